// The Hopper GEMM's fp32 staging epilogue: the accumulators leave through the warpgroup's shared
// buffer in 64 x kEpiN sub-tiles, read back as 8 consecutive fp32 of one row per thread, and go to
// D through the generic row epilogue (any D type and major, beta * C, bias, activation, scales).
// Taken by int32 sums, fp8 operands with a non-bf16 D, fp32 D, a C that TMA cannot read,
// and split-K's partials and folds.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>

#include "gemm/epilogue/epilogue.cuh"
#include "gemm/sm90/params.cuh"

namespace tessera::gemm_impl::sm90 {

// An accumulator as the fp32 staging carries it: fp32 as it is, an int32 sum as its bits.
CUTE_DEVICE float acc_bits(float x) { return x; }
CUTE_DEVICE float acc_bits(int32_t x) { return __int_as_float(x); }

// The accumulators through the staging buffer, one 64 x kEpiN sub-tile at a time: emit(row, col,
// v[8]) gets tile-relative coordinates (row < BM, col < BN, col % 8 == 0). The read-back runs as a
// loop, so `emit` (the whole dtype / beta / bias epilogue) is inlined once per sub-tile, not once
// per chunk. (The sub-tile loop stays unrolled: accumulators need compile-time indices, and as a
// loop all of them stay live to the end, which spilled 128x256.)
template <class T, class Acc, class Emit>
CUTE_DEVICE void staged(ConsumerThread<T> const& me, Acc& acc, Emit&& emit) {
  constexpr int BN = T::BN, kEpiN = T::kEpiN, kLd = T::kEpiLd, kChunksPerRow = kEpiN / 8;
  float* const epi = me.epi();
  CUTE_UNROLL
  for (int sub = 0; sub < BN / kEpiN; ++sub) {
    CUTE_UNROLL
    for (int jj = 0; jj < kEpiN / 8; ++jj) {
      const int j = sub * (kEpiN / 8) + jj;
      CUTE_UNROLL
      for (int h = 0; h < 2; ++h) {
        const int r = 16 * me.wg_warp() + me.lane / 4 + 8 * h, col = 8 * jj + 2 * (me.lane % 4);
        *reinterpret_cast<float2*>(epi + r * kLd + col) =
            make_float2(acc_bits(acc(4 * j + 2 * h)), acc_bits(acc(4 * j + 2 * h + 1)));
        // Three warpgroups (152 registers): the WGMMAs keep every accumulator live across the
        // persistent loop; zeroing the staged ones frees their registers for `emit`.
        if constexpr (T::kConsumers == 3) acc(4 * j + 2 * h) = acc(4 * j + 2 * h + 1) = 0;
      }
    }
    cutlass::arch::NamedBarrier::arrive_and_wait(128, me.epi_barrier());
#pragma unroll 1
    for (int it = 0; it < 64 * kChunksPerRow / 128; ++it) {
      const int idx = it * 128 + me.wtid();
      const int r = idx / kChunksPerRow, c8 = (idx % kChunksPerRow) * 8;
      const float4* src = reinterpret_cast<const float4*>(epi + r * kLd + c8);
      const float4 lo = src[0], hi = src[1];
      float v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
      emit(me.wg_row0() + r, sub * kEpiN + c8, v);
    }
    cutlass::arch::NamedBarrier::arrive_and_wait(128, me.epi_barrier());  // the buffer is free again
  }
}

// Eight values of tile `c`'s row `row` from column `col` (tile-relative) into D, by the dtype's row
// epilogue: int32 sums (as their bits), fp8's scaled sums, or the plain fp32 epilogue.
template <class T>
CUTE_DEVICE void store_row8(GemmParams const& g, TileCoord const& c, int row, int col, float (&v)[8]) {
  const int m = c.m * T::BM + row, n0 = c.n * T::BN + col;
  if (m >= g.m || n0 >= g.n) return;
  if constexpr (T::kIntSums) {
    int sums[8];
    CUTE_UNROLL
    for (int i = 0; i < 8; ++i) sums[i] = __float_as_int(v[i]);
    epilogue_row8_s32<false>(g, c.l, m, n0, g.n, sums);
  } else if constexpr (T::kFp8) {
    epilogue_row8_scaled<false>(g, c.l, m, n0, g.n, v);
  } else {
    epilogue_row8<false>(g.epi, c.l, m, n0, g.n, v);
  }
}

}  // namespace tessera::gemm_impl::sm90
