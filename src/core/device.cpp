#include "core/device.hpp"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.hpp"

namespace tessera::detail {

Status current_device(DeviceInfo* info) {
  static std::mutex mu;
  static std::vector<DeviceInfo> cache;
  int dev = -1;
  if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return fail(TESSERA_STATUS_CUDA_ERROR, std::string("no usable CUDA device: ") + cudaGetErrorString(e));
  }
  std::lock_guard<std::mutex> lock(mu);
  for (const DeviceInfo& d : cache)
    if (d.device == dev) {
      *info = d;
      return Status::success();
    }
  DeviceInfo d;
  d.device = dev;
  cudaError_t e = cudaSuccess;
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&d.cc_major, cudaDevAttrComputeCapabilityMajor, dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&d.cc_minor, cudaDevAttrComputeCapabilityMinor, dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&d.sm_count, cudaDevAttrMultiProcessorCount, dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&d.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&d.l2_bytes, cudaDevAttrL2CacheSize, dev);
  if (e == cudaSuccess) {  // the name keys the tuning cache; read once per device
    cudaDeviceProp prop{};
    e = cudaGetDeviceProperties(&prop, dev);
    if (e == cudaSuccess) std::snprintf(d.name, sizeof(d.name), "%s", prop.name);
  }
  if (e != cudaSuccess)
    return fail(TESSERA_STATUS_CUDA_ERROR, std::string("reading device attributes: ") + cudaGetErrorString(e));
  cache.push_back(d);
  *info = d;
  return Status::success();
}

}  // namespace tessera::detail
