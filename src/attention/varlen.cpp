// tessera::attention_varlen: validate -> the prefill family of the head dim, one CTA per (query
// block of the longest sequence, head, sequence); each CTA reads its sequence's rows from
// cu_seqlens on the device (common.cuh: query_block) and returns at once past its end.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <utility>

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

// (token, head) strides as the (batch, seq, head) triple of an Operand: no batch mode.
struct Strides3 {
  int64_t s[3];
  explicit Strides3(const int64_t (&st)[2]) : s{0, st[0], st[1]} {}
};

Status check_cu_seqlens(const char* name, const int32_t* cu) {
  if (!cu) return invalid(std::string(name) + ": null pointer (int32 [batch + 1] on the device)");
  if (reinterpret_cast<uintptr_t>(cu) % 4 != 0) return invalid(std::string(name) + ": must be 4-byte aligned");
  return Status::success();
}

Status validate_varlen(const VarlenArgs& a) {
  if (Status s = check_sizes({{"batch", a.batch},
                              {"total_q", a.total_q},
                              {"total_k", a.total_k},
                              {"heads_q", a.heads_q},
                              {"heads_kv", a.heads_kv},
                              {"head_dim", a.head_dim}});
      !s.ok())
    return s;
  const std::pair<const char*, int64_t> max_seqlens[] = {{"max_seqlen_q", a.max_seqlen_q},
                                                         {"max_seqlen_k", a.max_seqlen_k}};
  for (auto [name, v] : max_seqlens)
    if (v < 0) return invalid(std::string(name) + ": must be >= 0 (got " + std::to_string(v) + ")");
  // One CTA per (query block, head, sequence) in a one-dimensional grid; no sequence is longer than
  // total_q (the device clamps to it). 64 rows is the smallest query block.
  const __int128 blocks = __int128((std::min(a.max_seqlen_q, a.total_q) + 63) / 64) * a.heads_q * a.batch;
  if (blocks > INT_MAX)
    return invalid("batch, heads_q, max_seqlen_q: more than 2^31 query blocks of 64 rows (batch x heads_q x "
                   "ceil(min(max_seqlen_q, total_q) / 64) = " +
                   (blocks > INT64_MAX ? std::string("over 2^63") : std::to_string(int64_t(blocks))) + ")");
  if (Status s = check_common(a.dtype, a.heads_q, a.heads_kv, a.head_dim, a.softmax_scale, a.window_left,
                              a.window_right, a.softcap, a.max_sms);
      !s.ok())
    return s;
  if (Status s = check_cu_seqlens("cu_seqlens_q", a.cu_seqlens_q); !s.ok()) return s;
  if (Status s = check_cu_seqlens("cu_seqlens_k", a.cu_seqlens_k); !s.ok()) return s;
  const Strides3 qs(a.q_stride), ks(a.k_stride), vs(a.v_stride), os(a.o_stride);
  Operand q{"q", a.q, qs.s, 1, a.total_q, a.heads_q}, k{"k", a.k, ks.s, 1, a.total_k, a.heads_kv},
      v{"v", a.v, vs.s, 1, a.total_k, a.heads_kv}, o{"o", a.o, os.s, 1, a.total_q, a.heads_q};
  for (Operand* t : {&q, &k, &v, &o}) {
    t->packed = true;
    if (Status s = check_operand(*t, a.head_dim); !s.ok()) return s;
  }
  if (Status s = check_output(o, a.lse, a.head_dim, {q, k, v}); !s.ok()) return s;
  // O and LSE are written while other CTAs still read cu_seqlens.
  const auto o_span = span(o, a.head_dim, 2);
  const auto lse_lo = reinterpret_cast<uintptr_t>(a.lse), lse_hi = lse_lo + uintptr_t(a.heads_q * a.total_q * 4);
  const std::pair<const char*, const int32_t*> cus[] = {{"cu_seqlens_q", a.cu_seqlens_q},
                                                        {"cu_seqlens_k", a.cu_seqlens_k}};
  for (auto [name, cu] : cus) {
    const auto lo = reinterpret_cast<uintptr_t>(cu), hi = lo + uintptr_t((a.batch + 1) * 4);
    if (o_span.first < hi && lo < o_span.second) return invalid(std::string("o: overlaps ") + name + " in memory");
    if (a.lse && lse_lo < hi && lo < lse_hi) return invalid(std::string("lse: overlaps ") + name + " in memory");
  }
  return Status::success();
}

// The kernels' parameters: the packed tensors as one batch of total_q query rows and total_k keys
// (which bound every sequence, so that params_of's window rules hold for each), the batch strides
// 0, LSE [Hq, total_q], and the sequences' offsets.
AttnParams varlen_params_of(const VarlenArgs& a) {
  AttentionArgs view;
  view.q = a.q;
  view.k = a.k;
  view.v = a.v;
  view.o = a.o;
  view.lse = a.lse;
  view.dtype = a.dtype;
  view.batch = a.batch;
  view.seqlen_q = a.total_q;
  view.seqlen_k = a.total_k;
  view.heads_q = a.heads_q;
  view.heads_kv = a.heads_kv;
  view.head_dim = a.head_dim;
  for (int i = 0; i < 2; ++i) {
    view.q_stride[i + 1] = a.q_stride[i];
    view.k_stride[i + 1] = a.k_stride[i];
    view.v_stride[i + 1] = a.v_stride[i];
    view.o_stride[i + 1] = a.o_stride[i];
  }
  view.softmax_scale = a.softmax_scale;
  view.causal = a.causal;
  view.window_left = a.window_left;
  view.window_right = a.window_right;
  view.softcap = a.softcap;
  AttnParams p = params_of(view);
  p.cu_seqlens_q = a.cu_seqlens_q;
  p.cu_seqlens_k = a.cu_seqlens_k;
  p.max_seqlen_q = int(std::min(a.max_seqlen_q, a.total_q));
  p.max_seqlen_k = int(std::min(a.max_seqlen_k, a.total_k));
  p.lse_stride[0] = 0;
  p.lse_stride[1] = a.total_q;
  return p;
}

}  // namespace
}  // namespace attn

Status attention_varlen_workspace_size(const VarlenArgs& args, size_t* bytes) {
  auto impl = [&]() -> Status {
    if (!bytes) return attn::invalid("bytes: null pointer");
    if (Status s = attn::validate_varlen(args); !s.ok()) return s;
    *bytes = 0;
    return Status::success();
  };
  return detail::remember(impl());
}

Status attention_varlen(const VarlenArgs& args, void* stream, void* workspace, size_t workspace_bytes) {
  auto impl = [&]() -> Status {
    if (Status s = attn::validate_varlen(args); !s.ok()) return s;
    if (Status s = attn::validate_workspace(workspace, workspace_bytes); !s.ok()) return s;
    if (Status s = attn::check_prefill_overrides(args.head_dim, true); !s.ok()) return s;
    detail::DeviceInfo dev;
    if (Status s = detail::current_device(&dev); !s.ok()) return s;
    if (Status s = attn::check_device(dev); !s.ok()) return s;
    return attn::run_prefill(dev, args.head_dim, args.dtype == DType::BF16, true, attn::varlen_params_of(args),
                             args.max_sms, stream);
  };
  return detail::remember(impl());
}

}  // namespace tessera
