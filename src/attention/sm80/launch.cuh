// Definition of the sm_80 attention launcher; included only by the generated instantiations.
#pragma once
#include <cuda_runtime.h>

#include <atomic>

#include "attention/sm80/config_shape.hpp"
#include "attention/sm80/kernel.cuh"
#include "attention/sm80/launch.hpp"

namespace tessera::attn::sm80 {

template <int Cfg, bool BF16, bool Causal>
cudaError_t launch(const AttnParams& p, cudaStream_t stream) {
  using S = ConfigShape<Cfg>;
  using T = Traits<S::D, S::BM, S::BN, S::Warps, BF16, Causal>;
  auto* kernel = &attention_kernel<T>;
  static std::atomic<unsigned long long> configured{0};  // per device: raise the smem limit once
  int dev = 0;
  if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
  const unsigned long long bit = 1ull << (dev & 63);
  if (!(configured.load(std::memory_order_acquire) & bit)) {
    if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, T::kSmemBytes);
        e != cudaSuccess)
      return e;
    configured.fetch_or(bit, std::memory_order_acq_rel);
  }
  const dim3 grid(unsigned((p.seqlen_q + S::BM - 1) / S::BM), unsigned(p.heads_q), unsigned(p.batch));
  kernel<<<grid, T::kThreads, T::kSmemBytes, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace tessera::attn::sm80
