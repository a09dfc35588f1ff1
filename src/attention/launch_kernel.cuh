// The launch both attention families share: raise the kernel's dynamic-smem limit once per device,
// then one CTA per (query block, query head, batch).
#pragma once
#include <cuda_runtime.h>

#include <atomic>

#include "attention/params.hpp"

namespace tessera::attn {

// kernel: the configuration's __global__ function; block_m: its query rows per CTA.
template <class Kernel>
cudaError_t launch_kernel(Kernel* kernel, int block_m, int threads, int smem_bytes, std::atomic<unsigned long long>& configured,
                          const AttnParams& p, cudaStream_t stream) {
  int dev = 0;
  if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
  const unsigned long long bit = 1ull << (dev & 63);
  if (!(configured.load(std::memory_order_acquire) & bit)) {
    if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
        e != cudaSuccess)
      return e;
    configured.fetch_or(bit, std::memory_order_acq_rel);
  }
  const dim3 grid(unsigned((p.seqlen_q + block_m - 1) / block_m), unsigned(p.heads_q), unsigned(p.batch));
  kernel<<<grid, threads, smem_bytes, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace tessera::attn
