// tessera::attention: validate -> pick the head-dim configuration -> launch.
#include <cuda_runtime_api.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "attention/decode/decode.hpp"
#include "attention/entry.hpp"
#include "attention/params.hpp"
#include "attention/sm80/launch.hpp"
#include "attention/sm90/launch.hpp"
#include "attention/sm90ws/launch.hpp"
#include "attention/validate.hpp"
#include "core/device.hpp"
#include "core/environment.hpp"
#include "core/injective.hpp"
#include "core/status.hpp"
#include "tessera/tessera.hpp"

namespace tessera {
namespace attn {
namespace {

using detail::fail;
using detail::invalid;

struct AttnConfig {
  int id;
  const char* name;
  // 80: sm80 family (mma.sync, sm_80 and newer); 90: sm90 family (WGMMA, cp.async; cc 9.0 only);
  // 91: sm90ws family (TMA, warp-specialised WGMMA; cc 9.0 only).
  int arch;
  int d, bm, bn;
  int smem_bytes;
  // Whether the family runs variable-length batches (AttnParams::cu_seqlens_q): attention_varlen
  // chooses only such rows. False unless a row says so, so that a family added without it is never
  // handed a varlen call.
  bool varlen = false;
};

const AttnConfig kConfigs[] = {
#define TESSERA_ATTN_CONFIG(id, name, d, bm, bn, warps, reason) \
  {id, name, 80, d, bm, bn, ((bm) + 2 * (bn)) * (d) * 2, true},
#define TESSERA_ATTN_SM90_CONFIG(id, name, d, bm, bn, overlap, reason) \
  {id, name, 90, d, bm, bn, ((bm) + 4 * (bn)) * (d) * 2, true},
#define TESSERA_ATTN_SM90WS_CONFIG(id, name, d, bm, bn, stages, reason) \
  {id, name, 91, d, bm, bn, ((bm) + 2 * (stages) * (bn)) * (d) * 2 + 1024, true},
#include "attention/configs.def"
#undef TESSERA_ATTN_CONFIG
#undef TESSERA_ATTN_SM90_CONFIG
#undef TESSERA_ATTN_SM90WS_CONFIG
};

bool head_dim_supported(int64_t head_dim) {
  for (const AttnConfig& c : kConfigs)
    if (c.d == head_dim) return true;
  return false;
}

// The sm90ws row for causal d = 64 calls of up to this many query rows (the longest sequence's):
// configs.def.
constexpr int64_t kShortRowsD64 = 1024;
const AttnConfig* named(const std::string& name) {
  for (const AttnConfig& c : kConfigs)
    if (name == c.name) return &c;
  return nullptr;
}

// The default configuration for a head dim on a device of compute capability `cc` (major*10+minor):
// on cc 9.0 the first sm90ws row (causal d = 64 with at most kShortRowsD64 query rows: its 128-row
// one), then the first sm90 row (TESSERA_ATTN_ARCH: 90 keeps the sm90 family, 80 the sm80 one), else
// the first sm80 row; with `varlen`, the first such row that runs variable-length batches; null if
// none. `rows`: the query rows (varlen: the longest sequence's).
const AttnConfig* config_for(int64_t head_dim, int cc, int arch, bool varlen, int64_t rows, bool causal) {
  const bool hopper = cc == 90 && arch != 80;
  static const AttnConfig* const short_causal_d64 = named("fa3_sm90_d64_128x128");  // looked up once
  if (hopper && arch != 90 && head_dim == 64 && causal && rows <= kShortRowsD64 && short_causal_d64)
    return short_causal_d64;
  for (int family : {91, 90})
    for (const AttnConfig& c : kConfigs)
      if (c.d == head_dim && c.arch == family && hopper && !(family == 91 && arch == 90) && (c.varlen || !varlen))
        return &c;
  for (const AttnConfig& c : kConfigs)
    if (c.d == head_dim && c.arch == 80 && (c.varlen || !varlen)) return &c;
  return nullptr;
}

// The configuration for this call: TESSERA_ATTN_CONFIG (for tuning and tests) must name a config of
// this head dim (and, for a varlen call, one that runs them); without it, the default for the
// device. The overrides come from the environment snapshot (core/environment.hpp), read once per
// process.
Status requested_config(int64_t head_dim, int cc, bool varlen, int64_t rows, bool causal, const AttnConfig** out) {
  const detail::Environment& env = detail::environment();
  if (!env.attn_error.ok()) return env.attn_error;
  *out = config_for(head_dim, cc, env.attn_arch, varlen, rows, causal);
  if (env.attn_config.empty()) return Status::success();
  if (const AttnConfig* c = named(env.attn_config)) {
    if (c->d != head_dim)
      return invalid("TESSERA_ATTN_CONFIG: '" + env.attn_config + "' is for head_dim " + std::to_string(c->d) +
                     ", not " + std::to_string(head_dim));
    if (varlen && !c->varlen)
      return fail(TESSERA_STATUS_NOT_SUPPORTED, "TESSERA_ATTN_CONFIG: '" + env.attn_config +
                                                    "' does not run variable-length batches (attention_varlen)");
    *out = c;
    return Status::success();
  }
  return invalid("TESSERA_ATTN_CONFIG: unknown configuration '" + env.attn_config + "'");
}

std::string head_dims() {
  std::string s;
  for (const AttnConfig& c : kConfigs)
    if (c.arch == 80) s += (s.empty() ? "" : ", ") + std::to_string(c.d);
  return s;
}

}  // namespace

Status check_common(DType dtype, int64_t heads_q, int64_t heads_kv, int64_t head_dim, float softmax_scale,
                    int64_t window_left, int64_t window_right, float softcap, int max_sms) {
  if (dtype != DType::F16 && dtype != DType::BF16) return invalid("dtype: must be f16 or bf16");
  if (max_sms < 0) return invalid("max_sms: must be >= 0 (0 = every SM), got " + std::to_string(max_sms));
  if (!head_dim_supported(head_dim))
    return invalid("head_dim: " + std::to_string(head_dim) + " is not supported (supported: " + head_dims() + ")");
  if (heads_q % heads_kv != 0)
    return invalid("heads_kv: must divide heads_q (" + std::to_string(heads_q) + " % " + std::to_string(heads_kv) +
                   " != 0)");
  if (!std::isfinite(softmax_scale) || softmax_scale < 0.0f)
    return invalid("softmax_scale: must be finite and >= 0 (0 = 1/sqrt(head_dim))");
  if (window_left < -1 || window_right < -1)
    return invalid("window_left, window_right: must be >= 0, or -1 for unlimited (got " + std::to_string(window_left) +
                   ", " + std::to_string(window_right) + ")");
  if (!std::isfinite(softcap) || softcap < 0.0f) return invalid("softcap: must be finite and >= 0 (0 = none)");
  return Status::success();
}

Status check_sizes(std::initializer_list<std::pair<const char*, int64_t>> sizes) {
  for (auto [name, v] : sizes) {
    if (v <= 0) return invalid(std::string(name) + ": must be >= 1 (got " + std::to_string(v) + ")");
    // 32-bit tile coordinates may run up to 1024 past the last row.
    if (v > INT_MAX - 1024)
      return invalid(std::string(name) + ": must be <= 2^31 - 1025 (got " + std::to_string(v) + ")");
  }
  return Status::success();
}

Status check_operand(const Operand& t, int64_t head_dim) {
  const std::string n(t.name);
  if (!t.ptr) return invalid(n + ": null pointer");
  if (reinterpret_cast<uintptr_t>(t.ptr) % 16 != 0)
    return invalid(n + ": must be 16-byte aligned (the kernels move 8 head-dim elements at a time)");
  for (int i = t.packed ? 1 : 0; i < 3; ++i) {
    const char* mode[] = {t.outer_name, t.packed ? "token" : "sequence", "head"};
    const std::string at = n + "_stride[" + std::to_string(t.packed ? i - 1 : i) + "] (" + mode[i] + ")";
    if (t.stride[i] < 0) return invalid(at + ": must be >= 0");
    if (t.stride[i] % 8 != 0)
      return invalid(at + ": must be a multiple of 8 elements (16 bytes) so head-dim rows stay aligned (got " +
                     std::to_string(t.stride[i]) + ")");
  }
  // The largest element offset must fit in 64 bits (int64 indexing in the kernel).
  const __int128 last = (__int128)(t.outer - 1) * t.stride[0] + (__int128)(t.seq - 1) * t.stride[1] +
                        (__int128)(t.heads - 1) * t.stride[2] + head_dim;
  if (last > INT64_MAX / 2) return invalid(n + ": strides address more than 2^62 elements");
  return Status::success();
}

std::pair<uintptr_t, uintptr_t> span(const Operand& t, int64_t head_dim, int64_t elem_bytes) {
  const int64_t last = (t.outer - 1) * t.stride[0] + (t.seq - 1) * t.stride[1] + (t.heads - 1) * t.stride[2] + head_dim;
  const auto lo = reinterpret_cast<uintptr_t>(t.ptr);
  return {lo, lo + uintptr_t(last * elem_bytes)};
}

Status check_output(const Operand& o, const float* lse, int64_t head_dim, std::initializer_list<Operand> inputs) {
  // Each output element written once.
  if (!detail::injective({{o.outer, o.stride[0]}, {o.seq, o.stride[1]}, {o.heads, o.stride[2]}, {head_dim, 1}}))
    return invalid("o_stride: batches, rows or heads of O overlap in memory");
  if (lse && reinterpret_cast<uintptr_t>(lse) % 4 != 0) return invalid("lse: must be 4-byte aligned");
  // O is written while the inputs are read (and LSE written): their memory must be disjoint.
  const auto os = span(o, head_dim, 2);
  for (const Operand& x : inputs) {
    const auto xs = span(x, head_dim, 2);
    if (os.first < xs.second && xs.first < os.second) return invalid(std::string("o: overlaps ") + x.name + " in memory");
  }
  if (lse) {
    const auto lo = reinterpret_cast<uintptr_t>(lse);
    const auto hi = lo + uintptr_t(o.outer * o.heads * o.seq * 4);
    if (os.first < hi && lo < os.second) return invalid("lse: overlaps o in memory");
  }
  return Status::success();
}

Status validate(const AttentionArgs& a) {
  if (a.dtype != DType::F16 && a.dtype != DType::BF16) return invalid("dtype: must be f16 or bf16");
  if (Status s = check_sizes({{"batch", a.batch},
                              {"seqlen_q", a.seqlen_q},
                              {"seqlen_k", a.seqlen_k},
                              {"heads_q", a.heads_q},
                              {"heads_kv", a.heads_kv},
                              {"head_dim", a.head_dim}});
      !s.ok())
    return s;
  if (a.max_sms < 0) return invalid("max_sms: must be >= 0 (0 = every SM), got " + std::to_string(a.max_sms));
  // One CTA per (query block, head, batch) in a one-dimensional grid (launch_kernel.cuh); 64 rows is
  // the smallest query block.
  if ((a.seqlen_q + 63) / 64 * a.heads_q * a.batch > INT_MAX)
    return invalid("batch, heads_q, seqlen_q: more than 2^31 query blocks of 64 rows (batch x heads_q x "
                   "ceil(seqlen_q / 64) = " + std::to_string((a.seqlen_q + 63) / 64 * a.heads_q * a.batch) + ")");
  if (Status s = check_common(a.dtype, a.heads_q, a.heads_kv, a.head_dim, a.softmax_scale, a.window_left,
                              a.window_right, a.softcap, a.max_sms);
      !s.ok())
    return s;
  const Operand q{"q", a.q, a.q_stride, a.batch, a.seqlen_q, a.heads_q}, k{"k", a.k, a.k_stride, a.batch, a.seqlen_k, a.heads_kv},
      v{"v", a.v, a.v_stride, a.batch, a.seqlen_k, a.heads_kv}, o{"o", a.o, a.o_stride, a.batch, a.seqlen_q, a.heads_q};
  for (const Operand& t : {q, k, v, o})
    if (Status s = check_operand(t, a.head_dim); !s.ok()) return s;
  return check_output(o, a.lse, a.head_dim, {q, k, v});
}

// The decode family's plan for this call (params `p`) on `dev`, or false when the call goes to a
// prefill family: more than decode::kMaxSeqlenQ query tokens, a TESSERA_ATTN_CONFIG override (it
// names a prefill configuration), or a CTA the device's shared memory cannot hold.
bool decode_plan(const AttentionArgs& a, const AttnParams& p, const detail::DeviceInfo& dev, size_t workspace_bytes,
                 decode::Plan* out) {
  if (a.seqlen_q > decode::kMaxSeqlenQ || dev.cc_major < 8 || !detail::environment().attn_config.empty()) return false;
  return decode_plan_on(dev, a.batch, a.seqlen_q, a.seqlen_k, a.heads_q, a.heads_kv, a.head_dim, a.max_sms,
                        workspace_bytes, p.window_left, out);
}

bool decode_plan_on(const detail::DeviceInfo& dev, int64_t batch, int64_t seqlen_q, int64_t seqlen_k, int64_t heads_q,
                    int64_t heads_kv, int64_t head_dim, int max_sms, size_t workspace_bytes, int64_t window_left,
                    decode::Plan* out) {
  const int d = int(head_dim);
  const int per_sm = decode::ctas_per_sm(d, dev.smem_optin + 1024);  // + the CTA's reserved 1 KB
  if (per_sm < 1) return false;
  const int sms = max_sms > 0 && max_sms < dev.sm_count ? max_sms : dev.sm_count;
  *out = decode::make_plan(batch, seqlen_q, seqlen_k, heads_q, heads_kv, d, sms, per_sm, workspace_bytes, window_left,
                           decode::cluster_limit_for(dev.cc_major, max_sms, detail::environment().attn_arch == 80));
  return true;
}

detail::DeviceInfo workspace_bound_device(int64_t head_dim) {
  detail::DeviceInfo big;
  big.cc_major = 8;  // no cluster combine: its plans need no workspace, and the bound is for every GPU
  big.sm_count = 256;
  big.smem_optin = 4 * (decode::smem_bytes(int(head_dim)) + 1024);
  return big;
}

AttnParams params_of(const AttentionArgs& args) {
  AttnParams p;
  p.q = args.q;
  p.k = args.k;
  p.v = args.v;
  p.o = args.o;
  p.lse = args.lse;
  p.batch = int(args.batch);
  p.seqlen_q = int(args.seqlen_q);
  p.seqlen_k = int(args.seqlen_k);
  p.heads_q = int(args.heads_q);
  p.heads_kv = int(args.heads_kv);
  p.max_seqlen_q = p.seqlen_q;
  p.lse_stride[0] = args.heads_q * args.seqlen_q;  // [B, Hq, Sq]
  p.lse_stride[1] = args.seqlen_q;
  for (int i = 0; i < 3; ++i) {
    p.q_stride[i] = args.q_stride[i];
    p.k_stride[i] = args.k_stride[i];
    p.v_stride[i] = args.v_stride[i];
    p.o_stride[i] = args.o_stride[i];
  }
  p.scale = args.softmax_scale > 0.0f ? args.softmax_scale : 1.0f / std::sqrt(float(args.head_dim));
  p.scale_log2 = p.scale * 1.4426950408889634f;
  // A side that reaches past every key is no limit, which also keeps it in an int: a left window
  // of seqlen_k or more starts every row's window before key 0 (the last row's i' is seqlen_k - 1),
  // a right one of seqlen_q or more ends every row's after the last key (the first row's i' is
  // seqlen_k - seqlen_q).
  auto side = [&](int64_t w, int64_t wide) { return w < 0 || w >= wide ? -1 : int(w); };
  p.window_left = side(args.window_left, args.seqlen_k);
  p.window_right = args.causal ? 0 : side(args.window_right, args.seqlen_q);
  p.softcap = args.softcap;
  if (args.softcap > 0.0f) {
    p.softcap_in = p.scale / args.softcap;
    p.softcap_out = args.softcap / p.scale;
  }
  return p;
}

Status check_prefill_overrides(int64_t head_dim, bool varlen) {
  const AttnConfig* cfg = nullptr;
  return requested_config(head_dim, 0, varlen, 0, false, &cfg);
}

Status check_device(const detail::DeviceInfo& dev) {
  if (dev.cc_major >= 8) return Status::success();
  return fail(TESSERA_STATUS_NOT_SUPPORTED, "attention kernels need an sm_80 or newer GPU; this device is sm_" +
                                                std::to_string(dev.cc_major * 10 + dev.cc_minor));
}

Status run_prefill(const detail::DeviceInfo& dev, int64_t head_dim, bool bf16, bool varlen, const AttnParams& p,
                   int max_sms, void* stream) {
  const int cc = dev.cc_major * 10 + dev.cc_minor;
  const AttnConfig* cfg = nullptr;
  const int64_t rows = planned_rows(p);
  // The causal instantiations are those of a right window of 0 (causal or not: the same mask), which
  // they run longest query block first.
  const bool causal = p.window_right == 0;
  if (Status s = requested_config(head_dim, cc, varlen, rows, causal, &cfg); !s.ok()) return s;
  if (!cfg)  // validation admits only head dims with a row; a varlen call may still find none
    return fail(TESSERA_STATUS_NOT_SUPPORTED, "no attention configuration for head_dim " + std::to_string(head_dim) +
                                                  (varlen ? " runs variable-length batches" : ""));
  // Operands a TMA descriptor cannot describe (a broadcast stride) go to the cp.async families.
  if (cfg->arch == 91 && !sm90ws::supports(p)) cfg = config_for(head_dim, cc, 90, varlen, rows, causal);
  if (cfg->arch >= 90 && cc != 90)
    return fail(TESSERA_STATUS_NOT_SUPPORTED, std::string(cfg->name) + " is an sm_90a kernel; this device is sm_" +
                                                  std::to_string(cc));
  if (cfg->smem_bytes > dev.smem_optin)
    return fail(TESSERA_STATUS_NOT_SUPPORTED, std::string(cfg->name) + " needs " + std::to_string(cfg->smem_bytes) +
                                                  " bytes of shared memory; the device allows " +
                                                  std::to_string(dev.smem_optin));
  const auto s = static_cast<cudaStream_t>(stream);
  const cudaError_t e = cfg->arch == 91   ? sm90ws::run(cfg->id, bf16, causal, p, max_sms, s)
                        : cfg->arch == 90 ? sm90::run(cfg->id, bf16, causal, p, max_sms, s)
                                          : sm80::run(cfg->id, bf16, causal, p, max_sms, s);
  if (e != cudaSuccess) return fail(TESSERA_STATUS_CUDA_ERROR, std::string(cfg->name) + ": " + cudaGetErrorString(e));
  return Status::success();
}

constexpr size_t kWorkspaceAlign = 256;

Status validate_workspace(const void* workspace, size_t workspace_bytes) {
  if (workspace_bytes > 0 && workspace == nullptr)
    return invalid("workspace: null pointer with workspace_bytes = " + std::to_string(workspace_bytes));
  if (workspace && reinterpret_cast<uintptr_t>(workspace) % kWorkspaceAlign != 0)
    return invalid("workspace: must be 256-byte aligned (cudaMalloc memory is)");
  return Status::success();
}

}  // namespace attn

Status attention_workspace_size(const AttentionArgs& args, size_t* bytes) {
  auto impl = [&]() -> Status {
    if (!bytes) return attn::invalid("bytes: null pointer");
    if (Status s = attn::validate(args); !s.ok()) return s;
    *bytes = 0;
    const attn::AttnParams p = attn::params_of(args);
    detail::DeviceInfo dev;
    if (!detail::current_device(&dev).ok()) dev = attn::workspace_bound_device(args.head_dim);
    attn::decode::Plan pl;
    if (attn::decode_plan(args, p, dev, SIZE_MAX, &pl)) *bytes = pl.workspace_bytes;
    return Status::success();
  };
  return detail::remember(impl());
}

Status attention(const AttentionArgs& args, void* stream, void* workspace, size_t workspace_bytes) {
  auto impl = [&]() -> Status {
    if (Status s = attn::validate(args); !s.ok()) return s;
    if (Status s = attn::validate_workspace(workspace, workspace_bytes); !s.ok()) return s;
    // A bad override is an argument error, GPU or not.
    if (Status s = attn::check_prefill_overrides(args.head_dim, false); !s.ok()) return s;
    detail::DeviceInfo dev;
    if (Status s = detail::current_device(&dev); !s.ok()) return s;
    if (Status s = attn::check_device(dev); !s.ok()) return s;
    const attn::AttnParams p = attn::params_of(args);
    attn::decode::Plan dp;
    if (attn::decode_plan(args, p, dev, workspace_bytes, &dp)) {
      const cudaError_t e = attn::decode::run(int(args.head_dim), args.dtype == DType::BF16, p, dp, workspace,
                                              args.max_sms, attn::decode_dependent_launch(dev),
                                              static_cast<cudaStream_t>(stream));
      if (e != cudaSuccess) return detail::fail(TESSERA_STATUS_CUDA_ERROR, std::string("decode attention: ") + cudaGetErrorString(e));
      return Status::success();
    }
    return attn::run_prefill(dev, args.head_dim, args.dtype == DType::BF16, false, p, args.max_sms, stream);
  };
  return detail::remember(impl());
}

}  // namespace tessera
