// What both attention kernel families share: a CTA's place in the problem, the (batch, head)
// slices of Q, K, V and O, the online softmax, and O's way out (normalise, LSE, smem, 16-byte stores).
#pragma once

#include <cute/tensor.hpp>

#include <climits>

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
  int row0;  // first query row
  // The sequence's query rows and keys: the call's seqlen_q / seqlen_k, or with cu_seqlens
  // (varlen) this sequence's, starting at rows q_start / k_start of the packed tensors (0 otherwise).
  int seqlen_q, seqlen_k, q_start, k_start;
  // Row r of the block (r = 0 .. BM - 1) sees keys key_lo + r <= j < min(key_hi + r, seqlen_k): its
  // window (causal: a right side of 0), bottom-right aligned to the sequence. Both are clamped into
  // [-BM, seqlen_k], which masks the same keys and keeps every sum with a row or column offset inside
  // an int.
  int key_lo, key_hi;
  int n_begin, n_end;        // key blocks (BN keys) to visit, [n_begin, n_end): those some row sees
  int full_begin, full_end;  // blocks in [full_begin, full_end) hold only keys every row sees
  // Whether key block n may hold a key some row of the block must not see (the per-element mask).
  __device__ __forceinline__ bool masked(int n) const { return n < full_begin || n >= full_end; }
};

// Sequence b's rows of a packed tensor of `total` rows (varlen): [cu[b], cu[b + 1]) clamped into
// [0, total], a negative length read as 0. The host cannot check cu_seqlens without a
// synchronisation; the clamp keeps every read and write inside the tensor whatever they hold.
__device__ __forceinline__ void sequence_rows(const int* cu, int b, int total, int& start, int& len) {
  start = min(max(cu[b], 0), total);
  len = min(max(cu[b + 1], start), total) - start;
}

// Sequence b's key count: the call's seqlen_k, or read again from cu_seqlens_k (varlen).
__device__ __forceinline__ int key_count(const AttnParams& p, int b) {
  int start = 0, len = p.seqlen_k;
  if (p.cu_seqlens_k) sequence_rows(p.cu_seqlens_k, b, p.seqlen_k, start, len);
  return len;
}

// Block `block` of the grid's order: (query block, head, batch), query blocks fastest. A block that
// starts at or past its sequence's last query row (varlen: the grid covers the longest sequence)
// has nothing to compute: the kernels return at once when row0 >= seqlen_q.
template <int BM, int BN, bool Causal>
__device__ __forceinline__ QueryBlock query_block(const AttnParams& p, int block) {
  QueryBlock q;
  const int bh = p.by_m_blocks.div(block), m = block - bh * p.m_blocks;
  // Causal: the highest query blocks see the most keys; launch them first (longest-first) so the
  // short ones fill the tail of the grid.
  q.m_block = Causal ? p.m_blocks - 1 - m : m;
  q.head = bh % p.heads_q;  // a division still: as a multiplier it cost the d = 128 tile a stack frame
  q.b = bh / p.heads_q;
  q.head_kv = p.by_group.div(q.head);
  q.row0 = q.m_block * BM;
  q.seqlen_q = p.seqlen_q;
  q.seqlen_k = p.seqlen_k;
  q.q_start = q.k_start = 0;
  if (p.cu_seqlens_q) {  // uniform: the same for every CTA of the launch
    sequence_rows(p.cu_seqlens_q, q.b, p.seqlen_q, q.q_start, q.seqlen_q);
    sequence_rows(p.cu_seqlens_k, q.b, p.seqlen_k, q.k_start, q.seqlen_k);
  }
  // The block's last row that exists: rows past seqlen_q are computed but never stored, so they
  // neither widen the visited range nor force a mask.
  const int last = min(BM, q.seqlen_q - q.row0) - 1;
  // Row 0's bottom-right aligned position among the keys; the window bounds are computed in 64 bits,
  // then clamped.
  const int64_t i0 = int64_t(q.row0) + q.seqlen_k - q.seqlen_q;
  const int right = Causal ? 0 : p.window_right;  // causal wins over (is at most) any right window
  auto clamp = [&](int64_t x) { return int(max<int64_t>(-BM, min<int64_t>(q.seqlen_k, x))); };
  q.key_lo = p.window_left < 0 ? -BM : clamp(i0 - p.window_left);
  q.key_hi = right < 0 ? q.seqlen_k : clamp(i0 + right + 1);
  // The lowest key any row sees is row 0's first, the highest the last row's last; a block needs no
  // mask when the last row's window starts at or before it and row 0's ends at or after it.
  const int first_key = max(0, q.key_lo), end_key = max(0, min(q.key_hi + last, q.seqlen_k));
  q.n_begin = first_key / BN;
  q.n_end = first_key < end_key ? (end_key + BN - 1) / BN : q.n_begin;
  q.full_begin = (max(0, q.key_lo + last) + BN - 1) / BN;
  q.full_end = max(0, min(q.key_hi, q.seqlen_k)) / BN;
  return q;
}
// The CTA's own block: one CTA per block, launched from block0 on (launch_kernel.cuh).
template <int BM, int BN, bool Causal>
__device__ __forceinline__ QueryBlock query_block(const AttnParams& p) {
  return query_block<BM, BN, Causal>(p, p.block0 + int(blockIdx.x));
}

// Masks S block (rows, cols) view `s` with coordinates `coords` inside the (BM, BN) block whose
// first key is col0: keys outside a row's window and past seqlen_k become -inf. Only the blocks
// QueryBlock::masked() names pay for it.
template <class TS, class TC>
__device__ __forceinline__ void mask_block(TS& s, TC const& coords, const QueryBlock& q, int col0, int seqlen_k) {
  // Key col0 + c is visible to row r when key_lo <= col0 + c - r < key_hi and col0 + c < seqlen_k:
  // a band of diagonals and the sequence end. In block coordinates the three bounds are the same for
  // every element, so no per-row bound needs a register.
  // This thread's first element (row t_row, column t_col); the others sit at fixed offsets from it.
  const int t_row = get<0>(coords(0, 0)), t_col = get<1>(coords(0, 0));
  const int lo = q.key_lo - col0 - (t_col - t_row), hi = q.key_hi - col0 - (t_col - t_row), end = seqlen_k - col0 - t_col;
  CUTE_UNROLL
  for (int r = 0; r < size<0>(s); ++r) {
    CUTE_UNROLL
    for (int c = 0; c < size<1>(s); ++c) {
      const int dr = get<0>(coords.layout()(r, c)), dc = get<1>(coords.layout()(r, c));  // compile-time
      if (dc - dr < lo || dc - dr >= hi || dc >= end) s(r, c) = -INFINITY;
    }
  }
}

// mask_block with the bounds of the CTA's QueryBlock derived again (for varlen, from cu_seqlens read
// again): a varlen sequence's key_lo, key_hi and key count are not constants the compiler can
// rematerialise, and the kernels at the register limit cannot hold them through the key loop; the
// masked blocks are few.
template <int BM, int BN, bool Causal, class TS, class TC>
__device__ __forceinline__ void mask_keys(TS& s, TC const& coords, const AttnParams& p, int col0) {
  const QueryBlock q = query_block<BM, BN, Causal>(p);
  mask_block(s, coords, q, col0, q.seqlen_k);
}

// Softcap (p.softcap > 0; the caller checks) on S block `s` in place, kept in units of the raw
// score for the softmax: s -> (softcap / scale) * tanh(s * scale / softcap). tanh on the SFU
// (tanh.approx.f32, sm_75+; relative error about 2^-16 as measured, 2^-11 as documented) is one
// instruction with no temporaries, which the kernels at the register limit need: an exact
// 1 - 2 / (1 + e^2x) on ex2 and rcp took 30 more registers at d = 128 on sm_90. S is finite here
// (the mask comes after), and tanh saturates at +-1.
__device__ __forceinline__ float tanh_approx(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
template <class TS>
__device__ __forceinline__ void apply_softcap(TS& s, const AttnParams& p) {
  CUTE_UNROLL
  for (int i = 0; i < size(s); ++i) s(i) = p.softcap_out * tanh_approx(s(i) * p.softcap_in);
}

// The (sequence, head) slices of Q, K and V as (seq, D) tensors with unit stride along D: the
// batch's, or a packed sequence's rows (varlen; the batch strides are 0 there).
template <class Element, int D>
__device__ __forceinline__ auto head_tensors(const AttnParams& p, const QueryBlock& q) {
  const int64_t q_rows = int64_t(q.b) * p.q_stride[0] + int64_t(q.q_start) * p.q_stride[1];
  const int64_t k_rows = int64_t(q.b) * p.k_stride[0] + int64_t(q.k_start) * p.k_stride[1];
  const int64_t v_rows = int64_t(q.b) * p.v_stride[0] + int64_t(q.k_start) * p.v_stride[1];
  const Element* q_ptr = static_cast<const Element*>(p.q) + q_rows + q.head * p.q_stride[2];
  const Element* k_ptr = static_cast<const Element*>(p.k) + k_rows + q.head_kv * p.k_stride[2];
  const Element* v_ptr = static_cast<const Element*>(p.v) + v_rows + q.head_kv * p.v_stride[2];
  return cute::make_tuple(
      make_tensor(make_gmem_ptr(q_ptr), make_shape(q.seqlen_q, Int<D>{}), make_stride(p.q_stride[1], _1{})),
      make_tensor(make_gmem_ptr(k_ptr), make_shape(q.seqlen_k, Int<D>{}), make_stride(p.k_stride[1], _1{})),
      make_tensor(make_gmem_ptr(v_ptr), make_shape(q.seqlen_k, Int<D>{}), make_stride(p.v_stride[1], _1{})));
}

// A sequence's query rows in the packed Q, O and LSE: the first (0 without varlen) and how many.
// The epilogue reads them again instead of holding QueryBlock's copies in registers through the key
// loop, where the kernels at the register limit have none to spare.
struct SeqRows {
  int start, len;
};
__device__ __forceinline__ SeqRows query_rows(const AttnParams& p, int b) {
  SeqRows r{0, p.seqlen_q};
  if (p.cu_seqlens_q) sequence_rows(p.cu_seqlens_q, b, p.seqlen_q, r.start, r.len);
  return r;
}

// The (sequence, head) slice of O, (seq, D) with unit stride along D.
template <class Element, int D>
__device__ __forceinline__ auto output_tensor(const AttnParams& p, const QueryBlock& q, const SeqRows& rows) {
  Element* o_ptr = static_cast<Element*>(p.o) + int64_t(q.b) * p.o_stride[0] + int64_t(rows.start) * p.o_stride[1] +
                   q.head * p.o_stride[2];
  return make_tensor(make_gmem_ptr(o_ptr), make_shape(rows.len, Int<D>{}), make_stride(p.o_stride[1], _1{}));
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

// copy_rows' bound for a key block that lies inside the sequence. Of the key blocks a CTA visits only
// the last one (the first visited) can reach past the sequence's end, and that one is masked
// (QueryBlock::full_end <= seqlen_k / BN): the kernels bound it by the key count and every other
// block by kAllRows, so that no key count is held in a register through the loop.
constexpr int kAllRows = INT_MAX;

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

  // One S block (rows, cols) view `s`, masked and capped already: S -> exp2 weights in place,
  // updating the running max and sum. Returns whether a row max of this warp moved: O then needs
  // rescaling by `correction`.
  template <class TS>
  __device__ bool update(TS& s, const AttnParams& p) {
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
  __device__ void finish(TO& o_rc, TC const& coords, const QueryBlock& q, const AttnParams& p,
                         const SeqRows& rows) const {
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      const float sum = quad_sum(row_sum[r]);
      const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
      CUTE_UNROLL
      for (int c = 0; c < size<1>(o_rc); ++c) o_rc(r, c) *= inv;
      const int row = q.row0 + get<0>(coords(r, 0));
      if (p.lse && (threadIdx.x % 4) == 0 && row < rows.len) {
        const float lse = sum > 0.0f ? (row_max[r] * p.scale_log2 + __log2f(sum)) * 0.69314718055994530942f : -INFINITY;
        p.lse[int64_t(q.b) * p.lse_stride[0] + int64_t(q.head) * p.lse_stride[1] + rows.start + row] = lse;
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
