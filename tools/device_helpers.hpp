// Device-side helpers of the CLI (device_helpers.cu): random fill, conversion to fp32 and the
// comparison of an output against an fp32 reference. All throw CliError on a CUDA error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "tessera/tessera.hpp"

namespace tessera_cli {

// Fills n elements with values uniform in [-1, 1) from a counter-based hash of (seed, index), so
// that the same seed gives the same data and different seeds independent data. S8: uniform integers
// in [-128, 127]. E4M3 / E5M2: values uniform in [-4, 4) rounded to the fp8 type (so each element is
// exactly the value the GEMM reads; finite).
void fill_uniform(void* data, tessera::DType dtype, size_t n, uint64_t seed, cudaStream_t stream);

// Fills n fp32 values uniform in [lo, hi) (the int8 scales: lo > 0), from the same hash.
void fill_uniform_range(float* data, size_t n, float lo, float hi, uint64_t seed, cudaStream_t stream);

// dst[i] = float(src[i]) for i < n (f16, bf16, f32, and fp8 exactly).
void convert_to_f32(const void* src, tessera::DType dtype, float* dst, size_t n, cudaStream_t stream);

// The logical elements of a (batched) matrix: element (i, j) of batch l lies at
// l * batch_stride + (row_major ? i * ld + j : j * ld + i).
struct MatrixView {
  int64_t rows = 0, cols = 0, ld = 0, batch = 1, batch_stride = 0;
  bool row_major = false;
};

// Block scales of a stored operand (ScaleMode::Block): element (r, c) of the stored matrix takes
// ptr[(r / row_block) * row_stride + (c / col_block) * col_stride].
struct BlockScales {
  const float* ptr = nullptr;
  int64_t row_stride = 0, col_stride = 0;
  int64_t row_block = 1, col_block = 1;
};

// The logical elements of the fp8 operand `src` laid out as `view` (a broadcast operand: batch 1),
// widened to fp32 and multiplied by their block scale (one fp32 rounding), written at the same offsets
// of `dst` (sized like src; the elements outside the view are left as they are).
void convert_block_scaled_to_f32(const void* src, tessera::DType dtype, const MatrixView& view,
                                 const BlockScales& scales, float* dst, cudaStream_t stream);

// The fused epilogue applied to an fp32 reference laid out as `view`, in place:
// ref(l, i, j) = act(ref(l, i, j) + bias[l * bias_batch_stride + (per_row ? i : j)]), with `bias`
// (of `dtype`; null = none) and the activation computed in fp32 the way tessera defines them.
void apply_bias_activation(float* ref, const MatrixView& view, const void* bias, tessera::DType dtype, bool per_row,
                           int64_t bias_batch_stride, tessera::Activation activation, cudaStream_t stream);

// ---- int8 operands -------------------------------------------------------------------------------

// An int8 operand as rows x K: element (r, k) of batch l at ptr + l * batch_stride + r * stride_r +
// k * stride_k. op(A) is M x K (r = i); op(B) is passed as its transpose, N x K (r = j). (fp8 operands,
// also one byte an element, use it for their K-major copies: copy_int8_k_major moves bytes.)
struct Int8Operand {
  const int8_t* ptr = nullptr;
  int64_t stride_r = 0, stride_k = 0, batch_stride = 0;
};

// The exact sums sum_k op(A)(i, k) op(B)(k, j) of every output, in int64 (no overflow at any K the
// library takes), written laid out as `view` (D's layout; sums has room for D's elements).
void int8_reference_sums(const Int8Operand& a, const Int8Operand& b, int64_t k, const MatrixView& view,
                         int64_t* sums, cudaStream_t stream);

// The dequantised reference before bias and activation, laid out as `view`:
// ref = float(alpha * scale_a[i * step] * scale_b[j * step] * sum + beta * C) in fp64, with step 1
// for row-wise scales and 0 for one value each; null scales count as 1, a null `c` as none (C has
// `c_dtype` and D's layout).
void dequantised_reference(const int64_t* sums, const MatrixView& view, float alpha, const float* scale_a,
                           const float* scale_b, bool row_wise, float beta, const void* c, tessera::DType c_dtype,
                           float* ref, cudaStream_t stream);
// The same from fp32 sums (fp8 operands: cuBLASLt's fp32 GEMM of the operands widened to fp32, whose
// products are exact); `sums` may be `ref` (in place).
void dequantised_reference(const float* sums, const MatrixView& view, float alpha, const float* scale_a,
                           const float* scale_b, bool row_wise, float beta, const void* c, tessera::DType c_dtype,
                           float* ref, cudaStream_t stream);

struct ExactCompare {
  uint64_t mismatches = 0;  // outputs that differ from the int64 reference (an unwritten one included)
  double err_sq = 0;        // sum of (out - ref)^2
  double ref_sq = 0;        // sum of ref^2
  // The first mismatch in (batch, row, column) order, or -1s (for the message).
  int64_t first_batch = -1, first_row = -1, first_col = -1;
  int64_t first_out = 0, first_ref = 0;
};

// An int32 output against the int64 reference, both laid out as `view`, exactly. Synchronises.
ExactCompare compare_exact_s32(const int32_t* out, const int64_t* ref, const MatrixView& view, cudaStream_t stream);

// dst (rows x dst_k per batch, K-major with leading dimension dst_ld >= dst_k, batch stride
// dst_batch_stride) = the operand `src` (Int8Operand layout, rows x k), zero past k (dst_k >= k), for
// `batches` batches: the K-major copies cuBLASLt's int8 kernels need (both operands K-major, "TN",
// and K a multiple of 4).
void copy_int8_k_major(const Int8Operand& src, int64_t rows, int64_t k, int64_t batches, int8_t* dst, int64_t dst_k,
                       int64_t dst_ld, int64_t dst_batch_stride, cudaStream_t stream);

struct CompareSums {
  double err_sq = 0;           // sum over finite outputs of (out - ref)^2
  double ref_sq = 0;           // sum of ref^2
  uint64_t nonfinite = 0;      // outputs that are NaN or Inf (left out of err_sq)
};

// Compares `out` (of `dtype`) with the fp32 `ref`, both laid out as `view`, accumulating in fp64.
// Synchronises `stream`.
CompareSums compare_to_reference(const void* out, tessera::DType dtype, const float* ref, const MatrixView& view,
                                 cudaStream_t stream);

}  // namespace tessera_cli
