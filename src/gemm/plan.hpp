// Host-side GEMM planning: validation of the public arguments, then canonicalisation to the
// kernels' problem (row-major D; A is M x K, B is N x K, each K-major or MN-major), and the
// decision whether an operand must first be copied into an aligned, padded workspace.
// Pure C++ without CUDA calls, so the CPU tests cover all of it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "gemm/kernel_params.hpp"
#include "tessera/tessera.hpp"

namespace tessera::gemm_impl {

// Every rule of the API; on failure the message names the argument and the rule.
Status validate(const GemmArgs& args);

// One operand of the canonical problem (A: rows = M, B: rows = N).
struct OperandPlan {
  const void* ptr = nullptr;
  int64_t rows = 0, k = 0;
  int64_t ld = 0;            // stride of the non-contiguous mode
  int64_t batch_stride = 0;  // 0 = broadcast
  bool k_major = true;
  // The fast kernels read 16-byte vectors: base 16-byte aligned, ld and batch stride multiples of
  // 8 elements, and a contiguous extent that is a multiple of 8 (so a vector never straddles the
  // edge). Otherwise the operand is copied, zero padded, into the workspace first.
  // fp32 operands (tf32): the kernels read them K-major only, 16-byte aligned with K a multiple of 4;
  // any other fp32 operand, and every 3xTF32 one, is copied K-major into the workspace. s8 and fp8
  // operands likewise, with K a multiple of 16.
  bool aligned = true;
  int64_t padded_ld = 0;     // 16-bit: round_up(contiguous extent, 8); fp32: padded_k, or 3 x padded_k for 3xTF32
  int64_t padded_k = 0;      // K-major copies: K rounded up to 16 bytes (4 fp32, 16 s8), one K range of the copy
  int64_t padded_batches = 0;
  size_t pad_bytes = 0;      // workspace bytes for the padded copy (256-byte granules)
  bool f32 = false;          // fp32 elements: the copy is K-major (whatever the operand's major)
  bool b8 = false;           // 8-bit elements (s8, fp8): as fp32, read K-major only (16-byte aligned, K a multiple of 16)
  // 3xTF32 (fp32 only): the copy lays tf32 high and low parts side by side along K, A as
  // [lo | hi | hi] (kSplitA) and B as [hi | lo | hi] (kSplitB), so that one tf32 GEMM over 3 K sums
  // lo hi + hi lo + hi hi: the small products first, so that the accumulator still holds them at
  // their own scale (added after the large ones, the tensor cores' accumulation dropped most of
  // their bits).
  int split = 0;
  // 32-bit and 8-bit operands: the tensor cores read them K-major only, so their copies are K-major.
  bool copies_k_major() const { return f32 || b8; }
  // The major the kernels read: an fp32 or 8-bit operand reaches them K-major (as it is, or copied so).
  bool kernel_k_major() const { return k_major || copies_k_major(); }
};
// The kernels index with 32-bit coordinates (validate's rule for M, N, K; 3xTF32's tripled K too).
constexpr int64_t kMaxKernelK = 2147483647 - 1024;
enum SplitPattern : int { kSplitNone = 0, kSplitA = 1, kSplitB = 2 };

struct GemmPlan {
  bool empty = false;        // M, N or batch is 0: nothing to do
  // The kernels compute D^T = op(B)^T op(A)^T: D is column-major, unless the plan computes the
  // orientation opposite to D's storage (make_plan's `flip`; the canonical D is then column-major,
  // params.epi.d_col_major, which only the sm90 TMA-store epilogue writes).
  bool swapped = false;
  // The flipped orientation can run there: D is 16-bit of the operands' type, can be TMA-stored
  // (EpilogueParams::d_tma: 16-byte base, leading dimension and batch stride, an extent of whole
  // 16-byte chunks), and beta = 0 or C is stored like D and as aligned.
  bool flip_ok = false;
  int ab_dtype = kF16;
  // The kernels add their accumulators into IEEE fp32 sums as K goes (sm90 Traits::kPromote rows):
  // 3xTF32 always, fp8 unless Precision::Fp8FastAccum.
  bool promote = false;
  GemmParams params;         // canonical problem, pointing at the caller's operands
  // K of the tensor-core kernels once the operands are prepared: 3 x round_up(K, 4) for 3xTF32 (the
  // copies' three K ranges), else K. The fallback runs params.k on the caller's operands.
  int64_t kernel_k = 0;
  OperandPlan a, b;
  size_t workspace_bytes = 0;  // the pad copies, then the split-K area (0 for aligned operands without split-K)
  size_t splitk_bytes = 0;     // upper bound of the split-K area (partial tiles + counters), after the pads
};

// A block-scale matrix (rows x cols at element strides {along rows, along cols}) as a row- or
// column-major matrix with a leading dimension; {0, 0}: row-major, contiguous. A mode of extent 1
// takes any stride. !ok when it is neither.
struct BlockScaleLayout {
  bool ok = false, row_major = true;
  int64_t ld = 1;
};
BlockScaleLayout block_scale_layout(int64_t rows, int64_t cols, const int64_t (&strides)[2]);

// Precondition: validate(args) succeeded; `flip` only where flip_ok (the heuristic decides, gemm/api.cpp).
// Without `flip` the canonical D is row-major: a column-major D is computed as D^T. With it, the
// other way round: a decode shape's weights can then be the kernel's N operand whatever D's layout
// (128 x 6144 x 4096 with a column-major D: 64 x 96 tiles in pairs, 128 CTAs, where the
// row-major orientation's 64-row tiles give 96).
GemmPlan make_plan(const GemmArgs& args, bool flip = false);

}  // namespace tessera::gemm_impl
