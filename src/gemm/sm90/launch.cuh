// Definition of the sm_90a launcher; included only by the generated instantiation files.
#pragma once
#include <cuda_runtime.h>

#include <atomic>

#include "gemm/launch_batched.hpp"
#include "gemm/sm90/config_shape.hpp"
#include "gemm/sm90/kernel.cuh"
#include "gemm/sm90/launch.hpp"

namespace tessera::gemm_impl::sm90 {

template <int Cfg, int DT, bool AKMajor, bool BKMajor>
using TraitsOf = Traits<ConfigShape<Cfg>::BM, ConfigShape<Cfg>::BN, ConfigShape<Cfg>::BK, ConfigShape<Cfg>::Stages, DT,
                        AKMajor, BKMajor>;

template <int Cfg, int DT, bool AKMajor, bool BKMajor>
cudaError_t launch(const GemmParams& p, int sm_count, cudaStream_t stream) {
  using T = TraitsOf<Cfg, DT, AKMajor, BKMajor>;
  using S = ConfigShape<Cfg>;
  static_assert(T::kSmemBytes == smem_bytes_for(S::BM, S::BN, S::BK, S::Stages), "host smem formula is stale");
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

  return launch_batched(p, [&](const GemmParams& q) {
    const KernelParams<T> kp{q, T::make_tma_a(q), T::make_tma_b(q)};
    // Persistent: at most one CTA per SM, each walking tiles blockIdx.x, + gridDim.x, ...
    const long long tiles = (long long)((q.m + T::BM - 1) / T::BM) * ((q.n + T::BN - 1) / T::BN) * q.batch;
    const unsigned grid = unsigned(tiles < sm_count ? tiles : sm_count);
    kernel<<<grid, T::kThreads, T::kSmemBytes, stream>>>(kp);
    return cudaGetLastError();
  });
}

}  // namespace tessera::gemm_impl::sm90
