// The GEMM configuration table and the heuristic: one place for every tile choice.
#pragma once
#include <string>
#include <vector>

namespace tessera::gemm_impl {

enum class Kernel { Sm80, Fallback };

struct Config {
  int id;               // index in configs.def (sm80); -1 for the fallback
  Kernel kernel;
  const char* name;
  int bm, bn, bk, stages, warps;
  int smem_bytes;       // dynamic shared memory per CTA
  int min_cc;           // compute capability x10
  const char* reason;
};

const std::vector<Config>& configs();
const Config* find_config(const std::string& name);
std::string config_names();  // comma-separated, for error messages
const Config& fallback_config();

// Problem facts the heuristic looks at (host-only, so the CPU tests can drive it).
struct HeuristicInput {
  long long m, n, k, batch;
  int sm_count;
  int cc;          // e.g. 90
  int smem_optin;  // bytes
};

// The sm80 configuration for a problem: the largest tile that still gives every SM at least one
// CTA, among those whose shared memory fits the device.
const Config& select_config(const HeuristicInput& in);

}  // namespace tessera::gemm_impl
