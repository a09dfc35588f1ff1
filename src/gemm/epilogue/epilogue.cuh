// The GEMM epilogue's last step, shared by every kernel: D = act(alpha * acc + beta * C + bias),
// converted to D's dtype (chosen at run time: one kernel serves F16, BF16 and F32 outputs, which keeps the
// number of instantiations down; the branch is uniform across the CTA).
//
// Kernels hand over 8 consecutive accumulators of one row of the canonical row-major D. When the
// 8 are inside the matrix and the pointers allow it, C is read and D written with 16-byte
// accesses; otherwise element by element, with bounds checks.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "gemm/kernel_params.hpp"

namespace tessera::gemm_impl {

template <int DT> struct StorageOf;
template <> struct StorageOf<kF16> { using type = __half; };
template <> struct StorageOf<kBF16> { using type = __nv_bfloat16; };
template <> struct StorageOf<kF32> { using type = float; };

__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(float x) { return x; }
template <class T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <> __device__ __forceinline__ float from_float<float>(float x) { return x; }

// 8 elements of T as whole 16-byte words (1 word for 2-byte types, 2 for float).
template <class T>
struct alignas(16) Vec8 {
  T v[8];
};

// The activations of EpilogueParams::activation, in fp32. GELU is the erf form (torch's default),
// GELU_TANH the tanh approximation (torch's approximate="tanh"), with tanh(u) = 1 - 2 / (1 + e^2u)
// on the fast exponential (libm's tanhf made the sm80 64x64 kernel spill on sm_90).
__device__ __forceinline__ float activate(int act, float x) {
  switch (act) {
    case kActRelu: return fmaxf(x, 0.0f);
    case kActGelu: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case kActGeluTanh: {
      const float u = 0.79788456080286536f * (x + 0.044715f * x * x * x);
      return 0.5f * x * (2.0f - __fdividef(2.0f, 1.0f + __expf(2.0f * u)));
    }
    case kActSilu: return __fdividef(x, 1.0f + __expf(-x));
    default: return x;
  }
}

// The activation out of line, for the sm90 kernels: inlined into every unrolled output element,
// erff / tanhf / expf made them ~3.5x larger, and the instruction-cache misses of walking past that
// code (even with the activation off) slowed every tile. One value a call is latency-bound instead
// (call, the switch's indirect branch and return in series per element), so callers hand over
// several values a call, which overlap: 4 here (epilogue_row8), 8 packed in the TMA-store epilogue
// (sm90/epilogue_store.cuh); one a call only where more spilled (three consumer warpgroups). Callers test
// for kActNone first, so the plain epilogue never calls it. The sm80 kernels inline it instead
// (epilogue_row8<true>): there the call's ABI cost a stack frame (check_kernels).
template <int kAct> __device__ __forceinline__ void activate_each(float& v) { v = activate(kAct, v); }
template <int kAct> __device__ __forceinline__ void activate_each(float4& v) {
  v.x = activate(kAct, v.x), v.y = activate(kAct, v.y), v.z = activate(kAct, v.z), v.w = activate(kAct, v.w);
}
// The one switch over the activations, each value of v... (floats or float4s) in its case.
template <class... V>
__device__ __forceinline__ void activate_all(int act, V&... v) {
  switch (act) {
    case kActRelu: (activate_each<kActRelu>(v), ...); break;
    case kActGelu: (activate_each<kActGelu>(v), ...); break;
    case kActGeluTanh: (activate_each<kActGeluTanh>(v), ...); break;
    case kActSilu: (activate_each<kActSilu>(v), ...); break;
    default: break;
  }
}
template <class V>  // float or float4
static __device__ __noinline__ V activate_out_of_line(int act, V v) {
  activate_all(act, v);
  return v;
}

// Whether the epilogue adds a bias or applies an activation (uniform across the grid).
__device__ __forceinline__ bool has_bias_or_activation(const EpilogueParams& p) {
  return p.bias != nullptr || p.activation != kActNone;
}

// The element-by-element paths (strided operands, the matrix's right edge) are rare: they run as
// loops over one copy of their body, the 8 values rotated through v[0] (register arrays need
// compile-time indices), instead of 8 unrolled copies per call site. Unrolled, they and the
// activations were most of each kernel's code: the kernels unroll their epilogue steps, so every
// copy was repeated per step (compile time, and instruction-cache misses on every tile).
__device__ __forceinline__ void rotate8(float (&v)[8]) {
  const float first = v[0];
#pragma unroll
  for (int i = 0; i < 7; ++i) v[i] = v[i + 1];
  v[7] = first;
}

template <int DT, bool kInlineActivation>
__device__ __forceinline__ void epilogue_row8_typed(const EpilogueParams& p, int l, int m, int n0, int n_limit,
                                                    float (&acc)[8]) {
  using T = typename StorageOf<DT>::type;
  const bool full = n0 + 8 <= n_limit;
  float out[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) out[i] = p.alpha * acc[i];
  if (p.beta != 0.0f) {
    const T* c = static_cast<const T*>(p.c) + l * p.batch_stride_c + int64_t(m) * p.c_stride_m;
    if (full && p.c_vec) {
      Vec8<T> cv = *reinterpret_cast<const Vec8<T>*>(c + n0);
#pragma unroll
      for (int i = 0; i < 8; ++i) out[i] += p.beta * to_float(cv.v[i]);
    } else {
#pragma unroll 1
      for (int i = 0; i < 8; ++i, rotate8(out))
        if (n0 + i < n_limit) out[0] += p.beta * to_float(c[int64_t(n0 + i) * p.c_stride_n]);
    }
  }
  if (p.bias) {
    const T* b = static_cast<const T*>(p.bias) + l * p.batch_stride_bias + int64_t(m) * p.bias_stride_m;
    if (p.bias_stride_n == 0) {  // one value per row
      const float bm = to_float(*b);
#pragma unroll
      for (int i = 0; i < 8; ++i) out[i] += bm;
    } else if (full && p.bias_vec) {
      const Vec8<T> bv = *reinterpret_cast<const Vec8<T>*>(b + n0);
#pragma unroll
      for (int i = 0; i < 8; ++i) out[i] += to_float(bv.v[i]);
    } else {
#pragma unroll 1
      for (int i = 0; i < 8; ++i, rotate8(out))
        if (n0 + i < n_limit) out[0] += to_float(b[int64_t(n0 + i) * p.bias_stride_n]);
    }
  }
  if (p.activation != kActNone) {
    if constexpr (kInlineActivation) {
      // One switch for the 8 values (a switch per value made the sm80 64x64 kernel spill on sm_90).
      switch (p.activation) {
#define TESSERA_ACT8(tag)                                                                 \
  case tag:                                                                               \
    _Pragma("unroll 1") for (int i = 0; i < 8; ++i, rotate8(out)) out[0] = activate(tag, out[0]); \
    break;
        TESSERA_ACT8(kActRelu)
        TESSERA_ACT8(kActGelu)
        TESSERA_ACT8(kActGeluTanh)
        TESSERA_ACT8(kActSilu)
#undef TESSERA_ACT8
        default: break;
      }
    } else {
#pragma unroll
      for (int q = 0; q < 8; q += 4) {
        const float4 a = activate_out_of_line(p.activation, make_float4(out[q], out[q + 1], out[q + 2], out[q + 3]));
        out[q] = a.x, out[q + 1] = a.y, out[q + 2] = a.z, out[q + 3] = a.w;
      }
    }
  }
  T* d = static_cast<T*>(p.d) + l * p.batch_stride_d + int64_t(m) * p.ldd + n0;
  if (full && p.d_vec) {
    Vec8<T> dv;
#pragma unroll
    for (int i = 0; i < 8; ++i) dv.v[i] = from_float<T>(out[i]);
    *reinterpret_cast<Vec8<T>*>(d) = dv;
  } else {
#pragma unroll 1
    for (int i = 0; i < 8; ++i, rotate8(out))
      if (n0 + i < n_limit) d[i] = from_float<T>(out[0]);
  }
}

// Writes D(l, m, n0 .. n0+7) (the part with n < n_limit). The caller checks m < M.
// kInlineActivation: see activate_out_of_line (false for the sm90 kernels).
template <bool kInlineActivation>
__device__ __forceinline__ void epilogue_row8(const EpilogueParams& p, int l, int m, int n0, int n_limit,
                                              float (&acc)[8]) {
  switch (p.d_dtype) {
    case kF16: epilogue_row8_typed<kF16, kInlineActivation>(p, l, m, n0, n_limit, acc); break;
    case kBF16: epilogue_row8_typed<kBF16, kInlineActivation>(p, l, m, n0, n_limit, acc); break;
    default: epilogue_row8_typed<kF32, kInlineActivation>(p, l, m, n0, n_limit, acc); break;
  }
}

// Dequantised sums (s8 and fp8 operands), 8 consecutive of one row: v * scale_m * scale_n
// (GemmParams; none where null), then the fp32 epilogue above. The caller checks m < M.
template <bool kInlineActivation>
__device__ __forceinline__ void epilogue_row8_scaled(const GemmParams& p, int l, int m, int n0, int n_limit,
                                                     float (&v)[8]) {
  if (p.scale_m) {
    const float row_scale = p.scale_m[int64_t(m) * p.scale_step];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int n = p.scale_step ? (n0 + i < n_limit ? n0 + i : n0) : 0;  // clamped: a ragged edge reads in bounds
      v[i] *= row_scale * p.scale_n[n];
    }
  }
  epilogue_row8<kInlineActivation>(p.epi, l, m, n0, n_limit, v);
}

// The int32 sums of s8 operands, 8 consecutive of one row: an s32 D takes them as they are, any other
// D gets them dequantised through epilogue_row8_scaled. The caller checks m < M.
template <bool kInlineActivation>
__device__ __forceinline__ void epilogue_row8_s32(const GemmParams& p, int l, int m, int n0, int n_limit,
                                                  const int (&sums)[8]) {
  const EpilogueParams& e = p.epi;
  if (e.d_dtype == kS32) {
    int* d = static_cast<int*>(e.d) + l * e.batch_stride_d + int64_t(m) * e.ldd + n0;
    if (n0 + 8 <= n_limit && e.d_vec) {
      reinterpret_cast<int4*>(d)[0] = make_int4(sums[0], sums[1], sums[2], sums[3]);
      reinterpret_cast<int4*>(d)[1] = make_int4(sums[4], sums[5], sums[6], sums[7]);
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i)
        if (n0 + i < n_limit) d[i] = sums[i];
    }
    return;
  }
  float v[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) v[i] = float(sums[i]);
  epilogue_row8_scaled<kInlineActivation>(p, l, m, n0, n_limit, v);
}

}  // namespace tessera::gemm_impl
