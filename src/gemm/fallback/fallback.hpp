// Kernels without CuTe for the cases the tensor-core kernels do not take directly:
//  - pad_operand: copies an unaligned operand into the workspace with its contiguous extent
//    padded (with zeros) to a multiple of 8 elements, so the fast kernels can read it;
//  - prepare_f32 / prepare_8bit: copy an fp32 (for 3xTF32 split) or 8-bit (s8, fp8) operand K-major
//    into the workspace;
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

// fp32 operand (rows x k per batch, K-major or MN-major with stride ld) -> K-major dst of rows x
// (segments x padded_k) per batch, zeros past k in each range; split: gemm/plan.hpp SplitPattern
// (0: a plain copy; 3xTF32: tf32 high and low parts in three K ranges).
cudaError_t prepare_f32(const float* src, int64_t ld, int64_t src_batch_stride, bool k_major, int64_t rows, int64_t k,
                        float* dst, int64_t padded_k, int split, int64_t batches, cudaStream_t stream);

// s8 or fp8 operand (bytes) -> K-major dst of rows x padded_k per batch, zeros past k.
cudaError_t prepare_8bit(const int8_t* src, int64_t ld, int64_t src_batch_stride, bool k_major, int64_t rows, int64_t k,
                       int8_t* dst, int64_t padded_k, int64_t batches, cudaStream_t stream);

// Canonical GEMM with general operand majors (f16, bf16, or f32 in plain fp32 FMA; s8 in int32; fp8 in fp32).
cudaError_t simt(int ab_dtype, bool a_k_major, bool b_k_major, const GemmParams& p, cudaStream_t stream);

}  // namespace tessera::gemm_impl::fallback
