// Facts about the current CUDA device, read once per device and cached (the heuristic needs the
// SM count; dispatch needs the compute capability and the shared-memory limit).
#pragma once
#include "tessera/tessera.hpp"

namespace tessera::detail {

// Device ordinals the library keeps per-device state for (0 .. kMaxDevices - 1).
constexpr int kMaxDevices = 64;

struct DeviceInfo {
  int device = -1;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int smem_optin = 0;  // max dynamic shared memory per block (bytes)
  int l2_bytes = 0;
  char name[256] = {};  // cudaDeviceProp::name (a fixed array: copied on every call without allocating)
};

// Fills `info` for the current device; a CUDA_ERROR status when there is none.
Status current_device(DeviceInfo* info);

}  // namespace tessera::detail
