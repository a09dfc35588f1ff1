// The attention oracle shared by `tessera attention --verify` and the GPU tests
// (tests/gpu/test_attention_gpu.cpp): a naive fp32 GPU reference, the comparison of tessera's
// output with it, and the pass criterion. Compiled into the CLI and into tessera_gpu_tests
// (attention_gpu_reference.cu); no exceptions, CUDA errors are returned.
//
// Reference (one thread block per (batch, query head, query row); nothing tiled or fused):
//   s_j = scale * sum_d float(Q[d]) * float(K_j[d])     in fp32, for every visible key j: with
//                                                       i' = i + Sk - Sq, i' - window_left <= j <=
//                                                       i' + window_right (-1: that side unlimited),
//                                                       j <= i' under causal
//   s_j = softcap * tanhf(s_j / softcap)                when softcap > 0
//   m = max_j s_j, p_j = exp(s_j - m), l = sum_j p_j    in fp32
//   O32  = (sum_j p_j V_j) / l                          fp32 throughout            ("ref32")
//   Olow = dtype((sum_j dtype(p_j) V_j) / l)            P rounded to the input dtype before P.V
//                                                       and O rounded to it ("same-precision ref")
//   LSE  = m + log(l)                                   natural log, fp32, [B, Hq, Sq]
// Olow makes the roundings a correct flash-attention kernel cannot avoid (P and O in f16/bf16); its
// distance to O32 calibrates how far tessera may be from O32. Rows with no visible key (causal with
// Sq > Sk, or a window outside the keys): O32 = Olow = 0 and LSE = -inf.
//
// Pass criterion (attention_check): every O element finite (O is poisoned with NaN beforehand), and
//   max|O - O32| <= 2 * max|Olow - O32| + atol(dtype)
//   |LSE - LSE32| <= 1e-3 on every row (rows with no visible key: both -inf).
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "tessera/tessera.hpp"

namespace tessera_ref {

// The keys query row i sees, [*first, *end) (empty: *first == *end): with i' = i + Sk - Sq, from
// max(0, i' - window_left) to min(Sk - 1, i' + right), right = 0 under causal, else window_right
// (-1: that side unlimited).
inline void attention_key_range(int64_t i, int64_t sq, int64_t sk, bool causal, int64_t window_left,
                                int64_t window_right, int64_t* first, int64_t* end) {
  // Sides past every key are unlimited (and would overflow the sums below).
  if (window_left >= sk) window_left = -1;
  if (window_right >= sq) window_right = -1;
  const int64_t ip = i + sk - sq;
  const int64_t right = causal ? 0 : window_right;
  const int64_t lo = window_left < 0 ? 0 : std::min(sk, std::max<int64_t>(0, ip - window_left));
  const int64_t hi = right < 0 ? sk : std::min(sk, std::max<int64_t>(0, ip + right + 1));
  *first = lo;
  *end = std::max(lo, hi);
}

// Number of keys query row i sees.
inline int64_t attention_visible_keys(int64_t i, int64_t sq, int64_t sk, bool causal, int64_t window_left = -1,
                                      int64_t window_right = -1) {
  int64_t first = 0, end = 0;
  attention_key_range(i, sq, sk, causal, window_left, window_right, &first, &end);
  return end - first;
}

namespace detail {
// sum over x = u .. v of min(max(x, 0), n), n >= 0: x itself on [0, n], n above it, 0 below.
inline int64_t clamped_sum(int64_t u, int64_t v, int64_t n) {
  if (v < u) return 0;
  int64_t s = 0;
  const int64_t a = std::max<int64_t>(u, 0), b = std::min(v, n);
  if (b >= a) {  // a + ... + b; one of (a + b), (b - a + 1) is even, halved first so no product overflows
    const int64_t terms = b - a + 1;
    s += (a + b) % 2 == 0 ? (a + b) / 2 * terms : (a + b) * (terms / 2);
  }
  const int64_t above = v - std::max(u, n + 1) + 1;  // terms at or past n + 1, each n
  if (above > 0) s += n * above;
  return s;
}
}  // namespace detail

// Sum over query rows of attention_visible_keys (per batch and head), in closed form: row i sees
// the keys [clamp(i' - L, 0, Sk), clamp(i' + R + 1, 0, Sk)) (L, R the window sides; a missing side
// clamps to 0 or Sk), whose bounds never cross, so the count is the difference of two clamped
// linear sums over i' = Sk - Sq .. Sk - 1. Without a window: Sq * Sk; causal alone: 1 + ... + Sk
// minus the part left of the first row, 1 + ... + max(0, Sk - Sq).
inline int64_t attention_unmasked_pairs(int64_t sq, int64_t sk, bool causal, int64_t window_left = -1,
                                        int64_t window_right = -1) {
  if (window_left >= sk) window_left = -1;  // as in attention_key_range
  if (window_right >= sq) window_right = -1;
  const int64_t right = causal ? 0 : window_right;
  const int64_t a = sk - sq, b = sk - 1;  // i' of the first and the last row
  const int64_t his = right < 0 ? sq * sk : detail::clamped_sum(a + right + 1, b + right + 1, sk);
  const int64_t los = window_left < 0 ? 0 : detail::clamped_sum(a - window_left, b - window_left, sk);
  return his - los;
}

// FLOPs of the forward pass counting only unmasked (query, key) pairs: 2*D for Q.K and 2*D for P.V
// per pair, so 4 * B * Hq * D * pairs (= 4*B*Hq*Sq*Sk*D without causal or a window).
inline double attention_flops(const tessera::AttentionArgs& a) {
  return 4.0 * double(a.batch) * double(a.heads_q) * double(a.head_dim) *
         double(attention_unmasked_pairs(a.seqlen_q, a.seqlen_k, a.causal, a.window_left, a.window_right));
}

// Largest head_dim the reference handles.
constexpr int64_t kMaxReferenceHeadDim = 512;

// Computes the references for the problem of `args` (its q, k, v, strides, sizes, dtype, scale,
// causal, window and softcap; args.o and args.lse are ignored). o32 and olow: fp32 [B, Sq, Hq, D] contiguous (olow may
// be null); lse32: fp32 [B, Hq, Sq] (may be null). Asynchronous on `stream`.
cudaError_t attention_reference(const tessera::AttentionArgs& args, float* o32, float* olow, float* lse32,
                                cudaStream_t stream);

struct AttentionErrors {
  double max_err = 0;        // max |O - O32| over the finite elements of O
  double max_err_lowp = 0;   // max |Olow - O32| (0 when no Olow was given)
  double max_ref = 0;        // max |O32| (for scale)
  uint64_t worst_index = 0;  // linear index into [B, Sq, Hq, D] of max_err (mod 2^32)
  uint64_t nonfinite = 0;    // O elements that are NaN or +-Inf (unwritten: O was poisoned)
  bool lse_checked = false;
  double max_lse_err = 0;    // max |LSE - LSE32| over rows where both are finite
  uint64_t lse_bad = 0;      // rows where LSE is NaN, or exactly one of LSE and LSE32 is infinite
  uint64_t lse_worst_row = 0;  // linear index into [B, Hq, Sq] of max_lse_err (mod 2^32)
};

// Compares tessera's O (args.o, with args.o_stride, of args.dtype) and, when both are given, its
// LSE (args.lse) with the references. Synchronises `stream`.
cudaError_t attention_compare(const tessera::AttentionArgs& args, const float* o32, const float* olow,
                              const float* lse32, AttentionErrors* errors, cudaStream_t stream);

// atol of the criterion: half an ulp (bf16) / one ulp (f16) in [0.5, 1), the magnitude of the
// largest |O| (O is a convex combination of V rows; with inputs in [-1, 1], |O| <= 1). It covers a
// correct result whose last rounding of O lands on the other neighbour than the reference's:
//   bf16: ulp(0.5..1) = 2^-8 = 3.9e-3  -> atol 2e-3
//   f16:  ulp(0.5..1) = 2^-11 = 4.9e-4 -> atol 5e-4
double attention_atol(tessera::DType dtype);
constexpr double kAttentionLseTol = 1e-3;

// 2 * max_err_lowp + atol: the bound on max_err.
double attention_bound(const AttentionErrors& e, tessera::DType dtype);

// True when `e` meets the criterion; otherwise `why` (if given) lists what failed.
bool attention_check(const AttentionErrors& e, tessera::DType dtype, std::string* why);

}  // namespace tessera_ref
