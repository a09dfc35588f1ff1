// Definition of the decode family's launcher; included only by decode_d<d>.cu.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>

#include "attention/decode/decode.hpp"
#include "attention/decode/kernel.cuh"

namespace tessera::attn::decode {

// Launches `blocks` CTAs of `kernel` as one grid, or under an SM budget as grids of at most
// `max_sms` CTAs one after another (launch_kernel.cuh: no CTA waits for another). `dependent`: a
// programmatic dependent launch (the kernel waits for the previous grid itself). `cluster` > 1:
// clusters of that many consecutive CTAs (the plan never asks for them under an SM budget).
template <class... Params, class... Args>
cudaError_t launch_chunks(void (*kernel)(Params...), int64_t blocks, int threads, int smem, int max_sms, bool dependent,
                          int cluster, cudaStream_t stream, DecodeParams p, Args... args) {
  cudaLaunchAttribute attrs[2] = {};
  cudaLaunchConfig_t cfg = {};
  cfg.blockDim = dim3(threads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attrs;
  if (dependent) {
    attrs[cfg.numAttrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[cfg.numAttrs++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster > 1) {
    attrs[cfg.numAttrs].id = cudaLaunchAttributeClusterDimension;
    attrs[cfg.numAttrs++].val.clusterDim = {unsigned(cluster), 1, 1};
  }
  const int64_t chunk = max_sms > 0 ? max_sms : blocks;
  for (int64_t first = 0; first < blocks; first += chunk) {
    p.block0 = first;
    cfg.gridDim = dim3(unsigned(std::min(chunk, blocks - first)));
    if (cudaError_t e = cudaLaunchKernelEx(&cfg, kernel, p, args...); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

// One CTA shape (T: head dim, dtype, row tiles per CTA): its shared-memory limit raised once per device.
template <class T>
cudaError_t launch_decode(const DecodeParams& p, int64_t ctas, int max_sms, bool dependent_launch, cudaStream_t stream) {
  static std::atomic<unsigned long long> configured{0};  // per device: the smem limit was raised
  int dev = 0;
  if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return e;
  const unsigned long long bit = 1ull << (dev & 63);
  constexpr int kSmem = smem_bytes(T::D, T::kTiles, T::kWarps);
  if (!(configured.load(std::memory_order_acquire) & bit)) {
    if (cudaError_t e = cudaFuncSetAttribute(decode_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
        e != cudaSuccess)
      return e;
    configured.fetch_or(bit, std::memory_order_acq_rel);
  }
  // Under an SM budget the chunks stay plain launches, one after another (a dependent chunk would run
  // beside the one before it, past the budget).
  return launch_chunks(decode_kernel<T>, ctas, T::kThreads, kSmem, max_sms, dependent_launch && max_sms == 0,
                       p.cluster_combine ? p.splits : 1, stream, p);
}

template <int D, bool BF16>
cudaError_t launch(const DecodeParams& p, int64_t ctas, int max_sms, bool dependent_launch, cudaStream_t stream) {
  // The CTA shapes plan.cpp can ask for at this head dim: one tile, kTiles (tiles_per_cta), or one
  // tile of kWideWarps warps (has_wide).
  constexpr int kTiles = tiles_per_cta(D, 2);
  using Wide = Traits<D, BF16, 1, has_wide(D) ? kWideWarps : kWarps>;
  const cudaError_t e = kTiles > 1 && p.tiles_per_cta == kTiles
                            ? launch_decode<Traits<D, BF16, kTiles>>(p, ctas, max_sms, dependent_launch, stream)
                        : has_wide(D) && p.warps == kWideWarps
                            ? launch_decode<Wide>(p, ctas, max_sms, dependent_launch, stream)
                            : launch_decode<Traits<D, BF16>>(p, ctas, max_sms, dependent_launch, stream);
  if (e != cudaSuccess || p.splits == 1 || p.arrivals || p.cluster_combine) return e;
  // The combine launches while the splits run and waits for them in the kernel (one launch gap less).
  const int64_t rows = int64_t(p.a.batch) * p.a.heads_q * p.a.seqlen_q;
  return launch_chunks(combine_kernel<typename Traits<D, BF16>::Element, D>, (rows + 3) / 4, 128, 0, max_sms,
                       dependent_launch && max_sms == 0, 1, stream, p);
}

}  // namespace tessera::attn::decode
