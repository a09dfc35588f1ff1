// tessera::attention_with_kvcache: validate -> (append the new keys) -> the decode family over the
// cache (contiguous or paged, per-sequence lengths read on the device).
#include <cuda_runtime_api.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <string>

#include "attention/decode/decode.hpp"
#include "attention/entry.hpp"
#include "attention/params.hpp"
#include "attention/validate.hpp"
#include "core/device.hpp"
#include "core/status.hpp"
#include "tessera/tessera.hpp"

namespace tessera {
namespace attn {
namespace {

using detail::invalid;

bool paged(const KvCacheArgs& a) { return a.block_table != nullptr; }
// Positions per sequence.
int64_t capacity(const KvCacheArgs& a) { return paged(a) ? a.max_pages * a.page_size : a.capacity; }

Status validate_kvcache(const KvCacheArgs& a) {
  if (Status s = check_sizes({{"batch", a.batch},
                              {"seqlen_q", a.seqlen_q},
                              {"heads_q", a.heads_q},
                              {"heads_kv", a.heads_kv},
                              {"head_dim", a.head_dim}});
      !s.ok())
    return s;
  if (Status s = check_common(a.dtype, a.heads_q, a.heads_kv, a.head_dim, a.softmax_scale, a.window_left,
                              a.window_right, a.softcap, a.max_sms);
      !s.ok())
    return s;
  if (!a.cache_seqlens) return invalid("cache_seqlens: null pointer (int32 [batch] on the device)");
  if (reinterpret_cast<uintptr_t>(a.cache_seqlens) % 4 != 0) return invalid("cache_seqlens: must be 4-byte aligned");
  if (paged(a)) {
    if (Status s = check_sizes({{"max_pages", a.max_pages}, {"num_pages", a.num_pages}, {"page_size", a.page_size}});
        !s.ok())
      return s;
    if (a.page_size % decode::kBlockN != 0)
      return invalid("page_size: must be a multiple of " + std::to_string(decode::kBlockN) + " (got " +
                     std::to_string(a.page_size) + ")");
    if (a.block_table_stride < a.max_pages)
      return invalid("block_table_stride: must be >= max_pages (" + std::to_string(a.max_pages) + "), got " +
                     std::to_string(a.block_table_stride));
    if (reinterpret_cast<uintptr_t>(a.block_table) % 4 != 0) return invalid("block_table: must be 4-byte aligned");
  } else if (Status s = check_sizes({{"capacity", a.capacity}}); !s.ok()) {
    return s;
  }
  if (capacity(a) > INT_MAX - 1024)
    return invalid("capacity: positions per sequence must be <= 2^31 - 1025 (got " + std::to_string(capacity(a)) + ")");
  if (a.seqlen_new < 0 || a.seqlen_new > capacity(a))
    return invalid("seqlen_new: must be in [0, capacity = " + std::to_string(capacity(a)) + "] (got " +
                   std::to_string(a.seqlen_new) + ")");
  if ((a.k_new == nullptr) != (a.v_new == nullptr) || (a.seqlen_new > 0) != (a.k_new != nullptr))
    return invalid("k_new, v_new: give both with seqlen_new >= 1, or neither with seqlen_new = 0");

  const int64_t outer = paged(a) ? a.num_pages : a.batch, seq = paged(a) ? a.page_size : a.capacity;
  const char* outer_name = paged(a) ? "page" : "batch";
  const Operand q{"q", a.q, a.q_stride, a.batch, a.seqlen_q, a.heads_q},
      o{"o", a.o, a.o_stride, a.batch, a.seqlen_q, a.heads_q},
      k{"k_cache", a.k_cache, a.k_cache_stride, outer, seq, a.heads_kv, outer_name},
      v{"v_cache", a.v_cache, a.v_cache_stride, outer, seq, a.heads_kv, outer_name};
  for (const Operand& t : {q, k, v, o})
    if (Status s = check_operand(t, a.head_dim); !s.ok()) return s;
  if (a.seqlen_new > 0) {
    const Operand kn{"k_new", a.k_new, a.k_new_stride, a.batch, a.seqlen_new, a.heads_kv},
        vn{"v_new", a.v_new, a.v_new_stride, a.batch, a.seqlen_new, a.heads_kv};
    for (const Operand& t : {kn, vn})
      if (Status s = check_operand(t, a.head_dim); !s.ok()) return s;
    // The new keys are written into the cache while it is read: every cache slot written once, and
    // the new keys apart from the cache they go to.
    for (const Operand& c : {k, v}) {
      const auto cs = span(c, a.head_dim, 2);
      for (const Operand& x : {kn, vn}) {
        const auto xs = span(x, a.head_dim, 2);
        if (cs.first < xs.second && xs.first < cs.second)
          return invalid(std::string(x.name) + ": overlaps " + c.name + " in memory");
      }
    }
    const auto ks = span(k, a.head_dim, 2), vs = span(v, a.head_dim, 2);
    if (ks.first < vs.second && vs.first < ks.second) return invalid("v_cache: overlaps k_cache in memory (both are written)");
    return check_output(o, a.lse, a.head_dim, {q, k, v, kn, vn});
  }
  return check_output(o, a.lse, a.head_dim, {q, k, v});
}

// The attention's parameters: the cache as K/V with `capacity` keys per sequence (the kernel reads
// each sequence's own count; windows relative to it).
AttnParams kv_params_of(const KvCacheArgs& a) {
  AttentionArgs view;
  view.q = a.q;
  view.k = a.k_cache;
  view.v = a.v_cache;
  view.o = a.o;
  view.lse = a.lse;
  view.dtype = a.dtype;
  view.batch = a.batch;
  view.seqlen_q = a.seqlen_q;
  view.seqlen_k = capacity(a);
  view.heads_q = a.heads_q;
  view.heads_kv = a.heads_kv;
  view.head_dim = a.head_dim;
  for (int i = 0; i < 3; ++i) {
    view.q_stride[i] = a.q_stride[i];
    view.k_stride[i] = a.k_cache_stride[i];
    view.v_stride[i] = a.v_cache_stride[i];
    view.o_stride[i] = a.o_stride[i];
  }
  view.softmax_scale = a.softmax_scale;
  view.causal = a.causal;
  view.window_left = a.window_left;
  view.window_right = a.window_right;
  view.softcap = a.softcap;
  return attn::params_of(view);
}

// The plan on `dev`: splits over the capacity (the lengths live on the device; a CTA past its
// sequence's end finds no keys), no first-block skip (a window's start depends on the length).
bool plan(const KvCacheArgs& a, const detail::DeviceInfo& dev, size_t workspace_bytes, decode::Plan* out) {
  return decode_plan_on(dev, a.batch, a.seqlen_q, capacity(a), a.heads_q, a.heads_kv, a.head_dim, a.max_sms,
                        workspace_bytes, -1, out);
}

}  // namespace
}  // namespace attn

Status attention_with_kvcache_workspace_size(const KvCacheArgs& args, size_t* bytes) {
  auto impl = [&]() -> Status {
    if (!bytes) return attn::invalid("bytes: null pointer");
    if (Status s = attn::validate_kvcache(args); !s.ok()) return s;
    *bytes = 0;
    detail::DeviceInfo dev;
    if (!detail::current_device(&dev).ok()) dev = attn::workspace_bound_device(args.head_dim);
    attn::decode::Plan pl;
    if (attn::plan(args, dev, SIZE_MAX, &pl)) *bytes = pl.workspace_bytes;
    return Status::success();
  };
  return detail::remember(impl());
}

Status attention_with_kvcache(const KvCacheArgs& args, void* stream_ptr, void* workspace, size_t workspace_bytes) {
  auto impl = [&]() -> Status {
    if (Status s = attn::validate_kvcache(args); !s.ok()) return s;
    if (Status s = attn::validate_workspace(workspace, workspace_bytes); !s.ok()) return s;
    detail::DeviceInfo dev;
    if (Status s = detail::current_device(&dev); !s.ok()) return s;
    const int cc = dev.cc_major * 10 + dev.cc_minor;
    if (dev.cc_major < 8)
      return detail::fail(TESSERA_STATUS_NOT_SUPPORTED,
                          "attention kernels need an sm_80 or newer GPU; this device is sm_" + std::to_string(cc));
    attn::decode::Plan pl;
    if (!attn::plan(args, dev, workspace_bytes, &pl))
      return detail::fail(TESSERA_STATUS_NOT_SUPPORTED,
                          "attention_with_kvcache: head_dim " + std::to_string(args.head_dim) + " needs " +
                              std::to_string(attn::decode::smem_bytes(int(args.head_dim))) +
                              " bytes of shared memory; the device allows " + std::to_string(dev.smem_optin));
    auto stream = static_cast<cudaStream_t>(stream_ptr);
    const attn::AttnParams p = attn::kv_params_of(args);
    if (args.seqlen_new > 0) {
      attn::decode::AppendParams ap;
      ap.k_new = args.k_new;
      ap.v_new = args.v_new;
      ap.k_cache = args.k_cache;
      ap.v_cache = args.v_cache;
      for (int i = 0; i < 3; ++i) {
        ap.k_new_stride[i] = args.k_new_stride[i];
        ap.v_new_stride[i] = args.v_new_stride[i];
        ap.k_stride[i] = args.k_cache_stride[i];
        ap.v_stride[i] = args.v_cache_stride[i];
      }
      ap.cache_seqlens = args.cache_seqlens;
      ap.block_table = args.block_table;
      ap.block_table_stride = args.block_table_stride;
      ap.page_size = int(args.page_size);
      ap.num_pages = int(args.num_pages);
      ap.capacity = p.seqlen_k;
      ap.batch = p.batch;
      ap.seqlen_new = int(args.seqlen_new);
      ap.heads_kv = p.heads_kv;
      ap.d = int(args.head_dim);
      if (cudaError_t e = attn::decode::append_kv(ap, args.max_sms, stream); e != cudaSuccess)
        return detail::fail(TESSERA_STATUS_CUDA_ERROR, std::string("appending k_new/v_new: ") + cudaGetErrorString(e));
    }
    attn::decode::Cache cache;
    cache.cache_seqlens = args.cache_seqlens;
    cache.seqlen_new = int(args.seqlen_new);
    cache.block_table = args.block_table;
    cache.block_table_stride = args.block_table_stride;
    cache.page_size = int(args.page_size);
    cache.num_pages = int(args.num_pages);
    const cudaError_t e = attn::decode::run(int(args.head_dim), args.dtype == DType::BF16, p, pl, workspace,
                                            args.max_sms, attn::decode_dependent_launch(dev), stream, &cache);
    if (e != cudaSuccess)
      return detail::fail(TESSERA_STATUS_CUDA_ERROR, std::string("attention_with_kvcache: ") + cudaGetErrorString(e));
    return Status::success();
  };
  return detail::remember(impl());
}

}  // namespace tessera
