// Kernels without CuTe for the cases the tensor-core kernels do not take directly:
//  - pad_operand: copies an unaligned operand into the workspace with its contiguous extent
//    padded (with zeros) to a multiple of 8 elements, so the fast kernels can read it;
//  - simt: a CUDA-core GEMM with element-wise loads for any alignment, used when the caller
//    gave too little workspace for the padded copies.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "gemm/kernel_params.hpp"

namespace tessera::gemm_impl::fallback {

// dst (outer x padded_ld per batch, batch stride outer * padded_ld) <- src (outer x contiguous
// with stride ld, batch stride src_batch_stride), zero in columns [contiguous, padded_ld).
cudaError_t pad_operand(const void* src, int64_t ld, int64_t src_batch_stride, int64_t outer, int64_t contiguous,
                        void* dst, int64_t padded_ld, int64_t batches, cudaStream_t stream);

// Canonical GEMM with general operand majors.
cudaError_t simt(int ab_dtype, bool a_k_major, bool b_k_major, const GemmParams& p, cudaStream_t stream);

}  // namespace tessera::gemm_impl::fallback
