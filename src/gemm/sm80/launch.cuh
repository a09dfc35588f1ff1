// Definition of the sm_80 launcher; included only by the generated instantiation files.
#pragma once
#include <cuda_runtime.h>

#include <atomic>

#include "gemm/sm80/config_shape.hpp"
#include "gemm/sm80/kernel.cuh"
#include "gemm/sm80/launch.hpp"
#include "gemm/launch_batched.hpp"

namespace tessera::gemm_impl::sm80 {

template <int Cfg, int DT, bool AKMajor, bool BKMajor>
cudaError_t launch(const GemmParams& p, cudaStream_t stream) {
  using S = ConfigShape<Cfg>;
  using T = Traits<S::BM, S::BN, S::BK, S::Stages, S::WarpsM, S::WarpsN, DT, AKMajor, BKMajor>;
  auto* kernel = &gemm_kernel<T>;

  // Raise the dynamic shared-memory limit once per device (it is a per-context attribute).
  static std::atomic<unsigned long long> configured{0};
  int dev = 0;
  if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
  const unsigned long long bit = 1ull << (dev & 63);
  if (!(configured.load(std::memory_order_acquire) & bit)) {
    if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, T::kSmemBytes);
        e != cudaSuccess)
      return e;
    configured.fetch_or(bit, std::memory_order_acq_rel);
  }

  const long long tiles = (long long)((p.m + S::BM - 1) / S::BM) * ((p.n + S::BN - 1) / S::BN);
  return launch_batched(p, DT, [&](const GemmParams& q) {
    kernel<<<dim3(unsigned(tiles), unsigned(q.batch)), T::kThreads, T::kSmemBytes, stream>>>(q);
    return cudaGetLastError();
  });
}

}  // namespace tessera::gemm_impl::sm80
