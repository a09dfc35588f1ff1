// `tessera tune`: times every GEMM configuration this device can run on one problem (the same
// problem options as `tessera gemm`), in both orientations where a config and the problem allow
// the flipped one (NAME+flip), checks each result against cuBLASLt, prints the table and
// records the fastest correct configuration in the library's tuning cache, which later gemm()
// calls without an explicit configuration consult (tessera::gemm_tune_store).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <optional>
#include <sstream>
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

constexpr const char* kFallbackName = "simt_fallback";

std::vector<OptionSpec> tune_options() {
  std::vector<OptionSpec> specs;
  for (const OptionSpec& s : gemm_problem_options())
    if (s.name != "config") specs.push_back(s);  // tune tries them all
  const std::vector<OptionSpec> tune_specs = {
      {"configs", "LIST", "comma-separated configurations to time (default: every one this device can run, "
                          "except simt_fallback, and the flipped orientation NAME+flip of those that can take it; "
                          "see `tessera info`)"},
      {"no-verify", "", "do not check each configuration's D against cuBLASLt (by default one that fails is "
                        "never chosen, and the exit code is 1)"},
      {"no-save", "", "only print the table; leave the tuning cache as it is"},
  };
  specs.insert(specs.end(), tune_specs.begin(), tune_specs.end());
  const std::vector<OptionSpec> common = run_options();  // --iters, --warmup, --seed, --json, --help
  specs.insert(specs.end(), common.begin(), common.end());
  return specs;
}

struct TuneSettings : RunCommon {
  bool verify = true;
  bool save = true;
  std::vector<std::string> configs;  // the candidates, in table order
};

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

TuneSettings parse_tune_settings(const Options& opts) {
  TuneSettings t;
  static_cast<RunCommon&>(t) = parse_run_common(opts);
  t.verify = !opts.has("no-verify");
  t.save = !opts.has("no-save");
  std::vector<std::string> known;  // in table order, each flippable config followed by its flipped spelling
  for (const tessera::ConfigInfo& c : tessera::gemm_configs()) {
    known.push_back(c.name);
    if (c.flippable) known.push_back(c.name + "+flip");
  }
  if (opts.has("configs")) {
    for (const std::string& name : split_list(opts.str("configs"))) {
      if (std::find(known.begin(), known.end(), name) == known.end())
        usage_error("--configs: unknown configuration '" + name + "' (see `tessera info`)");
      if (std::find(t.configs.begin(), t.configs.end(), name) == t.configs.end()) t.configs.push_back(name);
    }
    if (t.configs.empty()) usage_error("--configs: empty list");
  } else {
    for (const std::string& name : known)
      if (name != kFallbackName) t.configs.push_back(name);
  }
  return t;
}

enum class Outcome { Ok, Skipped, VerifyFailed };

struct ConfigResult {
  std::string config;
  Outcome outcome = Outcome::Ok;
  std::string reason;  // why it was skipped
  TimingResult timing;
  std::optional<VerifyResult> verify;
};

struct TuneReport {
  TuneReport(const DeviceInfo& d, const GemmProblem& p, const TuneSettings& s) : device(d), problem(p), settings(s) {}

  const DeviceInfo& device;
  const GemmProblem& problem;
  const TuneSettings& settings;
  std::string current;  // what gemm() chose before this run (heuristic or an earlier tuning)
  int input_sets = 1;
  size_t set_bytes = 0;
  std::vector<ConfigResult> results;
  const ConfigResult* best = nullptr;
  std::string cache_path;  // "" = cache disabled
  bool saved = false;
  std::string not_saved_reason;

  const ConfigResult* find(const std::string& name) const {
    for (const ConfigResult& r : results)
      if (r.config == name && r.outcome == Outcome::Ok) return &r;
    return nullptr;
  }
};

const char* outcome_name(Outcome o) {
  switch (o) {
    case Outcome::Ok: return "ok";
    case Outcome::Skipped: return "skipped";
    case Outcome::VerifyFailed: return "verify_failed";
  }
  return "?";
}

void print_report(std::FILE* out, const TuneReport& r) {
  const DeviceInfo& dev = r.device;
  const double flops = r.problem.flops();
  std::fprintf(out, "device    %s (cc %s, %d SMs, L2 %s)\n", dev.name.c_str(), dev.cc().c_str(), dev.sm_count,
               mib(dev.l2_bytes).c_str());
  std::fprintf(out, "problem   %s\n", r.problem.describe().c_str());
  std::fprintf(out, "current   %s (the automatic choice before this run: tuning cache or heuristic)\n",
               r.current.c_str());
  std::fprintf(out, "inputs    %d set%s of %s rotated, seed %llu\n", r.input_sets, r.input_sets > 1 ? "s" : "",
               mib(r.set_bytes).c_str(), (unsigned long long)r.settings.seed);
  std::fprintf(out, "timing    per config: median of %d samples after %d warm-up%s\n", r.settings.timing.samples,
               r.settings.timing.warmup_samples, r.settings.verify ? "; each D checked against cuBLASLt" : "");
  size_t width = 6;
  for (const ConfigResult& c : r.results) width = std::max(width, c.config.size());
  std::fprintf(out, "\n  %-*s %10s %10s  %s\n", int(width), "config", "ms", r.problem.throughput_unit(),
               r.settings.verify ? "verify" : "");
  for (const ConfigResult& c : r.results) {
    const char* mark = &c == r.best ? "*" : " ";
    if (c.outcome == Outcome::Skipped) {
      std::fprintf(out, "%s %-*s %10s %10s  skipped: %s\n", mark, int(width), c.config.c_str(), "-", "-",
                   c.reason.c_str());
      continue;
    }
    std::string verify;
    if (c.verify) {
      char buf[96];
      if (c.verify->exact)
        std::snprintf(buf, sizeof buf, "%s exact, %llu sums differ%s", c.verify->pass ? "PASS" : "FAIL",
                      (unsigned long long)c.verify->mismatches, c.verify->guards_ok ? "" : " guards OVERWRITTEN");
      else
        std::snprintf(buf, sizeof buf, "%s rel_err %.2e%s", c.verify->pass ? "PASS" : "FAIL", c.verify->rel_err,
                      c.verify->guards_ok ? "" : " guards OVERWRITTEN");
      verify = buf;
    }
    std::fprintf(out, "%s %-*s %10.4f %10.2f  %s%s\n", mark, int(width), c.config.c_str(), c.timing.median_ms,
                 tflops(flops, c.timing.median_ms), verify.c_str(),
                 c.config == r.current ? (verify.empty() ? "(current)" : "  (current)") : "");
  }
  std::fprintf(out, "\n");
  if (!r.best) {
    std::fprintf(out, "best      none: no configuration ran%s\n", r.settings.verify ? " correctly" : "");
    return;
  }
  std::fprintf(out, "best      %s  %.4f ms  %.2f %s", r.best->config.c_str(), r.best->timing.median_ms,
               tflops(flops, r.best->timing.median_ms), r.problem.throughput_unit());
  if (const ConfigResult* cur = r.find(r.current); cur && cur != r.best && r.best->timing.median_ms > 0)
    std::fprintf(out, "  (%.3fx the current choice's speed)", cur->timing.median_ms / r.best->timing.median_ms);
  std::fprintf(out, "\n");
  if (r.saved)
    std::fprintf(out, "saved     %s\n", r.cache_path.c_str());
  else
    std::fprintf(out, "not saved %s\n", r.not_saved_reason.c_str());
}

void write_json(std::ostream& os, const TuneReport& r) {
  const GemmProblem& p = r.problem;
  const double flops = p.flops();
  JsonWriter j(os);
  j.begin_object();
  j.field("tool", "tessera tune").field("tessera_version", tessera_version());
  j.field("gpu", r.device.name).field("cc", r.device.cc()).field("sms", r.device.sm_count);
  write_problem_json(j, p);
  j.field("current_config", r.current);
  j.key("results").begin_array();
  for (const ConfigResult& c : r.results) {
    j.begin_object();
    j.field("config", c.config).field("status", outcome_name(c.outcome));
    if (c.outcome == Outcome::Skipped) {
      j.field("reason", c.reason);
      j.key("ms").null().key("tflops").null().key("min_ms").null();
    } else {
      j.field("ms", c.timing.median_ms).field("tflops", tflops(flops, c.timing.median_ms));
      j.field("min_ms", c.timing.min_ms).field("launches_per_sample", c.timing.launches_per_sample);
    }
    j.key("verify");
    if (c.verify) {
      j.begin_object();
      j.field("rel_err", c.verify->rel_err).field("tol", c.verify->tol).field("pass", c.verify->pass);
      j.field("nonfinite", c.verify->nonfinite).field("guards_ok", c.verify->guards_ok);
      j.field("exact", c.verify->exact);
      j.key("mismatches");
      if (c.verify->exact) j.value(c.verify->mismatches); else j.null();
      j.end_object();
    } else {
      j.null();
    }
    j.end_object();
  }
  j.end_array();
  if (r.best) {
    j.field("best_config", r.best->config).field("best_ms", r.best->timing.median_ms);
    j.field("best_tflops", tflops(flops, r.best->timing.median_ms));
  } else {
    j.key("best_config").null().key("best_ms").null().key("best_tflops").null();
  }
  j.field("saved", r.saved);
  j.key("cache_path");
  if (r.cache_path.empty()) j.null(); else j.value(r.cache_path);
  j.field("samples", r.settings.timing.samples).field("warmup_samples", r.settings.timing.warmup_samples);
  j.field("input_sets", r.input_sets).field("input_set_bytes", r.set_bytes);
  j.field("seed", r.settings.seed);
  j.field("commit", env("TESSERA_COMMIT"));
  j.field("date", utc_now_iso());
  j.end_object();
}

}  // namespace

void print_tune_help(std::FILE* out) {
  std::fprintf(out,
               "usage: tessera tune --m M --n N --k K [options]\n\n"
               "Times every GEMM configuration this device can run on one problem (the problem options are\n"
               "those of `tessera gemm`), checks each D against cuBLASLt, and records the fastest correct one\n"
               "in the tuning cache. Later tessera::gemm() calls without an explicit configuration (no\n"
               "GemmArgs::config, no TESSERA_GEMM_CONFIG) use it for the same device, canonical M/N/K/batch,\n"
               "dtypes and operand layouts. The cache is the file TESSERA_TUNE_CACHE (empty = disabled), else\n"
               "$XDG_CACHE_HOME/tessera/gemm_tune.txt, else ~/.cache/tessera/gemm_tune.txt; later lines win.\n\n"
               "options:\n");
  print_options(out, tune_options());
  std::fprintf(out,
               "\nexamples:\n"
               "  tessera tune --m 4096 --n 4096 --k 4096 --dtype bf16 --layout tn\n"
               "  tessera tune --m 128 --n 8192 --k 8192 --out-dtype f32 --no-save --json tune.json\n");
}

int run_tune(const std::vector<std::string>& args) {
  const std::vector<OptionSpec> specs = tune_options();
  const Options opts("tune", specs, args);
  if (opts.has("help")) {
    print_tune_help(stdout);
    return kExitOk;
  }
  const GemmProblem p = parse_gemm_problem(opts);  // p.config is "": the automatic choice
  const TuneSettings settings = parse_tune_settings(opts);
  const DeviceInfo device = require_device();
  std::FILE* human = human_stream(settings);

  const size_t set_bytes = InputSet::bytes_needed(p);
  require_device_memory(p.d.bytes() + 2 * GuardedBuffer::kGuardBytes + set_bytes +
                        (settings.verify ? kCublasLtWorkspaceBytes : 0) + (settings.verify ? verify_device_bytes(p) : 0));

  Stream stream;
  GuardedBuffer d(p.d.bytes());
  std::vector<InputSet> sets;
  sets.emplace_back(p, settings.seed, 0, stream.get());
  const int wanted = input_sets_wanted(set_bytes, device.l2_bytes);
  while (int(sets.size()) < wanted && set_bytes + kExtraSetHeadroomBytes <= free_device_memory())
    sets.emplace_back(p, settings.seed, int(sets.size()), stream.get());

  std::vector<tessera::GemmArgs> base_args;  // config "" (what the cache entry is keyed on)
  for (const InputSet& s : sets)
    base_args.push_back(p.tessera_args(s.a.get(), s.b.get(), s.c.get(), s.bias.get(), d.data(), s.scale_a.as<float>(),
                                       s.scale_b.as<float>()));

  TuneReport report(device, p, settings);
  report.input_sets = int(sets.size());
  report.set_bytes = set_bytes;
  report.cache_path = tessera::gemm_tune_cache_path();
  check_tessera(tessera::gemm_select_config(base_args[0], &report.current), "tessera::gemm_select_config");
  // Enough for every configuration: the pad copies and the largest split-K area.
  size_t workspace_bytes = 0;
  for (const tessera::GemmArgs& a : base_args) {
    size_t bytes = 0;
    check_tessera(tessera::gemm_workspace_size(a, &bytes), "tessera::gemm_workspace_size");
    workspace_bytes = std::max(workspace_bytes, bytes);
  }
  const DeviceBuffer workspace(workspace_bytes);

  std::optional<LtHandle> lt;
  DeviceBuffer lt_workspace;
  if (settings.verify) {
    lt.emplace();
    lt_workspace = DeviceBuffer(kCublasLtWorkspaceBytes);
  }

  bool any_verify_failed = false;
  for (const std::string& name : settings.configs) {
    ConfigResult result;
    result.config = name;
    std::vector<tessera::GemmArgs> cfg_args = base_args;
    for (tessera::GemmArgs& a : cfg_args) a.config = name;

    // Configurations this device (or this problem) cannot take answer NOT_SUPPORTED, before any launch.
    std::string selected;
    tessera::Status s = tessera::gemm_select_config(cfg_args[0], &selected);
    if (s.ok()) s = tessera::gemm(cfg_args[0], stream.get(), workspace.get(), workspace.bytes());
    if (s.code == TESSERA_STATUS_NOT_SUPPORTED) {
      result.outcome = Outcome::Skipped;
      result.reason = s.message;
      report.results.push_back(result);
      continue;
    }
    check_tessera(s, ("tessera::gemm (config " + name + ")").c_str());

    const Launch launch = [&](int64_t i) {
      check_tessera(tessera::gemm(cfg_args[size_t(i) % cfg_args.size()], stream.get(), workspace.get(),
                                  workspace.bytes()),
                    "tessera::gemm");
    };
    if (settings.verify) {
      result.verify = verify_gemm(p, sets[0], d, [&] { launch(0); }, lt->get(), lt_workspace, stream.get());
      if (!result.verify->pass) {
        result.outcome = Outcome::VerifyFailed;
        any_verify_failed = true;
      }
    }
    TimingConfig timing = settings.timing;
    timing.launches_per_sample = launches_per_sample_for(estimate_launch_ms(launch, stream.get()));
    result.timing = time_launches(launch, timing, stream.get());
    CLI_CUDA_CHECK(cudaGetLastError());
    report.results.push_back(result);
  }

  for (const ConfigResult& r : report.results)
    if (r.outcome == Outcome::Ok && (!report.best || r.timing.median_ms < report.best->timing.median_ms))
      report.best = &r;

  if (!report.best) {
    report.not_saved_reason = "(nothing to save)";
  } else if (!settings.save) {
    report.not_saved_reason = "(--no-save)";
  } else if (report.cache_path.empty()) {
    report.not_saved_reason = "(the tuning cache is disabled: TESSERA_TUNE_CACHE is set to an empty value)";
  } else {
    check_tessera(tessera::gemm_tune_store(base_args[0], report.best->config, &report.cache_path),
                  "tessera::gemm_tune_store");
    report.saved = true;
  }

  print_report(human, report);
  if (settings.json_path) emit_json(*settings.json_path, [&](std::ostream& os) { write_json(os, report); });
  if (!report.best)
    throw CliError(kExitTesseraError, std::string("tune: no configuration ") +
                                          (any_verify_failed ? "produced a correct result" : "can run this problem") +
                                          " on this device");
  return any_verify_failed ? kExitVerifyFailed : kExitOk;
}

}  // namespace tessera_cli
