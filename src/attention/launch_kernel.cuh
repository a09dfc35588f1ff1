// The launch both attention families share: raise the kernel's dynamic-smem limit once per device,
// then one CTA per (query block, query head, batch), in one launch, or under an SM budget in
// launches of at most `max_sms` CTAs each, one after another on the stream: the block scheduler
// puts a launch's CTAs on as many SMs as it can, so a launch no larger than the budget is what keeps
// the call within it (no CTA waits for another, so the call finishes beside kernels holding the
// other SMs).
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>

#include "attention/params.hpp"

namespace tessera::attn {

// The AttnParams inside a kernel's parameters: themselves, or a struct's `p` beside its TMA descriptors.
inline AttnParams& attn_params_of(AttnParams& p) { return p; }
template <class KernelParams>
AttnParams& attn_params_of(KernelParams& kp) {
  return kp.p;
}

// kernel: the configuration's __global__ function; block_m: its query rows per CTA; params: what it
// takes (AttnParams, or a struct holding them as `p`). persistent: the kernel walks the blocks
// itself (block, block + gridDim.x, ...): one launch of at most one CTA per SM (or per budgeted SM).
template <class Kernel, class Params>
cudaError_t launch_kernel(Kernel* kernel, int block_m, int threads, int smem_bytes, std::atomic<unsigned long long>& configured,
                          const Params& params, int max_sms, cudaStream_t stream, bool persistent = false) {
  int dev = 0;
  if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
  const unsigned long long bit = 1ull << (dev & 63);
  if (!(configured.load(std::memory_order_acquire) & bit)) {
    if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
        e != cudaSuccess)
      return e;
    configured.fetch_or(bit, std::memory_order_acq_rel);
  }
  Params kp = params;
  AttnParams& p = attn_params_of(kp);
  // Variable-length batches: query blocks of the longest sequence for every one (the CTAs past a
  // shorter sequence's end return at once); none at all when max_seqlen_q is 0.
  p.m_blocks = (planned_rows(p) + block_m - 1) / block_m;
  p.by_m_blocks = FastDiv(p.m_blocks);
  p.by_group = FastDiv(p.heads_kv > 0 ? p.heads_q / p.heads_kv : 1);
  const long long blocks = (long long)p.m_blocks * p.heads_q * p.batch;  // < 2^31 (validate)
  if (persistent) {
    int sms = 0;
    if (cudaError_t e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev); e != cudaSuccess) return e;
    const long long ctas = std::min<long long>(blocks, max_sms > 0 ? std::min(max_sms, sms) : sms);
    p.block0 = 0;
    if (ctas > 0) kernel<<<unsigned(ctas), threads, smem_bytes, stream>>>(kp);
    return cudaGetLastError();
  }
  const long long chunk = max_sms > 0 ? max_sms : blocks;
  for (long long first = 0; first < blocks; first += chunk) {
    p.block0 = int(first);
    kernel<<<unsigned(std::min(chunk, blocks - first)), threads, smem_bytes, stream>>>(kp);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace tessera::attn
