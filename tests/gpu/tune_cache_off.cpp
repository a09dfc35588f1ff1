// The GPU tests compare gemm_select_config with the heuristic, so a tuning cache left by
// `tessera tune` in the user's ~/.cache must not change their choices: the cache is turned off for
// this binary before main() (the library reads TESSERA_TUNE_CACHE at its first GEMM).
#include <cstdlib>

namespace {

[[maybe_unused]] const bool kTuneCacheOff = [] { return ::setenv("TESSERA_TUNE_CACHE", "", 1) == 0; }();

}  // namespace
