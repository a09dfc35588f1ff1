#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "gpu_helpers.hpp"

namespace tessera_test {
namespace {

template <class T>
__device__ __forceinline__ T convert(float x);
template <>
__device__ __forceinline__ __half convert<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 convert<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ float convert<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ int8_t convert<int8_t>(float x) {
  return int8_value(x);
}
template <>
__device__ __forceinline__ __nv_fp8_e4m3 convert<__nv_fp8_e4m3>(float x) {
  return __nv_fp8_e4m3(kFp8Range * x);  // round to nearest, saturating to the finite range
}
template <>
__device__ __forceinline__ __nv_fp8_e5m2 convert<__nv_fp8_e5m2>(float x) {
  return __nv_fp8_e5m2(kFp8Range * x);
}

template <class T>
__global__ void fill_kernel(T* base, int64_t outer, int64_t inner, int64_t ld, int64_t batch_stride, int64_t total,
                            uint64_t seed) {
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = idx % inner;
    const int64_t rest = idx / inner;
    const int64_t o = rest % outer;
    const int64_t l = rest / outer;
    base[l * batch_stride + o * ld + i] = convert<T>(uniform_value(seed, uint64_t(idx)));
  }
}

struct Dims4 {
  int64_t dims[4], strides[4];
};

template <class T>
__global__ void fill_4d_kernel(T* base, Dims4 t, int64_t total, uint64_t seed) {
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    int64_t rest = idx, off = 0;
    for (int m = 3; m >= 0; --m) {
      off += (rest % t.dims[m]) * t.strides[m];
      rest /= t.dims[m];
    }
    base[off] = convert<T>(uniform_value(seed, uint64_t(idx)));
  }
}

__global__ void int8_reference_kernel(const int8_t* a, int64_t a_si, int64_t a_sk, int64_t a_bs, const int8_t* b,
                                      int64_t b_sj, int64_t b_sk, int64_t b_bs, int64_t m, int64_t n, int64_t k,
                                      int64_t total, int64_t* sums) {
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = idx % m, j = idx / m % n, l = idx / (m * n);
    const int8_t* pa = a + l * a_bs + i * a_si;
    const int8_t* pb = b + l * b_bs + j * b_sj;
    long long s = 0;
    for (int64_t kk = 0; kk < k; ++kk) s += int(pa[kk * a_sk]) * int(pb[kk * b_sk]);
    sums[idx] = s;
  }
}

template <class T>
__global__ void fp8_reference_kernel(const T* a, int64_t a_si, int64_t a_sk, int64_t a_bs, const T* b, int64_t b_sj,
                                     int64_t b_sk, int64_t b_bs, int64_t m, int64_t n, int64_t k, int64_t total,
                                     double* sums) {
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = idx % m, j = idx / m % n, l = idx / (m * n);
    const T* pa = a + l * a_bs + i * a_si;
    const T* pb = b + l * b_bs + j * b_sj;
    double s = 0;
    for (int64_t kk = 0; kk < k; ++kk) s += double(float(pa[kk * a_sk])) * double(float(pb[kk * b_sk]));
    sums[idx] = s;
  }
}

template <class T>
__global__ void fp8_block_reference_kernel(const T* a, int64_t a_si, int64_t a_sk, int64_t a_bs, const T* b,
                                           int64_t b_sj, int64_t b_sk, int64_t b_bs, const float* scale_a,
                                           int64_t sa_sm, int64_t sa_sk, const float* scale_b, int64_t sb_sk,
                                           int64_t sb_sn, int64_t m, int64_t n, int64_t k, int64_t total,
                                           double* sums) {
  constexpr int64_t kBlock = 128;  // K per block scale (tessera_scale_mode_t block)
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = idx % m, j = idx / m % n, l = idx / (m * n);
    const T* pa = a + l * a_bs + i * a_si;
    const T* pb = b + l * b_bs + j * b_sj;
    const float* sa = scale_a + i * sa_sm;
    const float* sb = scale_b + (j / kBlock) * sb_sn;
    double s = 0;
    for (int64_t k0 = 0, kb = 0; k0 < k; k0 += kBlock, ++kb) {
      const int64_t k1 = k0 + kBlock < k ? k0 + kBlock : k;
      double block = 0;
      for (int64_t kk = k0; kk < k1; ++kk) block += double(float(pa[kk * a_sk])) * double(float(pb[kk * b_sk]));
      s += double(sa[kb * sa_sk]) * double(sb[kb * sb_sk]) * block;
    }
    sums[idx] = s;
  }
}

__global__ void guard_kernel(uint8_t* p, size_t bytes, uint32_t salt) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < bytes; i += size_t(gridDim.x) * blockDim.x)
    p[i] = guard_byte(i, salt);
}

unsigned blocks_for(int64_t n) {
  const int64_t b = (n + 255) / 256;
  return unsigned(b < 4096 ? (b > 0 ? b : 1) : 4096);
}

}  // namespace

cudaError_t fill_uniform(void* base, tessera::DType dtype, int64_t batches, int64_t outer, int64_t inner, int64_t ld,
                         int64_t batch_stride, uint64_t seed, cudaStream_t stream) {
  const int64_t total = batches * outer * inner;
  if (total <= 0) return cudaSuccess;
  const unsigned blocks = blocks_for(total);
  switch (dtype) {
    case tessera::DType::F16:
      fill_kernel<<<blocks, 256, 0, stream>>>(static_cast<__half*>(base), outer, inner, ld, batch_stride, total, seed);
      break;
    case tessera::DType::BF16:
      fill_kernel<<<blocks, 256, 0, stream>>>(static_cast<__nv_bfloat16*>(base), outer, inner, ld, batch_stride, total,
                                              seed);
      break;
    case tessera::DType::F32:
      fill_kernel<<<blocks, 256, 0, stream>>>(static_cast<float*>(base), outer, inner, ld, batch_stride, total, seed);
      break;
    case tessera::DType::S8:
      fill_kernel<<<blocks, 256, 0, stream>>>(static_cast<int8_t*>(base), outer, inner, ld, batch_stride, total, seed);
      break;
    case tessera::DType::E4M3:
      fill_kernel<<<blocks, 256, 0, stream>>>(static_cast<__nv_fp8_e4m3*>(base), outer, inner, ld, batch_stride, total,
                                              seed);
      break;
    case tessera::DType::E5M2:
      fill_kernel<<<blocks, 256, 0, stream>>>(static_cast<__nv_fp8_e5m2*>(base), outer, inner, ld, batch_stride, total,
                                              seed);
      break;
    case tessera::DType::S32: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t fill_uniform_4d(void* base, tessera::DType dtype, const int64_t (&dims)[4], const int64_t (&strides)[4],
                            uint64_t seed, cudaStream_t stream) {
  Dims4 t;
  int64_t total = 1;
  for (int m = 0; m < 4; ++m) {
    t.dims[m] = dims[m];
    t.strides[m] = strides[m];
    total *= dims[m];
  }
  if (total <= 0) return cudaSuccess;
  const unsigned blocks = blocks_for(total);
  switch (dtype) {
    case tessera::DType::F16:
      fill_4d_kernel<<<blocks, 256, 0, stream>>>(static_cast<__half*>(base), t, total, seed);
      break;
    case tessera::DType::BF16:
      fill_4d_kernel<<<blocks, 256, 0, stream>>>(static_cast<__nv_bfloat16*>(base), t, total, seed);
      break;
    case tessera::DType::F32:
      fill_4d_kernel<<<blocks, 256, 0, stream>>>(static_cast<float*>(base), t, total, seed);
      break;
    case tessera::DType::S8:
    case tessera::DType::S32:
    case tessera::DType::E4M3:
    case tessera::DType::E5M2: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t int8_gemm_reference(const int8_t* a, int64_t a_si, int64_t a_sk, int64_t a_bs, const int8_t* b,
                                int64_t b_sj, int64_t b_sk, int64_t b_bs, int64_t m, int64_t n, int64_t k,
                                int64_t batch, int64_t* sums, cudaStream_t stream) {
  const int64_t total = m * n * batch;
  if (total <= 0) return cudaSuccess;
  int8_reference_kernel<<<blocks_for(total), 256, 0, stream>>>(a, a_si, a_sk, a_bs, b, b_sj, b_sk, b_bs, m, n, k,
                                                               total, sums);
  return cudaGetLastError();
}

cudaError_t fp8_gemm_reference(tessera::DType dtype, const void* a, int64_t a_si, int64_t a_sk, int64_t a_bs,
                               const void* b, int64_t b_sj, int64_t b_sk, int64_t b_bs, int64_t m, int64_t n,
                               int64_t k, int64_t batch, double* sums, cudaStream_t stream) {
  const int64_t total = m * n * batch;
  if (total <= 0) return cudaSuccess;
  if (dtype == tessera::DType::E4M3)
    fp8_reference_kernel<<<blocks_for(total), 256, 0, stream>>>(static_cast<const __nv_fp8_e4m3*>(a), a_si, a_sk,
                                                                a_bs, static_cast<const __nv_fp8_e4m3*>(b), b_sj,
                                                                b_sk, b_bs, m, n, k, total, sums);
  else if (dtype == tessera::DType::E5M2)
    fp8_reference_kernel<<<blocks_for(total), 256, 0, stream>>>(static_cast<const __nv_fp8_e5m2*>(a), a_si, a_sk,
                                                                a_bs, static_cast<const __nv_fp8_e5m2*>(b), b_sj,
                                                                b_sk, b_bs, m, n, k, total, sums);
  else
    return cudaErrorInvalidValue;
  return cudaGetLastError();
}

cudaError_t fp8_block_gemm_reference(tessera::DType dtype, const void* a, int64_t a_si, int64_t a_sk, int64_t a_bs,
                                     const void* b, int64_t b_sj, int64_t b_sk, int64_t b_bs, const float* scale_a,
                                     int64_t sa_sm, int64_t sa_sk, const float* scale_b, int64_t sb_sk, int64_t sb_sn,
                                     int64_t m, int64_t n, int64_t k, int64_t batch, double* sums,
                                     cudaStream_t stream) {
  const int64_t total = m * n * batch;
  if (total <= 0) return cudaSuccess;
  if (k > 0 && (!scale_a || !scale_b)) return cudaErrorInvalidValue;
  if (dtype == tessera::DType::E4M3)
    fp8_block_reference_kernel<<<blocks_for(total), 256, 0, stream>>>(
        static_cast<const __nv_fp8_e4m3*>(a), a_si, a_sk, a_bs, static_cast<const __nv_fp8_e4m3*>(b), b_sj, b_sk,
        b_bs, scale_a, sa_sm, sa_sk, scale_b, sb_sk, sb_sn, m, n, k, total, sums);
  else if (dtype == tessera::DType::E5M2)
    fp8_block_reference_kernel<<<blocks_for(total), 256, 0, stream>>>(
        static_cast<const __nv_fp8_e5m2*>(a), a_si, a_sk, a_bs, static_cast<const __nv_fp8_e5m2*>(b), b_sj, b_sk,
        b_bs, scale_a, sa_sm, sa_sk, scale_b, sb_sk, sb_sn, m, n, k, total, sums);
  else
    return cudaErrorInvalidValue;
  return cudaGetLastError();
}

cudaError_t fill_guard(void* p, size_t bytes, uint32_t salt, cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  guard_kernel<<<blocks_for(int64_t(bytes)), 256, 0, stream>>>(static_cast<uint8_t*>(p), bytes, salt);
  return cudaGetLastError();
}

tessera::Status call_on_stream(cudaStream_t s, bool capture_graph, const std::function<tessera::Status()>& call,
                               std::string* problems) {
  auto fail = [&](const char* what, cudaError_t e) {
    *problems += std::string(what) + ": " + cudaGetErrorString(e) + "; ";
    cudaGetLastError();
  };
  if (!capture_graph) return call();
  if (cudaError_t e = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal); e != cudaSuccess) {
    fail("cudaStreamBeginCapture", e);
    return tessera::Status::success();
  }
  const tessera::Status status = call();
  cudaGraph_t graph = nullptr;
  if (cudaError_t e = cudaStreamEndCapture(s, &graph); e != cudaSuccess) {
    fail("cudaStreamEndCapture (did tessera use another stream or a synchronous call?)", e);
    if (graph) cudaGraphDestroy(graph);
    return status;
  }
  cudaGraphExec_t exec = nullptr;
  if (status.ok()) {
    cudaError_t e = cudaGraphInstantiate(&exec, graph, 0);
    if (e == cudaSuccess) e = cudaGraphLaunch(exec, s);
    if (e != cudaSuccess) fail("graph instantiate/launch", e);
  }
  cudaStreamSynchronize(s);
  if (exec) cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return status;
}

}  // namespace tessera_test
