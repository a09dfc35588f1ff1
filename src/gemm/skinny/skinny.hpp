// Host side of the skinny GEMM (kernel.cuh): a canonical problem with a side of at most kMaxRows
// (the tokens of a decode step) and both operands K-major and 16-byte aligned.
#pragma once
#include <cuda_runtime_api.h>

#include "gemm/kernel_params.hpp"

namespace tessera::gemm_impl::skinny {

constexpr int kMaxRows = 64;  // 4 m16 tiles of X
constexpr int kWarps = 8;     // per CTA, splitting K (256 threads: two or three CTAs per SM)
constexpr int kCtasPerSm = 2;  // resident per SM: at most 128 registers (scripts/check_kernels.py checks)
constexpr int kMaxWTiles = 3;  // n8 tiles of W per CTA: a third costs registers, a fourth would spill

// Whether `rows_w` weight rows (x batch) fit one wave of CTAs (kCtasPerSm per SM) at `tiles` n8
// tiles of W each (by default the most: about 6300 rows on 132 SMs).
inline bool fits_one_wave(long long rows_w, long long batch, int sms, int tiles = kMaxWTiles) {
  const long long groups = (rows_w + 7) / 8;
  return (groups + tiles - 1) / tiles * batch <= (long long)kCtasPerSm * sms;
}

// Waves of 8-row CTAs from which the CTAs take kMaxWTiles tiles instead (w_tiles).
constexpr long long kManyWaves = 30;

// n8 tiles of W per CTA (kernel.cuh kNT) for `rows_x` rows of X: the fewest that fit the grid in one
// wave on `sms` SMs, where every CTA asks DRAM for all of its W at entry; a grid of several waves
// even so keeps one (8 rows per CTA: short CTAs keep the stream steady, and a last wave of 24-row
// CTAs idles more of the GPU), as do more than 16 rows of X (their kernel has one tile only). Past
// kManyWaves waves (a vocabulary-sized W, ~64k rows on 132 SMs) kMaxWTiles: so many short CTAs'
// start-ups outweigh that last wave (docs/PERF.md has the scan).
inline int w_tiles(long long rows_x, long long rows_w, long long batch, int sms) {
  if (rows_x > 16) return 1;
  for (int nt = 1; nt <= kMaxWTiles; ++nt)
    if (fits_one_wave(rows_w, batch, sms, nt)) return nt;
  const long long ctas = (rows_w + 7) / 8 * batch, wave = (long long)kCtasPerSm * sms;
  return ctas >= kManyWaves * wave ? kMaxWTiles : 1;
}

// Runs D = A B^T for `p` (A/B dtype `ab_dtype`, both K-major), the smaller of M and N <= kMaxRows,
// with `w_tiles` n8 tiles of W per CTA (w_tiles()); `dependent_launch`: a programmatic dependent
// launch (cc 9.x only; the kernel's Hopper SASS comes from compute_90a, which keeps its wait for the
// previous grid: CMake tessera_dependent_kernels).
cudaError_t run(int ab_dtype, const GemmParams& p, int w_tiles, bool dependent_launch, cudaStream_t stream);

}  // namespace tessera::gemm_impl::skinny
