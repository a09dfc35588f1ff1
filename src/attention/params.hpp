// Plain parameters of the attention-forward kernels (no CUDA/CuTe types; host-testable).
#pragma once
#include <cstdint>

#include "core/fast_div.hpp"

namespace tessera::attn {

struct AttnParams {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  float* lse = nullptr;  // fp32, or null: row i of (batch b, head h) at b * lse_stride[0] + h * lse_stride[1] + i
  int batch = 0, seqlen_q = 0, seqlen_k = 0, heads_q = 0, heads_kv = 0;
  int64_t q_stride[3] = {0, 0, 0};  // (batch, seq, head)
  int64_t k_stride[3] = {0, 0, 0};
  int64_t v_stride[3] = {0, 0, 0};
  int64_t o_stride[3] = {0, 0, 0};
  int64_t lse_stride[2] = {0, 0};  // (batch, head); rows contiguous. [B, Hq, Sq]: {Hq * Sq, Sq}
  // Variable-length batches (attention_varlen; null for every other call): sequence b owns the rows
  // [cu_seqlens_q[b], cu_seqlens_q[b + 1]) of the packed Q, O and LSE (seqlen_q rows in all) and
  // [cu_seqlens_k[b], cu_seqlens_k[b + 1]) of K and V (seqlen_k); the batch strides are 0. The
  // prefill kernels read them per CTA (common.cuh: query_block), clamped into the packed tensors.
  const int* cu_seqlens_q = nullptr;
  const int* cu_seqlens_k = nullptr;
  int max_seqlen_q = 0;  // varlen: the longest query sequence the grid covers (seqlen_q otherwise)
  int max_seqlen_k = 0;  // varlen: the caller's longest key sequence (a scheduling hint only)
  float scale = 1.0f;        // softmax scale
  float scale_log2 = 1.0f;   // scale * log2(e): softmax in exp2
  // Local attention: query i sees keys i' - window_left <= j <= i' + window_right, i' = i + seqlen_k -
  // seqlen_q; -1 = unlimited (causal is window_right = 0, folded in by the API).
  int window_left = -1, window_right = -1;
  float softcap = 0.0f;  // > 0: s -> softcap * tanh(s / softcap) on the scaled scores
  // The softcap as the prefill kernels apply it to raw scores s, s -> softcap_out * tanh(s *
  // softcap_in): softcap_in = scale / softcap, softcap_out = softcap / scale (api.cpp; both 0
  // without a softcap). Kernel parameters, so the loop reads them from the constant bank instead of
  // holding them in registers.
  float softcap_in = 0.0f, softcap_out = 0.0f;
  // The grid is one-dimensional over (query block, head, batch), query blocks fastest; a launch
  // covers blocks [block0, block0 + gridDim.x) (launch_kernel.cuh cuts the grid under an SM budget).
  int m_blocks = 0;          // query blocks per (batch, head)
  int block0 = 0;
  // The block index's divisors (common.cuh: query_block, per block walked), made with m_blocks
  // (launch_kernel.cuh; the decode family makes by_group in decode::run): a division by a run-time
  // value is a ~20-instruction chain on the GPU.
  FastDiv by_m_blocks, by_group;  // m_blocks, heads_q / heads_kv
};

// The query rows and keys a launch is planned for: the call's, or a variable-length batch's longest.
inline int planned_rows(const AttnParams& p) { return p.cu_seqlens_q ? p.max_seqlen_q : p.seqlen_q; }
inline int planned_keys(const AttnParams& p) { return p.cu_seqlens_q ? p.max_seqlen_k : p.seqlen_k; }

}  // namespace tessera::attn
