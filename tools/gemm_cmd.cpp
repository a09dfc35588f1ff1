// `tessera gemm`: one GEMM through tessera; optionally checked against a cuBLASLt fp32 reference
// (--verify) and timed against cuBLASLt on the same inputs (--compare cublas).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "args.hpp"
#include "check.hpp"
#include "commands.hpp"
#include "cublaslt_gemm.hpp"
#include "cuda_raii.hpp"
#include "device_info.hpp"
#include "gemm_buffers.hpp"
#include "gemm_problem.hpp"
#include "json.hpp"
#include "run_common.hpp"
#include "tessera/tessera.hpp"
#include "timing.hpp"
#include "verify.hpp"

namespace tessera_cli {
namespace {

std::vector<OptionSpec> gemm_options() {
  std::vector<OptionSpec> specs = gemm_problem_options();
  const std::vector<OptionSpec> run_specs = {
      {"verify", "", "check D against a cuBLASLt fp32-output reference (bias and activation applied to it in fp32; "
                     "poisoned D, guard bands); exit 1 on FAIL"},
      {"compare", "LIB", "also time LIB on the same inputs; LIB = cublas (cuBLASLt)"},
  };
  specs.insert(specs.end(), run_specs.begin(), run_specs.end());
  const std::vector<OptionSpec> common = run_options();  // --iters, --warmup, --seed, --json, --help
  specs.insert(specs.end(), common.begin(), common.end());
  return specs;
}

struct RunSettings : RunCommon {
  bool verify = false;
  bool compare = false;  // against cuBLASLt
};

RunSettings parse_run_settings(const Options& opts) {
  RunSettings r;
  static_cast<RunCommon&>(r) = parse_run_common(opts);
  r.verify = opts.has("verify");
  if (opts.has("compare")) {
    const std::string lib = opts.str("compare");
    if (lib != "cublas" && lib != "cublaslt") usage_error("--compare: unknown library '" + lib + "' (expected cublas)");
    r.compare = true;
  }
  return r;
}

// Everything a run produced, for the human-readable report and the JSON.
struct GemmReport {
  GemmReport(const DeviceInfo& d, const GemmProblem& p, const RunSettings& s) : device(d), problem(p), settings(s) {}

  const DeviceInfo& device;
  const GemmProblem& problem;
  const RunSettings& settings;
  std::string config;
  int input_sets = 1;
  size_t set_bytes = 0;
  std::optional<VerifyResult> verify;
  TimingResult tessera;
  std::optional<TimingResult> cublas;

  std::optional<double> ratio() const {
    if (!cublas || tessera.median_ms <= 0) return std::nullopt;
    return cublas->median_ms / tessera.median_ms;  // = tessera TFLOP/s / cuBLASLt TFLOP/s
  }
};

void print_report(std::FILE* out, const GemmReport& r) {
  const DeviceInfo& dev = r.device;
  const double flops = r.problem.flops();
  std::fprintf(out, "device    %s (cc %s, %d SMs, L2 %s)\n", dev.name.c_str(), dev.cc().c_str(), dev.sm_count,
               mib(dev.l2_bytes).c_str());
  std::fprintf(out, "problem   %s\n", r.problem.describe().c_str());
  std::fprintf(out, "config    %s%s\n", r.config.c_str(),
               r.problem.config.empty() ? " (automatic: tuning cache or heuristic)" : "");
  std::fprintf(out, "inputs    %d set%s of %s rotated, seed %llu\n", r.input_sets, r.input_sets > 1 ? "s" : "",
               mib(r.set_bytes).c_str(), (unsigned long long)r.settings.seed);
  if (r.verify) {
    const VerifyResult& v = *r.verify;
    std::fprintf(out, "verify    %s  rel_err %.3e (tol %.1e), %llu non-finite, guards %s\n", v.pass ? "PASS" : "FAIL",
                 v.rel_err, v.tol, (unsigned long long)v.nonfinite, v.guards_ok ? "intact" : "OVERWRITTEN");
  }
  std::fprintf(out, "timing    median of %d samples after %d warm-up; %s\n", r.tessera.samples,
               r.settings.timing.warmup_samples, timing_mode_description(r.tessera.launches_per_sample).c_str());
  auto line = [&](const char* name, const TimingResult& t) {
    std::fprintf(out, "%-9s %10.4f ms  %9.2f TFLOP/s  (min %.4f ms; host %.1f us/launch)\n", name, t.median_ms,
                 tflops(flops, t.median_ms), t.min_ms, t.host_us_per_launch);
  };
  line("tessera", r.tessera);
  if (r.cublas) line("cuBLASLt", *r.cublas);
  if (r.cublas && (r.problem.has_bias() || r.problem.activation != tessera::Activation::None))
    std::fprintf(out, "note      cuBLASLt is timed without the bias and activation (its GEMM with alpha, beta only)\n");
  if (auto ratio = r.ratio()) std::fprintf(out, "ratio     %.3f (tessera / cuBLASLt)\n", *ratio);
}

void write_json(std::ostream& os, const GemmReport& r) {
  const GemmProblem& p = r.problem;
  const double flops = p.flops();
  JsonWriter j(os);
  j.begin_object();
  j.field("tool", "tessera gemm").field("tessera_version", tessera_version());
  j.field("gpu", r.device.name).field("cc", r.device.cc()).field("sms", r.device.sm_count);
  write_problem_json(j, p);
  j.field("config", r.config);
  j.field("tessera_ms", r.tessera.median_ms).field("tessera_tflops", tflops(flops, r.tessera.median_ms));
  if (r.cublas) {
    j.field("cublas_ms", r.cublas->median_ms).field("cublas_tflops", tflops(flops, r.cublas->median_ms));
  } else {
    j.key("cublas_ms").null().key("cublas_tflops").null();
  }
  j.field("ratio", r.ratio());
  j.key("verify");
  if (r.verify) {
    const VerifyResult& v = *r.verify;
    j.begin_object();
    j.field("rel_err", v.rel_err).field("tol", v.tol).field("pass", v.pass);
    j.field("nonfinite", v.nonfinite).field("guards_ok", v.guards_ok);
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
  j.field("cublas_min_ms", r.cublas ? std::optional<double>(r.cublas->min_ms) : std::nullopt);
  j.field("tessera_host_us_per_launch", r.tessera.host_us_per_launch);
  j.field("cublas_host_us_per_launch", r.cublas ? std::optional<double>(r.cublas->host_us_per_launch) : std::nullopt);
  j.end_object();
  j.field("seed", r.settings.seed);
  j.field("commit", env("TESSERA_COMMIT"));
  j.field("date", utc_now_iso());
  j.end_object();
}

}  // namespace

void print_gemm_help(std::FILE* out) {
  std::fprintf(out,
               "usage: tessera gemm --m M --n N --k K [options]\n\n"
               "D = act(alpha * op(A) * op(B) + beta * C + bias) through tessera, on fresh random inputs uniform\n"
               "in [-1, 1] (bias and activation only with --bias / --activation).\n"
               "Matrices are column-major as in BLAS unless --d-row-major; FLOPs = 2*M*N*K*batch.\n"
               "Without --compare only tessera is timed. Problems whose launch takes under %.0f us are timed\n"
               "as batches of back-to-back launches per event pair, the same way for both libraries; with\n"
               "--compare the two libraries' samples alternate, so that both see the same clocks.\n\n"
               "options:\n",
               kSmallProblemMs * 1e3);
  print_options(out, gemm_options());
  std::fprintf(out,
               "\nexamples:\n"
               "  tessera gemm --m 8192 --n 8192 --k 8192 --dtype bf16 --verify --compare cublas\n"
               "  tessera gemm --m 4096 --n 4096 --k 4096 --batch 8 --broadcast-b --layout nn --json out.json\n"
               "  tessera gemm --m 4096 --n 11008 --k 4096 --d-row-major --bias col --activation silu --verify\n");
}

int run_gemm(const std::vector<std::string>& args) {
  const std::vector<OptionSpec> specs = gemm_options();
  const Options opts("gemm", specs, args);
  if (opts.has("help")) {
    print_gemm_help(stdout);
    return kExitOk;
  }
  const GemmProblem p = parse_gemm_problem(opts);
  const RunSettings settings = parse_run_settings(opts);
  const DeviceInfo device = require_device();
  // With JSON on stdout, the human-readable report moves to stderr so that stdout parses.
  std::FILE* human = human_stream(settings);

  const bool need_cublas = settings.verify || settings.compare;
  const size_t set_bytes = InputSet::bytes_needed(p);
  require_device_memory(p.d.bytes() + 2 * GuardedBuffer::kGuardBytes + set_bytes +
                        (need_cublas ? kCublasLtWorkspaceBytes : 0) +
                        (settings.verify ? (p.has_c() ? 2 : 1) * p.d.elements() * sizeof(float) : 0));

  Stream stream;
  GuardedBuffer d(p.d.bytes());
  std::vector<InputSet> sets;
  sets.emplace_back(p, settings.seed, 0, stream.get());
  const int wanted = input_sets_wanted(set_bytes, device.l2_bytes);
  while (int(sets.size()) < wanted && set_bytes + kExtraSetHeadroomBytes <= free_device_memory())
    sets.emplace_back(p, settings.seed, int(sets.size()), stream.get());

  std::vector<tessera::GemmArgs> tessera_args;
  for (const InputSet& s : sets)
    tessera_args.push_back(p.tessera_args(s.a.get(), s.b.get(), s.c.get(), s.bias.get(), d.data()));

  // tessera's argument errors surface here, before any GEMM runs. The workspace is allocated once,
  // for the largest need over the input sets (all equally aligned, so in practice the same).
  GemmReport report(device, p, settings);
  report.input_sets = int(sets.size());
  report.set_bytes = set_bytes;
  check_tessera(tessera::gemm_select_config(tessera_args[0], &report.config), "tessera::gemm_select_config");
  size_t workspace_bytes = 0;
  for (const tessera::GemmArgs& a : tessera_args) {
    size_t bytes = 0;
    check_tessera(tessera::gemm_workspace_size(a, &bytes), "tessera::gemm_workspace_size");
    workspace_bytes = std::max(workspace_bytes, bytes);
  }
  const DeviceBuffer workspace(workspace_bytes);
  const Launch tessera_launch = [&](int64_t i) {
    check_tessera(tessera::gemm(tessera_args[size_t(i) % tessera_args.size()], stream.get(), workspace.get(),
                                workspace.bytes()),
                  "tessera::gemm");
  };

  std::optional<LtHandle> lt;
  DeviceBuffer lt_workspace;
  if (need_cublas) {
    lt.emplace();
    lt_workspace = DeviceBuffer(kCublasLtWorkspaceBytes);
  }
  if (settings.verify)
    report.verify = verify_gemm(p, sets[0], d, [&] { tessera_launch(0); }, lt->get(), lt_workspace, stream.get());

  std::optional<LtGemm> anchor;
  Launch cublas_launch;
  if (settings.compare) {
    // fp32 operands: tessera's tf32 against cuBLASLt's tf32; 3xTF32 against cuBLASLt's fp32.
    const bool tf32 = p.a.dtype == tessera::DType::F32 && p.precision != tessera::Precision::TF32x3;
    anchor.emplace(lt->get(), p, p.d.dtype, lt_workspace.bytes(),
                   tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F);
    cublas_launch = [&](int64_t i) {
      const InputSet& s = sets[size_t(i) % sets.size()];
      anchor->run(s.a.get(), s.b.get(), s.c.get(), d.data(), lt_workspace.get(), stream.get());
    };
  }

  // Both libraries are timed the same way: the batch size comes from the faster one's launch time.
  double single_ms = estimate_launch_ms(tessera_launch, stream.get());
  if (settings.compare) single_ms = std::min(single_ms, estimate_launch_ms(cublas_launch, stream.get()));
  TimingConfig timing = settings.timing;
  timing.launches_per_sample = launches_per_sample_for(single_ms);
  if (settings.compare) {  // interleaved samples: both see the same clock and power history
    const std::vector<TimingResult> t = time_interleaved({tessera_launch, cublas_launch}, timing, stream.get());
    report.tessera = t[0];
    report.cublas = t[1];
  } else {
    report.tessera = time_launches(tessera_launch, timing, stream.get());
  }
  CLI_CUDA_CHECK(cudaGetLastError());

  print_report(human, report);
  if (settings.json_path) emit_json(*settings.json_path, [&](std::ostream& os) { write_json(os, report); });
  return report.verify && !report.verify->pass ? kExitVerifyFailed : kExitOk;
}

}  // namespace tessera_cli
