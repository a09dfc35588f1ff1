// Device helpers of the CLI: random fill, conversion to fp32, and the output/reference comparison.
// Kept to simple grid-stride kernels: they run once per buffer, outside any timed region.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

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

__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(float x) { return x; }

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

template <class T>
__global__ void convert_kernel(const T* src, float* dst, size_t n) {
  for (size_t i = first_index(); i < n; i += grid_stride()) dst[i] = to_float(src[i]);
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
  const int64_t inner = v.row_major ? v.cols : v.rows;
  const int64_t per_batch = v.rows * v.cols;
  const size_t total = size_t(per_batch) * size_t(v.batch);
  for (size_t i = first_index(); i < total; i += grid_stride()) {
    const int64_t l = int64_t(i) / per_batch, rem = int64_t(i) - l * per_batch;
    const int64_t o = rem / inner, in = rem - o * inner;
    const int64_t row = v.row_major ? o : in, col = v.row_major ? in : o;
    float x = ref[l * v.batch_stride + o * v.ld + in];
    if (bias) x += to_float(bias[l * bias_stride + (per_row ? row : col)]);
    ref[l * v.batch_stride + o * v.ld + in] = reference_activation(act, x);
  }
}

struct Accumulators {
  double err_sq;
  double ref_sq;
  unsigned long long nonfinite;
};

template <class T>
__global__ void compare_kernel(const T* out, const float* ref, MatrixView v, Accumulators* acc) {
  // Walk the logical elements with the contiguous index fastest, so that loads coalesce.
  const int64_t inner = v.row_major ? v.cols : v.rows;
  const int64_t per_batch = v.rows * v.cols;
  const size_t total = size_t(per_batch) * size_t(v.batch);
  double err_sq = 0, ref_sq = 0;
  unsigned long long nonfinite = 0;
  for (size_t i = first_index(); i < total; i += grid_stride()) {
    const int64_t l = int64_t(i) / per_batch, rem = int64_t(i) - l * per_batch;
    const int64_t o = rem / inner, in = rem - o * inner;
    const int64_t off = l * v.batch_stride + o * v.ld + in;
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

// Calls f with a null pointer of the element type of `dtype`, to pick a kernel instantiation.
template <class F>
void dispatch(tessera::DType dtype, F&& f) {
  switch (dtype) {
    case tessera::DType::F16: return f(static_cast<__half*>(nullptr));
    case tessera::DType::BF16: return f(static_cast<__nv_bfloat16*>(nullptr));
    case tessera::DType::F32: return f(static_cast<float*>(nullptr));
  }
  throw CliError(kExitCudaError, "device helpers: unknown dtype");
}

}  // namespace

void fill_uniform(void* data, tessera::DType dtype, size_t n, uint64_t seed, cudaStream_t stream) {
  if (n == 0) return;
  dispatch(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    fill_uniform_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<T*>(data), n, seed);
  });
  CLI_CUDA_CHECK(cudaGetLastError());
}

void convert_to_f32(const void* src, tessera::DType dtype, float* dst, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  dispatch(dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    convert_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<const T*>(src), dst, n);
  });
  CLI_CUDA_CHECK(cudaGetLastError());
}

void apply_bias_activation(float* ref, const MatrixView& view, const void* bias, tessera::DType dtype, bool per_row,
                           int64_t bias_batch_stride, tessera::Activation activation, cudaStream_t stream) {
  const size_t total = size_t(view.rows) * size_t(view.cols) * size_t(view.batch);
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
  const size_t total = size_t(view.rows) * size_t(view.cols) * size_t(view.batch);
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

}  // namespace tessera_cli
