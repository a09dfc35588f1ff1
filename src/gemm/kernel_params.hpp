// Plain-old-data parameters shared by host dispatch and device kernels. No CUDA or CuTe types
// here, so that host code (and the CPU tests) can build and inspect them.
#pragma once
#include <cstdint>

namespace tessera::gemm_impl {

// Element type tags used as template arguments (see dtype.hpp for the mapping to C++ types).
// kS8: int8 operands (int32 accumulators); kS32: their D, the exact sums; kE4M3 / kE5M2: fp8 operands.
enum DTypeTag : int { kF16 = 0, kBF16 = 1, kF32 = 2, kS8 = 3, kS32 = 4, kE4M3 = 5, kE5M2 = 6 };
constexpr bool is_fp8(int dt) { return dt == kE4M3 || dt == kE5M2; }

// Element-wise activation applied last in the epilogue (values = the C ABI's tessera_activation_t).
enum ActivationTag : int { kActNone = 0, kActRelu = 1, kActGelu = 2, kActGeluTanh = 3, kActSilu = 4 };

// Epilogue: D(m, n) = act(alpha * acc(m, n) + beta * C(m, n) + bias(m, n)) for the canonical D,
// row-major unless d_col_major.
struct EpilogueParams {
  void* d = nullptr;            // row-major: D(m, n) at d + l * batch_stride_d + m * ldd + n
  int64_t ldd = 0;
  // The canonical D is column-major: D(m, n) at d + l * batch_stride_d + m + n * ldd. Set when the
  // plan computes the orientation opposite to D's storage (gemm/plan.hpp, `flip`); only the sm90
  // kernels' TMA-store epilogue writes it (their launcher refuses any other epilogue then).
  bool d_col_major = false;
  int64_t batch_stride_d = 0;
  int d_dtype = kF32;           // DTypeTag; C has the same dtype
  bool d_vec = false;           // 16-byte stores are legal (base, ldd and batch stride aligned)
  // D can be written by TMA store: d_vec, and D's contiguous extent (N, or M with d_col_major) fills
  // whole 16-byte chunks. TMA writes a row's last chunk whole: with a ragged extent (e.g. N = 390
  // bf16, ldd = 392) it wrote the padding after every row, and past the last row's end (H100,
  // GemmEpilogue.TmaStoreKeepsThePadding).
  bool d_tma = false;
  const void* c = nullptr;      // null when beta == 0
  int64_t c_stride_m = 0;       // C(m, n) at c + l * batch_stride_c + m * c_stride_m + n * c_stride_n
  int64_t c_stride_n = 0;
  int64_t batch_stride_c = 0;
  bool c_vec = false;           // c_stride_n == 1 and 16-byte loads are legal
  // C can be loaded by TMA into D's sub-tiles: contiguous along D's contiguous mode (c_stride_n == 1,
  // or c_stride_m == 1 with d_col_major), 16-byte base, leading dimension and batch stride, and (as
  // for d_tma) an extent of whole 16-byte chunks, so that no load reaches past C's last element.
  bool c_tma = false;
  float alpha = 1.0f;
  float beta = 0.0f;
  // Bias in D's dtype, null for none: bias(l, m, n) at bias + l * batch_stride_bias + m * bias_stride_m
  // + n * bias_stride_n, where one of the two strides is 0 (a vector per row or per column of D).
  const void* bias = nullptr;
  int64_t bias_stride_m = 0;
  int64_t bias_stride_n = 0;
  int64_t batch_stride_bias = 0;
  bool bias_vec = false;        // bias_stride_n == 1 and 16-byte loads are legal
  int activation = kActNone;    // ActivationTag
};

// How the sm90 persistent grid cuts a problem (gemm/schedule.hpp, chosen by gemm/configs.cpp).
struct Decomposition {
  int splits = 1;         // split-K ranges (1: none)
  bool stream_k = false;  // stream-K (only with splits == 1)
};

// One canonical GEMM: D (M x N, row-major) = A (M x K) * B^T where B is stored N x K.
// A is K-major when a_stride_k == 1, else M-major (a_stride_m == 1); likewise B.
struct GemmParams {
  int m = 0, n = 0, k = 0, batch = 0;
  const void* a = nullptr;
  int64_t lda = 0;              // stride of the non-contiguous mode
  int64_t batch_stride_a = 0;   // 0 = broadcast
  const void* b = nullptr;
  int64_t ldb = 0;
  int64_t batch_stride_b = 0;
  EpilogueParams epi;
  // s8 and fp8 operands with a dequantised D: the sums times scale_m[m * scale_step] * scale_n[n *
  // scale_step] (canonical row m, column n: the caller's scale_a and scale_b, swapped with the
  // orientation) before the epilogue above; null when there are no scales. scale_step: 1 for
  // row-wise vectors, 0 for one value each.
  const float* scale_m = nullptr;
  const float* scale_n = nullptr;
  int scale_step = 0;
  // fp8 block scales (ScaleMode::Block; never the swapped orientation): each 128-deep K block's sums
  // scaled as they are promoted, by row[m * row_stride_m + kb * row_stride_k] (one per row and block)
  // times col[kb * col_stride_k + (n / 128) * col_stride_n] (one per 128 x 128 block of B^T); the
  // epilogue scales nothing more (scale_m null). row null: none.
  struct BlockScales {
    const float* row = nullptr;
    const float* col = nullptr;
    int64_t row_stride_m = 0, row_stride_k = 0, col_stride_k = 0, col_stride_n = 0;
  } block;
};

// K per block-scale block, and per fp8 k-tile of the sm90 rows that apply them.
constexpr int kScaleBlockK = 128;

}  // namespace tessera::gemm_impl
