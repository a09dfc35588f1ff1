// What both attention kernel families share: a CTA's place in the problem, the (batch, head)
// slices of Q, K, V and O, the online softmax, and O's way out (normalise, LSE, smem, 16-byte stores).
#pragma once

#include <cute/tensor.hpp>

#include "attention/params.hpp"

namespace tessera::attn {

using namespace cute;

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffff, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffff, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffff, x, 1);
  return x + __shfl_xor_sync(0xffffffff, x, 2);
}
// 2^x on the SFU (ex2.approx.ftz: ~2 ulp, flushes denormals, which softmax weights can lose).
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// One CTA's block of BM query rows of one (batch, query head), and the key blocks it visits.
struct QueryBlock {
  int m_block, head, b, head_kv;
  int row0;      // first query row
  int diag;      // causal: query i sees keys j <= i + diag (bottom-right aligned)
  int n_blocks;  // key blocks of BN keys to visit (causal: up to the last row's diagonal)
};

template <int BM, int BN, bool Causal>
__device__ __forceinline__ QueryBlock query_block(const AttnParams& p) {
  QueryBlock q;
  const int block = p.block0 + int(blockIdx.x);  // (query block, head, batch), query blocks fastest
  const int m = block % p.m_blocks, bh = block / p.m_blocks;
  // Causal: the highest query blocks see the most keys; launch them first (longest-first) so the
  // short ones fill the tail of the grid.
  q.m_block = Causal ? p.m_blocks - 1 - m : m;
  q.head = bh % p.heads_q;
  q.b = bh / p.heads_q;
  q.head_kv = q.head / (p.heads_q / p.heads_kv);
  q.row0 = q.m_block * BM;
  q.diag = p.seqlen_k - p.seqlen_q;
  q.n_blocks = (p.seqlen_k + BN - 1) / BN;
  if constexpr (Causal) {
    const int last_row = min(q.row0 + BM, p.seqlen_q) - 1;
    q.n_blocks = min(q.n_blocks, max(0, (last_row + q.diag + 1 + BN - 1) / BN));
  }
  return q;
}

// The (batch, head) slices of Q, K, V and O as (seq, D) tensors with unit stride along D.
template <class Element, int D>
__device__ __forceinline__ auto head_tensors(const AttnParams& p, const QueryBlock& q) {
  const Element* q_ptr = static_cast<const Element*>(p.q) + q.b * p.q_stride[0] + q.head * p.q_stride[2];
  const Element* k_ptr = static_cast<const Element*>(p.k) + q.b * p.k_stride[0] + q.head_kv * p.k_stride[2];
  const Element* v_ptr = static_cast<const Element*>(p.v) + q.b * p.v_stride[0] + q.head_kv * p.v_stride[2];
  Element* o_ptr = static_cast<Element*>(p.o) + q.b * p.o_stride[0] + q.head * p.o_stride[2];
  return cute::make_tuple(
      make_tensor(make_gmem_ptr(q_ptr), make_shape(p.seqlen_q, Int<D>{}), make_stride(p.q_stride[1], _1{})),
      make_tensor(make_gmem_ptr(k_ptr), make_shape(p.seqlen_k, Int<D>{}), make_stride(p.k_stride[1], _1{})),
      make_tensor(make_gmem_ptr(v_ptr), make_shape(p.seqlen_k, Int<D>{}), make_stride(p.v_stride[1], _1{})),
      make_tensor(make_gmem_ptr(o_ptr), make_shape(p.seqlen_q, Int<D>{}), make_stride(p.o_stride[1], _1{})));
}

// gmem -> smem copy of a (CPY, CPY_ROWS, CPY_D) partition, rows at or past `rows` zero-filled
// (the copy atom's predicate); coords: the source's identity coordinates (row, d).
template <class TiledCopy, class TS, class TD, class TC>
__device__ __forceinline__ void copy_rows(TiledCopy const& g2s, TS const& src, TD&& dst, TC const& coords, int rows) {
  CUTE_UNROLL
  for (int i = 0; i < size<1>(dst); ++i) {
    const bool in = get<0>(coords(0, i, 0)) < rows;
    CUTE_UNROLL
    for (int j = 0; j < size<2>(dst); ++j) copy(g2s.with(in), src(_, i, j), dst(_, i, j));
  }
}

// Per-thread state of the online softmax for the kRows query rows a thread holds (a row's values
// are spread over the 4 threads of a quad).
template <int kRows>
struct OnlineSoftmax {
  float row_max[kRows], row_sum[kRows], correction[kRows];

  __device__ void init() {
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      row_max[r] = -INFINITY;
      row_sum[r] = 0.0f;
    }
  }

  // One S block, (rows, cols) view `s` with coordinates `coords` inside the (BM, BN) block whose
  // first key is col0: masks keys past seqlen_k and (causal) right of the diagonal when `check`,
  // then S -> exp2 weights in place, updating the running max and sum. Returns whether a row max
  // of this warp moved: O then needs rescaling by `correction`.
  template <bool Causal, class TS, class TC>
  __device__ bool update(TS& s, TC const& coords, const QueryBlock& q, int col0, bool check, const AttnParams& p) {
    if (check) {  // only the blocks that can hold masked keys pay for it
      CUTE_UNROLL
      for (int r = 0; r < size<0>(s); ++r) {
        CUTE_UNROLL
        for (int c = 0; c < size<1>(s); ++c) {
          const int col = col0 + get<1>(coords(r, c));
          const int row = q.row0 + get<0>(coords(r, c));
          if (col >= p.seqlen_k || (Causal && col > row + q.diag)) s(r, c) = -INFINITY;
        }
      }
    }
    bool max_moved = false;
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      float mx = row_max[r];
      CUTE_UNROLL
      for (int c = 0; c < size<1>(s); ++c) mx = fmaxf(mx, s(r, c));
      mx = quad_max(mx);
      // A row that has seen only masked keys keeps max = -inf; use 0 so exp2 gives 0, not NaN.
      const float mx_scaled = mx == -INFINITY ? 0.0f : mx * p.scale_log2;
      correction[r] = mx == -INFINITY ? 1.0f : fast_exp2(row_max[r] * p.scale_log2 - mx_scaled);
      max_moved |= mx != row_max[r];
      row_max[r] = mx;
      row_sum[r] *= correction[r];
      float sum = 0.0f;
      CUTE_UNROLL
      for (int c = 0; c < size<1>(s); ++c) {
        s(r, c) = fast_exp2(s(r, c) * p.scale_log2 - mx_scaled);
        sum += s(r, c);
      }
      row_sum[r] += sum;  // this thread's part; the quad is summed once at the end
    }
    // Rescaling O costs one multiply per O register; once the maxima settle (most key blocks of a
    // long row) no row of the warp moves, and the warp skips it.
    return __any_sync(0xffffffff, max_moved);
  }

  // O (rows, cols) view *= correction.
  template <class TO>
  __device__ void rescale(TO& o_rc) const {
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      CUTE_UNROLL
      for (int c = 0; c < size<1>(o_rc); ++c) o_rc(r, c) *= correction[r];
    }
  }

  // O /= row sum (0 for a row without a visible key) and the LSE of each row to gmem.
  template <class TO, class TC>
  __device__ void finish(TO& o_rc, TC const& coords, const QueryBlock& q, const AttnParams& p) const {
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const float sum = quad_sum(row_sum[r]);
      const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
      CUTE_UNROLL
      for (int c = 0; c < size<1>(o_rc); ++c) o_rc(r, c) *= inv;
      const int row = q.row0 + get<0>(coords(r, 0));
      if (p.lse && (threadIdx.x % 4) == 0 && row < p.seqlen_q) {
        const float lse = sum > 0.0f ? (row_max[r] * p.scale_log2 + __log2f(sum)) * 0.69314718055994530942f : -INFINITY;
        p.lse[(int64_t(q.b) * p.heads_q + q.head) * p.seqlen_q + row] = lse;
      }
    }
  }
};

// O leaves through smem sO (BM, D) (caller: every thread is done reading what sO overlays): the
// fp32 accumulators, cast to Element, stored with the MMA's C layout, then 16-byte row-major
// copies to gO, rows past seqlen_q skipped. cQ: identity coordinates of the (BM, D) block.
template <class GmemCopyOut, class Mma, class TAcc, class TS, class TG, class TC>
__device__ __forceinline__ void store_o(TAcc const& acc_o, Mma const& mma, TS& sO, TG& gO, TC const& cQ, int seqlen_q) {
  using Element = typename TS::value_type;
  const int tid = threadIdx.x;
  Tensor rO = make_tensor_like<Element>(acc_o);
  CUTE_UNROLL
  for (int i = 0; i < size(acc_o); ++i) rO(i) = Element(acc_o(i));
  auto r2s = make_tiled_copy_C(Copy_Atom<DefaultCopy, Element>{}, mma);
  copy(r2s, r2s.get_slice(tid).retile_S(rO), r2s.get_slice(tid).partition_D(sO));
  __syncthreads();

  GmemCopyOut s2g;
  auto thr_s2g = s2g.get_slice(tid);
  Tensor tOsO = thr_s2g.partition_S(sO);  // (CPY,CPY_M,CPY_D)
  Tensor tOgO = thr_s2g.partition_D(gO);
  Tensor tOcO = thr_s2g.partition_D(cQ);
  CUTE_UNROLL
  for (int i = 0; i < size<1>(tOsO); ++i) {
    if (get<0>(tOcO(0, i, 0)) < seqlen_q) {
      CUTE_UNROLL
      for (int j = 0; j < size<2>(tOsO); ++j) copy(s2g, tOsO(_, i, j), tOgO(_, i, j));
    }
  }
}

}  // namespace tessera::attn
