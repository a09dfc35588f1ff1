// The attention oracle shared by `tessera attention --verify` and the GPU tests
// (tests/gpu/test_attention_gpu.cpp): a naive fp32 GPU reference, the comparison of tessera's
// output with it, and the pass criterion. Compiled into the CLI and into tessera_gpu_tests
// (attention_gpu_reference.cu); no exceptions, CUDA errors are returned.
//
// Reference (one thread block per (batch, query head, query row); nothing tiled or fused):
//   s_j = scale * sum_d float(Q[d]) * float(K_j[d])     in fp32, for every visible key j
//   m = max_j s_j, p_j = exp(s_j - m), l = sum_j p_j    in fp32
//   O32  = (sum_j p_j V_j) / l                          fp32 throughout            ("ref32")
//   Olow = dtype((sum_j dtype(p_j) V_j) / l)            P rounded to the input dtype before P.V
//                                                       and O rounded to it ("same-precision ref")
//   LSE  = m + log(l)                                   natural log, fp32, [B, Hq, Sq]
// Olow makes the roundings a correct flash-attention kernel cannot avoid (P and O in f16/bf16); its
// distance to O32 calibrates how far tessera may be from O32. Rows with no visible key (causal,
// Sq > Sk): O32 = Olow = 0 and LSE = -inf.
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

// Keys that query row i sees (keys 0 .. n-1): all Sk, or under `causal` those with j <= i + Sk - Sq.
inline int64_t attention_visible_keys(int64_t i, int64_t sq, int64_t sk, bool causal) {
  if (!causal) return sk;
  return std::min(sk, std::max<int64_t>(0, i + sk - sq + 1));
}

// Sum over query rows of attention_visible_keys (per batch and head), in closed form: Sq * Sk
// without causal; with it the row counts run up to Sk in steps of one, ending at the last row, so
// the sum is 1 + 2 + ... + Sk minus the part left of the first row, 1 + ... + max(0, Sk - Sq).
inline int64_t attention_unmasked_pairs(int64_t sq, int64_t sk, bool causal) {
  if (!causal) return sq * sk;
  const int64_t lo = std::max<int64_t>(0, sk - sq);
  return (sk * (sk + 1) - lo * (lo + 1)) / 2;
}

// FLOPs of the forward pass counting only unmasked (query, key) pairs: 2*D for Q.K and 2*D for P.V
// per pair, so 4 * B * Hq * D * pairs (= 4*B*Hq*Sq*Sk*D without causal).
inline double attention_flops(const tessera::AttentionArgs& a) {
  return 4.0 * double(a.batch) * double(a.heads_q) * double(a.head_dim) *
         double(attention_unmasked_pairs(a.seqlen_q, a.seqlen_k, a.causal));
}

// Largest head_dim the reference handles.
constexpr int64_t kMaxReferenceHeadDim = 512;

// Computes the references for the problem of `args` (its q, k, v, strides, sizes, dtype, scale and
// causal; args.o and args.lse are ignored). o32 and olow: fp32 [B, Sq, Hq, D] contiguous (olow may
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
