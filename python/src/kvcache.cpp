// tessera._C.attention_with_kvcache and its workspace query: device pointers, sizes and strides as
// plain integers (the torch layer, tessera/_kvcache.py, reads them off the tensors).
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

using Strides = std::array<int64_t, 3>;

tessera::KvCacheArgs make_args(uintptr_t q, uintptr_t k_cache, uintptr_t v_cache, uintptr_t o, int dtype, int64_t batch,
                               int64_t seqlen_q, int64_t heads_q, int64_t heads_kv, int64_t head_dim, Strides q_stride,
                               Strides o_stride, Strides k_cache_stride, Strides v_cache_stride, int64_t capacity,
                               uintptr_t cache_seqlens, uintptr_t block_table, int64_t block_table_stride,
                               int64_t max_pages, int64_t num_pages, int64_t page_size, uintptr_t k_new, uintptr_t v_new,
                               int64_t seqlen_new, Strides k_new_stride, Strides v_new_stride, uintptr_t lse,
                               float softmax_scale, bool causal, int64_t window_left, int64_t window_right,
                               float softcap, int max_sms) {
  tessera::KvCacheArgs a;
  a.q = as_ptr<const void>(q);
  a.k_cache = as_ptr<void>(k_cache);
  a.v_cache = as_ptr<void>(v_cache);
  a.o = as_ptr<void>(o);
  a.lse = as_ptr<float>(lse);
  a.dtype = tessera::DType(dtype);
  a.batch = batch;
  a.seqlen_q = seqlen_q;
  a.heads_q = heads_q;
  a.heads_kv = heads_kv;
  a.head_dim = head_dim;
  for (int i = 0; i < 3; ++i) {
    a.q_stride[i] = q_stride[i];
    a.o_stride[i] = o_stride[i];
    a.k_cache_stride[i] = k_cache_stride[i];
    a.v_cache_stride[i] = v_cache_stride[i];
    a.k_new_stride[i] = k_new_stride[i];
    a.v_new_stride[i] = v_new_stride[i];
  }
  a.capacity = capacity;
  a.cache_seqlens = as_ptr<const int32_t>(cache_seqlens);
  a.block_table = as_ptr<const int32_t>(block_table);
  a.block_table_stride = block_table_stride;
  a.max_pages = max_pages;
  a.num_pages = num_pages;
  a.page_size = page_size;
  a.k_new = as_ptr<const void>(k_new);
  a.v_new = as_ptr<const void>(v_new);
  a.seqlen_new = seqlen_new;
  a.softmax_scale = softmax_scale;
  a.causal = causal;
  a.window_left = window_left;
  a.window_right = window_right;
  a.softcap = softcap;
  a.max_sms = max_sms;
  return a;
}

}  // namespace

void bind_kvcache(nb::module_& m) {
  const Strides zero{0, 0, 0};
  m.def(
      "attention_with_kvcache",
      [](uintptr_t q, uintptr_t k_cache, uintptr_t v_cache, uintptr_t o, int dtype, int64_t batch, int64_t seqlen_q,
         int64_t heads_q, int64_t heads_kv, int64_t head_dim, Strides q_stride, Strides o_stride,
         Strides k_cache_stride, Strides v_cache_stride, int64_t capacity, uintptr_t cache_seqlens,
         uintptr_t block_table, int64_t block_table_stride, int64_t max_pages, int64_t num_pages, int64_t page_size,
         uintptr_t k_new, uintptr_t v_new, int64_t seqlen_new, Strides k_new_stride, Strides v_new_stride,
         uintptr_t lse, float softmax_scale, bool causal, int64_t window_left, int64_t window_right, float softcap,
         int max_sms, uintptr_t stream, uintptr_t workspace, size_t workspace_bytes) {
        const tessera::KvCacheArgs a =
            make_args(q, k_cache, v_cache, o, dtype, batch, seqlen_q, heads_q, heads_kv, head_dim, q_stride, o_stride,
                      k_cache_stride, v_cache_stride, capacity, cache_seqlens, block_table, block_table_stride,
                      max_pages, num_pages, page_size, k_new, v_new, seqlen_new, k_new_stride, v_new_stride, lse,
                      softmax_scale, causal, window_left, window_right, softcap, max_sms);
        tessera::Status s;
        {
          nb::gil_scoped_release release;
          s = tessera::attention_with_kvcache(a, as_ptr<void>(stream), as_ptr<void>(workspace), workspace_bytes);
        }
        check(s);
      },
      "q"_a, "k_cache"_a, "v_cache"_a, "o"_a, "dtype"_a, "batch"_a, "seqlen_q"_a, "heads_q"_a, "heads_kv"_a,
      "head_dim"_a, "q_stride"_a, "o_stride"_a, "k_cache_stride"_a, "v_cache_stride"_a, "capacity"_a = 0,
      "cache_seqlens"_a = 0, "block_table"_a = 0, "block_table_stride"_a = 0, "max_pages"_a = 0, "num_pages"_a = 0,
      "page_size"_a = 0, "k_new"_a = 0, "v_new"_a = 0, "seqlen_new"_a = 0, "k_new_stride"_a = zero,
      "v_new_stride"_a = zero, "lse"_a = 0, "softmax_scale"_a = 0.0f, "causal"_a = false, "window_left"_a = -1,
      "window_right"_a = -1, "softcap"_a = 0.0f, "max_sms"_a = 0, "stream"_a = 0, "workspace"_a = 0,
      "workspace_bytes"_a = 0,
      "Attention of q against a KV cache (tessera_kvcache_args_t): contiguous [B, capacity, Hkv, D] or\n"
      "paged [num_pages, page_size, Hkv, D] with an int32 block table; cache_seqlens int32 [B]; k_new/v_new\n"
      "appended first. Asynchronous on `stream`.");
  m.def(
      "attention_with_kvcache_workspace_size",
      [](uintptr_t q, uintptr_t k_cache, uintptr_t v_cache, uintptr_t o, int dtype, int64_t batch, int64_t seqlen_q,
         int64_t heads_q, int64_t heads_kv, int64_t head_dim, Strides q_stride, Strides o_stride,
         Strides k_cache_stride, Strides v_cache_stride, int64_t capacity, uintptr_t cache_seqlens,
         uintptr_t block_table, int64_t block_table_stride, int64_t max_pages, int64_t num_pages, int64_t page_size,
         uintptr_t k_new, uintptr_t v_new, int64_t seqlen_new, Strides k_new_stride, Strides v_new_stride,
         uintptr_t lse, float softmax_scale, bool causal, int64_t window_left, int64_t window_right, float softcap,
         int max_sms) {
        size_t bytes = 0;
        check(tessera::attention_with_kvcache_workspace_size(
            make_args(q, k_cache, v_cache, o, dtype, batch, seqlen_q, heads_q, heads_kv, head_dim, q_stride, o_stride,
                      k_cache_stride, v_cache_stride, capacity, cache_seqlens, block_table, block_table_stride,
                      max_pages, num_pages, page_size, k_new, v_new, seqlen_new, k_new_stride, v_new_stride, lse,
                      softmax_scale, causal, window_left, window_right, softcap, max_sms),
            &bytes));
        return bytes;
      },
      "q"_a, "k_cache"_a, "v_cache"_a, "o"_a, "dtype"_a, "batch"_a, "seqlen_q"_a, "heads_q"_a, "heads_kv"_a,
      "head_dim"_a, "q_stride"_a, "o_stride"_a, "k_cache_stride"_a, "v_cache_stride"_a, "capacity"_a = 0,
      "cache_seqlens"_a = 0, "block_table"_a = 0, "block_table_stride"_a = 0, "max_pages"_a = 0, "num_pages"_a = 0,
      "page_size"_a = 0, "k_new"_a = 0, "v_new"_a = 0, "seqlen_new"_a = 0, "k_new_stride"_a = zero,
      "v_new_stride"_a = zero, "lse"_a = 0, "softmax_scale"_a = 0.0f, "causal"_a = false, "window_left"_a = -1,
      "window_right"_a = -1, "softcap"_a = 0.0f, "max_sms"_a = 0,
      "Bytes of workspace attention_with_kvcache() can use for these args (0: none).");
}

}  // namespace tessera_python
