// The skinny GEMM: D = X W^T where X has at most 16 x kMT rows (the tokens of a decode step) and W
// (the weights) many, both K-major. Memory-bound on W, which is read exactly once, straight from
// global memory into the mma.sync B fragments: no shared-memory staging, no pipeline barriers, no
// workspace, so a CTA starts streaming at once (a decode step is dozens of such launches).
//
// A CTA owns 8 kNT rows of W over the whole of K (N = 2048 weights, kNT = 1: 256 CTAs, two per
// SM); its warps split K into contiguous ranges, ask L2 for all of their share at entry (prefetch),
// keep a step of loads in flight, and their partial sums meet in shared memory, added in warp order
// (deterministic). kNT > 1 (skinny::w_tiles) fits a larger W into one wave of CTAs, each asking
// DRAM for all of its share at entry, and shares every CTA's loads of X among more W rows. Each
// 32-element chunk of K feeds two m16n8k16 MMAs per (m16 tile, n8 tile), with K permuted so that every
// fragment is one 16-byte load: thread t (lane % 4) of row g (lane / 4) loads elements 8t..8t+7 of
// the chunk and the MMAs read them as logical k (2t, 2t+1) <- (8t, 8t+1), (2t+8, 2t+9) <- (8t+2,
// 8t+3) in the first, (8t+4..8t+7) in the second; X is loaded with the same permutation, so every
// product pairs the same actual k.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "core/dependent_launch.cuh"
#include "gemm/epilogue/epilogue.cuh"
#include "gemm/kernel_params.hpp"
#include "gemm/skinny/skinny.hpp"

namespace tessera::gemm_impl::skinny {

constexpr int kThreads = 32 * kWarps;
constexpr int kChunk = 32;  // K elements per step: two k16 MMAs

// The roles of the canonical operands: X is A (small M) or B (small N, D computed transposed).
struct Operands {
  const void* x;
  int64_t ldx, batch_stride_x;
  const void* w;
  int64_t ldw, batch_stride_w;
  int rows_x, rows_w, k;
  bool x_is_a;
};

template <bool BF16>
__device__ __forceinline__ void mma16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
  if constexpr (BF16)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// 16 bytes of W (read once: streamed, evict-first) or of X (re-read by every CTA: through the
// read-only cache), zeros where `in` is false.
__device__ __forceinline__ uint4 load_w(const uint16_t* p, bool in) {
  return in ? __ldcs(reinterpret_cast<const uint4*>(p)) : uint4{};
}
__device__ __forceinline__ uint4 load_x(const uint16_t* p, bool in) {
  return in ? __ldg(reinterpret_cast<const uint4*>(p)) : uint4{};
}
// Fetches the 128-byte line at p into L2 (no registers, nothing to wait for).
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// kMT: m16 tiles of X (rows_x <= 16 kMT); kHalf: rows_x <= 8, so the upper 8 rows of the one tile are
// zeros that need neither loads nor registers; kNT: n8 tiles of W per CTA; kUnroll: chunks per step.
template <bool BF16, int kMT, bool kHalf, int kNT, int kUnroll>
__global__ void __launch_bounds__(kThreads) skinny_kernel(Operands op, EpilogueParams epi) {
  static_assert(!kHalf || kMT == 1, "half a tile: one m16 tile");
  // The loads of step i + 1 are issued before the MMAs of step i (a register double buffer), so a
  // warp always has a step in flight; left alone, the compiler interleaved each load with the MMAs
  // that use it, one step at a time.
  constexpr int kRowsX = 16 * kMT, kHalves = kHalf ? 1 : 2, kRowsW = 8 * kNT;
  __shared__ float red[kWarps][kRowsX][kRowsW + 1];  // +1: the warps' stores of one row spread over banks
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int l = blockIdx.y;
  const int w0 = blockIdx.x * kRowsW;
  const auto* x = static_cast<const uint16_t*>(op.x) + l * op.batch_stride_x;
  const auto* w = static_cast<const uint16_t*>(op.w) + l * op.batch_stride_w;
  bool w_row_in[kNT];
  const uint16_t* w_row[kNT];
#pragma unroll
  for (int j = 0; j < kNT; ++j) {
    w_row_in[j] = w0 + 8 * j + g < op.rows_w;
    w_row[j] = w + int64_t(w_row_in[j] ? w0 + 8 * j + g : 0) * op.ldw;
  }

  // This warp's contiguous share of the K chunks, asked of DRAM at once: each 128-byte line of its
  // W rows (two chunks) by one of the row's four threads.
  const int chunks = (op.k + kChunk - 1) / kChunk;
  const int c_begin = warp * chunks / kWarps, c_end = (warp + 1) * chunks / kWarps;
  // Under a dependent launch this runs beside the previous kernel's tail: the next kernel may launch
  // at once, and the prefetch is safe before the wait (L2 is where that kernel's writes land); the
  // loads into registers are not.
  allow_dependent_launch();
#pragma unroll
  for (int j = 0; j < kNT; ++j)
    if (w_row_in[j])
      for (int c = c_begin + 2 * t; c < c_end; c += 8) prefetch_l2(w_row[j] + c * kChunk);
  wait_for_prior_grid();

  struct Step {
    uint4 w[kUnroll][kNT], x[kUnroll][kMT][kHalves];
  };
  auto load = [&](Step& st, int c) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int k0 = (c + u) * kChunk + 8 * t;
      const bool kin = c + u < c_end && k0 < op.k;  // K is a multiple of 8: a group is all in or all out
#pragma unroll
      for (int j = 0; j < kNT; ++j) st.w[u][j] = load_w(w_row[j] + k0, kin && w_row_in[j]);
#pragma unroll
      for (int i = 0; i < kMT; ++i)
#pragma unroll
        for (int h = 0; h < kHalves; ++h) {
          const int row = 16 * i + 8 * h + g;
          st.x[u][i][h] = load_x(x + int64_t(row) * op.ldx + k0, kin && row < op.rows_x);
        }
    }
  };
  float acc[kMT][kNT][4] = {};
  auto mma = [&](const Step& st) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int i = 0; i < kMT; ++i) {
        const uint4 a = st.x[u][i][0], a8 = kHalf ? uint4{} : st.x[u][i][kHalves - 1];
#pragma unroll
        for (int j = 0; j < kNT; ++j) {
          const uint4 b = st.w[u][j];
          mma16816<BF16>(acc[i][j], a.x, a8.x, a.y, a8.y, b.x, b.y);
          mma16816<BF16>(acc[i][j], a.z, a8.z, a.w, a8.w, b.z, b.w);
        }
      }
  };
  Step cur, next;
  load(cur, c_begin);
  for (int c = c_begin; c < c_end; c += kUnroll) {
    load(next, c + kUnroll);
    __syncwarp();  // keeps the loads above the MMAs (the scheduler sank them below, to save registers)
    mma(cur);
    cur = next;
  }

  // The warps' partial sums, then one thread per 8 outputs adds them in warp order.
#pragma unroll
  for (int i = 0; i < kMT; ++i)
#pragma unroll
    for (int j = 0; j < kNT; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r)
        if (!kHalf || r < 2) red[warp][16 * i + g + 8 * (r / 2)][8 * j + 2 * t + r % 2] = acc[i][j][r];
  __syncthreads();
  // Small M: D(m = X row, n = 8 W rows from w0 + wr). Small N: D(m = W row, n = X rows xr..xr+7).
  const int rows_x = kHalf ? 8 : kRowsX;
  const int groups = op.x_is_a ? rows_x * kNT : kRowsW * (rows_x / 8);
  for (int q = threadIdx.x; q < groups; q += kThreads) {
    const int xr = op.x_is_a ? q / kNT : 8 * (q % (rows_x / 8));      // first X row of the group
    const int wr = op.x_is_a ? 8 * (q % kNT) : q / (rows_x / 8);      // first W row of the group
    const int m = op.x_is_a ? xr : w0 + wr;                           // the canonical D row
    if (m >= (op.x_is_a ? op.rows_x : op.rows_w) || (op.x_is_a && w0 + wr >= op.rows_w)) continue;
    float v[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      float s = 0.0f;
#pragma unroll
      for (int k = 0; k < kWarps; ++k) s += op.x_is_a ? red[k][xr][wr + e] : red[k][xr + e][wr];
      v[e] = s;
    }
    epilogue_row8<true>(epi, l, m, op.x_is_a ? w0 + wr : xr, op.x_is_a ? op.rows_w : op.rows_x, v);
  }
}

}  // namespace tessera::gemm_impl::skinny
