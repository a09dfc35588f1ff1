#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <type_traits>

#include "gemm/epilogue/epilogue.cuh"
#include "gemm/fallback/fallback.hpp"
#include "gemm/launch_batched.hpp"

namespace tessera::gemm_impl::fallback {
namespace {

// One thread writes 16 bytes of padded elements (one 16-byte store): 8 of a 16-bit operand, 16 of s8.
template <class T>
__global__ void pad_kernel(const T* __restrict__ src, int64_t ld, int64_t sbs, int64_t outer, int64_t contiguous,
                           T* __restrict__ dst, int64_t padded_ld, int64_t total_vecs) {
  constexpr int kVec = 16 / int(sizeof(T));
  const int64_t vecs_per_row = padded_ld / kVec;
  for (int64_t v = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; v < total_vecs; v += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row_all = v / vecs_per_row;  // (batch, outer row)
    const int64_t c0 = (v - row_all * vecs_per_row) * kVec;
    const int64_t l = row_all / outer, r = row_all - l * outer;
    const T* s = src + l * sbs + r * ld;
    alignas(16) T out[kVec];
#pragma unroll
    for (int i = 0; i < kVec; ++i) out[i] = (c0 + i < contiguous) ? s[c0 + i] : T(0);
    *reinterpret_cast<uint4*>(dst + row_all * padded_ld + c0) = *reinterpret_cast<const uint4*>(out);
  }
}

template <class T>
cudaError_t pad(const T* src, int64_t ld, int64_t src_batch_stride, int64_t outer, int64_t contiguous, T* dst,
                int64_t padded_ld, int64_t batches, cudaStream_t stream) {
  const int64_t total = batches * outer * (padded_ld / (16 / int64_t(sizeof(T))));
  if (total == 0) return cudaSuccess;
  const int64_t blocks = (total + 255) / 256;
  pad_kernel<T><<<unsigned(blocks < 65536 * 16 ? blocks : 65536 * 16), 256, 0, stream>>>(
      src, ld, src_batch_stride, outer, contiguous, dst, padded_ld, total);
  return cudaGetLastError();
}

// fp32 or s8 operand -> K-major copy, in 32 x 32 tiles through shared memory so that both the read
// (along the source's contiguous mode) and the write (along K) are coalesced. 3xTF32 (fp32 only):
// each element's tf32 high part hi = rna(x) and low part lo = x - hi (exact in fp32) go into the
// copy's three K ranges as the pattern says.
__device__ __forceinline__ float tf32_high(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return __uint_as_float(r);
}

constexpr int kPrepTile = 32;
template <class T>
__global__ void __launch_bounds__(256) prepare_kernel(const T* __restrict__ src, int64_t ld, int64_t sbs, bool k_major,
                                                       int64_t rows, int64_t k, T* __restrict__ dst, int64_t padded_k,
                                                       int split, int64_t batches) {
  __shared__ T tile[kPrepTile][kPrepTile + 1];  // [row][k]; +1: the transposed reads spread over banks
  const int segments = split == 0 ? 1 : 3;
  const int64_t dst_ld = segments * padded_k;
  const int64_t tiles_k = (padded_k + kPrepTile - 1) / kPrepTile, tiles_r = (rows + kPrepTile - 1) / kPrepTile;
  const int64_t total = tiles_k * tiles_r * batches;
  const int tx = threadIdx.x % kPrepTile, ty = threadIdx.x / kPrepTile;  // 32 x 8
  for (int64_t t = blockIdx.x; t < total; t += gridDim.x) {
    const int64_t l = t / (tiles_k * tiles_r), rem = t % (tiles_k * tiles_r);
    const int64_t r0 = rem / tiles_k * kPrepTile, k0 = rem % tiles_k * kPrepTile;
    const T* s = src + l * sbs;
    __syncthreads();  // the previous tile's reads are done
    for (int i = ty; i < kPrepTile; i += 8) {
      // K-major source: lanes along k; MN-major: lanes along rows.
      const int64_t r = k_major ? r0 + i : r0 + tx, kk = k_major ? k0 + tx : k0 + i;
      const T v = r < rows && kk < k ? s[k_major ? r * ld + kk : kk * ld + r] : T(0);
      if (k_major) tile[i][tx] = v;
      else tile[tx][i] = v;
    }
    __syncthreads();
    for (int i = ty; i < kPrepTile; i += 8) {
      const int64_t r = r0 + i, kk = k0 + tx;
      if (r >= rows || kk >= padded_k) continue;
      const T x = tile[i][tx];
      T* d = dst + (l * rows + r) * dst_ld + kk;
      if constexpr (std::is_same_v<T, float>) {
        if (split != 0) {
          const float hi = tf32_high(x), lo = x - hi;
          // kSplitA: [lo | hi | hi]; kSplitB: [hi | lo | hi] (gemm/plan.hpp SplitPattern)
          d[0] = split == 1 ? lo : hi;
          d[padded_k] = split == 1 ? hi : lo;
          d[2 * padded_k] = hi;
          continue;
        }
      }
      d[0] = x;
    }
  }
}

template <class T>
cudaError_t prepare(const T* src, int64_t ld, int64_t src_batch_stride, bool k_major, int64_t rows, int64_t k, T* dst,
                    int64_t padded_k, int split, int64_t batches, cudaStream_t stream) {
  const int64_t total = (padded_k + kPrepTile - 1) / kPrepTile * ((rows + kPrepTile - 1) / kPrepTile) * batches;
  if (total == 0) return cudaSuccess;
  prepare_kernel<T><<<unsigned(total < 65536 * 16 ? total : 65536 * 16), 256, 0, stream>>>(
      src, ld, src_batch_stride, k_major, rows, k, dst, padded_k, split, batches);
  return cudaGetLastError();
}

constexpr int kTile = 64, kTileK = 16, kThreads = 256;

template <class T>
__device__ __forceinline__ float load_f(const T* p) { return to_float(*p); }
__device__ __forceinline__ int load_f(const int8_t* p) { return *p; }
__device__ __forceinline__ float load_f(const __nv_fp8_e4m3* p) { return float(*p); }
__device__ __forceinline__ float load_f(const __nv_fp8_e5m2* p) { return float(*p); }

// 64x64 output tile, 256 threads; each thread computes 2 rows x 8 consecutive columns so that the
// shared epilogue (8 outputs per call) applies. Operands go through shared memory as fp32 (s8: as
// int32, summed exactly; fp8 sums scaled as they leave).
template <class T>
__global__ void __launch_bounds__(kThreads) simt_kernel(GemmParams p, bool a_k_major, bool b_k_major) {
  using Acc = std::conditional_t<std::is_same_v<T, int8_t>, int, float>;
  constexpr bool kFp8 = sizeof(T) == 1 && !std::is_same_v<T, int8_t>;
  __shared__ Acc sA[kTileK][kTile + 1];
  __shared__ Acc sB[kTileK][kTile + 1];
  const int l = blockIdx.z;
  const int tiles_n = (p.n + kTile - 1) / kTile;
  const int m0 = int(blockIdx.x / tiles_n) * kTile, n0 = int(blockIdx.x % tiles_n) * kTile;
  const T* A = static_cast<const T*>(p.a) + l * p.batch_stride_a;
  const T* B = static_cast<const T*>(p.b) + l * p.batch_stride_b;
  const int64_t a_sm = a_k_major ? p.lda : 1, a_sk = a_k_major ? 1 : p.lda;
  const int64_t b_sn = b_k_major ? p.ldb : 1, b_sk = b_k_major ? 1 : p.ldb;
  const int tx = threadIdx.x % 8, ty = threadIdx.x / 8;  // 8 x 32 threads
  Acc acc[2][8] = {};
  for (int k0 = 0; k0 < p.k; k0 += kTileK) {
    for (int i = threadIdx.x; i < kTile * kTileK; i += kThreads) {
      // Walk the contiguous mode of each operand fastest so that loads coalesce.
      const int ra = a_k_major ? i / kTileK : i % kTile, ka = a_k_major ? i % kTileK : i / kTile;
      const int rb = b_k_major ? i / kTileK : i % kTile, kb = b_k_major ? i % kTileK : i / kTile;
      const int gm = m0 + ra, gka = k0 + ka, gn = n0 + rb, gkb = k0 + kb;
      const bool in_a = gm < p.m && gka < p.k, in_b = gn < p.n && gkb < p.k;
      sA[ka][ra] = in_a ? load_f(A + gm * a_sm + gka * a_sk) : Acc(0);
      sB[kb][rb] = in_b ? load_f(B + gn * b_sn + gkb * b_sk) : Acc(0);
      if constexpr (kFp8) {  // block scales: (a sa)(b sb) is the product the blocks scale
        const GemmParams::BlockScales& s = p.block;
        if (s.row && in_a) sA[ka][ra] *= s.row[gm * s.row_stride_m + (gka / kScaleBlockK) * s.row_stride_k];
        if (s.row && in_b) sB[kb][rb] *= s.col[(gkb / kScaleBlockK) * s.col_stride_k + (gn / kScaleBlockK) * s.col_stride_n];
      }
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTileK; ++kk) {
      const Acc a0 = sA[kk][ty * 2], a1 = sA[kk][ty * 2 + 1];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const Acc b = sB[kk][tx * 8 + j];
        acc[0][j] += a0 * b;
        acc[1][j] += a1 * b;
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int m = m0 + ty * 2 + i;
    if (m >= p.m || n0 + tx * 8 >= p.n) continue;
    if constexpr (std::is_same_v<Acc, int>) epilogue_row8_s32<true>(p, l, m, n0 + tx * 8, p.n, acc[i]);
    else if constexpr (sizeof(T) == 1) epilogue_row8_scaled<true>(p, l, m, n0 + tx * 8, p.n, acc[i]);
    else epilogue_row8<true>(p.epi, l, m, n0 + tx * 8, p.n, acc[i]);
  }
}

}  // namespace

cudaError_t pad_operand(const void* src, int64_t ld, int64_t src_batch_stride, int64_t outer, int64_t contiguous,
                        void* dst, int64_t padded_ld, int64_t batches, cudaStream_t stream) {
  return pad(static_cast<const uint16_t*>(src), ld, src_batch_stride, outer, contiguous, static_cast<uint16_t*>(dst),
             padded_ld, batches, stream);
}

cudaError_t prepare_f32(const float* src, int64_t ld, int64_t src_batch_stride, bool k_major, int64_t rows, int64_t k,
                        float* dst, int64_t padded_k, int split, int64_t batches, cudaStream_t stream) {
  return prepare<float>(src, ld, src_batch_stride, k_major, rows, k, dst, padded_k, split, batches, stream);
}

cudaError_t prepare_8bit(const int8_t* src, int64_t ld, int64_t src_batch_stride, bool k_major, int64_t rows, int64_t k,
                       int8_t* dst, int64_t padded_k, int64_t batches, cudaStream_t stream) {
  // Already K-major (a ragged K or an unaligned row): rows padded 16 bytes at a time, no transpose.
  if (k_major) return pad(src, ld, src_batch_stride, rows, k, dst, padded_k, batches, stream);
  return prepare<int8_t>(src, ld, src_batch_stride, k_major, rows, k, dst, padded_k, 0, batches, stream);
}

cudaError_t simt(int ab_dtype, bool a_k_major, bool b_k_major, const GemmParams& p, cudaStream_t stream) {
  const long long tiles = (long long)((p.n + kTile - 1) / kTile) * ((p.m + kTile - 1) / kTile);
  return launch_batched(p, ab_dtype, [&](const GemmParams& q) {
    const dim3 grid(unsigned(tiles), 1, unsigned(q.batch));
    if (ab_dtype == kBF16) simt_kernel<__nv_bfloat16><<<grid, kThreads, 0, stream>>>(q, a_k_major, b_k_major);
    else if (ab_dtype == kF32) simt_kernel<float><<<grid, kThreads, 0, stream>>>(q, a_k_major, b_k_major);
    else if (ab_dtype == kS8) simt_kernel<int8_t><<<grid, kThreads, 0, stream>>>(q, a_k_major, b_k_major);
    else if (ab_dtype == kE4M3) simt_kernel<__nv_fp8_e4m3><<<grid, kThreads, 0, stream>>>(q, a_k_major, b_k_major);
    else if (ab_dtype == kE5M2) simt_kernel<__nv_fp8_e5m2><<<grid, kThreads, 0, stream>>>(q, a_k_major, b_k_major);
    else simt_kernel<__half><<<grid, kThreads, 0, stream>>>(q, a_k_major, b_k_major);
    return cudaGetLastError();
  });
}

}  // namespace tessera::gemm_impl::fallback
