// The GEMM configuration table and the heuristic: one place for every tile choice.
#pragma once
#include <string>
#include <vector>

namespace tessera::gemm_impl {

enum class Kernel { Sm80, Sm90, Fallback };

struct Config {
  int id;               // id in sm80/configs.def or sm90/configs.def; -1 for the fallback
  Kernel kernel;
  const char* name;
  int bm, bn, bk, stages, warps;
  int smem_bytes;       // dynamic shared memory per CTA
  int min_cc;           // compute capability x10
  int max_cc;           // inclusive; sm_90a code runs on exactly cc 9.0
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
  // Both operands meet TMA's rules (after padding, if the caller gives the workspace) and K > 0:
  // then an sm_90 device takes the TMA/WGMMA kernels.
  bool tma_ok = false;
};

// The configuration for a problem: on an sm_90 device with TMA-ready operands the sm90 family,
// else the sm80 family; within the family the largest tile that still gives every SM at least one
// CTA, among those whose shared memory fits the device.
const Config& select_config(const HeuristicInput& in);

}  // namespace tessera::gemm_impl
