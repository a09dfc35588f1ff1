// What the CLI reports about the GPU (and uses: the L2 size decides how many input sets to rotate).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace tessera_cli {

struct DeviceInfo {
  int id = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  size_t smem_per_block_optin = 0;
  size_t l2_bytes = 0;
  size_t global_mem_bytes = 0;

  std::string cc() const { return std::to_string(cc_major) + "." + std::to_string(cc_minor); }
};

// Number of visible CUDA devices; 0 (and `why` set) when there are none or the runtime/driver
// cannot be used.
int device_count(std::string* why = nullptr);

// Properties of device `id`.
DeviceInfo query_device(int id);

// The current device, or a CliError(kExitNoDevice, "no CUDA device found ...") when there is none.
DeviceInfo require_device();

// "13.0" from 13000 (CUDA's version encoding); "none" for 0.
std::string cuda_version_string(int v);

}  // namespace tessera_cli
