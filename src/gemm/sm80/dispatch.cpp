// Run-time selection among the compiled sm_80 instantiations (no CuTe here: plain C++).
#include <array>

#include "gemm/sm80/config_shape.hpp"
#include "gemm/sm80/launch.hpp"

namespace tessera::gemm_impl::sm80 {
namespace {

using LaunchFn = cudaError_t (*)(const GemmParams&, cudaStream_t);
struct Row {
  int id;
  std::array<LaunchFn, 8> fn;  // [dt (F16, BF16)][a_k_major][b_k_major]
  int smem;
  LaunchFn tf32 = nullptr;     // fp32 operands, both K-major (configs.def TESSERA_SM80_TF32)
  LaunchFn s8 = nullptr;       // s8 operands, both K-major (configs.def TESSERA_SM80_S8)
};

template <int Cfg>
constexpr Row row() {
  using S = ConfigShape<Cfg>;
  // Same formula as Traits::kSmemBytes (checked by a static_assert in the tests).
  constexpr int pipe = S::Stages * (S::BM + S::BN) * S::BK * 2;
  constexpr int epi = S::BM * (S::BN + 8) * 4;
  Row r{Cfg,
        {&launch<Cfg, kF16, false, false>, &launch<Cfg, kF16, false, true>, &launch<Cfg, kF16, true, false>,
         &launch<Cfg, kF16, true, true>, &launch<Cfg, kBF16, false, false>, &launch<Cfg, kBF16, false, true>,
         &launch<Cfg, kBF16, true, false>, &launch<Cfg, kBF16, true, true>},
        pipe > epi ? pipe : epi};
  if constexpr (has_tf32(Cfg)) r.tf32 = &launch<Cfg, kF32, true, true>;
  if constexpr (has_s8(Cfg)) r.s8 = &launch<Cfg, kS8, true, true>;
  return r;
}

const Row kRows[] = {
#define TESSERA_SM80_CONFIG(id, ...) row<id>(),
#include "gemm/sm80/configs.def"
#undef TESSERA_SM80_CONFIG
};

const Row* find(int cfg) {
  for (const Row& r : kRows)
    if (r.id == cfg) return &r;
  return nullptr;
}

}  // namespace

cudaError_t run(int cfg, int dt, bool a_k_major, bool b_k_major, const GemmParams& p, cudaStream_t stream) {
  const Row* r = find(cfg);
  if (r && dt == kF32) return r->tf32 && a_k_major && b_k_major ? r->tf32(p, stream) : cudaErrorInvalidValue;
  if (r && dt == kS8) return r->s8 && a_k_major && b_k_major ? r->s8(p, stream) : cudaErrorInvalidValue;
  if (!r || (dt != kF16 && dt != kBF16)) return cudaErrorInvalidValue;
  return r->fn[(dt == kBF16 ? 4 : 0) + (a_k_major ? 2 : 0) + (b_k_major ? 1 : 0)](p, stream);
}

int smem_bytes(int cfg) {
  const Row* r = find(cfg);
  return r ? r->smem : 0;
}

}  // namespace tessera::gemm_impl::sm80
