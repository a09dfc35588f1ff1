// The naive fp32 attention reference and the comparison kernels (see attention_gpu_reference.hpp).
// Written for obviousness, not speed: it runs outside every timed region.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <climits>
#include <cmath>
#include <cstdio>

#include "attention_gpu_reference.hpp"

namespace tessera_ref {
namespace {

constexpr int kThreads = 128;  // per (batch, head, query row)
constexpr int kWarps = kThreads / 32;
constexpr int64_t kChunk = 4096;  // scores held in shared memory at once (16 KB); longer rows recompute
constexpr int kMaxDPerThread = int(kMaxReferenceHeadDim / kThreads);

struct RefParams {
  const void* q;
  const void* k;
  const void* v;
  int64_t q_stride[3], k_stride[3], v_stride[3];  // (batch, seq, head); the head-dim stride is 1
  int64_t sq, sk, hq, hkv, d;
  int64_t chunk;
  float scale;
  float softcap;  // > 0: s -> softcap * tanhf(s / softcap)
  bool causal;
  int64_t window_left, window_right;  // -1: unlimited
};

__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }

template <class T>
__device__ __forceinline__ float round_to(float x);  // x rounded to T (nearest even), back in fp32
template <>
__device__ __forceinline__ float round_to<__half>(float x) {
  return __half2float(__float2half_rn(x));
}
template <>
__device__ __forceinline__ float round_to<__nv_bfloat16>(float x) {
  return __bfloat162float(__float2bfloat16_rn(x));
}

struct MaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct SumOp {
  __device__ float operator()(float a, float b) const { return a + b; }
};

// Reduction over the block; every thread gets the result. `red` holds kWarps floats.
template <class Op>
__device__ float block_reduce(float x, float* red, Op op) {
  for (int o = 16; o > 0; o >>= 1) x = op(x, __shfl_xor_sync(0xffffffffu, x, o));
  __syncthreads();  // earlier readers of red are done
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = x;
  __syncthreads();
  float r = red[0];
  for (int w = 1; w < kWarps; ++w) r = op(r, red[w]);
  return r;
}

template <class T>
__global__ void __launch_bounds__(kThreads) reference_kernel(RefParams p, float* o32, float* olow, float* lse) {
  extern __shared__ float smem[];  // q row (D floats), then up to `chunk` scores
  __shared__ float red[kWarps];
  float* qrow = smem;
  float* sc = smem + p.d;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int64_t i = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int64_t hk = h / (p.hq / p.hkv);
  const int64_t D = p.d;
  const T* q = static_cast<const T*>(p.q) + b * p.q_stride[0] + i * p.q_stride[1] + h * p.q_stride[2];
  const T* k = static_cast<const T*>(p.k) + b * p.k_stride[0] + hk * p.k_stride[2];  // K, V rows from key 0
  const T* v = static_cast<const T*>(p.v) + b * p.v_stride[0] + hk * p.v_stride[2];
  // The visible keys: j0 .. j0 + n - 1 (i' = i + Sk - Sq; left side i' - window_left, right side
  // i' + window_right, or i' under causal).
  const int64_t ip = i + p.sk - p.sq;
  int64_t j0 = 0, j1 = p.sk;  // [j0, j1)
  if (p.window_left >= 0) j0 = max(j0, ip - p.window_left);
  if (p.causal) j1 = min(j1, ip + 1);
  if (p.window_right >= 0) j1 = min(j1, ip + p.window_right + 1);
  const int64_t n = j1 > j0 ? j1 - j0 : 0;
  const int64_t out = ((b * p.sq + i) * p.hq + h) * D;
  float* lse_row = lse ? lse + (b * p.hq + h) * p.sq + i : nullptr;

  if (n == 0) {  // no visible key
    for (int64_t d = tid; d < D; d += kThreads) {
      o32[out + d] = 0.0f;
      if (olow) olow[out + d] = 0.0f;
    }
    if (tid == 0 && lse_row) *lse_row = -INFINITY;
    return;
  }

  for (int64_t d = tid; d < D; d += kThreads) qrow[d] = to_f(q[d]);
  __syncthreads();

  // sc[jj] = scale * q . k_{j0 + c0 + jj} for jj < cn (softcapped): one warp per key, lanes along D.
  auto scores = [&](int64_t c0, int64_t cn) {
    for (int64_t jj = warp; jj < cn; jj += kWarps) {
      const T* kj = k + (j0 + c0 + jj) * p.k_stride[1];
      float dot = 0.0f;
      for (int64_t d = lane; d < D; d += 32) dot = fmaf(qrow[d], to_f(kj[d]), dot);
      for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
      float s = p.scale * dot;
      if (p.softcap > 0.0f) s = p.softcap * tanhf(s / p.softcap);
      if (lane == 0) sc[jj] = s;
    }
  };

  // Pass 1: the row maximum.
  const int64_t chunks = (n + p.chunk - 1) / p.chunk;
  float m = -INFINITY;
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t c0 = c * p.chunk, cn = min(p.chunk, n - c0);
    scores(c0, cn);
    __syncthreads();
    for (int64_t jj = tid; jj < cn; jj += kThreads) m = fmaxf(m, sc[jj]);
    __syncthreads();  // before the next chunk overwrites sc
  }
  m = block_reduce(m, red, MaxOp{});

  // Pass 2: p = exp(s - m), the sum, and P.V in fp32 (acc) and with P rounded to T (acc_low).
  float l = 0.0f;
  float acc[kMaxDPerThread], acc_low[kMaxDPerThread];
#pragma unroll
  for (int r = 0; r < kMaxDPerThread; ++r) acc[r] = acc_low[r] = 0.0f;
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t c0 = c * p.chunk, cn = min(p.chunk, n - c0);
    if (chunks > 1) {  // (one chunk: its scores are still in sc)
      scores(c0, cn);
      __syncthreads();
    }
    for (int64_t jj = tid; jj < cn; jj += kThreads) {
      const float e = expf(sc[jj] - m);
      sc[jj] = e;
      l += e;
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < kMaxDPerThread; ++r) {
      const int64_t d = tid + int64_t(r) * kThreads;
      if (d < D) {
        const T* vd = v + (j0 + c0) * p.v_stride[1] + d;
        float a = acc[r], al = acc_low[r];
        for (int64_t jj = 0; jj < cn; ++jj) {
          const float vv = to_f(vd[jj * p.v_stride[1]]);
          const float pj = sc[jj];
          a = fmaf(pj, vv, a);
          al = fmaf(round_to<T>(pj), vv, al);
        }
        acc[r] = a;
        acc_low[r] = al;
      }
    }
    __syncthreads();  // before the next chunk overwrites sc
  }
  l = block_reduce(l, red, SumOp{});

#pragma unroll
  for (int r = 0; r < kMaxDPerThread; ++r) {
    const int64_t d = tid + int64_t(r) * kThreads;
    if (d < D) {
      o32[out + d] = acc[r] / l;
      if (olow) olow[out + d] = round_to<T>(acc_low[r] / l);
    }
  }
  if (tid == 0 && lse_row) *lse_row = m + logf(l);
}

// ---- comparison ----------------------------------------------------------------------------------

struct CompareAcc {
  unsigned long long worst;      // (bits of max |O - O32|) << 32 | index
  unsigned long long nonfinite;
  unsigned int max_lowp_bits;    // bits of max |Olow - O32| (non-negative floats order as integers)
  unsigned int max_ref_bits;
  unsigned long long lse_worst;  // (bits of max |LSE - LSE32|) << 32 | row
  unsigned long long lse_bad;
};

__device__ __forceinline__ unsigned long long pack(float err, uint64_t index) {
  return (static_cast<unsigned long long>(__float_as_uint(err)) << 32) | (index & 0xffffffffull);
}

__device__ __forceinline__ unsigned long long warp_max_u64(unsigned long long x) {
  for (int o = 16; o > 0; o >>= 1) {
    const unsigned long long y = __shfl_xor_sync(0xffffffffu, x, o);
    x = y > x ? y : x;
  }
  return x;
}
__device__ __forceinline__ unsigned long long warp_sum_u64(unsigned long long x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}
__device__ __forceinline__ float warp_max_f(float x) {
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}

struct OView {
  int64_t stride[3];
  int64_t sq, hq, d;
};

// Threads walk [B, Sq, Hq, D] in order (D fastest: O's loads coalesce along its unit stride).
template <class T>
__global__ void compare_o_kernel(const T* o, OView view, int64_t total, const float* o32, const float* olow,
                                 CompareAcc* acc) {
  unsigned long long worst = 0, nonfinite = 0;
  float lowp = 0.0f, ref_max = 0.0f;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < total; idx += step) {
    int64_t r = idx;
    const int64_t d = r % view.d;
    r /= view.d;
    const int64_t h = r % view.hq;
    r /= view.hq;
    const int64_t s = r % view.sq;
    const int64_t b = r / view.sq;
    const float x = to_f(o[b * view.stride[0] + s * view.stride[1] + h * view.stride[2] + d]);
    const float ref = o32[idx];
    ref_max = fmaxf(ref_max, fabsf(ref));
    if (olow) lowp = fmaxf(lowp, fabsf(olow[idx] - ref));
    if (!isfinite(x)) {
      ++nonfinite;
    } else {
      const unsigned long long key = pack(fabsf(x - ref), uint64_t(idx));
      worst = key > worst ? key : worst;
    }
  }
  worst = warp_max_u64(worst);
  nonfinite = warp_sum_u64(nonfinite);
  lowp = warp_max_f(lowp);
  ref_max = warp_max_f(ref_max);
  if ((threadIdx.x & 31) == 0) {
    if (worst) atomicMax(&acc->worst, worst);
    if (nonfinite) atomicAdd(&acc->nonfinite, nonfinite);
    if (lowp > 0.0f) atomicMax(&acc->max_lowp_bits, __float_as_uint(lowp));
    if (ref_max > 0.0f) atomicMax(&acc->max_ref_bits, __float_as_uint(ref_max));
  }
}

__global__ void compare_lse_kernel(const float* lse, const float* lse32, int64_t rows, CompareAcc* acc) {
  unsigned long long worst = 0, bad = 0;
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < rows; idx += step) {
    const float x = lse[idx], r = lse32[idx];
    if (isnan(x) || isnan(r)) {
      ++bad;
    } else if (isinf(x) || isinf(r)) {
      if (x != r) ++bad;  // both -inf (a row with no visible key) is right
    } else {
      const unsigned long long key = pack(fabsf(x - r), uint64_t(idx));
      worst = key > worst ? key : worst;
    }
  }
  worst = warp_max_u64(worst);
  bad = warp_sum_u64(bad);
  if ((threadIdx.x & 31) == 0) {
    if (worst) atomicMax(&acc->worst, worst);
    if (bad) atomicAdd(&acc->lse_bad, bad);
  }
}

unsigned blocks_for(int64_t n, int threads) {
  const int64_t b = (n + threads - 1) / threads;
  return unsigned(b < 8192 ? (b > 0 ? b : 1) : 8192);
}

float bits_to_float(unsigned int u) {
  float f;
  static_assert(sizeof f == sizeof u, "");
  __builtin_memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace

cudaError_t attention_reference(const tessera::AttentionArgs& a, float* o32, float* olow, float* lse32,
                                cudaStream_t stream) {
  if (a.batch <= 0 || a.seqlen_q <= 0 || a.heads_q <= 0) return cudaSuccess;  // nothing to compute
  if ((a.dtype != tessera::DType::F16 && a.dtype != tessera::DType::BF16) || a.head_dim < 1 ||
      a.head_dim > kMaxReferenceHeadDim || a.heads_kv < 1 || a.heads_q % a.heads_kv != 0 || a.seqlen_k < 0 ||
      a.seqlen_q > INT_MAX || a.heads_q > 65535 || a.batch > 65535 || !o32)
    return cudaErrorInvalidValue;
  RefParams p{};
  p.q = a.q;
  p.k = a.k;
  p.v = a.v;
  for (int i = 0; i < 3; ++i) {
    p.q_stride[i] = a.q_stride[i];
    p.k_stride[i] = a.k_stride[i];
    p.v_stride[i] = a.v_stride[i];
  }
  p.sq = a.seqlen_q;
  p.sk = a.seqlen_k;
  p.hq = a.heads_q;
  p.hkv = a.heads_kv;
  p.d = a.head_dim;
  p.chunk = std::max<int64_t>(1, std::min(a.seqlen_k, kChunk));
  // The same default as tessera (api.cpp): 1 / sqrt(D) computed in fp32.
  p.scale = a.softmax_scale > 0.0f ? a.softmax_scale : 1.0f / std::sqrt(float(a.head_dim));
  p.causal = a.causal;
  p.softcap = a.softcap;
  // A side reaching past every key is unlimited (left: seqlen_k or more, right: seqlen_q or more), which
  // keeps i' -/+ window in 64 bits.
  p.window_left = a.window_left >= a.seqlen_k ? -1 : a.window_left;
  p.window_right = a.window_right >= a.seqlen_q ? -1 : a.window_right;
  const size_t smem = size_t(p.d + p.chunk) * sizeof(float);
  const dim3 grid(unsigned(a.seqlen_q), unsigned(a.heads_q), unsigned(a.batch));
  if (a.dtype == tessera::DType::F16)
    reference_kernel<__half><<<grid, kThreads, smem, stream>>>(p, o32, olow, lse32);
  else
    reference_kernel<__nv_bfloat16><<<grid, kThreads, smem, stream>>>(p, o32, olow, lse32);
  return cudaGetLastError();
}

cudaError_t attention_compare(const tessera::AttentionArgs& a, const float* o32, const float* olow,
                              const float* lse32, AttentionErrors* errors, cudaStream_t stream) {
  *errors = AttentionErrors{};
  const int64_t total = a.batch * a.seqlen_q * a.heads_q * a.head_dim;
  const int64_t rows = a.batch * a.heads_q * a.seqlen_q;
  const bool check_lse = a.lse && lse32;
  if (total <= 0) return cudaSuccess;
  if (a.dtype != tessera::DType::F16 && a.dtype != tessera::DType::BF16) return cudaErrorInvalidValue;

  CompareAcc* acc = nullptr;  // [0]: O, [1]: LSE
  cudaError_t e = cudaMalloc(&acc, 2 * sizeof(CompareAcc));
  if (e != cudaSuccess) return e;
  e = cudaMemsetAsync(acc, 0, 2 * sizeof(CompareAcc), stream);
  const OView view{{a.o_stride[0], a.o_stride[1], a.o_stride[2]}, a.seqlen_q, a.heads_q, a.head_dim};
  if (e == cudaSuccess) {
    if (a.dtype == tessera::DType::F16)
      compare_o_kernel<<<blocks_for(total, 256), 256, 0, stream>>>(static_cast<const __half*>(a.o), view, total, o32,
                                                                   olow, acc);
    else
      compare_o_kernel<<<blocks_for(total, 256), 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(a.o), view,
                                                                   total, o32, olow, acc);
    e = cudaGetLastError();
  }
  if (e == cudaSuccess && check_lse) {
    compare_lse_kernel<<<blocks_for(rows, 256), 256, 0, stream>>>(a.lse, lse32, rows, acc + 1);
    e = cudaGetLastError();
  }
  CompareAcc host[2] = {};
  if (e == cudaSuccess) e = cudaMemcpyAsync(host, acc, sizeof host, cudaMemcpyDeviceToHost, stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  cudaFree(acc);
  if (e != cudaSuccess) return e;

  errors->max_err = bits_to_float(unsigned(host[0].worst >> 32));
  errors->worst_index = host[0].worst & 0xffffffffull;
  errors->nonfinite = host[0].nonfinite;
  errors->max_err_lowp = bits_to_float(host[0].max_lowp_bits);
  errors->max_ref = bits_to_float(host[0].max_ref_bits);
  errors->lse_checked = check_lse;
  if (check_lse) {
    errors->max_lse_err = bits_to_float(unsigned(host[1].worst >> 32));
    errors->lse_worst_row = host[1].worst & 0xffffffffull;
    errors->lse_bad = host[1].lse_bad;
  }
  return cudaSuccess;
}

double attention_atol(tessera::DType dtype) { return dtype == tessera::DType::BF16 ? 2e-3 : 5e-4; }

double attention_bound(const AttentionErrors& e, tessera::DType dtype) {
  return 2.0 * e.max_err_lowp + attention_atol(dtype);
}

bool attention_check(const AttentionErrors& e, tessera::DType dtype, std::string* why) {
  std::string w;
  char buf[256];
  if (e.nonfinite) {
    std::snprintf(buf, sizeof buf, "%llu non-finite O elements (unwritten: O was poisoned with NaN); ",
                  (unsigned long long)e.nonfinite);
    w += buf;
  }
  const double bound = attention_bound(e, dtype);
  if (!(e.max_err <= bound)) {
    std::snprintf(buf, sizeof buf,
                  "max|O - ref32| = %.3e above the bound %.3e (2 * max|O_lowp - ref32| = %.3e, atol %.0e); ",
                  e.max_err, bound, 2.0 * e.max_err_lowp, attention_atol(dtype));
    w += buf;
  }
  if (e.lse_checked) {
    if (e.lse_bad) {
      std::snprintf(buf, sizeof buf, "%llu LSE rows NaN or wrongly infinite (or finite where no key is visible); ",
                    (unsigned long long)e.lse_bad);
      w += buf;
    }
    if (!(e.max_lse_err <= kAttentionLseTol)) {
      std::snprintf(buf, sizeof buf, "max|LSE - LSE32| = %.3e above %.0e; ", e.max_lse_err, kAttentionLseTol);
      w += buf;
    }
  }
  if (why) *why = w;
  return w.empty();
}

}  // namespace tessera_ref
