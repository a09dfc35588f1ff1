// Device-side helpers of the CLI (device_helpers.cu): random fill, conversion to fp32 and the
// comparison of an output against an fp32 reference. All throw CliError on a CUDA error.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "tessera/tessera.hpp"

namespace tessera_cli {

// Fills n elements with values uniform in [-1, 1) from a counter-based hash of (seed, index), so
// that the same seed gives the same data and different seeds independent data.
void fill_uniform(void* data, tessera::DType dtype, size_t n, uint64_t seed, cudaStream_t stream);

// dst[i] = float(src[i]) for i < n.
void convert_to_f32(const void* src, tessera::DType dtype, float* dst, size_t n, cudaStream_t stream);

// The logical elements of a (batched) matrix: element (i, j) of batch l lies at
// l * batch_stride + (row_major ? i * ld + j : j * ld + i).
struct MatrixView {
  int64_t rows = 0, cols = 0, ld = 0, batch = 1, batch_stride = 0;
  bool row_major = false;
};

// The fused epilogue applied to an fp32 reference laid out as `view`, in place:
// ref(l, i, j) = act(ref(l, i, j) + bias[l * bias_batch_stride + (per_row ? i : j)]), with `bias`
// (of `dtype`; null = none) and the activation computed in fp32 the way tessera defines them.
void apply_bias_activation(float* ref, const MatrixView& view, const void* bias, tessera::DType dtype, bool per_row,
                           int64_t bias_batch_stride, tessera::Activation activation, cudaStream_t stream);

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
