// tessera._C.attention_varlen and its workspace query: device pointers, sizes and strides as plain
// integers (the torch layer, tessera/_varlen.py, reads them off the tensors).
#include <nanobind/nanobind.h>
#include <nanobind/stl/array.h>

#include <array>
#include <cstdint>

#include "binding.hpp"
#include "tessera/tessera.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace tessera_python {

namespace {

using Strides = std::array<int64_t, 2>;

tessera::VarlenArgs make_args(uintptr_t q, uintptr_t k, uintptr_t v, uintptr_t o, int dtype, uintptr_t cu_seqlens_q,
                              uintptr_t cu_seqlens_k, int64_t batch, int64_t total_q, int64_t total_k,
                              int64_t max_seqlen_q, int64_t max_seqlen_k, int64_t heads_q, int64_t heads_kv,
                              int64_t head_dim, Strides q_stride, Strides k_stride, Strides v_stride, Strides o_stride,
                              uintptr_t lse, float softmax_scale, bool causal, int64_t window_left,
                              int64_t window_right, float softcap, int max_sms) {
  tessera::VarlenArgs a;
  a.q = as_ptr<const void>(q);
  a.k = as_ptr<const void>(k);
  a.v = as_ptr<const void>(v);
  a.o = as_ptr<void>(o);
  a.lse = as_ptr<float>(lse);
  a.dtype = tessera::DType(dtype);
  a.cu_seqlens_q = as_ptr<const int32_t>(cu_seqlens_q);
  a.cu_seqlens_k = as_ptr<const int32_t>(cu_seqlens_k);
  a.batch = batch;
  a.total_q = total_q;
  a.total_k = total_k;
  a.max_seqlen_q = max_seqlen_q;
  a.max_seqlen_k = max_seqlen_k;
  a.heads_q = heads_q;
  a.heads_kv = heads_kv;
  a.head_dim = head_dim;
  for (int i = 0; i < 2; ++i) {
    a.q_stride[i] = q_stride[i];
    a.k_stride[i] = k_stride[i];
    a.v_stride[i] = v_stride[i];
    a.o_stride[i] = o_stride[i];
  }
  a.softmax_scale = softmax_scale;
  a.causal = causal;
  a.window_left = window_left;
  a.window_right = window_right;
  a.softcap = softcap;
  a.max_sms = max_sms;
  return a;
}

}  // namespace

void bind_varlen(nb::module_& m) {
  m.def(
      "attention_varlen",
      [](uintptr_t q, uintptr_t k, uintptr_t v, uintptr_t o, int dtype, uintptr_t cu_seqlens_q, uintptr_t cu_seqlens_k,
         int64_t batch, int64_t total_q, int64_t total_k, int64_t max_seqlen_q, int64_t max_seqlen_k, int64_t heads_q,
         int64_t heads_kv, int64_t head_dim, Strides q_stride, Strides k_stride, Strides v_stride, Strides o_stride,
         uintptr_t lse, float softmax_scale, bool causal, int64_t window_left, int64_t window_right, float softcap,
         int max_sms, uintptr_t stream, uintptr_t workspace, size_t workspace_bytes) {
        const tessera::VarlenArgs a =
            make_args(q, k, v, o, dtype, cu_seqlens_q, cu_seqlens_k, batch, total_q, total_k, max_seqlen_q,
                      max_seqlen_k, heads_q, heads_kv, head_dim, q_stride, k_stride, v_stride, o_stride, lse,
                      softmax_scale, causal, window_left, window_right, softcap, max_sms);
        tessera::Status s;
        {
          nb::gil_scoped_release release;
          s = tessera::attention_varlen(a, as_ptr<void>(stream), as_ptr<void>(workspace), workspace_bytes);
        }
        check(s);
      },
      "q"_a, "k"_a, "v"_a, "o"_a, "dtype"_a, "cu_seqlens_q"_a, "cu_seqlens_k"_a, "batch"_a, "total_q"_a, "total_k"_a,
      "max_seqlen_q"_a, "max_seqlen_k"_a, "heads_q"_a, "heads_kv"_a, "head_dim"_a, "q_stride"_a, "k_stride"_a,
      "v_stride"_a, "o_stride"_a, "lse"_a = 0, "softmax_scale"_a = 0.0f, "causal"_a = false, "window_left"_a = -1,
      "window_right"_a = -1, "softcap"_a = 0.0f, "max_sms"_a = 0, "stream"_a = 0, "workspace"_a = 0,
      "workspace_bytes"_a = 0,
      "Attention over packed variable-length sequences (tessera_varlen_args_t): Q/O [total_q, Hq, D],\n"
      "K/V [total_k, Hkv, D] with (token, head) strides; cu_seqlens_q/k int32 [batch + 1] device pointers;\n"
      "lse: optional fp32 [Hq, total_q] pointer (0 = none). Asynchronous on `stream`.");
  m.def(
      "attention_varlen_workspace_size",
      [](uintptr_t q, uintptr_t k, uintptr_t v, uintptr_t o, int dtype, uintptr_t cu_seqlens_q, uintptr_t cu_seqlens_k,
         int64_t batch, int64_t total_q, int64_t total_k, int64_t max_seqlen_q, int64_t max_seqlen_k, int64_t heads_q,
         int64_t heads_kv, int64_t head_dim, Strides q_stride, Strides k_stride, Strides v_stride, Strides o_stride,
         uintptr_t lse, float softmax_scale, bool causal, int64_t window_left, int64_t window_right, float softcap,
         int max_sms) {
        size_t bytes = 0;
        check(tessera::attention_varlen_workspace_size(
            make_args(q, k, v, o, dtype, cu_seqlens_q, cu_seqlens_k, batch, total_q, total_k, max_seqlen_q,
                      max_seqlen_k, heads_q, heads_kv, head_dim, q_stride, k_stride, v_stride, o_stride, lse,
                      softmax_scale, causal, window_left, window_right, softcap, max_sms),
            &bytes));
        return bytes;
      },
      "q"_a, "k"_a, "v"_a, "o"_a, "dtype"_a, "cu_seqlens_q"_a, "cu_seqlens_k"_a, "batch"_a, "total_q"_a, "total_k"_a,
      "max_seqlen_q"_a, "max_seqlen_k"_a, "heads_q"_a, "heads_kv"_a, "head_dim"_a, "q_stride"_a, "k_stride"_a,
      "v_stride"_a, "o_stride"_a, "lse"_a = 0, "softmax_scale"_a = 0.0f, "causal"_a = false, "window_left"_a = -1,
      "window_right"_a = -1, "softcap"_a = 0.0f, "max_sms"_a = 0,
      "Bytes of workspace attention_varlen() can use for these args (0: none).");
}

}  // namespace tessera_python
