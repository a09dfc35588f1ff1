// The Hopper GEMM (seeds 002/003): TMA loads into a ring of 128-byte-swizzled shared-memory stages,
// full/empty mbarriers, WGMMA with fp32 accumulators, warp specialisation and a persistent tile loop.
//
//   warpgroup 0 (producer, 56 registers): one elected thread walks the CTA's tiles and k-tiles and
//     issues the TMA loads of A and B into the next free stage (waits on its `empty` barrier, arms
//     its `full` barrier with the transaction byte count). On the decode tiles warp 1 first
//     prefetches the weights' first k-tiles into L2 (KernelParams::prefetch_a / prefetch_b).
//   consumer warpgroups (224 registers; 152 when there are three), in one of two schedules:
//     cooperative: BM / 64 of them (one to three) on one BM x BN tile, each owns 64 rows; while they
//       run the epilogue the tensor cores idle (the producer already fills the ring for the next tile).
//     ping-pong: two, each on its own 64 x BN tile, the CTA's work items alternating between them;
//       their mainloops take turns (an mbarrier per warpgroup says "your turn"), so one's epilogue
//       runs under the other's mainloop and the tensor cores stay busy across tile boundaries.
//     Per k-tile: wait `full`, issue BK/16 WGMMAs 64xBNx16 reading A and B straight from smem,
//     keep one batch in flight, and release the previous stage once its WGMMAs retired.
//     Epilogue (EpiMode): a 16-bit D leaves as swizzled 64x64 sub-tiles stored by TMA, whose last
//     store drains under the next tile's mainloop; beta*C arrives by TMA in the same sub-tiles; fp32
//     D, a C that TMA cannot read and split-K go through fp32 sub-tiles.
//
// Work: a persistent walk over (tile, k-tile range) items (gemm/schedule.hpp): whole tiles, split-K
// ranges, or stream-K shares whose partial tiles are folded into the owner's accumulators. The
// one-tile kernel (Traits::kOneTile, the same template) runs a launch of one wave with a plain
// epilogue: each CTA's tile is its block index, and none of the code above that it does not need is
// compiled into it.
//
// Canonical problem (gemm/plan.hpp): D (M x N, row-major) = A (M x K) * B^T with B stored N x K; A
// and B K-major or MN-major, 16-byte aligned with 16-byte leading dimensions (TMA's rules; the
// dispatcher pads other operands first). Batches are the third TMA mode (stride 0 = broadcast).
//
// The pieces: traits.cuh (the kernel's compile-time description), params.cuh (its parameters and
// a thread's place), mainloop.cuh (producer `load`, consumer `mma`, the ring), epilogue_store.cuh
// (16-bit D by TMA store), epilogue_staged.cuh (the fp32 staging), fixup.cuh (stream-K and split-K).
// This file only orchestrates them.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>

#include "core/dependent_launch.cuh"
#include "gemm/sm90/epilogue_staged.cuh"
#include "gemm/sm90/epilogue_store.cuh"
#include "gemm/sm90/fixup.cuh"
#include "gemm/sm90/mainloop.cuh"
#include "gemm/sm90/params.cuh"
#include "gemm/sm90/probe.cuh"
#include "gemm/sm90/traits.cuh"

namespace tessera::gemm_impl::sm90 {

// Before the cluster's first sync, by one thread: the TMA descriptors' prefetch and every barrier.
template <class T>
CUTE_DEVICE void init_cta(KernelParams<T> const& p, typename T::SharedStorage& smem) {
  prefetch_tma_descriptor(p.tma_a.get_tma_descriptor());
  prefetch_tma_descriptor(p.tma_b.get_tma_descriptor());
  if (stores_by_tma(p)) {
    const bool col = T::kFlip && p.g.epi.d_col_major, with_c = !T::kOneTile && p.g.epi.beta != 0.0f;
    prefetch_tma_descriptor(col ? p.tma_dt.get_tma_descriptor() : p.tma_d.get_tma_descriptor());
    if (with_c) prefetch_tma_descriptor(col ? p.tma_ct.get_tma_descriptor() : p.tma_c.get_tma_descriptor());
  }
  if (!T::kOneTile)
    for (int i = 0; i < T::kConsumers; ++i) FullBarrier::init(&smem.c_full[i], 1);  // one thread's expect_tx
  Mainloop<T>::init_barriers(smem);
  cutlass::arch::fence_barrier_init();
}

template <class T>
__global__ void __launch_bounds__(T::kThreads, 1) gemm_kernel(const __grid_constant__ KernelParams<T> p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  constexpr int BM = T::BM, BN = T::BN, ClusterM = T::ClusterM, ClusterN = T::ClusterN, kCluster = T::kCluster;
  constexpr bool kOneTile = T::kOneTile;  // one tile per CTA, plain TMA-store epilogue (Traits)
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  auto& smem = *reinterpret_cast<typename T::SharedStorage*>(smem_raw);
  const int warp = threadIdx.x / 32;
  const int cta_rank = kCluster > 1 ? int(block_rank_in_cluster()) : 0;  // position in the cluster

  allow_dependent_launch();
  TESSERA_SM90_PROBE_ENTRY()
  TESSERA_SM90_PROBE_PM(0)
  if (T::kL2Warm && warp == 1 && (p.prefetch_a | p.prefetch_b)) Mainloop<T>::l2_warm(p, cta_rank);
  if (warp == 0 && elect_one_sync()) init_cta(p, smem);
  TESSERA_SM90_PROBE_PM(1)
  // Clusters: the peers' barriers must be initialised before any multicast or remote arrive. Every
  // thread arrives now and waits only just before its first use of the pipeline (the producer before
  // its first TMA, the consumers before their mainloop), so that the barrier's round trip overlaps
  // the walk and tensor set-up.
  if constexpr (kCluster > 1) cluster_arrive_relaxed();  // fence_barrier_init released the inits
  else __syncthreads();
  wait_for_prior_grid();  // the launch and the set-up above overlap the previous kernel's tail
  TESSERA_SM90_PROBE_PM(2)

  Tensor sA = make_tensor(make_smem_ptr(smem.a), typename T::SmemLayoutA{});  // (BM,BK,PIPE)
  Tensor sB = make_tensor(make_smem_ptr(smem.b), typename T::SmemLayoutB{});  // (BN,BK,PIPE)
  if (threadIdx.x / 128 == 0) {  // the producer warpgroup
    cutlass::arch::warpgroup_reg_dealloc<T::kProducerRegs>();
    TESSERA_SM90_PROBE_PM(3)
    if (warp == 0 && elect_one_sync()) Mainloop<T>::load(p, smem, sA, sB, cta_rank);
    TESSERA_SM90_PROBE_LAST()
    return;
  }

  // ---------------- consumers ----------------
  cutlass::arch::warpgroup_reg_alloc<T::kConsumerRegs>();
  TESSERA_SM90_PROBE_PM(3)
  const ConsumerThread<T> me(smem);
  typename T::TiledMma mma;
  Tensor acc = partition_fragment_C(mma, Shape<Int<BM>, Int<BN>>{});  // (MMA,MMA_M,MMA_N) fp32 (s8: int32)
  // WGMMA accumulator layout of a 64 x BN warpgroup tile: thread (warp w, lane) holds rows
  // 16w + lane/4 + 8h (h = 0, 1) and columns 8j + 2(lane%4) + c (c = 0, 1), at acc(c + 2h + 4j).
  static_assert(decltype(size(acc))::value == BN / 2, "one 64 x BN WGMMA accumulator per thread");

  PipelineState<T::Stages> pipe;
  uint32_t c_phase = 0;  // parity of this warpgroup's next C sub-tile (smem.c_full)
  const Schedule& sched = p.sched;
  Walk walk(sched, cta_index() / kCluster);
  // Ping-pong: the walk's items alternate between the warpgroups (the first is warpgroup 1's); each
  // passes over the other's item, advancing its ring position by the stages that item uses.
  // `turn_phase` is the parity of this warpgroup's next turn: a fresh barrier passes parity 1, so
  // warpgroup 1 starts at once and warpgroup 2 waits for warpgroup 1's first mainloop.
  uint32_t turn_phase = me.warp_group() == 1 ? 1 : 0;
  bool one_tile_taken = false;
  auto next_item = [&](WorkItem& w, bool pass_one) {
    if constexpr (kOneTile) return one_tile_item(one_tile_taken, sched.k_tiles, w);
    if constexpr (T::Pingpong) {
      if (pass_one) {
        if (!walk.next(sched, cta_index() / kCluster, grid_size() / kCluster, w)) return false;
        pipe.skip(w.kt_end - w.kt_begin);
      }
    }
    return walk.next(sched, cta_index() / kCluster, grid_size() / kCluster, w);
  };
  if constexpr (kCluster > 1) cluster_wait();  // the peers' barriers are initialised (see above)
  TESSERA_SM90_PROBE_START()
  WorkItem w;
  for (bool pass_one = me.warp_group() == 2; next_item(w, pass_one); pass_one = true) {
    TESSERA_SM90_PROBE_ITEM_BEGIN(w.tile)
    TESSERA_SM90_PROBE_EPI(15)
    // The item's roles as predicates, so that only the tile, range and k-tile count stay in
    // registers across the mainloop (the 128x256 tile has none to spare next to its accumulators).
    const bool sk_publisher = !kOneTile && sk_publishes(sched, w), sk_owner = !kOneTile && sk_folds(sched, w);
    const int split = w.split;
    Mainloop<T>::mma(p, smem, mma, sA, sB, acc, pipe, turn_phase, me, w, cta_rank);
    TESSERA_SM90_PROBE_ITEM_END()
    TESSERA_SM90_PROBE_ITEM_KTILES(w.kt_end - w.kt_begin)

    // Stream-K: a share's partial goes out, or the owner folds the later shares' partials in.
    if (!kOneTile && !T::kIntSums && supports_stream_k(BM, T::Pingpong) && (sk_publisher || sk_owner) &&
        stream_k_fixup(p, w, sk_publisher, acc, me.ttid(), me.tile_barrier(), cta_rank))
      continue;  // a publisher's share: its partial is out, the owner writes the tile

    // The tile's coordinates, only now: registers kept across the mainloop spilled a 128x256 tile.
    const TileCoord c = kOneTile ? one_tile_coord<ClusterM, ClusterN>(cta_rank)
                                 : cta_tile(w.tile, p.raster_c, cta_rank, ClusterM, ClusterN);
    if (c.m >= p.tiles_m || c.n >= p.tiles_n) continue;  // a cluster rank past the last tile: nothing to write

    // The epilogue (EpiMode, decided by the launch plan): a 16-bit D by TMA store (or direct from
    // the same sub-tiles); else through the fp32 staging, whole tiles at once or split-K's ranges.
    auto store = [&](int row, int col, float (&v)[8]) { store_row8<T>(p.g, c, row, col, v); };
    if constexpr (T::kIntSums) {
      staged(me, acc, store);
    } else if (kOneTile || p.epi_mode != kEpiStaged) {
      Store16<T>(p, smem, me, c).run(acc, c_phase);
    } else if constexpr (!kOneTile) {
      if (sched.splits == 1) staged(me, acc, store);
      else split_k(p, smem, me, acc, c, split);
    }
  }
  TESSERA_SM90_PROBE_PM(4)
  // The last TMA stores must have read this CTA's shared memory before it exits.
  if (stores_by_tma(p) && me.wtid() == 0) tma_store_wait<0>();
  TESSERA_SM90_PROBE_EXIT()
  TESSERA_SM90_PROBE_LAST()
#endif
}

}  // namespace tessera::gemm_impl::sm90
