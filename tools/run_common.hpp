// Pieces shared by the commands that run and time a kernel (`gemm`, `attention`): option parsing
// helpers, the options every run command has (--iters, --warmup, --seed, --json, --help), device
// memory checks, and the metadata and JSON output of a report.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "args.hpp"
#include "tessera/tessera.hpp"
#include "timing.hpp"

namespace tessera_cli {

// "f16" / "fp16" / "half", "bf16", and with `allow_f32` "f32" / "fp32" / "float"; a usage error
// naming --option otherwise.
tessera::DType parse_dtype(const std::string& option, const std::string& s, bool allow_f32);

// The integer option `name` (or `fallback`), which must be >= 1.
int64_t positive(const Options& opts, const std::string& name, int64_t fallback);

// --iters, --warmup, --seed, --json [FILE], --help.
std::vector<OptionSpec> run_options();

struct RunCommon {
  TimingConfig timing;
  uint64_t seed = 0;
  std::optional<std::string> json_path;  // "-" = stdout
};
RunCommon parse_run_common(const Options& opts);

// Where the human-readable report goes: stderr when the JSON goes to stdout (so that it parses).
std::FILE* human_stream(const RunCommon& r);

uint64_t clock_seed();
std::string mib(size_t bytes);  // "12.3 MiB"
size_t free_device_memory();
// Fails early, with the sizes, rather than at whichever cudaMalloc runs out.
void require_device_memory(size_t needed);

// Input sets to rotate while timing so that one pass moves more than twice the L2 size (at most
// kMaxInputSets).
constexpr int kMaxInputSets = 8;
// Extra input sets are optional; they are only allocated while this much device memory stays free
// (for the libraries' and the CUDA runtime's own allocations).
constexpr size_t kExtraSetHeadroomBytes = size_t(512) << 20;
int input_sets_wanted(size_t set_bytes, size_t l2_bytes);

double tflops(double flops, double ms);
std::string utc_now_iso();
std::optional<std::string> env(const char* name);

// Calls `write` on stdout when `path` is "-", else on the file `path` (a usage error if it cannot
// be opened).
void emit_json(const std::string& path, const std::function<void(std::ostream&)>& write);

}  // namespace tessera_cli
