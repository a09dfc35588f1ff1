// Grids hold at most 65535 batches in y; larger batch counts are launched in chunks, each with
// its operand pointers advanced by the chunk's first batch.
#pragma once
#include <cuda_runtime_api.h>

#include "gemm/kernel_params.hpp"

namespace tessera::gemm_impl {

constexpr int kMaxGridBatch = 65535;

constexpr int dtype_bytes(int dt) { return dt == kF32 || dt == kS32 ? 4 : dt == kS8 || is_fp8(dt) ? 1 : 2; }

// `ab_dtype`: A's and B's DTypeTag (their batch strides count its elements).
template <class LaunchOne>
cudaError_t launch_batched(const GemmParams& p, int ab_dtype, LaunchOne&& launch_one) {
  const int ab_bytes = dtype_bytes(ab_dtype);
  for (int first = 0; first < p.batch; first += kMaxGridBatch) {
    GemmParams q = p;
    q.batch = p.batch - first < kMaxGridBatch ? p.batch - first : kMaxGridBatch;
    const int eb = dtype_bytes(p.epi.d_dtype);
    q.a = static_cast<const char*>(p.a) + first * p.batch_stride_a * ab_bytes;
    q.b = static_cast<const char*>(p.b) + first * p.batch_stride_b * ab_bytes;
    q.epi.d = static_cast<char*>(p.epi.d) + first * p.epi.batch_stride_d * eb;
    if (p.epi.c) q.epi.c = static_cast<const char*>(p.epi.c) + first * p.epi.batch_stride_c * eb;
    if (p.epi.bias) q.epi.bias = static_cast<const char*>(p.epi.bias) + first * p.epi.batch_stride_bias * eb;
    if (cudaError_t e = launch_one(q); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace tessera::gemm_impl
