// The Hopper GEMM's fix-ups of partial tiles, after the mainloop (gemm/schedule.hpp): stream-K
// shares folded into the owner's accumulators, and split-K ranges published to the workspace and
// folded, in parallel by every range or serially by the last to arrive, in an order that timing
// cannot change.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>

#include "gemm/sm90/epilogue_staged.cuh"
#include "gemm/sm90/params.cuh"
#include "gemm/sm90/probe.cuh"

namespace tessera::gemm_impl::sm90 {

// Stream-K flags: a release store after the partial, an acquire load before reading it.
__device__ __forceinline__ void store_release(int* p, int v) {
  asm volatile("st.release.gpu.global.b32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
template <class Word>  // int or unsigned
__device__ __forceinline__ Word load_acquire(const Word* p) {
  static_assert(sizeof(Word) == 4, "a 32-bit flag or counter");
  Word v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void store_release(unsigned long long* p, unsigned long long v) {
  asm volatile("st.release.gpu.global.b64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ unsigned long long load_acquire(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.acquire.gpu.global.b64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

// Stream-K fix-up of a work item that takes part in it (gemm/schedule.hpp). One partial slot per CTA
// (only a share's first item can start inside a tile), numbered rank * workers + worker so that the
// later workers' partials of a tile follow each other; a partial is the accumulators in fragment
// order (float4 i of the tile's thread t at i * kTileThreads + t: coalesced, no staging). A
// publisher stores it and raises its flag (returns true: the item is done); the owner waits for the
// later workers' flags (they computed their part first thing in their shares), adds their partials
// in worker order (the same bits whichever finished first) and returns false: on to the epilogue.
// ttid: the thread among the tile's threads; tile_barrier: the named barrier of the tile's warpgroups.
template <class T, class Acc>
CUTE_DEVICE bool stream_k_fixup(KernelParams<T> const& p, WorkItem const& w, bool sk_publisher, Acc& acc, int ttid,
                                int tile_barrier, int cta_rank) {
  constexpr int BM = T::BM, BN = T::BN, kCluster = T::kCluster;
  const Schedule& sched = p.sched;
  constexpr int kTileThreads = T::kTileThreads, kVecs = BN / 8;  // float4s of accumulators per thread
  const int sk_slot = cta_rank * (grid_size() / kCluster) + cta_index() / kCluster;
  if (sk_publisher) {
    float4* const part = reinterpret_cast<float4*>(p.sk_partials) + size_t(sk_slot) * (BM * BN / 4) + ttid;
    CUTE_UNROLL
    for (int i = 0; i < kVecs; ++i)
      __stcg(part + i * kTileThreads, make_float4(acc(4 * i), acc(4 * i + 1), acc(4 * i + 2), acc(4 * i + 3)));
    __threadfence();
    cutlass::arch::NamedBarrier::arrive_and_wait(kTileThreads, tile_barrier);
    if (ttid == 0) store_release(p.sk_flags + sk_slot, 1);
    return true;
  }
  for (int v = cta_index() / kCluster + 1, slot = sk_slot + 1; sk_folds_from(sched, w, v, grid_size() / kCluster);
       ++v, ++slot) {
    while (load_acquire(p.sk_flags + slot) == 0) {
    }
    const float4* const part = reinterpret_cast<const float4*>(p.sk_partials) + size_t(slot) * (BM * BN / 4) + ttid;
    CUTE_UNROLL
    for (int i = 0; i < kVecs; ++i) {
      const float4 x = __ldcg(part + i * kTileThreads);
      acc(4 * i) += x.x, acc(4 * i + 1) += x.y, acc(4 * i + 2) += x.z, acc(4 * i + 3) += x.w;
    }
  }
  return false;
}

// Split-K, step 1: this range's partial tile (row-major BM x BN fp32) into its workspace slot.
template <class T, class Acc>
CUTE_DEVICE void publish_partial(ConsumerThread<T> const& me, Acc& acc, float* tile_partials, int split) {
  constexpr int BM = T::BM, BN = T::BN;
  if constexpr (supports_parallel_fold(BM, BN, T::Pingpong)) {
    // Straight from the accumulators, two columns a store: a warp's store covers 8 rows x 32
    // bytes, whole sectors, faster than through the smem staging as D leaves. The wider tiles
    // stage it: their registers are all taken (the direct stores spilled 12 bytes of 128x256 and
    // 32 of 192x192).
    float* const rows = tile_partials + split * (BM * BN) + me.acc_row() * BN + 2 * (me.lane % 4);
    CUTE_UNROLL
    for (int j = 0; j < BN / 8; ++j)
      CUTE_UNROLL
      for (int h = 0; h < 2; ++h)
        __stcg(reinterpret_cast<float2*>(rows + 8 * h * BN + 8 * j), make_float2(acc(4 * j + 2 * h), acc(4 * j + 2 * h + 1)));
  } else {
    float* const mine = tile_partials + split * (BM * BN);
    staged(me, acc, [&](int row, int col, float (&v)[8]) {
      float4* dst = reinterpret_cast<float4*>(mine + row * BN + col);
      __stcg(dst, make_float4(v[0], v[1], v[2], v[3]));
      __stcg(dst + 1, make_float4(v[4], v[5], v[6], v[7]));
    });
  }
}

// Split-K, step 2: sign the range in; returns whether this range folds. In one round (every unit
// has its own worker, so all of a tile's ranges run at once: KernelParams::fold_parallel, which the
// launcher sets knowing how many clusters fit at once) each range waits for the others and folds its
// 1/splits of the tile. Otherwise the last range to arrive folds the whole tile alone: a range
// still queued behind an earlier unit of its worker cannot be waited for.
// One warp signs the range in for the tile's threads (the barrier before it orders their stores
// before its fence, as in a cooperative grid sync), and its acquires before the barrier after it
// order every range's stores before the fold's loads. Flags: raise this range's, then the warp's
// lanes wait for every range's. Counters: count in; in one round wait for all, else the last to
// count in folds.
template <class T>
CUTE_DEVICE bool sign_in(KernelParams<T> const& p, typename T::SharedStorage& smem, ConsumerThread<T> const& me,
                         long long tile, int split, bool one_round) {
  const Schedule& sched = p.sched;
  uint32_t& folds = smem.splitk_last[T::Pingpong ? me.warp_group() - 1 : 0];
  TESSERA_SM90_PROBE_MARK(0)
  cutlass::arch::NamedBarrier::arrive_and_wait(T::kTileThreads, me.tile_barrier());
  TESSERA_SM90_PROBE_MARK(1)
  if (me.ttid() < 32) {
    if (one_round && p.fold_epoch != 0) {
      unsigned long long* const flags = p.fold_flags + tile * sched.splits;
      if (me.ttid() == 0) {
        __threadfence();
        store_release(flags + split, p.fold_epoch);
      }
      for (int r = me.ttid(); r < sched.splits; r += 32)
        while (load_acquire(flags + r) != p.fold_epoch) {
        }
      __threadfence();
      __syncwarp();
      if (me.ttid() == 0) folds = 1;
    } else if (me.ttid() == 0) {
      __threadfence();
      const unsigned done = atomicAdd(p.counters + tile, 1u);
      if (one_round) {
        while (load_acquire(p.counters + tile) < unsigned(sched.splits)) {
        }
      }
      __threadfence();
      folds = one_round || done == unsigned(sched.splits - 1);
    }
  }
  cutlass::arch::NamedBarrier::arrive_and_wait(T::kTileThreads, me.tile_barrier());
  TESSERA_SM90_PROBE_MARK(2)
  return folds;
}

// Split-K, step 3 on the tiles that fold in parallel: float4s [u0, u1) of the tile (row-major),
// summed over every range's partial. In one round range `split` folds its 1/splits of the tile's
// 8-float chunks, else the last range all. A warp reads U consecutive float4s (U x 16 bytes, whole
// sectors) from each of `lanes` partials at a time: lane (sub, u) sums ranges sub, sub + lanes, ...
// (kGroup loads in flight), the subs add their sums in a butterfly, and the even lane of each pair
// of float4s stores the 8-float chunk. The order depends on the splits, the tile and the round
// only, so the bits do not depend on timing. The fold's cost is its L2 round trips, with every
// range loading at once.
template <class T>
CUTE_DEVICE void fold_parallel(GemmParams const& g, int splits, TileCoord const& c, const float* tile_partials,
                               int split, bool one_round) {
  constexpr int BM = T::BM, BN = T::BN, kChunks = BM * BN / 8, kGroup = 8;
  const int S = splits;
  const int u0 = one_round ? 2 * (split * kChunks / S) : 0;
  const int u1 = one_round ? 2 * ((split + 1) * kChunks / S) : 2 * kChunks;
  int lanes = 1;  // 1, 2 or 4 partials a load instruction: U = 32, 16 or 8
  while (lanes < 4 && lanes * kGroup < S) lanes *= 2;
  // The thread index, read again: one register less held across the mainloop (it spilled the
  // 128x128 tile).
  const int fold_tid = T::Pingpong ? thread_index() % 128 : thread_index() - 128;
  const int U = 32 / lanes, sub = (fold_tid % 32) / U, u = fold_tid % U;
  const int per_pass = T::kTileThreads / 32 * U;
  const float4* const part0 = reinterpret_cast<const float4*>(tile_partials);
#pragma unroll 1  // one copy of the row epilogue (see `staged`)
  for (int pass = u0; pass < u1; pass += per_pass) {  // uniform: the shuffles need every lane
    const int unit = pass + fold_tid / 32 * U + u;
    float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
    if (unit < u1) {
      // Ranges sub, sub + lanes, ...: one pointer, stepped (64-bit products cost registers).
      const float4* src = part0 + size_t(sub) * (BM * BN / 4) + unit;
      const size_t step = size_t(lanes) * (BM * BN / 4);
#pragma unroll 1
      for (int r0 = sub; r0 < S; r0 += kGroup * lanes, src += kGroup * step) {
        float4 x[kGroup];
        CUTE_UNROLL
        for (int q = 0; q < kGroup; ++q)
          if (r0 + q * lanes < S) x[q] = __ldcg(src + q * step);
        CUTE_UNROLL
        for (int q = 0; q < kGroup; ++q)
          if (r0 + q * lanes < S) sum.x += x[q].x, sum.y += x[q].y, sum.z += x[q].z, sum.w += x[q].w;
      }
    }
    for (int off = U; off < 32; off *= 2) {  // every sub ends with the same bits
      sum.x += __shfl_xor_sync(0xffffffffu, sum.x, off), sum.y += __shfl_xor_sync(0xffffffffu, sum.y, off);
      sum.z += __shfl_xor_sync(0xffffffffu, sum.z, off), sum.w += __shfl_xor_sync(0xffffffffu, sum.w, off);
    }
    float4 next;  // the odd neighbour's float4: the chunk's second half
    next.x = __shfl_down_sync(0xffffffffu, sum.x, 1), next.y = __shfl_down_sync(0xffffffffu, sum.y, 1);
    next.z = __shfl_down_sync(0xffffffffu, sum.z, 1), next.w = __shfl_down_sync(0xffffffffu, sum.w, 1);
    if (unit < u1 && sub == 0 && u % 2 == 0) {  // u1 is even: the odd neighbour is in range too
      float v[8] = {sum.x, sum.y, sum.z, sum.w, next.x, next.y, next.z, next.w};
      store_row8<T>(g, c, unit / 2 / (BN / 8), (unit / 2 % (BN / 8)) * 8, v);
    }
  }
  TESSERA_SM90_PROBE_MARK(3)
}

// Split-K, step 3 on the wide tiles, by the last range alone. This warpgroup's 64 x BN rows:
// kIters chunks of 8 floats per thread (chunk `it` is number it * 128 + wtid in row-major order),
// summed in registers in passes of kPass chunks, range 0 first, then one range per L2 round trip
// (64 floats in flight: a 256-wide tile keeps its dead 128 accumulators live across the persistent
// loop, and more spilled it; three consumer warpgroups have 152 registers and keep 32 in flight, as
// 64 spilled the 192x192 tile). The adds run in range order p_0 + p_1 + ...
template <class T>
CUTE_DEVICE void fold_serial(GemmParams const& g, int splits, TileCoord const& c, ConsumerThread<T> const& me,
                             const float* tile_partials) {
  constexpr int BM = T::BM, BN = T::BN;
  constexpr int kRowChunks = BN / 8, kIters = 64 * kRowChunks / 128, kPass = T::kConsumers == 3 ? 2 : 4;
  const float4* const base = reinterpret_cast<const float4*>(tile_partials) + (me.wg_row0() * BN) / 4 + 2 * me.wtid();
#pragma unroll 1  // one copy of the row epilogue per pass (see `staged`)
  for (int p0 = 0; p0 < kIters; p0 += kPass) {
    float4 lo[kPass], hi[kPass];
    CUTE_UNROLL
    for (int q = 0; q < kPass; ++q) lo[q] = __ldcg(base + 256 * (p0 + q)), hi[q] = __ldcg(base + 256 * (p0 + q) + 1);
#pragma unroll 1  // one range per L2 round trip (see above)
    for (int r = 1; r < splits; ++r) {
      const float4* const part = base + size_t(r) * (BM * BN / 4);  // range r's partial
      float4 xl[kPass], xh[kPass];
      CUTE_UNROLL
      for (int q = 0; q < kPass; ++q) xl[q] = __ldcg(part + 256 * (p0 + q)), xh[q] = __ldcg(part + 256 * (p0 + q) + 1);
      CUTE_UNROLL
      for (int q = 0; q < kPass; ++q) {
        lo[q].x += xl[q].x, lo[q].y += xl[q].y, lo[q].z += xl[q].z, lo[q].w += xl[q].w;
        hi[q].x += xh[q].x, hi[q].y += xh[q].y, hi[q].z += xh[q].z, hi[q].w += xh[q].w;
      }
    }
    CUTE_UNROLL
    for (int q = 0; q < kPass; ++q) {
      const int idx = (p0 + q) * 128 + me.wtid();
      float v[8] = {lo[q].x, lo[q].y, lo[q].z, lo[q].w, hi[q].x, hi[q].y, hi[q].z, hi[q].w};
      store_row8<T>(g, c, me.wg_row0() + idx / kRowChunks, (idx % kRowChunks) * 8, v);
    }
  }
}

// Split-K: publish this range's partial tile, count the range in, and fold: the sum of every
// range's partial comes from the workspace (this range's own too, so the accumulators are dead by
// then), in an order that timing cannot change.
template <class T, class Acc>
CUTE_DEVICE void split_k(KernelParams<T> const& p, typename T::SharedStorage& smem, ConsumerThread<T> const& me,
                         Acc& acc, TileCoord const& c, int split) {
  constexpr bool kParallelFold = supports_parallel_fold(T::BM, T::BN, T::Pingpong);
  const Schedule& sched = p.sched;
  const long long tile = ((long long)c.l * p.tiles_m + c.m) * p.tiles_n + c.n;  // this CTA's tile: its slots
  float* const tile_partials = p.partials + tile * sched.splits * (T::BM * T::BN);
  publish_partial(me, acc, tile_partials, split);
  const bool one_round = kParallelFold && p.fold_parallel;
  if (!sign_in(p, smem, me, tile, split, one_round)) return;
  if constexpr (kParallelFold) fold_parallel<T>(p.g, sched.splits, c, tile_partials, split, one_round);
  else fold_serial(p.g, sched.splits, c, me, tile_partials);
}

}  // namespace tessera::gemm_impl::sm90
