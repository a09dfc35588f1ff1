// `tessera attention`: one attention forward pass through tessera on random inputs; optionally
// checked against the fp32 GPU reference (--verify, the oracle of the GPU tests:
// attention_gpu_reference.hpp) and timed with CUDA events.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "args.hpp"
#include "attention_gpu_reference.hpp"
#include "check.hpp"
#include "commands.hpp"
#include "cuda_raii.hpp"
#include "device_helpers.hpp"
#include "device_info.hpp"
#include "gemm_buffers.hpp"  // GuardedBuffer
#include "gemm_problem.hpp"  // dtype_name, dtype_bytes
#include "json.hpp"
#include "run_common.hpp"
#include "tessera/tessera.hpp"
#include "timing.hpp"

namespace tessera_cli {
namespace {

using tessera::DType;

std::vector<OptionSpec> attention_options() {
  std::vector<OptionSpec> specs = {
      {"b", "B", "batch (default 1)"},
      {"hq", "H", "query heads (default 16)"},
      {"hkv", "H", "key/value heads; must divide --hq (default: --hq; 1 = MQA)"},
      {"sq", "S", "query sequence length (required)"},
      {"sk", "S", "key/value sequence length (default: --sq)"},
      {"d", "D", "head dim (default 128; tessera has 64, 96, 128, 256)"},
      {"causal", "", "causal mask, bottom-right aligned: query i sees keys j <= i + Sk - Sq"},
      {"window-left", "W", "local attention: query i sees no key j < i' - W, i' = i + Sk - Sq (default -1 = unlimited)"},
      {"window-right", "W", "local attention: query i sees no key j > i' + W (default -1 = unlimited; --causal: 0)"},
      {"softcap", "C", "cap the scaled scores s at C * tanh(s / C), Gemma 2 (default 0 = none)"},
      {"dtype", "T", "f16 | bf16 (default bf16)"},
      {"layout", "L", "bshd ([B, S, H, D], default) | bhsd ([B, H, S, D]); Q, K, V and O alike, contiguous"},
      {"scale", "X", "softmax scale (default 0 = 1/sqrt(D))"},
      {"no-lse", "", "do not write the log-sum-exp (lse = null)"},
      {"verify", "", "check O and LSE against the fp32 GPU reference (poisoned O and LSE, guard bands); exit 1 on "
                     "FAIL. The reference is naive: seconds for long sequences"},
  };
  const std::vector<OptionSpec> common = run_options();  // --iters, --warmup, --seed, --json, --help
  specs.insert(specs.end(), common.begin(), common.end());
  return specs;
}

struct AttentionProblem {
  int64_t b = 1, hq = 16, hkv = 16, sq = 0, sk = 0, d = 128;
  bool causal = false;
  DType dtype = DType::BF16;
  std::string layout = "bshd";
  float scale = 0.0f;
  bool lse = true;
  int64_t window_left = -1, window_right = -1;
  float softcap = 0.0f;

  size_t q_elements() const { return size_t(b * sq * hq * d); }
  size_t kv_elements() const { return size_t(b * sk * hkv * d); }
  size_t lse_rows() const { return size_t(b * hq * sq); }
  size_t set_bytes() const { return (q_elements() + 2 * kv_elements()) * dtype_bytes(dtype); }
  float effective_scale() const { return scale > 0.0f ? scale : 1.0f / std::sqrt(float(d)); }

  tessera::AttentionArgs args(const void* q, const void* k, const void* v, void* o, float* lse_ptr) const {
    tessera::AttentionArgs a;
    a.q = q;
    a.k = k;
    a.v = v;
    a.o = o;
    a.lse = lse ? lse_ptr : nullptr;
    a.dtype = dtype;
    a.batch = b;
    a.seqlen_q = sq;
    a.seqlen_k = sk;
    a.heads_q = hq;
    a.heads_kv = hkv;
    a.head_dim = d;
    const bool bhsd = layout == "bhsd";
    auto strides = [&](int64_t s, int64_t h, int64_t (&st)[3]) {
      if (bhsd)
        tessera::bhsd_strides(s, h, d, st);
      else
        tessera::bshd_strides(s, h, d, st);
    };
    strides(sq, hq, a.q_stride);
    strides(sk, hkv, a.k_stride);
    strides(sk, hkv, a.v_stride);
    strides(sq, hq, a.o_stride);
    a.softmax_scale = scale;
    a.causal = causal;
    a.window_left = window_left;
    a.window_right = window_right;
    a.softcap = softcap;
    return a;
  }

  bool windowed() const { return window_left >= 0 || window_right >= 0; }

  std::string describe() const {
    char buf[320];
    std::snprintf(buf, sizeof buf, "B=%lld Hq=%lld Hkv=%lld Sq=%lld Sk=%lld D=%lld  %s  %s  layout %s  scale %.6g%s%s",
                  (long long)b, (long long)hq, (long long)hkv, (long long)sq, (long long)sk, (long long)d,
                  dtype_name(dtype), causal ? "causal" : "non-causal", layout.c_str(), effective_scale(),
                  scale > 0.0f ? "" : " (1/sqrt(D))", lse ? "" : "  no LSE");
    std::string s = buf;
    if (windowed()) s += "  window (" + std::to_string(window_left) + ", " + std::to_string(window_right) + ")";
    if (softcap > 0.0f) {
      std::snprintf(buf, sizeof buf, "  softcap %.6g", softcap);
      s += buf;
    }
    return s;
  }
};

AttentionProblem parse_problem(const Options& opts) {
  if (!opts.has("sq")) usage_error("--sq is required (see `tessera attention --help`)");
  AttentionProblem p;
  p.b = positive(opts, "b", 1);
  p.hq = positive(opts, "hq", 16);
  p.hkv = positive(opts, "hkv", p.hq);
  p.sq = positive(opts, "sq", 0);
  p.sk = positive(opts, "sk", p.sq);
  p.d = positive(opts, "d", 128);
  p.causal = opts.has("causal");
  p.dtype = parse_dtype("dtype", opts.str("dtype", "bf16"), /*allow_f32=*/false);
  p.layout = opts.str("layout", "bshd");
  std::transform(p.layout.begin(), p.layout.end(), p.layout.begin(), [](unsigned char c) { return std::tolower(c); });
  if (p.layout != "bshd" && p.layout != "bhsd") usage_error("--layout: expected bshd or bhsd, got '" + p.layout + "'");
  const double scale = opts.real("scale", 0.0);
  if (!(scale >= 0.0) || !std::isfinite(scale)) usage_error("--scale: must be finite and >= 0 (0 = 1/sqrt(D))");
  p.scale = float(scale);
  p.lse = !opts.has("no-lse");
  p.window_left = opts.integer("window-left", -1);
  p.window_right = opts.integer("window-right", -1);
  p.softcap = float(opts.real("softcap", 0.0));  // tessera refuses a bad window or softcap, naming it
  // Everything else (heads dividing, supported head dims, sizes) is tessera's to refuse, with its
  // own message naming the argument.
  return p;
}

struct RunSettings : RunCommon {
  bool verify = false;
};

// One set of inputs; several are rotated while timing so that small problems are not served from L2.
struct AttentionInputs {
  DeviceBuffer q, k, v;
  AttentionInputs(const AttentionProblem& p, uint64_t seed, int set_index, cudaStream_t stream)
      : q(p.q_elements() * dtype_bytes(p.dtype)),
        k(p.kv_elements() * dtype_bytes(p.dtype)),
        v(p.kv_elements() * dtype_bytes(p.dtype)) {
    int operand = 0;
    for (DeviceBuffer* b : {&q, &k, &v})
      fill_uniform(b->get(), p.dtype, b->bytes() / dtype_bytes(p.dtype),
                   seed ^ (0xD1B54A32D192ED03ull * uint64_t(3 * set_index + operand++ + 1)), stream);
  }
};

struct AttentionVerify {
  tessera_ref::AttentionErrors errors;
  double bound = 0;
  bool guards_ok = false;
  bool pass = false;
  std::string why;  // what failed
};

// The references from `in`, then O and LSE poisoned (guards filled), one tessera run, the
// comparison and the guards.
AttentionVerify verify_attention(const AttentionProblem& p, const AttentionInputs& in, GuardedBuffer& o,
                                 GuardedBuffer& lse, const DeviceBuffer& workspace, cudaStream_t stream) {
  const tessera::AttentionArgs args = p.args(in.q.get(), in.k.get(), in.v.get(), o.data(), static_cast<float*>(lse.data()));
  DeviceBuffer o32(p.q_elements() * sizeof(float)), olow(p.q_elements() * sizeof(float)),
      lse32(p.lse_rows() * sizeof(float));
  CLI_CUDA_CHECK(tessera_ref::attention_reference(args, o32.as<float>(), olow.as<float>(), lse32.as<float>(), stream));

  for (GuardedBuffer* b : {&o, &lse}) {
    b->fill_guards(stream);
    b->poison(stream);
  }
  check_tessera(tessera::attention(args, stream, workspace.get(), workspace.bytes()), "tessera::attention");
  CLI_CUDA_CHECK(cudaStreamSynchronize(stream));

  AttentionVerify r;
  r.guards_ok = o.guards_intact(stream) && lse.guards_intact(stream);
  CLI_CUDA_CHECK(
      tessera_ref::attention_compare(args, o32.as<float>(), olow.as<float>(), lse32.as<float>(), &r.errors, stream));
  r.bound = tessera_ref::attention_bound(r.errors, p.dtype);
  r.pass = tessera_ref::attention_check(r.errors, p.dtype, &r.why) && r.guards_ok;
  if (!r.guards_ok) r.why += "guard bands around O or LSE overwritten; ";
  return r;
}

struct AttentionReport {
  const DeviceInfo& device;
  const AttentionProblem& problem;
  const RunSettings& settings;
  double flops = 0;
  int input_sets = 1;
  size_t set_bytes = 0;
  std::optional<AttentionVerify> verify;
  TimingResult tessera;
};

void print_report(std::FILE* out, const AttentionReport& r) {
  const DeviceInfo& dev = r.device;
  std::fprintf(out, "device    %s (cc %s, %d SMs, L2 %s)\n", dev.name.c_str(), dev.cc().c_str(), dev.sm_count,
               mib(dev.l2_bytes).c_str());
  std::fprintf(out, "problem   %s\n", r.problem.describe().c_str());
  std::fprintf(out, "flops     %.4g (4 * B * Hq * D * unmasked (query, key) pairs%s)\n", r.flops,
               r.problem.causal || r.problem.windowed() ? "; masked pairs excluded exactly" : "");
  std::fprintf(out, "inputs    %d set%s of %s rotated, seed %llu\n", r.input_sets, r.input_sets > 1 ? "s" : "",
               mib(r.set_bytes).c_str(), (unsigned long long)r.settings.seed);
  if (r.verify) {
    const AttentionVerify& v = *r.verify;
    const tessera_ref::AttentionErrors& e = v.errors;
    std::fprintf(out, "verify    %s  max|O-ref32| %.3e (bound %.3e = 2 * max|O_lowp-ref32| %.3e + atol %.0e)",
                 v.pass ? "PASS" : "FAIL", e.max_err, v.bound, e.max_err_lowp,
                 tessera_ref::attention_atol(r.problem.dtype));
    if (e.lse_checked)
      std::fprintf(out, ", max|dLSE| %.3e (tol %.0e), %llu bad LSE rows", e.max_lse_err, tessera_ref::kAttentionLseTol,
                   (unsigned long long)e.lse_bad);
    std::fprintf(out, ", %llu non-finite, guards %s\n", (unsigned long long)e.nonfinite,
                 v.guards_ok ? "intact" : "OVERWRITTEN");
    if (!v.pass) std::fprintf(out, "          %s\n", v.why.c_str());
  }
  std::fprintf(out, "timing    median of %d samples after %d warm-up; %s\n", r.tessera.samples,
               r.settings.timing.warmup_samples, timing_mode_description(r.tessera.launches_per_sample).c_str());
  std::fprintf(out, "%-9s %10.4f ms  %9.2f TFLOP/s  (min %.4f ms)\n", "tessera", r.tessera.median_ms,
               tflops(r.flops, r.tessera.median_ms), r.tessera.min_ms);
}

void write_json(std::ostream& os, const AttentionReport& r) {
  const AttentionProblem& p = r.problem;
  JsonWriter j(os);
  j.begin_object();
  j.field("tool", "tessera attention").field("tessera_version", tessera_version());
  j.field("gpu", r.device.name).field("cc", r.device.cc()).field("sms", r.device.sm_count);
  j.field("batch", p.b).field("heads_q", p.hq).field("heads_kv", p.hkv);
  j.field("seqlen_q", p.sq).field("seqlen_k", p.sk).field("head_dim", p.d);
  j.field("causal", p.causal).field("dtype", dtype_name(p.dtype)).field("layout", p.layout);
  j.field("softmax_scale", double(p.effective_scale())).field("lse", p.lse);
  j.field("window_left", p.window_left).field("window_right", p.window_right).field("softcap", double(p.softcap));
  j.field("flops", r.flops);
  j.field("flops_convention", "4 * B * Hq * D * unmasked (query, key) pairs (causal and windows: exact count, "
                              "sum over i of the keys row i sees, from max(0, i' - window_left) to min(Sk - 1, "
                              "i' + window_right), i' = i + Sk - Sq)");
  j.field("tessera_ms", r.tessera.median_ms).field("tessera_tflops", tflops(r.flops, r.tessera.median_ms));
  j.key("verify");
  if (r.verify) {
    const AttentionVerify& v = *r.verify;
    const tessera_ref::AttentionErrors& e = v.errors;
    j.begin_object();
    j.field("max_err", e.max_err).field("max_err_lowp", e.max_err_lowp).field("bound", v.bound);
    j.field("atol", tessera_ref::attention_atol(p.dtype)).field("max_ref", e.max_ref);
    j.key("max_lse_err");
    if (e.lse_checked)
      j.value(e.max_lse_err);
    else
      j.null();
    j.field("lse_tol", tessera_ref::kAttentionLseTol).field("lse_bad", e.lse_bad);
    j.field("nonfinite", e.nonfinite).field("guards_ok", v.guards_ok).field("pass", v.pass);
    j.end_object();
  } else {
    j.null();
  }
  j.field("timing_mode", r.tessera.launches_per_sample > 1 ? "batched" : "single");
  j.key("timing").begin_object();
  j.field("description", timing_mode_description(r.tessera.launches_per_sample));
  j.field("launches_per_sample", r.tessera.launches_per_sample);
  j.field("samples", r.tessera.samples).field("warmup_samples", r.settings.timing.warmup_samples);
  j.field("input_sets", r.input_sets).field("input_set_bytes", r.set_bytes);
  j.field("tessera_min_ms", r.tessera.min_ms);
  j.end_object();
  j.field("seed", r.settings.seed);
  j.field("commit", env("TESSERA_COMMIT"));
  j.field("date", utc_now_iso());
  j.end_object();
}

}  // namespace

void print_attention_help(std::FILE* out) {
  std::fprintf(out,
               "usage: tessera attention --sq S [options]\n\n"
               "O = softmax(scale * Q K^T [causal / window mask]) V through tessera (FlashAttention-2 style\n"
               "forward; --softcap caps the scaled scores before the softmax), on fresh random inputs uniform\n"
               "in [-1, 1]. Q [B, Sq, Hq, D], K and V [B, Sk, Hkv, D], O like Q,\n"
               "stored as --layout says; LSE fp32 [B, Hq, Sq]. GQA: query head h reads K/V head h / (Hq / Hkv).\n\n"
               "FLOPs = 4 * B * Hq * D * (unmasked query-key pairs): 4*B*Hq*Sq*Sk*D without --causal or a window;\n"
               "with them the pairs are counted exactly, sum over rows i of the keys row i sees, max(0, i' - left)\n"
               "to min(Sk - 1, i' + right) with i' = i + Sk - Sq (causal: right = 0; Sq = Sk = S, causal alone:\n"
               "S(S+1)/2, a little over the usual 'half'). Problems whose launch takes under %.0f us are timed as\n"
               "batches of back-to-back launches per event pair.\n\n"
               "--verify compares with a naive fp32 GPU reference and a same-precision one (P and O rounded to\n"
               "the dtype): pass when max|O - ref32| <= 2 * max|O_lowp - ref32| + atol (bf16 2e-3, f16 5e-4),\n"
               "|LSE - LSE32| <= 1e-3 (rows without keys: both -inf), O finite and the guard bands intact.\n\n"
               "options:\n",
               kSmallProblemMs * 1e3);
  print_options(out, attention_options());
  std::fprintf(out,
               "\nexamples:\n"
               "  tessera attention --b 1 --hq 16 --sq 16384 --d 128 --causal --verify\n"
               "  tessera attention --b 1 --hq 16 --sq 32768 --d 128 --causal --window-left 4095 --softcap 50\n"
               "  tessera attention --b 4 --hq 32 --hkv 8 --sq 1 --sk 8192 --d 128 --dtype f16 --json out.json\n");
}

int run_attention(const std::vector<std::string>& args) {
  const std::vector<OptionSpec> specs = attention_options();
  const Options opts("attention", specs, args);
  if (opts.has("help")) {
    print_attention_help(stdout);
    return kExitOk;
  }
  const AttentionProblem p = parse_problem(opts);
  RunSettings settings;
  static_cast<RunCommon&>(settings) = parse_run_common(opts);
  settings.verify = opts.has("verify");
  const DeviceInfo device = require_device();
  std::FILE* human = human_stream(settings);

  const size_t set_bytes = p.set_bytes();
  const size_t o_bytes = p.q_elements() * dtype_bytes(p.dtype), lse_bytes = p.lse_rows() * sizeof(float);
  require_device_memory(set_bytes + o_bytes + lse_bytes + 4 * GuardedBuffer::kGuardBytes +
                        (settings.verify ? 2 * p.q_elements() * sizeof(float) + lse_bytes : 0));

  Stream stream;
  GuardedBuffer o(o_bytes), lse(lse_bytes);
  std::vector<AttentionInputs> sets;
  sets.emplace_back(p, settings.seed, 0, stream.get());
  const int wanted = input_sets_wanted(set_bytes, device.l2_bytes);
  while (int(sets.size()) < wanted && set_bytes + kExtraSetHeadroomBytes <= free_device_memory())
    sets.emplace_back(p, settings.seed, int(sets.size()), stream.get());
  std::vector<tessera::AttentionArgs> tessera_args;
  for (const AttentionInputs& s : sets)
    tessera_args.push_back(p.args(s.q.get(), s.k.get(), s.v.get(), o.data(), static_cast<float*>(lse.data())));

  AttentionReport report{device, p, settings};
  report.flops = tessera_ref::attention_flops(tessera_args[0]);
  report.input_sets = int(sets.size());
  report.set_bytes = set_bytes;

  // The workspace the library asks for, as a user's call would pass it: decode-shaped calls split
  // the keys over the SMs only with one (without, one CTA per (batch, KV head, row tile) walks them all).
  size_t workspace_bytes = 0;
  check_tessera(tessera::attention_workspace_size(tessera_args[0], &workspace_bytes), "tessera::attention_workspace_size");
  DeviceBuffer workspace(workspace_bytes);
  const Launch launch = [&](int64_t i) {
    check_tessera(tessera::attention(tessera_args[size_t(i) % tessera_args.size()], stream.get(), workspace.get(),
                                     workspace_bytes),
                  "tessera::attention");
  };
  // tessera's argument errors surface here, before anything is timed.
  launch(0);
  CLI_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
  if (settings.verify) report.verify = verify_attention(p, sets[0], o, lse, workspace, stream.get());

  TimingConfig timing = settings.timing;
  timing.launches_per_sample = launches_per_sample_for(estimate_launch_ms(launch, stream.get()));
  report.tessera = time_launches(launch, timing, stream.get());
  CLI_CUDA_CHECK(cudaGetLastError());

  print_report(human, report);
  if (settings.json_path) emit_json(*settings.json_path, [&](std::ostream& os) { write_json(os, report); });
  return report.verify && !report.verify->pass ? kExitVerifyFailed : kExitOk;
}

}  // namespace tessera_cli
