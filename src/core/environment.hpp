// The TESSERA_* environment variables (README "Overrides"), read once per process: measurements and
// tests set them; calls read this snapshot, never getenv (which scans the whole environment and may
// race with a setenv in another thread). reread() takes a new snapshot for tests and tools.
#pragma once
#include <string>

#include "tessera/tessera.hpp"

namespace tessera::detail {

struct Environment {
  // Bumped by every reread(): memoized launch plans carry it and are dropped when it moves.
  unsigned generation = 0;

  // GEMM (gemm/api.cpp). A malformed value is kept as `gemm_error`, which every GEMM entry returns
  // (a typo is an argument error, not silently the default).
  Status gemm_error;
  std::string gemm_config;  // TESSERA_GEMM_CONFIG: a config spelling, "" = the heuristic
  static constexpr int kMaxGemmSplits = 128;  // gemm_impl::kMaxSplits (checked there)
  int gemm_splits = 0;      // TESSERA_GEMM_SPLITS=1..kMaxGemmSplits, 0 = unset
  int gemm_streamk = -1;    // TESSERA_GEMM_STREAMK=0|1, -1 = unset
  int gemm_flip = -1;       // TESSERA_GEMM_FLIP=0|1, -1 = unset
  int gemm_l2_warm = -1;    // TESSERA_GEMM_L2_WARM=0..64, -1 = unset
  int sm90_epilogue = 3;    // TESSERA_SM90_EPILOGUE=staged|tma|smem16 -> 0|1|2; 3 = unset (sm90::EpiMode)
  bool gemm_pdl = true;     // TESSERA_GEMM_PDL=0 turns programmatic dependent launch off
  bool gemm_one_tile = true;  // TESSERA_GEMM_ONE_TILE=0 keeps one-wave launches on the general kernel

  // Attention (attention/api.cpp), likewise.
  Status attn_error;
  int attn_arch = 0;        // TESSERA_ATTN_ARCH=80|90, 0 = the device's newest family
  std::string attn_config;  // TESSERA_ATTN_CONFIG: a row name of attention/configs.def, "" = default
  // TESSERA_ATTN_DYNAMIC=0: no launch-slot counters (attention/launch_slots.hpp): the sm90ws family keeps
  // its static block walks, the decode family combines its key splits in a second kernel.
  bool attn_dynamic = true;

  // Where the tuning cache file lives (gemm/tune_cache.hpp resolves them): TESSERA_TUNE_CACHE (set
  // but empty disables the cache), XDG_CACHE_HOME, HOME.
  bool tune_cache_set = false;
  std::string tune_cache, xdg_cache_home, home;
};

// The current snapshot; the first call reads the environment. Lock-free once taken.
const Environment& environment();
// A new snapshot (the old ones stay valid for callers still holding them).
void reread_environment();

}  // namespace tessera::detail
