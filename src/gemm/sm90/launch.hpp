// Host side of the sm_90a GEMM kernels: what the launch plan (gemm/launch_plan.cpp) decides for a
// launch (Launch), the rules it decides by (epilogue_mode, grid_of), and the launchers (defined in
// launch.cuh, explicitly instantiated in the generated translation units, one per config row and
// dtype; see CMakeLists.txt). Plain C++: the CPU tests drive the rules.
#pragma once
#include <cuda_runtime_api.h>

#include "gemm/kernel_params.hpp"
#include "gemm/schedule.hpp"

namespace tessera::gemm_impl::sm90 {

// How the epilogue stores D: kEpiStaged through fp32 smem sub-tiles (any D, the split-K fix-up);
// kEpiTma as 16-bit 64x64 sub-tiles stored by TMA; kEpiSmem16 as the same 16-bit sub-tiles copied
// out by the threads (D not TMA-aligned). kEpiAuto: the rules' choice (epilogue_mode).
enum EpiMode : int { kEpiStaged = 0, kEpiTma = 1, kEpiSmem16 = 2, kEpiAuto = 3 };

// The D type the sub-tile paths store for these operands (Traits::DElement): a 16-bit D of the
// operands' type, fp8 operands' bf16 D (tensor scales fold into alpha, row-wise ones multiply each
// row and column in Store16::fill, block scales were applied in the mainloop); -1: none.
inline int sub_tile_d_dtype(int ab_dtype) {
  if (ab_dtype == kF16 || ab_dtype == kBF16) return ab_dtype;
  return is_fp8(ab_dtype) ? int(kBF16) : -1;
}

// How D leaves: a D of sub_tile_d_dtype goes out in 16-bit sub-tiles, by TMA when D meets TMA's
// rules (EpilogueParams::d_tma), else by the threads; beta * C joins the TMA path when C meets the
// same rules (c_tma). Any other C, an fp32 D, a 16-bit D of the other type, tf32 and s8 kernels
// and split-K ranges go through the fp32 staging. `forced`
// (TESSERA_SM90_EPILOGUE, for measurements) replaces the choice where it can run. A column-major D
// (d_col_major) has only the TMA path, on a config that can flip (`flippable`, Config::flip): -1
// where that cannot run.
inline int epilogue_mode(bool flippable, int ab_dtype, const EpilogueParams& e, int splits, int forced) {
  if (e.d_col_major) {
    const bool tma = flippable && splits == 1 && e.d_dtype == ab_dtype && e.d_tma && (e.beta == 0.0f || e.c_tma);
    return tma && (forced == kEpiAuto || forced == kEpiTma) ? int(kEpiTma) : -1;
  }
  if (splits != 1 || e.d_dtype != sub_tile_d_dtype(ab_dtype) || forced == kEpiStaged) return kEpiStaged;
  if (e.beta != 0.0f) return e.d_tma && e.c_tma && forced != kEpiSmem16 ? kEpiTma : kEpiStaged;
  return e.d_tma && forced != kEpiSmem16 ? kEpiTma : kEpiSmem16;
}

// One launch as the plan decided it; the launcher reads it and decides nothing.
struct Launch {
  int splits = 1;              // split-K ranges (gemm_impl::Decomposition)
  bool stream_k = false;       // stream-K over the partial last wave (splits == 1)
  bool fold_parallel = false;  // split-K in one round: every range folds its share (needs every range resident)
  bool one_tile = false;       // the row's one-tile kernel (traits.cuh Traits::kOneTile)
  int epi_mode = kEpiStaged;   // EpiMode, never kEpiAuto here
  int l2_warm = 0;             // k-tiles of the weights prefetched into L2 at entry (gemm_impl::l2_warm_ktiles)
  bool dependent_launch = true;  // programmatic dependent launch (TESSERA_GEMM_PDL=0 turns it off)
  bool promote = false;        // 3xTF32: accumulators promoted to IEEE fp32 sums (Traits::kPromote rows)
  int clusters = 0;            // the persistent grid's clusters: what fits at once, within the SM budget
  void* workspace = nullptr;   // per call: the split-K / stream-K area, 256-byte aligned
};

// The tile shape a grid is cut by (a config row's numbers).
struct TileShape {
  int bm, bn, bk, cluster_m, cluster_n;
};

// The grid of one launch: tiles, the persistent walk and the CTAs. Host-only, plain integers.
struct Grid {
  long long tiles_m = 0, tiles_n = 0, tiles_mc = 0, tiles_nc = 0;
  long long tiles = 0;    // BM x BN tiles over every batch
  Schedule sched;         // gemm/schedule.hpp
  long long workers = 0;  // clusters of the persistent grid
};
// False where the 32-bit walk cannot describe the problem (make_schedule).
inline bool grid_of(const TileShape& s, long long m, long long n, long long k, long long batch, int splits,
                    bool stream_k, int clusters, Grid* g) {
  g->tiles_m = (m + s.bm - 1) / s.bm;
  g->tiles_n = (n + s.bn - 1) / s.bn;
  g->tiles = g->tiles_m * g->tiles_n * batch;
  // The walk goes over cluster tiles: cluster_m x cluster_n tiles walked together.
  g->tiles_mc = (g->tiles_m + s.cluster_m - 1) / s.cluster_m;
  g->tiles_nc = (g->tiles_n + s.cluster_n - 1) / s.cluster_n;
  const long long k_tiles = (k + s.bk - 1) / s.bk;
  if (!make_schedule(g->tiles_mc * g->tiles_nc * batch, splits, k_tiles, clusters, stream_k, &g->sched)) return false;
  // Persistent: at most one CTA per SM; stream-K shares go to every cluster the GPU holds at once.
  g->workers = g->sched.sk_units > 0 ? clusters : (g->sched.units < clusters ? g->sched.units : clusters);
  return true;
}

// Per device, once: raises the row's kernels' shared-memory limit and returns how many of its
// clusters fit on the GPU at once (> 0; the persistent grid's most), or -cudaError_t on failure.
template <int Cfg, int DT, bool AKMajor, bool BKMajor, bool BlockScales = false>
int prepare(int sm_count);
template <int Cfg, int DT, bool AKMajor, bool BKMajor, bool BlockScales = false>
cudaError_t launch(const GemmParams& p, const Launch& l, cudaStream_t stream);

// The same by run-time row id (an id of sm90/configs.def), A/B dtype and majors (and for fp8 operands
// whether they carry block scales; run() reads that from GemmParams::block).
int prepare(int cfg, int dt, bool a_k_major, bool b_k_major, int sm_count, bool block_scales = false);
// Precondition: the plan's (K > 0, TMA-ready operands, a Launch from gemm/launch_plan.cpp).
cudaError_t run(int cfg, int dt, bool a_k_major, bool b_k_major, const GemmParams& p, const Launch& l,
                cudaStream_t stream);

// Dynamic shared memory a configuration needs (bytes), for the heuristic and `tessera info`.
int smem_bytes(int cfg);

}  // namespace tessera::gemm_impl::sm90
