// Host side of the skinny GEMM (kernel.cuh): a canonical problem with a side of at most kMaxRows
// (the tokens of a decode step) and both operands K-major and 16-byte aligned.
#pragma once
#include <cuda_runtime_api.h>

#include "gemm/kernel_params.hpp"

namespace tessera::gemm_impl::skinny {

constexpr int kMaxRows = 64;  // 4 m16 tiles of X
constexpr int kWarps = 8;     // per CTA, splitting K (256 threads: two or three CTAs per SM)

// Runs D = A B^T for `p` (A/B dtype `ab_dtype`, both K-major), the smaller of M and N <= kMaxRows;
// `dependent_launch`: a programmatic dependent launch (cc 9.x only: the kernel waits for the previous
// grid only where compiled for sm_90).
cudaError_t run(int ab_dtype, const GemmParams& p, bool dependent_launch, cudaStream_t stream);

}  // namespace tessera::gemm_impl::skinny
