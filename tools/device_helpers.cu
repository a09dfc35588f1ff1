// Device helpers of the CLI: random fill, conversion to fp32, and the output/reference comparison.
// Kept to simple grid-stride kernels: they run once per buffer, outside any timed region.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cub/block/block_reduce.cuh>
#include <type_traits>

#include "check.hpp"
#include "cuda_raii.hpp"
#include "device_helpers.hpp"

namespace tessera_cli {
namespace {

constexpr int kThreads = 256;
constexpr size_t kMaxBlocks = 8192;  // enough to fill any GPU; the loops cover the rest

unsigned blocks_for(size_t n) { return unsigned(std::min((n + kThreads - 1) / kThreads, kMaxBlocks)); }

__device__ __forceinline__ size_t first_index() { return size_t(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ __forceinline__ size_t grid_stride() { return size_t(gridDim.x) * blockDim.x; }

// Logical element i of a MatrixView (batch, then the contiguous mode fastest, so that loads coalesce):
// its batch, row, column and offset.
struct ViewElement {
  int64_t l, row, col, off;
};
__host__ __device__ __forceinline__ size_t view_elements(const MatrixView& v) {
  return size_t(v.rows) * size_t(v.cols) * size_t(v.batch);
}
__device__ __forceinline__ ViewElement view_element(const MatrixView& v, size_t i) {
  const int64_t inner = v.row_major ? v.cols : v.rows, per_batch = v.rows * v.cols;
  const int64_t l = int64_t(i) / per_batch, rem = int64_t(i) - l * per_batch;
  const int64_t o = rem / inner, in = rem - o * inner;
  return ViewElement{l, v.row_major ? o : in, v.row_major ? in : o, l * v.batch_stride + o * v.ld + in};
}

__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_fp8_e4m3 x) { return float(x); }
__device__ __forceinline__ float to_float(__nv_fp8_e5m2 x) { return float(x); }

template <class T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <>
__device__ __forceinline__ float from_float<float>(float x) { return x; }

// SplitMix64 finaliser: a good 64-bit mix, cheap enough to hash every element's index.
__device__ __forceinline__ uint64_t mix64(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

template <class T>
__global__ void fill_uniform_kernel(T* data, size_t n, uint64_t seed) {
  for (size_t i = first_index(); i < n; i += grid_stride()) {
    const uint64_t h = mix64(seed + 0x9E3779B97F4A7C15ull * (i + 1));
    const float u = float(h >> 40) * 0x1.0p-24f;  // 24 random bits -> [0, 1)
    data[i] = from_float<T>(2.0f * u - 1.0f);
  }
}

// Integers uniform in [-128, 127]: the hash's top byte.
__global__ void fill_s8_kernel(int8_t* data, size_t n, uint64_t seed) {
  for (size_t i = first_index(); i < n; i += grid_stride())
    data[i] = int8_t(uint8_t(mix64(seed + 0x9E3779B97F4A7C15ull * (i + 1)) >> 56));
}

// fp8 operands: values uniform in [-kFp8Range, kFp8Range) rounded to the fp8 type (to nearest, finite),
// so that every stored byte is a value the type holds exactly; never NaN or Inf.
constexpr float kFp8Range = 4.0f;
template <class T>
__global__ void fill_fp8_kernel(T* data, size_t n, uint64_t seed) {
  for (size_t i = first_index(); i < n; i += grid_stride()) {
    const float u = float(mix64(seed + 0x9E3779B97F4A7C15ull * (i + 1)) >> 40) * 0x1.0p-24f;  // [0, 1)
    data[i] = T(kFp8Range * (2.0f * u - 1.0f));  // the __nv_fp8 constructor: round to nearest, saturate
  }
}

__global__ void fill_range_kernel(float* data, size_t n, float lo, float hi, uint64_t seed) {
  for (size_t i = first_index(); i < n; i += grid_stride()) {
    const float u = float(mix64(seed + 0x9E3779B97F4A7C15ull * (i + 1)) >> 40) * 0x1.0p-24f;  // [0, 1)
    data[i] = lo + (hi - lo) * u;
  }
}

template <class T>
__global__ void convert_kernel(const T* src, float* dst, size_t n) {
  for (size_t i = first_index(); i < n; i += grid_stride()) dst[i] = to_float(src[i]);
}

// The logical elements of `v` widened and multiplied by their block scale (fp32 product of an exact fp8
// value), written at the same offsets.
template <class T>
__global__ void convert_block_scaled_kernel(const T* src, MatrixView v, BlockScales s, float* dst) {
  for (size_t i = first_index(); i < view_elements(v); i += grid_stride()) {
    const ViewElement e = view_element(v, i);
    dst[e.off] = to_float(src[e.off]) * s.ptr[e.row / s.row_block * s.row_stride + e.col / s.col_block * s.col_stride];
  }
}

// The reference activations, in fp32 with the accurate library functions (tessera's kernels may
// use faster approximations; the tolerance covers the difference).
__device__ __forceinline__ float reference_activation(tessera::Activation act, float x) {
  switch (act) {
    case tessera::Activation::Relu: return fmaxf(x, 0.0f);
    case tessera::Activation::Gelu: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case tessera::Activation::GeluTanh:
      return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    case tessera::Activation::Silu: return x / (1.0f + expf(-x));
    case tessera::Activation::None: break;
  }
  return x;
}

template <class T>
__global__ void bias_activation_kernel(float* ref, MatrixView v, const T* bias, bool per_row, int64_t bias_stride,
                                       tessera::Activation act) {
  for (size_t i = first_index(); i < view_elements(v); i += grid_stride()) {
    const ViewElement e = view_element(v, i);
    float x = ref[e.off];
    if (bias) x += to_float(bias[e.l * bias_stride + (per_row ? e.row : e.col)]);
    ref[e.off] = reference_activation(act, x);
  }
}

struct Accumulators {
  double err_sq;
  double ref_sq;
  unsigned long long nonfinite;
};

template <class T>
__global__ void compare_kernel(const T* out, const float* ref, MatrixView v, Accumulators* acc) {
  double err_sq = 0, ref_sq = 0;
  unsigned long long nonfinite = 0;
  for (size_t i = first_index(); i < view_elements(v); i += grid_stride()) {
    const int64_t off = view_element(v, i).off;
    const float x = to_float(out[off]), r = ref[off];
    ref_sq += double(r) * r;
    if (!isfinite(x)) {
      ++nonfinite;
      continue;
    }
    const double diff = double(x) - double(r);
    err_sq += diff * diff;
  }
  using Reduce = cub::BlockReduce<double, kThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  const double block_err = Reduce(tmp).Sum(err_sq);
  __syncthreads();  // tmp is reused
  const double block_ref = Reduce(tmp).Sum(ref_sq);
  if (threadIdx.x == 0) {
    atomicAdd(&acc->err_sq, block_err);
    atomicAdd(&acc->ref_sq, block_ref);
  }
  if (nonfinite) atomicAdd(&acc->nonfinite, nonfinite);  // rare: only a broken output has any
}

// ---- int8 ----------------------------------------------------------------------------------------

// The reference sums: a 64 x 64 output tile per CTA of 16 x 16 threads (4 x 4 outputs each), K in
// steps of 32 through shared memory as int32. A step's products sum exactly in int32 (at most
// 32 * 2^14), the steps in int64. Operands are read with whichever of their modes is contiguous
// fastest, so that the loads coalesce.
constexpr int kRefTile = 64, kRefK = 32, kRefThreads = 256;

__device__ __forceinline__ int64_t view_offset(const MatrixView& v, int64_t l, int64_t i, int64_t j) {
  return l * v.batch_stride + (v.row_major ? i * v.ld + j : j * v.ld + i);
}

__global__ void __launch_bounds__(kRefThreads)
    int8_sums_kernel(Int8Operand a, Int8Operand b, int64_t k, MatrixView v, int64_t batch0, int64_t* sums) {
  __shared__ int sa[kRefK][kRefTile + 1];  // [k][row]; +1: the k-fastest stores spread over banks
  __shared__ int sb[kRefK][kRefTile + 1];
  const int64_t l = batch0 + blockIdx.z;
  const int64_t i0 = int64_t(blockIdx.y) * kRefTile, j0 = int64_t(blockIdx.x) * kRefTile;
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int8_t* pa = a.ptr + l * a.batch_stride;
  const int8_t* pb = b.ptr + l * b.batch_stride;
  const bool a_k_fast = a.stride_k == 1, b_k_fast = b.stride_k == 1;
  long long acc[4][4] = {};
  for (int64_t k0 = 0; k0 < k; k0 += kRefK) {
    for (int e = threadIdx.x; e < kRefTile * kRefK; e += kRefThreads) {
      int r = a_k_fast ? e / kRefK : e % kRefTile, kk = a_k_fast ? e % kRefK : e / kRefTile;
      int64_t gr = i0 + r, gk = k0 + kk;
      sa[kk][r] = gr < v.rows && gk < k ? int(pa[gr * a.stride_r + gk * a.stride_k]) : 0;
      r = b_k_fast ? e / kRefK : e % kRefTile, kk = b_k_fast ? e % kRefK : e / kRefTile;
      gr = j0 + r, gk = k0 + kk;
      sb[kk][r] = gr < v.cols && gk < k ? int(pb[gr * b.stride_r + gk * b.stride_k]) : 0;
    }
    __syncthreads();
    int part[4][4] = {};
#pragma unroll 4
    for (int kk = 0; kk < kRefK; ++kk) {
      int av[4], bv[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) av[q] = sa[kk][ty + 16 * q], bv[q] = sb[kk][tx + 16 * q];
#pragma unroll
      for (int q = 0; q < 4; ++q)
#pragma unroll
        for (int p = 0; p < 4; ++p) part[q][p] += av[q] * bv[p];
    }
#pragma unroll
    for (int q = 0; q < 4; ++q)
#pragma unroll
      for (int p = 0; p < 4; ++p) acc[q][p] += part[q][p];
    __syncthreads();
  }
#pragma unroll
  for (int q = 0; q < 4; ++q)
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      const int64_t i = i0 + ty + 16 * q, j = j0 + tx + 16 * p;
      if (i < v.rows && j < v.cols) sums[view_offset(v, l, i, j)] = acc[q][p];
    }
}

// S: int64_t (int8's exact sums) or float (fp8's fp32 sums; `sums` may be `ref`: each element is read
// before it is written, by the same thread).
template <class S, class T>
__global__ void dequantise_kernel(const S* sums, MatrixView v, float alpha, const float* scale_a,
                                  const float* scale_b, int step, float beta, const T* c, float* ref) {
  for (size_t idx = first_index(); idx < view_elements(v); idx += grid_stride()) {
    const ViewElement e = view_element(v, idx);
    double x = double(alpha) * double(sums[e.off]);
    if (scale_a) x *= double(scale_a[e.row * step]);
    if (scale_b) x *= double(scale_b[e.col * step]);
    if (c) x += double(beta) * double(to_float(c[e.off]));
    ref[e.off] = float(x);
  }
}

struct ExactAccumulators {
  double err_sq;
  double ref_sq;
  unsigned long long mismatches;
  unsigned long long first;  // smallest logical index (batch, then row, then column) of a mismatch
};

__global__ void compare_exact_kernel(const int32_t* out, const int64_t* ref, MatrixView v, ExactAccumulators* acc) {
  double err_sq = 0, ref_sq = 0;
  unsigned long long mismatches = 0, first = ~0ull;
  for (size_t idx = first_index(); idx < view_elements(v); idx += grid_stride()) {
    const ViewElement e = view_element(v, idx);
    const int64_t x = out[e.off], r = ref[e.off];
    ref_sq += double(r) * double(r);
    if (x != r) {
      const double diff = double(x) - double(r);
      err_sq += diff * diff;
      ++mismatches;
      first = min(first, (unsigned long long)(e.l * v.rows * v.cols + e.row * v.cols + e.col));
    }
  }
  using Reduce = cub::BlockReduce<double, kThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  const double block_err = Reduce(tmp).Sum(err_sq);
  __syncthreads();
  const double block_ref = Reduce(tmp).Sum(ref_sq);
  if (threadIdx.x == 0) {
    atomicAdd(&acc->err_sq, block_err);
    atomicAdd(&acc->ref_sq, block_ref);
  }
  if (mismatches) {
    atomicAdd(&acc->mismatches, mismatches);
    atomicMin(&acc->first, first);
  }
}

__global__ void copy_k_major_kernel(Int8Operand src, int64_t rows, int64_t k, int64_t batches, int8_t* dst,
                                    int64_t dst_k, int64_t dst_ld, int64_t dst_batch_stride) {
  // Walk the source's contiguous mode fastest (the reads coalesce; the copy runs once, untimed).
  const bool k_fast = src.stride_k == 1;
  const int64_t inner = k_fast ? dst_k : rows, outer = k_fast ? rows : dst_k;
  const size_t total = size_t(inner) * size_t(outer) * size_t(batches);
  for (size_t idx = first_index(); idx < total; idx += grid_stride()) {
    const int64_t l = int64_t(idx) / (inner * outer), rem = int64_t(idx) - l * inner * outer;
    const int64_t o = rem / inner, in = rem - o * inner;
    const int64_t r = k_fast ? o : in, kk = k_fast ? in : o;
    dst[l * dst_batch_stride + r * dst_ld + kk] =
        kk < k ? src.ptr[l * src.batch_stride + r * src.stride_r + kk * src.stride_k] : int8_t(0);
  }
}

// fp8 dtypes: calls f with a null pointer of the element type and returns true; false for others.
template <class F>
bool dispatch_fp8(tessera::DType dtype, F&& f) {
  if (dtype == tessera::DType::E4M3) return f(static_cast<__nv_fp8_e4m3*>(nullptr)), true;
  if (dtype == tessera::DType::E5M2) return f(static_cast<__nv_fp8_e5m2*>(nullptr)), true;
  return false;
}

// Calls f with a null pointer of the element type of `dtype`, to pick a kernel instantiation.
template <class F>
void dispatch(tessera::DType dtype, F&& f) {
  switch (dtype) {
    case tessera::DType::F16: return f(static_cast<__half*>(nullptr));
    case tessera::DType::BF16: return f(static_cast<__nv_bfloat16*>(nullptr));
    case tessera::DType::F32: return f(static_cast<float*>(nullptr));
    case tessera::DType::S8:
    case tessera::DType::S32:  // the int8 helpers below name their types
    case tessera::DType::E4M3:
    case tessera::DType::E5M2: break;  // fp8: fill_uniform and convert_to_f32 name theirs
  }
  throw CliError(kExitCudaError, "device helpers: no floating-point kernel for this dtype");
}

}  // namespace

void fill_uniform(void* data, tessera::DType dtype, size_t n, uint64_t seed, cudaStream_t stream) {
  if (n == 0) return;
  if (dtype == tessera::DType::S8) {
    fill_s8_kernel<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<int8_t*>(data), n, seed);
    CLI_CUDA_CHECK(cudaGetLastError());
    return;
  }
  const bool fp8 = dispatch_fp8(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    fill_fp8_kernel<<<blocks_for(n), kThreads, 0, stream>>>(static_cast<T*>(data), n, seed);
  });
  if (!fp8)
    dispatch(dtype, [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      fill_uniform_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<T*>(data), n, seed);
    });
  CLI_CUDA_CHECK(cudaGetLastError());
}

void convert_to_f32(const void* src, tessera::DType dtype, float* dst, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  auto launch = [&](auto* tag) {  // fp8: exact, every fp8 value is an fp32 one
    using T = std::remove_pointer_t<decltype(tag)>;
    convert_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const T*>(src), dst, n);
  };
  if (!dispatch_fp8(dtype, launch)) dispatch(dtype, launch);
  CLI_CUDA_CHECK(cudaGetLastError());
}

void convert_block_scaled_to_f32(const void* src, tessera::DType dtype, const MatrixView& view,
                                 const BlockScales& scales, float* dst, cudaStream_t stream) {
  const size_t total = view_elements(view);
  if (total == 0) return;
  const bool fp8 = dispatch_fp8(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    convert_block_scaled_kernel<T><<<blocks_for(total), kThreads, 0, stream>>>(static_cast<const T*>(src), view,
                                                                                scales, dst);
  });
  if (!fp8) throw CliError(kExitCudaError, "device helpers: block scales apply to fp8 operands only");
  CLI_CUDA_CHECK(cudaGetLastError());
}

void apply_bias_activation(float* ref, const MatrixView& view, const void* bias, tessera::DType dtype, bool per_row,
                           int64_t bias_batch_stride, tessera::Activation activation, cudaStream_t stream) {
  const size_t total = view_elements(view);
  if (total == 0 || (!bias && activation == tessera::Activation::None)) return;
  dispatch(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    bias_activation_kernel<T><<<blocks_for(total), kThreads, 0, stream>>>(ref, view, static_cast<const T*>(bias),
                                                                          per_row, bias_batch_stride, activation);
  });
  CLI_CUDA_CHECK(cudaGetLastError());
}

CompareSums compare_to_reference(const void* out, tessera::DType dtype, const float* ref, const MatrixView& view,
                                 cudaStream_t stream) {
  DeviceBuffer acc_buf(sizeof(Accumulators));
  auto* acc = acc_buf.as<Accumulators>();
  CLI_CUDA_CHECK(cudaMemsetAsync(acc, 0, sizeof(Accumulators), stream));
  const size_t total = view_elements(view);
  if (total > 0) {
    dispatch(dtype, [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      compare_kernel<T><<<blocks_for(total), kThreads, 0, stream>>>(static_cast<const T*>(out), ref, view, acc);
    });
    CLI_CUDA_CHECK(cudaGetLastError());
  }
  Accumulators host{};
  CLI_CUDA_CHECK(cudaMemcpyAsync(&host, acc, sizeof host, cudaMemcpyDeviceToHost, stream));
  CLI_CUDA_CHECK(cudaStreamSynchronize(stream));
  return CompareSums{host.err_sq, host.ref_sq, host.nonfinite};
}

void fill_uniform_range(float* data, size_t n, float lo, float hi, uint64_t seed, cudaStream_t stream) {
  if (n == 0) return;
  fill_range_kernel<<<blocks_for(n), kThreads, 0, stream>>>(data, n, lo, hi, seed);
  CLI_CUDA_CHECK(cudaGetLastError());
}

void int8_reference_sums(const Int8Operand& a, const Int8Operand& b, int64_t k, const MatrixView& view,
                         int64_t* sums, cudaStream_t stream) {
  if (view.rows == 0 || view.cols == 0 || view.batch == 0) return;
  const int64_t tiles_m = (view.rows + kRefTile - 1) / kRefTile, tiles_n = (view.cols + kRefTile - 1) / kRefTile;
  if (tiles_m > 65535) throw CliError(kExitUsage, "int8 reference: M above 65535 * 64 rows");
  constexpr int64_t kMaxZ = 65535;
  for (int64_t l = 0; l < view.batch; l += kMaxZ) {
    const dim3 grid(unsigned(tiles_n), unsigned(tiles_m), unsigned(std::min(kMaxZ, view.batch - l)));
    int8_sums_kernel<<<grid, kRefThreads, 0, stream>>>(a, b, k, view, l, sums);
    CLI_CUDA_CHECK(cudaGetLastError());
  }
}

namespace {

template <class S>
void dequantise(const S* sums, const MatrixView& view, float alpha, const float* scale_a, const float* scale_b,
                bool row_wise, float beta, const void* c, tessera::DType c_dtype, float* ref, cudaStream_t stream) {
  const size_t total = view_elements(view);
  if (total == 0) return;
  dispatch(c ? c_dtype : tessera::DType::F32, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    dequantise_kernel<S, T><<<blocks_for(total), kThreads, 0, stream>>>(
        sums, view, alpha, scale_a, scale_b, row_wise ? 1 : 0, beta, static_cast<const T*>(c), ref);
  });
  CLI_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

void dequantised_reference(const int64_t* sums, const MatrixView& view, float alpha, const float* scale_a,
                           const float* scale_b, bool row_wise, float beta, const void* c, tessera::DType c_dtype,
                           float* ref, cudaStream_t stream) {
  dequantise(sums, view, alpha, scale_a, scale_b, row_wise, beta, c, c_dtype, ref, stream);
}

void dequantised_reference(const float* sums, const MatrixView& view, float alpha, const float* scale_a,
                           const float* scale_b, bool row_wise, float beta, const void* c, tessera::DType c_dtype,
                           float* ref, cudaStream_t stream) {
  dequantise(sums, view, alpha, scale_a, scale_b, row_wise, beta, c, c_dtype, ref, stream);
}

ExactCompare compare_exact_s32(const int32_t* out, const int64_t* ref, const MatrixView& view, cudaStream_t stream) {
  DeviceBuffer acc_buf(sizeof(ExactAccumulators));
  auto* acc = acc_buf.as<ExactAccumulators>();
  ExactAccumulators init{0.0, 0.0, 0ull, ~0ull};
  CLI_CUDA_CHECK(cudaMemcpyAsync(acc, &init, sizeof init, cudaMemcpyHostToDevice, stream));
  const size_t total = view_elements(view);
  if (total > 0) {
    compare_exact_kernel<<<blocks_for(total), kThreads, 0, stream>>>(out, ref, view, acc);
    CLI_CUDA_CHECK(cudaGetLastError());
  }
  ExactAccumulators host{};
  CLI_CUDA_CHECK(cudaMemcpyAsync(&host, acc, sizeof host, cudaMemcpyDeviceToHost, stream));
  CLI_CUDA_CHECK(cudaStreamSynchronize(stream));
  ExactCompare r;
  r.mismatches = host.mismatches;
  r.err_sq = host.err_sq;
  r.ref_sq = host.ref_sq;
  if (host.mismatches) {
    const int64_t per_batch = view.rows * view.cols, first = int64_t(host.first);
    r.first_batch = first / per_batch;
    r.first_row = first % per_batch / view.cols;
    r.first_col = first % view.cols;
    const int64_t off = r.first_batch * view.batch_stride +
                        (view.row_major ? r.first_row * view.ld + r.first_col : r.first_col * view.ld + r.first_row);
    int32_t o = 0;
    CLI_CUDA_CHECK(cudaMemcpy(&o, out + off, sizeof o, cudaMemcpyDeviceToHost));
    CLI_CUDA_CHECK(cudaMemcpy(&r.first_ref, ref + off, sizeof r.first_ref, cudaMemcpyDeviceToHost));
    r.first_out = o;
  }
  return r;
}

void copy_int8_k_major(const Int8Operand& src, int64_t rows, int64_t k, int64_t batches, int8_t* dst, int64_t dst_k,
                       int64_t dst_ld, int64_t dst_batch_stride, cudaStream_t stream) {
  const size_t total = size_t(rows) * size_t(dst_k) * size_t(batches);
  if (total == 0) return;
  copy_k_major_kernel<<<blocks_for(total), kThreads, 0, stream>>>(src, rows, k, batches, dst, dst_k, dst_ld,
                                                                   dst_batch_stride);
  CLI_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tessera_cli
