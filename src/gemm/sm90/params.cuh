// What one launch of the Hopper GEMM kernel is given (KernelParams) and where a CTA and a thread
// stand in it: the grid and thread registers read where used, the tile coordinates of a work item,
// and a consumer thread's place in its tile (ConsumerThread).
#pragma once

#include <cute/tensor.hpp>

#include "gemm/kernel_params.hpp"
#include "gemm/raster.hpp"
#include "gemm/schedule.hpp"
#include "gemm/sm90/traits.cuh"

namespace tessera::gemm_impl::sm90 {

template <class T>
struct KernelParams {
  GemmParams g;
  typename T::TmaA tma_a;
  typename T::TmaB tma_b;
  typename T::TmaD tma_d;    // valid when epi_mode == kEpiTma (tma_dt with d_col_major)
  typename T::TmaC tma_c;    // valid when epi_mode == kEpiTma and beta != 0 (tma_ct with d_col_major)
  typename T::TmaDT tma_dt;
  typename T::TmaCT tma_ct;
  int epi_mode;            // EpiMode: how the epilogue stores D
  Schedule sched;          // the persistent walk (gemm/schedule.hpp): data-parallel, split-K or stream-K
  float* partials;     // split-K: [tile][split][BM][BN] fp32 partial tiles
  unsigned* counters;  // split-K: per-tile count of finished ranges (zeroed by the launcher)
  float* sk_partials;  // stream-K: one BM x BN fp32 partial per CTA of the grid, in accumulator order
  int* sk_flags;       // stream-K: per CTA, 1 once its partial is published (zeroed by the launcher)
  // Tiles along M and N, and cluster tiles: read from the parameter space where used (computed in
  // the kernel they lived in registers across the persistent loop and spilled the 128x128 tile).
  int tiles_m, tiles_n;
  Raster raster_c;  // the cluster tiles' raster (tiles_mc x tiles_nc a batch)
  // L2 warm-up at entry: the first work item's first `prefetch_a` / `prefetch_b` k-tiles of A / B
  // are prefetched into L2 (TMA prefetch: no shared memory, no barrier) while the barriers are set
  // up, before the cluster has synchronised and before the wait for the previous kernel, so that
  // DRAM starts on them at once, under that kernel's tail when launched as its dependent (0 = none;
  // decode tiles only: Traits::kL2Warm, gemm/configs.cpp l2_warm_ktiles). Safe before the wait: a
  // prefetch fills L2 only, where the previous kernel's writes land.
  int prefetch_a, prefetch_b;
  // Split-K in one round (a worker per unit, so all of a tile's ranges are resident at once) on a
  // tile that folds in parallel (supports_parallel_fold): every range folds its share of the tile.
  // The ranges sign in by flags, one per tile and range, set to `fold_epoch` once the range's
  // partial is out: the launcher draws a new epoch for every launch (64 bits, from a random start,
  // never 0), so whatever the workspace held, an earlier launch's flags included, reads as "not
  // yet", and no memset precedes the launch (a cost a small problem would notice). In a captured
  // graph every replay repeats the epoch: there (fold_epoch == 0) they count in on the counters,
  // which the graph's memset clears. Else the counters, and the last range to arrive folds.
  int fold_parallel;
  unsigned long long* fold_flags;
  unsigned long long fold_epoch;
  // 3xTF32 on a kernel with Traits::kPromote: the accumulators are promoted (see the mainloop).
  int promote;
};

// This CTA's position in the grid and the grid's size, read where used: in registers across the
// persistent loop they spilled the 128x256 tile's consumers, which have none to spare.
__device__ __forceinline__ int cta_index() {
  int v;
  asm volatile("mov.u32 %0, %%ctaid.x;" : "=r"(v));
  return v;
}
__device__ __forceinline__ int thread_index() {
  int v;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(v));
  return v;
}
__device__ __forceinline__ int grid_size() {
  int v;
  asm volatile("mov.u32 %0, %%nctaid.x;" : "=r"(v));
  return v;
}

// The CTA's i-th tile of the persistent walk -> (batch, tile_m, tile_n); grouped raster per batch.
struct TileCoord {
  int l, m, n;
};
__device__ __forceinline__ TileCoord tile_at(int tile, const Raster& r) {
  TileCoord c;
  c.l = r.per_batch.div(tile);
  grouped_raster(tile - c.l * r.per_batch.d, r, c.m, c.n);
  return c;
}
// The tile of cluster rank `rank` in cluster tile `ctile` (clusters are cluster_m tiles tall or
// cluster_n tiles wide; one of the two is 1).
__device__ __forceinline__ TileCoord cta_tile(int ctile, const Raster& raster_c, int rank, int cluster_m,
                                              int cluster_n) {
  TileCoord c = tile_at(ctile, raster_c);
  c.m = c.m * cluster_m + (cluster_m > 1 ? rank : 0);
  c.n = c.n * cluster_n + (cluster_n > 1 ? rank : 0);
  return c;
}

// The one-tile kernel's tile (Traits::kOneTile): the grid is (tiles_nc * cluster, tiles_mc, batches),
// the cluster along x, so the block index is the tile: no walk, no divisions by launch constants.
template <int ClusterM, int ClusterN>
__device__ __forceinline__ TileCoord one_tile_coord(int rank) {
  TileCoord c;
  c.l = int(blockIdx.z);
  c.m = int(blockIdx.y) * ClusterM + (ClusterM > 1 ? rank : 0);
  c.n = int(blockIdx.x) / (ClusterM * ClusterN) * ClusterN + (ClusterN > 1 ? rank : 0);
  return c;
}
// The one-tile kernel's walk, for the producer and the consumers alike: one item, the whole K of
// the block's tile; `taken` is the walk's state.
__device__ __forceinline__ bool one_tile_item(bool& taken, int k_tiles, WorkItem& w) {
  if (taken) return false;
  taken = true;
  w.tile = 0, w.split = 0, w.kt_begin = 0, w.kt_end = k_tiles;
  return true;
}

// A consumer thread's place: its warpgroup, its rows of the tile, its named barriers and staging
// buffer. Each is computed from the thread index where used (held in registers across the
// persistent loop, they spilled the wide tiles' consumers), except the lane, which the mainloop
// reads every k-tile.
template <class T>
struct ConsumerThread {
  int lane;
  float* epi_base;  // T::SharedStorage::epi

  __device__ __forceinline__ ConsumerThread(typename T::SharedStorage& smem)
      : lane(int(threadIdx.x) % 32), epi_base(&smem.epi[0][0]) {}
  __device__ __forceinline__ int warp_group() const { return thread_index() / 128; }  // 1 .. kConsumers
  __device__ __forceinline__ int wtid() const { return thread_index() % 128; }  // thread in its warpgroup
  // The thread among the tile's threads: both cooperative warpgroups, or its own (ping-pong).
  __device__ __forceinline__ int ttid() const { return T::Pingpong ? wtid() : thread_index() - 128; }
  __device__ __forceinline__ int wg_warp() const { return (thread_index() / 32) % 4; }  // warp in its warpgroup
  __device__ __forceinline__ int wg_row0() const { return T::Pingpong ? 0 : (warp_group() - 1) * 64; }
  // Named barriers: 1..kConsumers one per consumer warpgroup (epilogue), kConsumers + 1 all
  // consumers (a cooperative tile's split-K / stream-K steps); 0 is __syncthreads.
  __device__ __forceinline__ int epi_barrier() const { return warp_group(); }
  __device__ __forceinline__ int tile_barrier() const { return T::Pingpong ? epi_barrier() : T::kConsumers + 1; }
  __device__ __forceinline__ float* epi() const { return epi_base + (warp_group() - 1) * (T::kEpiBytes / 4); }
  // This thread's first accumulator row in the tile (the other is 8 rows further): WGMMA's layout.
  __device__ __forceinline__ int acc_row() const { return wg_row0() + 16 * wg_warp() + lane / 4; }
};

}  // namespace tessera::gemm_impl::sm90
