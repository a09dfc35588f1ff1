#include "gemm/configs.hpp"

#include <cstring>

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
  Config{id, Kernel::Sm80, name, bm, bn, bk, stages, (wm) * (wn), smem_of(bm, bn, bk, stages), 80, reason},
#include "gemm/sm80/configs.def"
#undef TESSERA_SM80_CONFIG
  };
  v.push_back(Config{-1, Kernel::Fallback, "simt_fallback", 64, 64, 16, 1, 8, 64 * 17 * 4 * 2, 80,
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

const Config& select_config(const HeuristicInput& in) {
  // Tiles are tried from the largest (most reuse per byte loaded, fewest CTAs) to the smallest;
  // the first whose tile count fills every SM once wins. If none does, the smallest tile gives
  // the most parallelism. Configs whose shared memory exceeds the device's limit are skipped.
  const Config* smallest = nullptr;
  for (const Config& c : configs()) {
    if (c.kernel != Kernel::Sm80 || c.smem_bytes > in.smem_optin || in.cc < c.min_cc) continue;
    const long long tiles = ((in.m + c.bm - 1) / c.bm) * ((in.n + c.bn - 1) / c.bn) * in.batch;
    if (tiles >= in.sm_count) return c;
    smallest = &c;  // configs.def lists tiles from large to small
  }
  return smallest ? *smallest : fallback_config();
}

}  // namespace tessera::gemm_impl
