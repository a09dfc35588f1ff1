// The Hopper GEMM's mainloop, both sides of the shared-memory ring: the producer (`load`: TMA loads
// of A and B into the stages) and the consumers (`mma`: WGMMAs on the stages, the promotion of the
// sums into fp32 totals, fp8 block scales), with the ring's position (PipelineState) and its
// barriers (`full`: a stage has landed; `empty`: every consumer warp of the cluster has read it).
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>

#include "gemm/sm90/params.cuh"
#include "gemm/sm90/probe.cuh"

namespace tessera::gemm_impl::sm90 {

using FullBarrier = cutlass::arch::ClusterTransactionBarrier;
using EmptyBarrier = cutlass::arch::ClusterBarrier;

// A position in the ring: the stage and the parity of its barriers' current phase.
template <int Stages>
struct PipelineState {
  int stage = 0;
  uint32_t phase = 0;
  __device__ __forceinline__ void advance() {
    if (++stage == Stages) { stage = 0; phase ^= 1; }
  }
  // Past n stages at once (a ping-pong warpgroup passing over the other's work item).
  __device__ __forceinline__ void skip(int n) {
    const int t = stage + n;
    phase ^= (t / Stages) & 1;
    stage = t % Stages;
  }
};

// fp8 block scales (GemmParams::block) along one work item's k-tiles, for one consumer thread: the
// factors of the k-tile to be promoted next (row0 / row1: the thread's two accumulator rows; col: the
// tile's 128 columns, which one scale block of B^T covers). Each promotion loads the following
// k-tile's into the same registers, so the loads (L1 / L2 hits: every CTA of a row or column block
// reads the same values) have a whole k-tile to land, and no copy waits for them. Rows past M read
// row M - 1's factors (their sums are zeros).
struct BlockScaleWalk {
  const float *r0, *r1, *c;
  float row0 = 1.0f, row1 = 1.0f, col = 1.0f;  // (an item without k-tiles promotes zeros)

  __device__ __forceinline__ void start(const GemmParams& g, int row, int n0, int kt_begin, int k_count) {
    const GemmParams::BlockScales& s = g.block;
    r0 = s.row + int64_t(min(row, g.m - 1)) * s.row_stride_m + int64_t(kt_begin) * s.row_stride_k;
    r1 = s.row + int64_t(min(row + 8, g.m - 1)) * s.row_stride_m + int64_t(kt_begin) * s.row_stride_k;
    c = s.col + int64_t(n0 / kScaleBlockK) * s.col_stride_n + int64_t(kt_begin) * s.col_stride_k;
    if (k_count > 0) row0 = __ldg(r0), row1 = __ldg(r1), col = __ldg(c);
  }
  // After a promotion: the following k-tile's factors.
  __device__ __forceinline__ void next(const GemmParams& g) {
    r0 += g.block.row_stride_k, r1 += g.block.row_stride_k, c += g.block.col_stride_k;
    row0 = __ldg(r0), row1 = __ldg(r1), col = __ldg(c);
  }
};

// A's and B's tiles in global memory as this CTA's TMA loads see them: its part of each box.
template <class T>
CUTE_DEVICE auto gmem_views(KernelParams<T> const& p, int cta_rank) {
  constexpr int BM = T::BM, BN = T::BN, BK = T::BK, ClusterM = T::ClusterM, ClusterN = T::ClusterN;
  const GemmParams& g = p.g;
  const int la_n = g.batch_stride_a ? g.batch : 1, lb_n = g.batch_stride_b ? g.batch : 1;
  Tensor mA = p.tma_a.get_tma_tensor(make_shape(g.m, g.k, la_n));             // (M,K,L) coords
  Tensor mB = p.tma_b.get_tma_tensor(make_shape(g.n, g.k, lb_n));             // (N,K,L) coords
  Tensor gA = local_tile(mA, Shape<Int<BM>, Int<BK>>{}, make_coord(_, _, _));  // (BM,BK,m,k,l)
  Tensor gB = local_tile(mB, Shape<Int<BN>, Int<BK>>{}, make_coord(_, _, _));  // (BN,BK,n,k,l)
  return make_tuple(p.tma_a.get_slice(ClusterN > 1 ? cta_rank : 0).partition_S(gA),   // (TMA,TMA_M,TMA_K,m,k,l)
                    p.tma_b.get_slice(ClusterM > 1 ? cta_rank : 0).partition_S(gB));  // (TMA,TMA_N,TMA_K,n,k,l)
}

template <class T>
struct Mainloop {
  static constexpr int BM = T::BM, BN = T::BN, Stages = T::Stages;
  static constexpr int ClusterM = T::ClusterM, ClusterN = T::ClusterN, kCluster = T::kCluster;

  // The ring's barriers, by one thread before the cluster's first sync.
  CUTE_DEVICE static void init_barriers(typename T::SharedStorage& smem) {
    for (int s = 0; s < Stages; ++s) {
      FullBarrier::init(&smem.full[s], 1);  // the producer's arrive + TMA bytes
      // One arrive per consumer warp (of the warpgroups on the stage's tile) of every CTA in the
      // cluster: a stage is refilled (by this CTA's TMA and, through multicast, by its peers') only
      // once all of them have read it.
      EmptyBarrier::init(&smem.empty[s], 4 * T::kTileWarpgroups * kCluster);
    }
    if constexpr (T::Pingpong) {
      EmptyBarrier::init(&smem.turn[0], 128);  // every thread of the other warpgroup arrives
      EmptyBarrier::init(&smem.turn[1], 128);
    }
  }

  // L2 warm-up (KernelParams::prefetch_a / prefetch_b), by an idle producer warp while warp 0 sets
  // up: the first work item's first k-tiles of A and B.
  CUTE_DEVICE static void l2_warm(KernelParams<T> const& p, int cta_rank) {
    if (elect_one_sync()) {
      auto warm = [&](const TileCoord& c, int kt_begin, int kt_end) {
        auto views = gmem_views(p, cta_rank);
        const int la = p.g.batch_stride_a ? c.l : 0, lb = p.g.batch_stride_b ? c.l : 0;
        for (int kt = kt_begin; kt < kt_begin + p.prefetch_a && kt < kt_end; ++kt)
          cute::prefetch(p.tma_a, get<0>(views)(_, _, _, c.m, kt, la));
        for (int kt = kt_begin; kt < kt_begin + p.prefetch_b && kt < kt_end; ++kt)
          cute::prefetch(p.tma_b, get<1>(views)(_, _, _, c.n, kt, lb));
      };
      if constexpr (T::kOneTile) {
        warm(one_tile_coord<ClusterM, ClusterN>(cta_rank), 0, p.sched.k_tiles);
      } else {
        Walk first(p.sched, int(blockIdx.x) / kCluster);
        if (WorkItem w; first.next(p.sched, int(blockIdx.x) / kCluster, int(gridDim.x) / kCluster, w))
          warm(cta_tile(w.tile, p.raster_c, cta_rank, ClusterM, ClusterN), w.kt_begin, w.kt_end);
      }
    }
    __syncwarp();
  }

  // The producer: one elected thread walks the CTA's work items and their k-tiles and issues the
  // TMA loads of A and B into the ring (a stage once its `empty` barrier says every consumer warp
  // of the cluster has read it; its `full` barrier armed with the bytes to land).
  template <class SA, class SB>
  CUTE_DEVICE static void load(KernelParams<T> const& p, typename T::SharedStorage& smem, SA& sA, SB& sB, int cta_rank) {
    const GemmParams& g = p.g;
    auto views = gmem_views(p, cta_rank);
    Tensor tAgA = get<0>(views);                                                    // (TMA,TMA_M,TMA_K,m,k,l)
    Tensor tBgB = get<1>(views);                                                    // (TMA,TMA_N,TMA_K,n,k,l)
    Tensor tAsA = p.tma_a.get_slice(ClusterN > 1 ? cta_rank : 0).partition_D(sA);  // (TMA,TMA_M,TMA_K,PIPE)
    Tensor tBsB = p.tma_b.get_slice(ClusterM > 1 ? cta_rank : 0).partition_D(sB);  // (TMA,TMA_N,TMA_K,PIPE)
    PipelineState<Stages> pipe;
    bool cluster_ready = kCluster == 1;
    TESSERA_SM90_PROBE_PRODUCER_START()
    TESSERA_SM90_PROBE_PM(5)
    // Work items: the walk's, or the one-tile kernel's one (its tile from the block index).
    Walk walk(p.sched, int(blockIdx.x) / kCluster);
    bool one_tile_taken = false;
    auto next_item = [&](WorkItem& w) {
      if constexpr (T::kOneTile) return one_tile_item(one_tile_taken, p.sched.k_tiles, w);
      return walk.next(p.sched, int(blockIdx.x) / kCluster, int(gridDim.x) / kCluster, w);
    };
    for (WorkItem w; next_item(w);) {
      const TileCoord c = T::kOneTile ? one_tile_coord<ClusterM, ClusterN>(cta_rank)
                                      : cta_tile(w.tile, p.raster_c, cta_rank, ClusterM, ClusterN);
      const int la = g.batch_stride_a ? c.l : 0, lb = g.batch_stride_b ? c.l : 0;
      for (int kt = w.kt_begin; kt < w.kt_end; ++kt) {
        if (!cluster_ready) {  // one thread: the unaligned form of cluster_wait
          TESSERA_SM90_PROBE_PM(6)
          asm volatile("barrier.cluster.wait;" ::: "memory");
          cluster_ready = true;
          TESSERA_SM90_PROBE_PM(7)
        }
        const int stage = pipe.stage;
        EmptyBarrier::wait(&smem.empty[stage], pipe.phase ^ 1);  // a fresh barrier passes parity 1
        TESSERA_SM90_PROBE_ISSUED()
        FullBarrier::arrive_and_expect_tx(&smem.full[stage], T::kTxBytes);
        constexpr uint16_t kAll = uint16_t((1 << kCluster) - 1);  // multicast to every CTA of the cluster
        if constexpr (ClusterN > 1)
          copy(p.tma_a.with(smem.full[stage], kAll), tAgA(_, _, _, c.m, kt, la), tAsA(_, _, _, stage));
        else
          copy(p.tma_a.with(smem.full[stage]), tAgA(_, _, _, c.m, kt, la), tAsA(_, _, _, stage));
        if constexpr (ClusterM > 1)
          copy(p.tma_b.with(smem.full[stage], kAll), tBgB(_, _, _, c.n, kt, lb), tBsB(_, _, _, stage));
        else
          copy(p.tma_b.with(smem.full[stage]), tBgB(_, _, _, c.n, kt, lb), tBsB(_, _, _, stage));
        pipe.advance();
      }
    }
    // Tail (clusters): this CTA may exit only once the consumers of every CTA in the cluster have
    // released every stage, i.e. once all their remote arrives on this CTA's barriers have landed.
    // (Peers cannot exit before this CTA's multicast data reached them: they wait for it.)
    if constexpr (kCluster > 1) {
      for (int s = 0; s < Stages; ++s) {
        EmptyBarrier::wait(&smem.empty[pipe.stage], pipe.phase ^ 1);
        pipe.advance();
      }
    }
  }

  // A stage's WGMMAs retired: tell the producers of every CTA in the cluster (lane 0 of each warp).
  CUTE_DEVICE static void release(typename T::SharedStorage& smem, int s, int lane) {
    if constexpr (kCluster > 1) {
      CUTE_UNROLL
      for (int r = 0; r < kCluster; ++r) EmptyBarrier::arrive(&smem.empty[s], uint32_t(r), lane == 0);
    } else if (lane == 0) {
      EmptyBarrier::arrive(&smem.empty[s]);
    }
  }

  // The consumers' side for one work item: acc = the sum of its k-tiles' products. One batch of
  // BK/16 WGMMAs per k-tile; the previous batch retires while the next one is issued, and only then
  // is its stage handed back to the producer. Ping-pong: waits for this warpgroup's turn (parity
  // `turn_phase`) and, once its last batch is issued, gives the turn to the other warpgroup.
  // 3xTF32 needs fp32-class sums, which the tensor cores' accumulation (it truncates as it adds: an
  // error that grows with K) does not give; nor do fp8's: every kPromoteKTiles k-tiles the WGMMA
  // accumulators are added into `total` with IEEE fp32 adds and restart from zero. fp8 block scales:
  // each k-tile's sums (one 128-deep scale block) enter `total` times this thread's two rows'
  // factors (acc rows h = 0, 1) times the tile's column factor.
  // The WGMMA descriptors come from this thread's slice of sA and sB, made again per item: held across
  // the persistent loop, their base was one register too many for the wide tiles' epilogues.
  template <class TiledMma, class SA, class SB, class Acc>
  CUTE_DEVICE static void mma(KernelParams<T> const& p, typename T::SharedStorage& smem, TiledMma& tiled_mma,
                              SA& sA, SB& sB, Acc& acc, PipelineState<Stages>& pipe, uint32_t& turn_phase,
                              ConsumerThread<T> const& me, WorkItem const& w, int cta_rank) {
    auto thr_mma = tiled_mma.get_thread_slice(me.ttid());
    Tensor tCrA = thr_mma.make_fragment_A(thr_mma.partition_A(sA));  // (MMA,MMA_M,MMA_K,PIPE) smem descriptors
    Tensor tCrB = thr_mma.make_fragment_B(thr_mma.partition_B(sB));  // (MMA,MMA_N,MMA_K,PIPE)
    const int k_count = w.kt_end - w.kt_begin;
    if constexpr (T::Pingpong) {
      EmptyBarrier::wait(&smem.turn[me.warp_group() - 1], turn_phase);
      turn_phase ^= 1;
    }
    tiled_mma.accumulate_ = GMMA::ScaleOut::Zero;
    if (k_count == 0) clear(acc);
    [[maybe_unused]] auto total = make_fragment_like(acc);
    if constexpr (T::kPromote) clear(total);
    [[maybe_unused]] BlockScaleWalk bs;
    if constexpr (T::kBlockScales) {
      const TileCoord c = cta_tile(w.tile, p.raster_c, cta_rank, ClusterM, ClusterN);
      bs.start(p.g, c.m * BM + me.acc_row(), c.n * BN, w.kt_begin, k_count);
    }
    warpgroup_fence_operand(acc);
    int prev_stage = -1;
    for (int kt = 0; kt < k_count; ++kt) {
      FullBarrier::wait(&smem.full[pipe.stage], pipe.phase);
      TESSERA_SM90_PROBE_CONSUMED(full, kt)
      warpgroup_arrive();
      CUTE_UNROLL
      for (int kb = 0; kb < size<2>(tCrA); ++kb) {
        cute::gemm(tiled_mma, tCrA(_, _, kb, pipe.stage), tCrB(_, _, kb, pipe.stage), acc);
        tiled_mma.accumulate_ = GMMA::ScaleOut::One;
      }
      warpgroup_commit_batch();
      warpgroup_wait<1>();
      if (prev_stage >= 0) {
        release(smem, prev_stage, me.lane);
        TESSERA_SM90_PROBE_CONSUMED(release, kt - 1)
      }
      prev_stage = pipe.stage;
      pipe.advance();
      if constexpr (T::kPromote) {
        if (p.promote && (kt + 1) % T::kPromoteKTiles == 0 && kt + 1 < k_count) {
          warpgroup_wait<0>();
          warpgroup_fence_operand(acc);
          if constexpr (T::kBlockScales) {
            const float s0 = bs.row0 * bs.col, s1 = bs.row1 * bs.col;
            CUTE_UNROLL
            for (int i = 0; i < size(acc); ++i) total(i) = fmaf(acc(i), (i & 2) ? s1 : s0, total(i));
            bs.next(p.g);  // (a promotion inside the loop: another k-tile follows)
          } else {
            CUTE_UNROLL
            for (int i = 0; i < size(acc); ++i) total(i) += acc(i);
          }
          warpgroup_fence_operand(acc);
          tiled_mma.accumulate_ = GMMA::ScaleOut::Zero;
        }
      }
    }
    if constexpr (T::Pingpong) EmptyBarrier::arrive(&smem.turn[2 - me.warp_group()]);
    warpgroup_wait<0>();
    if (prev_stage >= 0) {
      release(smem, prev_stage, me.lane);
      TESSERA_SM90_PROBE_CONSUMED(release, k_count - 1)
    }
    if constexpr (T::kPromote) {
      if (p.promote) {
        warpgroup_fence_operand(acc);
        if constexpr (T::kBlockScales) {
          const float s0 = bs.row0 * bs.col, s1 = bs.row1 * bs.col;
          CUTE_UNROLL
          for (int i = 0; i < size(acc); ++i) acc(i) = fmaf(acc(i), (i & 2) ? s1 : s0, total(i));
        } else {
          CUTE_UNROLL
          for (int i = 0; i < size(acc); ++i) acc(i) += total(i);
        }
      }
    }
    warpgroup_fence_operand(acc);
  }
};

}  // namespace tessera::gemm_impl::sm90
