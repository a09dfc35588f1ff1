#include "core/environment.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "core/status.hpp"

namespace tessera::detail {
namespace {

// `var` as an integer in [lo, hi]; absent or empty leaves `value` alone.
Status integer(const char* var, long lo, long hi, int* value) {
  const char* env = std::getenv(var);
  if (!env || !*env) return Status::success();
  char* end = nullptr;
  const long v = std::strtol(env, &end, 10);
  if (*end != '\0' || v < lo || v > hi)
    return invalid(std::string(var) + ": must be an integer in " + std::to_string(lo) + ".." + std::to_string(hi) +
                   " (got '" + env + "')");
  *value = int(v);
  return Status::success();
}

// `var` as one of `names` (its index into `values`); absent or empty leaves `value` alone.
template <size_t N>
Status choice(const char* var, const char* const (&names)[N], const int (&values)[N], const char* rule, int* value) {
  const char* env = std::getenv(var);
  if (!env || !*env) return Status::success();
  for (size_t i = 0; i < N; ++i)
    if (!std::strcmp(env, names[i])) {
      *value = values[i];
      return Status::success();
    }
  return invalid(std::string(var) + ": must be " + rule + " (got '" + env + "')");
}

Status binary(const char* var, int* value) {
  return choice(var, {"0", "1"}, {0, 1}, "0 or 1", value);
}

std::string text(const char* var) {
  const char* env = std::getenv(var);
  return env ? env : "";
}

Environment read(unsigned generation) {
  Environment e;
  e.generation = generation;
  e.gemm_config = text("TESSERA_GEMM_CONFIG");
  int pdl = 1, one_tile = 1;
  // The first malformed variable is the GEMM's error; later ones are still parsed (and ignored).
  for (Status s : {integer("TESSERA_GEMM_SPLITS", 1, Environment::kMaxGemmSplits, &e.gemm_splits),
                   binary("TESSERA_GEMM_STREAMK", &e.gemm_streamk), binary("TESSERA_GEMM_FLIP", &e.gemm_flip),
                   integer("TESSERA_GEMM_L2_WARM", 0, 64, &e.gemm_l2_warm),
                   choice("TESSERA_SM90_EPILOGUE", {"staged", "tma", "smem16"}, {0, 1, 2}, "tma, smem16 or staged",
                          &e.sm90_epilogue),
                   binary("TESSERA_GEMM_PDL", &pdl), binary("TESSERA_GEMM_ONE_TILE", &one_tile)})
    if (!s.ok() && e.gemm_error.ok()) e.gemm_error = s;
  e.gemm_pdl = pdl != 0;
  e.gemm_one_tile = one_tile != 0;
  int dynamic = 1;
  e.attn_error = choice("TESSERA_ATTN_ARCH", {"80", "90"}, {80, 90}, "80 or 90", &e.attn_arch);
  if (Status s = binary("TESSERA_ATTN_DYNAMIC", &dynamic); !s.ok() && e.attn_error.ok()) e.attn_error = s;
  e.attn_dynamic = dynamic != 0;
  e.attn_config = text("TESSERA_ATTN_CONFIG");
  e.tune_cache_set = std::getenv("TESSERA_TUNE_CACHE") != nullptr;
  e.tune_cache = text("TESSERA_TUNE_CACHE");
  e.xdg_cache_home = text("XDG_CACHE_HOME");
  e.home = text("HOME");
  return e;
}

std::mutex g_mu;
std::atomic<const Environment*> g_current{nullptr};
// Every snapshot ever taken: a caller may still hold an old one while reread() installs the next.
std::vector<std::unique_ptr<const Environment>>& snapshots() {
  static auto* all = new std::vector<std::unique_ptr<const Environment>>();  // never destroyed: usable at exit
  return *all;
}

const Environment* install(unsigned generation) {
  snapshots().push_back(std::make_unique<const Environment>(read(generation)));
  const Environment* e = snapshots().back().get();
  g_current.store(e, std::memory_order_release);
  return e;
}

}  // namespace

const Environment& environment() {
  if (const Environment* e = g_current.load(std::memory_order_acquire)) return *e;
  std::lock_guard<std::mutex> lock(g_mu);
  if (const Environment* e = g_current.load(std::memory_order_acquire)) return *e;
  return *install(0);
}

void reread_environment() {
  std::lock_guard<std::mutex> lock(g_mu);
  const Environment* old = g_current.load(std::memory_order_acquire);
  install(old ? old->generation + 1 : 1);
}

}  // namespace tessera::detail
