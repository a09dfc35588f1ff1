#include "core/device.hpp"

#include <cuda.h>  // CUcontext, for cuCtxGetCurrent through the runtime's driver entry point
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>

#include "core/status.hpp"

namespace tessera::detail {
namespace {

// One slot per device ordinal, filled once and never changed: readers take no lock.
std::atomic<const DeviceInfo*> g_devices[kMaxDevices];

Status read_device(int dev, DeviceInfo* d) {
  d->device = dev;
  cudaError_t e = cudaSuccess;
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&d->cc_major, cudaDevAttrComputeCapabilityMajor, dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&d->cc_minor, cudaDevAttrComputeCapabilityMinor, dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&d->sm_count, cudaDevAttrMultiProcessorCount, dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&d->smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&d->l2_bytes, cudaDevAttrL2CacheSize, dev);
  if (e == cudaSuccess) {  // the name keys the tuning cache
    cudaDeviceProp prop{};
    e = cudaGetDeviceProperties(&prop, dev);
    if (e == cudaSuccess) std::snprintf(d->name, sizeof(d->name), "%s", prop.name);
  }
  if (e != cudaSuccess)
    return fail(TESSERA_STATUS_CUDA_ERROR, std::string("reading device attributes: ") + cudaGetErrorString(e));
  return Status::success();
}

// The runtime makes its primary context current in a host thread at the first call that needs one,
// but the driver calls the launchers make (cuTensorMapEncodeTiled for the TMA descriptors) need it
// current already: in a thread whose first CUDA call was a tessera GEMM they failed with
// CUDA_ERROR_INVALID_CONTEXT and the kernel ran on garbage descriptors. Once per thread and
// device: if no context is current, make the device's primary context current (cudaSetDevice);
// a context the caller made current (driver API) is left alone.
bool bind_context(int dev) {
  thread_local unsigned long long bound = 0;  // a bit per device ordinal
  if (bound >> dev & 1) return true;
  using GetCurrent = CUresult (*)(CUcontext*);
  static const GetCurrent get_current = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
#if CUDART_VERSION >= 12050
    const cudaError_t e = cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &fn, 4000, cudaEnableDefault, &found);
#else
    const cudaError_t e = cudaGetDriverEntryPoint("cuCtxGetCurrent", &fn, cudaEnableDefault, &found);
#endif
    return e == cudaSuccess && found == cudaDriverEntryPointSuccess ? reinterpret_cast<GetCurrent>(fn) : nullptr;
  }();
  CUcontext ctx = nullptr;
  if (!get_current || get_current(&ctx) != CUDA_SUCCESS || ctx == nullptr)
    if (cudaSetDevice(dev) != cudaSuccess) return false;
  bound |= 1ull << dev;
  return true;
}

}  // namespace

Status current_device(DeviceInfo* info) {
  int dev = -1;
  if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return fail(TESSERA_STATUS_CUDA_ERROR, std::string("no usable CUDA device: ") + cudaGetErrorString(e));
  }
  if (dev < 0 || dev >= kMaxDevices)
    return fail(TESSERA_STATUS_NOT_SUPPORTED, "device " + std::to_string(dev) + ": tessera handles ordinals below " +
                                                  std::to_string(kMaxDevices));
  if (!bind_context(dev)) {
    const cudaError_t e = cudaGetLastError();
    return fail(TESSERA_STATUS_CUDA_ERROR, std::string("making device ") + std::to_string(dev) +
                                               "'s context current: " + cudaGetErrorString(e));
  }
  if (const DeviceInfo* d = g_devices[dev].load(std::memory_order_acquire)) {
    *info = *d;
    return Status::success();
  }
  static std::mutex mu;  // the first call per device reads the attributes
  std::lock_guard<std::mutex> lock(mu);
  if (const DeviceInfo* d = g_devices[dev].load(std::memory_order_acquire)) {
    *info = *d;
    return Status::success();
  }
  auto* d = new DeviceInfo;  // never freed: readers may hold it until exit
  if (Status s = read_device(dev, d); !s.ok()) {
    delete d;
    return s;
  }
  g_devices[dev].store(d, std::memory_order_release);
  *info = *d;
  return Status::success();
}

}  // namespace tessera::detail
