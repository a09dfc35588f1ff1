// Run-time selection among the compiled sm_90a instantiations (no CuTe here: plain C++).
#include <array>

#include "gemm/sm90/config_shape.hpp"
#include "gemm/sm90/launch.hpp"

namespace tessera::gemm_impl::sm90 {
namespace {

using LaunchFn = cudaError_t (*)(const GemmParams&, const Launch&, cudaStream_t);
using PrepareFn = int (*)(int);
struct Row {
  int id;
  std::array<LaunchFn, 8> fn;  // [dt (F16, BF16)][a_k_major][b_k_major]
  std::array<PrepareFn, 8> prepare;
  int smem;
  LaunchFn tf32 = nullptr;     // fp32 operands, both K-major (configs.def TESSERA_SM90_TF32)
  PrepareFn tf32_prepare = nullptr;
  LaunchFn s8 = nullptr;       // s8 operands, both K-major (configs.def TESSERA_SM90_S8)
  PrepareFn s8_prepare = nullptr;
  std::array<LaunchFn, 2> fp8{};  // [e4m3, e5m2] operands, both K-major (configs.def TESSERA_SM90_FP8)
  std::array<PrepareFn, 2> fp8_prepare{};
  std::array<LaunchFn, 2> fp8_block{};  // the same with block scales (TESSERA_SM90_FP8_BLOCK)
  std::array<PrepareFn, 2> fp8_block_prepare{};
};

template <int Cfg>
constexpr Row row() {
  using S = ConfigShape<Cfg>;
  Row r{Cfg,
        {&launch<Cfg, kF16, false, false>, &launch<Cfg, kF16, false, true>, &launch<Cfg, kF16, true, false>,
         &launch<Cfg, kF16, true, true>, &launch<Cfg, kBF16, false, false>, &launch<Cfg, kBF16, false, true>,
         &launch<Cfg, kBF16, true, false>, &launch<Cfg, kBF16, true, true>},
        {&prepare<Cfg, kF16, false, false>, &prepare<Cfg, kF16, false, true>, &prepare<Cfg, kF16, true, false>,
         &prepare<Cfg, kF16, true, true>, &prepare<Cfg, kBF16, false, false>, &prepare<Cfg, kBF16, false, true>,
         &prepare<Cfg, kBF16, true, false>, &prepare<Cfg, kBF16, true, true>},
        smem_bytes_for(S::BM, S::BN, S::BK, S::Stages, S::Pingpong)};
  if constexpr (has_tf32(Cfg)) {
    r.tf32 = &launch<Cfg, kF32, true, true>;
    r.tf32_prepare = &prepare<Cfg, kF32, true, true>;
  }
  if constexpr (has_s8(Cfg)) {
    r.s8 = &launch<Cfg, kS8, true, true>;
    r.s8_prepare = &prepare<Cfg, kS8, true, true>;
  }
  if constexpr (has_fp8(Cfg)) {
    r.fp8 = {&launch<Cfg, kE4M3, true, true>, &launch<Cfg, kE5M2, true, true>};
    r.fp8_prepare = {&prepare<Cfg, kE4M3, true, true>, &prepare<Cfg, kE5M2, true, true>};
  }
  // Block scales are applied as the sums are promoted: the plan sends them to the rows that can take
  // them (Config::fp8_block), which must be the ones with these kernels.
  static_assert(has_fp8_block(Cfg) == (has_fp8(Cfg) && takes_fp8_block_scales(S::BM, S::BN, S::Pingpong)),
                "configs.def: TESSERA_SM90_FP8_BLOCK lists exactly the fp8 rows that take block scales");
  if constexpr (has_fp8_block(Cfg)) {
    r.fp8_block = {&launch<Cfg, kE4M3, true, true, true>, &launch<Cfg, kE5M2, true, true, true>};
    r.fp8_block_prepare = {&prepare<Cfg, kE4M3, true, true, true>, &prepare<Cfg, kE5M2, true, true, true>};
  }
  return r;
}

const Row kRows[] = {
#define TESSERA_SM90_CONFIG(id, ...) row<id>(),
#include "gemm/sm90/configs.def"
#undef TESSERA_SM90_CONFIG
};

const Row* find(int cfg) {
  for (const Row& r : kRows)
    if (r.id == cfg) return &r;
  return nullptr;
}

int variant(int dt, bool a_k_major, bool b_k_major) { return (dt == kBF16 ? 4 : 0) + (a_k_major ? 2 : 0) + (b_k_major ? 1 : 0); }

}  // namespace

int prepare(int cfg, int dt, bool a_k_major, bool b_k_major, int sm_count, bool block_scales) {
  const Row* r = find(cfg);
  if (!r || sm_count <= 0) return -int(cudaErrorInvalidValue);
  if (dt == kF32) return r->tf32_prepare && a_k_major && b_k_major ? r->tf32_prepare(sm_count) : -int(cudaErrorInvalidValue);
  if (dt == kS8) return r->s8_prepare && a_k_major && b_k_major ? r->s8_prepare(sm_count) : -int(cudaErrorInvalidValue);
  if (is_fp8(dt)) {
    const PrepareFn f = (block_scales ? r->fp8_block_prepare : r->fp8_prepare)[dt == kE5M2];
    return f && a_k_major && b_k_major ? f(sm_count) : -int(cudaErrorInvalidValue);
  }
  if (dt != kF16 && dt != kBF16) return -int(cudaErrorInvalidValue);
  return r->prepare[variant(dt, a_k_major, b_k_major)](sm_count);
}

cudaError_t run(int cfg, int dt, bool a_k_major, bool b_k_major, const GemmParams& p, const Launch& l,
                cudaStream_t stream) {
  const Row* r = find(cfg);
  if (dt == kF32) return r->tf32(p, l, stream);  // the plan ran prepare() for it: K-major, a tf32 row
  if (dt == kS8) return r->s8(p, l, stream);      // likewise: K-major, an s8 row
  if (is_fp8(dt)) return (p.block.row ? r->fp8_block : r->fp8)[dt == kE5M2](p, l, stream);  // likewise: an fp8 row
  return r->fn[variant(dt, a_k_major, b_k_major)](p, l, stream);
}

int smem_bytes(int cfg) {
  const Row* r = find(cfg);
  return r ? r->smem : 0;
}

}  // namespace tessera::gemm_impl::sm90
