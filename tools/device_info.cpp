#include "device_info.hpp"

#include <cuda_runtime_api.h>

#include "check.hpp"

namespace tessera_cli {

int device_count(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();  // not sticky; clear it so later calls start clean
    if (why) *why = std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
    return 0;
  }
  if (n == 0 && why) *why = "the CUDA runtime sees 0 devices";
  return n;
}

DeviceInfo query_device(int id) {
  cudaDeviceProp p{};
  CLI_CUDA_CHECK(cudaGetDeviceProperties(&p, id));
  DeviceInfo d;
  d.id = id;
  d.name = p.name;
  d.cc_major = p.major;
  d.cc_minor = p.minor;
  d.sm_count = p.multiProcessorCount;
  d.smem_per_block_optin = p.sharedMemPerBlockOptin;
  d.l2_bytes = size_t(p.l2CacheSize);
  d.global_mem_bytes = p.totalGlobalMem;
  return d;
}

DeviceInfo require_device() {
  std::string why;
  if (device_count(&why) == 0) throw CliError(kExitNoDevice, "no CUDA device found (" + why + ")");
  int id = 0;
  CLI_CUDA_CHECK(cudaGetDevice(&id));
  return query_device(id);
}

std::string cuda_version_string(int v) {
  if (v <= 0) return "none";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

}  // namespace tessera_cli
