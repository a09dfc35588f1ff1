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
  bool aligned = true;
  int64_t padded_ld = 0;     // round_up(contiguous extent, 8)
  int64_t padded_batches = 0;
  size_t pad_bytes = 0;      // workspace bytes for the padded copy (256-byte granules)
};

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
  GemmParams params;         // canonical problem, pointing at the caller's operands
  OperandPlan a, b;
  size_t workspace_bytes = 0;  // the pad copies, then the split-K area (0 for aligned operands without split-K)
  size_t splitk_bytes = 0;     // upper bound of the split-K area (partial tiles + counters), after the pads
};

// Precondition: validate(args) succeeded; `flip` only where flip_ok (the heuristic decides, gemm/api.cpp).
// Without `flip` the canonical D is row-major: a column-major D is computed as D^T. With it, the
// other way round: a decode shape's weights can then be the kernel's N operand whatever D's layout
// (128 x 6144 x 4096 with a column-major D: 64 x 96 tiles in pairs, 128 CTAs, where the
// row-major orientation's 64-row tiles give 96).
GemmPlan make_plan(const GemmArgs& args, bool flip = false);

}  // namespace tessera::gemm_impl
