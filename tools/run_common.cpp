#include "run_common.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <random>

#include "check.hpp"

namespace tessera_cli {

using tessera::DType;

DType parse_dtype(const std::string& option, const std::string& s, bool allow_f32) {
  if (s == "f16" || s == "fp16" || s == "half") return DType::F16;
  if (s == "bf16") return DType::BF16;
  if (allow_f32 && (s == "f32" || s == "fp32" || s == "float")) return DType::F32;
  usage_error("--" + option + ": unknown type '" + s + "' (expected f16 | bf16" + (allow_f32 ? " | f32)" : ")"));
}

int64_t positive(const Options& opts, const std::string& name, int64_t fallback) {
  const int64_t v = opts.integer(name, fallback);
  if (v < 1) usage_error("--" + name + ": must be >= 1 (got " + std::to_string(v) + ")");
  return v;
}

std::vector<OptionSpec> run_options() {
  return {
      {"iters", "N", "timed samples, the median is reported (default 20)"},
      {"warmup", "N", "warm-up samples before timing (default 5)"},
      {"seed", "S", "seed of the random inputs (default: from the clock; printed)"},
      {"json", "FILE", "write the result as JSON to FILE, or to stdout when FILE is - or omitted (the "
                       "human-readable report then goes to stderr)",
       /*value_optional=*/true, /*implicit_value=*/"-"},
      {"help", "", "show this help"},
  };
}

RunCommon parse_run_common(const Options& opts) {
  RunCommon r;
  r.timing.samples = int(opts.integer("iters", 20));
  r.timing.warmup_samples = int(opts.integer("warmup", 5));
  if (r.timing.samples < 1) usage_error("--iters: must be >= 1");
  if (r.timing.warmup_samples < 0) usage_error("--warmup: must be >= 0");
  r.seed = opts.has("seed") ? uint64_t(*opts.integer("seed")) : clock_seed();
  if (opts.has("json")) r.json_path = opts.str("json");
  return r;
}

std::FILE* human_stream(const RunCommon& r) { return r.json_path && *r.json_path == "-" ? stderr : stdout; }

uint64_t clock_seed() {
  const auto now = std::chrono::high_resolution_clock::now().time_since_epoch().count();
  return uint64_t(now) ^ (uint64_t(std::random_device{}()) << 32);
}

std::string mib(size_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / double(1 << 20));
  return buf;
}

size_t free_device_memory() {
  size_t free_bytes = 0, total_bytes = 0;
  CLI_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return free_bytes;
}

void require_device_memory(size_t needed) {
  const size_t free_bytes = free_device_memory();
  if (needed > free_bytes)
    throw CliError(kExitCudaError, "not enough device memory: this run needs about " + mib(needed) + ", " +
                                       mib(free_bytes) + " are free");
}

int input_sets_wanted(size_t set_bytes, size_t l2_bytes) {
  if (set_bytes == 0) return 1;
  return int(std::min<size_t>(2 * l2_bytes / set_bytes + 1, kMaxInputSets));
}

double tflops(double flops, double ms) { return ms > 0 ? flops / (ms * 1e-3) / 1e12 : 0.0; }

std::string utc_now_iso() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? std::optional<std::string>(v) : std::nullopt;
}

void emit_json(const std::string& path, const std::function<void(std::ostream&)>& write) {
  if (path == "-") {
    write(std::cout);
    std::cout.flush();
    return;
  }
  std::ofstream file(path);
  if (!file) throw CliError(kExitUsage, "--json: cannot open '" + path + "' for writing");
  write(file);
}

}  // namespace tessera_cli
