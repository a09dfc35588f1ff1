// The GEMM tuning cache: the configuration `tessera tune` measured fastest for a problem on a
// device, kept in a text file that gemm() consults (before the heuristic) when the caller asks
// for no configuration. One entry per line, later lines win, malformed lines are ignored:
//
//   v1 <cc> <m> <n> <k> <batch> <ab dtype> <a k-major> <b k-major> <d dtype> <config> <device name>
//
// <config> as GemmArgs::config spells it: a name, or "<name>+flip" for the flipped orientation.
// e.g. "v1 90 4096 4096 4096 1 1 1 1 2 sm90_128x256x64_s4 NVIDIA H100 80GB HBM3". The problem is
// the canonical one (gemm/plan.hpp: row-major D, A M x K, B N x K; dtypes as DTypeTag), so every
// layout spelling of one problem shares an entry. The device name runs to the end of the line.
// Lines starting with '#' are comments. The first part of this header is plain C++ (no CUDA), so
// the CPU tests cover it with temporary files.
//
// The file comes from the user's environment (TESSERA_TUNE_CACHE), so whatever it names must not
// hang, crash or throw in the process that calls gemm():
//   - only a regular file (after symlinks) of at most kTuneCacheMaxBytes (16 MiB) is read; it is
//     checked before the open, opened without blocking and checked again on the descriptor, so a
//     FIFO, a directory, a device, a larger file, or a path that cannot be opened (missing, no
//     permission, a component that is not a directory, too long) is an empty cache, silently, as
//     a missing file is;
//   - its content is parsed line by line, any bytes: binary data, NULs, long lines, numbers out
//     of range make malformed lines, which are skipped;
//   - store() appends only to such a regular file (creating it and its directories if missing),
//     and only while the file stays within the cap; otherwise it returns false with an error that
//     names the path and the rule or errno;
//   - no member throws (but size(), for tests): running out of host memory while loading is an
//     empty cache, during a lookup a miss, during a store a failed store.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "core/device.hpp"
#include "gemm/configs.hpp"
#include "gemm/plan.hpp"

namespace tessera::gemm_impl {

struct TuneKey {
  std::string device;  // device name (normalised by the functions below: no control characters, trimmed)
  int cc = 0;          // compute capability x10, e.g. 90
  int64_t m = 0, n = 0, k = 0, batch = 1;  // canonical problem
  int ab_dtype = 0;    // DTypeTag of A and B
  bool a_k_major = true, b_k_major = true;
  int d_dtype = 0;     // DTypeTag of C and D
};

// The device name as stored: control characters become spaces, surrounding blanks are trimmed,
// and an empty name becomes "unknown".
std::string normalize_device_name(const std::string& name);

// One cache line (without the newline) / its parse. parse_tune_line returns false for blank,
// comment and malformed lines (unknown version, missing or non-numeric fields, out-of-range values,
// no device name) and leaves the outputs unspecified then.
std::string format_tune_line(const TuneKey& key, const std::string& config);
bool parse_tune_line(const std::string& line, TuneKey* key, std::string* config);

// The map key of an entry: every field of TuneKey, the device name normalised.
std::string tune_key_string(const TuneKey& key);

// The cache file: `tune_env` (TESSERA_TUNE_CACHE) when set, where an empty value disables the
// cache; else <xdg_cache_home>/tessera/gemm_tune.txt when that is set and non-empty; else
// <home>/.cache/tessera/gemm_tune.txt; else "" (disabled). Null pointers mean "not set".
std::string tune_cache_path_from(const char* tune_env, const char* xdg_cache_home, const char* home);
// The same from the process environment.
std::string tune_cache_path();

// The largest cache file that is read (a real one holds a line per tuned problem: ~100 bytes each).
constexpr size_t kTuneCacheMaxBytes = size_t(16) << 20;

// A cache file and its entries. The file is read at the first lookup or store (once; a missing
// file is an empty cache); store appends a line and updates the entries. Thread-safe.
class TuneCache {
 public:
  explicit TuneCache(std::string path) : path_(std::move(path)) {}
  const std::string& path() const { return path_; }  // "" = disabled: lookups miss, stores fail

  std::optional<std::string> lookup(const TuneKey& key) noexcept;
  // Appends the entry (creating the file and its directories); false with `error` set on failure.
  bool store(const TuneKey& key, const std::string& config, std::string* error) noexcept;
  size_t size();  // entries (distinct keys) after loading
  bool empty() noexcept {  // after loading; cheap (no lock) once loaded
    ensure_loaded();
    return !has_entries_.load(std::memory_order_acquire);
  }

 private:
  void ensure_loaded() noexcept;
  void load() noexcept;
  bool store_line(const TuneKey& key, const std::string& config, std::string* error);

  std::string path_;
  std::once_flag loaded_;
  std::mutex mu_;
  std::map<std::string, std::string> entries_;  // tune_key_string -> config name
  std::atomic<bool> has_entries_{false};        // lets lookups on an empty cache skip the lock
};

// The process-wide cache at tune_cache_path(), resolved at first use.
TuneCache& global_tune_cache();

// ---- the library's use of the cache (needs configs.hpp, plan.hpp, device.hpp; no CUDA calls) ----

TuneKey make_tune_key(const GemmPlan& plan, const detail::DeviceInfo& dev);

// The configuration `cache` holds for this problem and device (with its orientation: an entry may
// be spelt "<name>+flip", configs.hpp), if the device can run it (arch, shared memory) and, for an
// sm90 config, the operands are TMA-ready (`tma_ok`, as for the heuristic); else {null} (also for
// unknown names, e.g. from an older build, and the flipped spelling of a config that cannot flip).
ConfigChoice tuned_config(TuneCache& cache, const GemmPlan& plan, const detail::DeviceInfo& dev, bool tma_ok);
inline ConfigChoice tuned_config(const GemmPlan& plan, const detail::DeviceInfo& dev, bool tma_ok) {
  return tuned_config(global_tune_cache(), plan, dev, tma_ok);
}

}  // namespace tessera::gemm_impl
