#include "gemm/configs.hpp"

#include <cstring>

#include "gemm/sm90/config_shape.hpp"

namespace tessera::gemm_impl {
namespace {

constexpr int smem_of(int bm, int bn, int bk, int stages) {
  const int pipe = stages * (bm + bn) * bk * 2;
  const int epi = bm * (bn + 8) * 4;
  return pipe > epi ? pipe : epi;
}

std::vector<Config> build() {
  std::vector<Config> v = {
#define TESSERA_SM80_CONFIG(id, name, bm, bn, bk, stages, wm, wn, reason) \
  Config{id, Kernel::Sm80, name, bm, bn, bk, stages, (wm) * (wn), smem_of(bm, bn, bk, stages), 80, 999, reason},
#include "gemm/sm80/configs.def"
#undef TESSERA_SM80_CONFIG
#define TESSERA_SM90_CONFIG(id, name, bm, bn, bk, stages, reason)                                           \
  Config{id, Kernel::Sm90, name, bm, bn, bk, stages, 4 * (1 + (bm) / 64), sm90::smem_bytes_for(bm, bn, bk, stages), \
         90, 90, reason},
#include "gemm/sm90/configs.def"
#undef TESSERA_SM90_CONFIG
  };
  v.push_back(Config{-1, Kernel::Fallback, "simt_fallback", 64, 64, 16, 1, 8, 64 * 17 * 4 * 2, 80, 999,
                     "Any alignment, no workspace: CUDA-core fp32 FMA with element-wise loads. Used when an "
                     "operand is not 16-byte aligned (or its contiguous extent is not a multiple of 8) and the "
                     "caller gave too little workspace for the padded copy; slow but always correct."});
  return v;
}

}  // namespace

const std::vector<Config>& configs() {
  static const std::vector<Config> table = build();
  return table;
}

const Config* find_config(const std::string& name) {
  for (const Config& c : configs())
    if (name == c.name) return &c;
  return nullptr;
}

std::string config_names() {
  std::string s;
  for (const Config& c : configs()) s += (s.empty() ? "" : ", ") + std::string(c.name);
  return s;
}

const Config& fallback_config() { return configs().back(); }

namespace {

// Within one family, tiles are tried from the largest (most reuse per byte loaded, fewest CTAs) to
// the smallest; the first whose tile count fills every SM once wins. If none does, the smallest
// tile gives the most parallelism. Configs the device cannot run (shared memory, arch) are skipped.
const Config* select_in(Kernel family, const HeuristicInput& in) {
  const Config* smallest = nullptr;
  for (const Config& c : configs()) {
    if (c.kernel != family || c.smem_bytes > in.smem_optin || in.cc < c.min_cc || in.cc > c.max_cc) continue;
    const long long tiles = ((in.m + c.bm - 1) / c.bm) * ((in.n + c.bn - 1) / c.bn) * in.batch;
    if (tiles >= in.sm_count) return &c;
    smallest = &c;  // each configs.def lists tiles from large to small
  }
  return smallest;
}

}  // namespace

const Config& select_config(const HeuristicInput& in) {
  // TMA/WGMMA on Hopper when the operands allow it (mma.sync reaches ~65% of Hopper's tensor-core
  // peak, WGMMA all of it); else, or when no sm90 config fits, the mma.sync kernels.
  if (in.cc == 90 && in.tma_ok)
    if (const Config* c = select_in(Kernel::Sm90, in)) return *c;
  const Config* c = select_in(Kernel::Sm80, in);
  return c ? *c : fallback_config();
}

}  // namespace tessera::gemm_impl
