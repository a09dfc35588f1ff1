// cuBLASLt as the oracle (--verify, fp32 output) and the anchor (--compare cublas, the problem's
// own output type) for a GemmProblem: same operands, layouts, batch strides, alpha and beta.
#pragma once

#include <cublasLt.h>

#include <cstddef>
#include <memory>
#include <type_traits>

#include "gemm_problem.hpp"

namespace tessera_cli {

// Workspace offered to cuBLASLt: enough that its heuristic is not steered away from split-K /
// stream-K algorithms by a lack of scratch memory.
constexpr size_t kCublasLtWorkspaceBytes = size_t(32) << 20;

// Whether these headers have cuBLASLt's fp8 scale modes beyond one value per tensor (cuBLAS 12.9 and
// later): row-wise ("outer vector", CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F) and block
// (CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F, CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F).
#if defined(CUBLAS_VERSION) && CUBLAS_VERSION >= 120900
constexpr bool kLtHasScaleModes = true;
#else
constexpr bool kLtHasScaleModes = false;
#endif

// How cuBLASLt reads the fp8 scales (LtFp8Options); all but Scalar need kLtHasScaleModes.
enum class LtScales {
  Scalar,    // one value each (CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F)
  OuterVec,  // OUTER_VEC_32F: scale_a M values (rows of op(A)), scale_b N (columns of op(B))
  // scale_a VEC128_32F (1 x 128 blocks of op(A)), scale_b BLK128x128_32F (128 x 128 blocks of op(B)),
  // laid out as GemmProblem's block scales (K-major operands, as cuBLASLt's fp8 GEMMs want them)
  Block
};

// fp8 operands (CUDA_R_8F_E4M3 / CUDA_R_8F_E5M2 with CUBLAS_COMPUTE_32F and fp32 alpha / beta): the
// dequantisation scales, device pointers to fp32 of the problem's A and B (LtGemm puts each, and its
// mode, in the slot cuBLASLt reads that operand from), and the accumulation mode.
struct LtFp8Options {
  const float* scale_a = nullptr;  // null: 1 (no scale)
  const float* scale_b = nullptr;
  LtScales scales = LtScales::Scalar;
  bool fast_accum = false;  // CUBLASLT_MATMUL_DESC_FAST_ACCUM: no promotion of the tensor cores' sums
};

template <class Handle>
using LtPtr = std::unique_ptr<std::remove_pointer_t<Handle>, cublasStatus_t (*)(Handle)>;

class LtHandle {
 public:
  LtHandle();
  cublasLtHandle_t get() const { return h_.get(); }

 private:
  LtPtr<cublasLtHandle_t> h_;
};

class LtGemm {
 public:
  // Plans `p` with D (and C) of type `d_dtype`, algorithm = cuBLASLt's first heuristic choice for
  // `workspace_bytes` of workspace. Throws if cuBLASLt has none, unless `required` is false: then
  // found() says whether it has one (run() needs one).
  // `compute`: CUBLAS_COMPUTE_32F, or CUBLAS_COMPUTE_32F_FAST_TF32 for the tf32 anchor of fp32 operands,
  // or CUBLAS_COMPUTE_32I for int8 operands (s8 A and B, s32 D, int32 alpha and beta, which must
  // be 1 and 0 here; cuBLASLt's int8 kernels want both operands K-major: the "TN" layout).
  // `fp8` (fp8 operands, CUBLAS_COMPUTE_32F): their scales and accumulation mode; cuBLASLt's fp8
  // kernels want both operands K-major too, and have no e5m2 x e5m2 GEMM.
  LtGemm(cublasLtHandle_t handle, const GemmProblem& p, tessera::DType d_dtype, size_t workspace_bytes,
         cublasComputeType_t compute = CUBLAS_COMPUTE_32F, bool required = true, const LtFp8Options* fp8 = nullptr);
  bool found() const { return found_; }

  // Enqueues one GEMM. `c` is ignored when beta == 0. `workspace` holds at least the
  // `workspace_bytes` given to the constructor.
  void run(const void* a, const void* b, const void* c, void* d, void* workspace, cudaStream_t stream) const;
  // The same, returning cuBLASLt's status instead of throwing (some refusals, such as scale modes the
  // chosen kernel cannot apply, surface only when the GEMM is enqueued).
  cublasStatus_t try_run(const void* a, const void* b, const void* c, void* d, void* workspace,
                         cudaStream_t stream) const;

 private:
  cublasLtHandle_t handle_;
  LtPtr<cublasLtMatmulDesc_t> op_;
  LtPtr<cublasLtMatrixLayout_t> a_, b_, cd_;  // in cuBLASLt's A/B slots (see swap_ab_); C and D share cd_
  cublasLtMatmulAlgo_t algo_{};
  size_t workspace_bytes_;
  float alpha_, beta_;
  bool int_scale_;  // CUBLAS_COMPUTE_32I: alpha and beta are int32 (1 and 0)
  int32_t alpha_i_ = 1, beta_i_ = 0;
  bool found_ = false;
  // cuBLASLt is column-major. A row-major D (M x N) is the column-major D^T (N x M), computed as
  // D^T = op(B)^T op(A)^T: B goes in the A slot and A in the B slot, each with its op flipped.
  // This keeps every operand in the default COL order, which all cuBLASLt algorithms support.
  bool swap_ab_;
};

}  // namespace tessera_cli
