#include "cublaslt_gemm.hpp"

#include <climits>
#include <cstdint>

#include "check.hpp"

namespace tessera_cli {
namespace {

using tessera::DType;
using tessera::Op;

cudaDataType cuda_type(DType t) {
  switch (t) {
    case DType::F16: return CUDA_R_16F;
    case DType::BF16: return CUDA_R_16BF;
    case DType::F32: return CUDA_R_32F;
    case DType::S8: return CUDA_R_8I;
    case DType::S32: return CUDA_R_32I;
    case DType::E4M3: return CUDA_R_8F_E4M3;
    case DType::E5M2: return CUDA_R_8F_E5M2;
  }
  throw CliError(kExitCudaError, "cuBLASLt: unknown dtype");
}

cublasOperation_t cublas_op(Op op, bool flip) {
  const bool transpose = (op == Op::T) != flip;
  return transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
}

cublasLtHandle_t create_handle() {
  cublasLtHandle_t h = nullptr;
  CLI_CUBLAS_CHECK(cublasLtCreate(&h));
  return h;
}

LtPtr<cublasLtMatmulDesc_t> make_op(cublasOperation_t trans_a, cublasOperation_t trans_b, cublasComputeType_t compute) {
  cublasLtMatmulDesc_t raw = nullptr;
  const cudaDataType scale = compute == CUBLAS_COMPUTE_32I ? CUDA_R_32I : CUDA_R_32F;
  CLI_CUBLAS_CHECK(cublasLtMatmulDescCreate(&raw, compute, scale));
  LtPtr<cublasLtMatmulDesc_t> op(raw, cublasLtMatmulDescDestroy);
  CLI_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op.get(), CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof trans_a));
  CLI_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op.get(), CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof trans_b));
  return op;
}

// The stored matrix in cuBLASLt's default COL order (a row-major R x C matrix is the column-major
// C x R one), with `dtype` (the reference's D differs from the problem's).
LtPtr<cublasLtMatrixLayout_t> make_layout(const StoredMatrix& s, DType dtype) {
  if (s.batch > INT32_MAX) throw CliError(kExitUsage, "cuBLASLt: batch count must fit in int32");
  cublasLtMatrixLayout_t raw = nullptr;
  CLI_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&raw, cuda_type(dtype), uint64_t(s.inner()), uint64_t(s.outer()), s.ld));
  LtPtr<cublasLtMatrixLayout_t> layout(raw, cublasLtMatrixLayoutDestroy);
  const int32_t count = int32_t(s.batch);
  const int64_t stride = s.batch_stride;  // 0 broadcasts, as in tessera
  CLI_CUBLAS_CHECK(
      cublasLtMatrixLayoutSetAttribute(layout.get(), CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
  CLI_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout.get(), CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                    &stride, sizeof stride));
  return layout;
}

}  // namespace

LtHandle::LtHandle() : h_(create_handle(), cublasLtDestroy) {}

LtGemm::LtGemm(cublasLtHandle_t handle, const GemmProblem& p, DType d_dtype, size_t workspace_bytes,
               cublasComputeType_t compute, bool required, const LtFp8Options* fp8)
    : handle_(handle),
      op_(p.d.row_major ? make_op(cublas_op(p.op_b, true), cublas_op(p.op_a, true), compute)
                        : make_op(cublas_op(p.op_a, false), cublas_op(p.op_b, false), compute)),
      a_(make_layout(p.d.row_major ? p.b : p.a, p.a.dtype)),
      b_(make_layout(p.d.row_major ? p.a : p.b, p.b.dtype)),
      cd_(make_layout(p.d, d_dtype)),
      workspace_bytes_(workspace_bytes),
      alpha_(p.alpha),
      beta_(p.beta),
      int_scale_(compute == CUBLAS_COMPUTE_32I),
      swap_ab_(p.d.row_major) {
  if (int_scale_ && (p.alpha != 1.0f || p.beta != 0.0f))
    throw CliError(kExitUsage, "cuBLASLt int8: the anchor runs with alpha 1 and beta 0");
  if (fp8) {
    // In cuBLASLt's slots: with swap_ab_ its A is the problem's B (and its M the problem's N).
    const void* slot_a = swap_ab_ ? fp8->scale_b : fp8->scale_a;
    const void* slot_b = swap_ab_ ? fp8->scale_a : fp8->scale_b;
    if (slot_a)
      CLI_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_.get(), CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &slot_a,
                                                      sizeof slot_a));
    if (slot_b)
      CLI_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_.get(), CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &slot_b,
                                                      sizeof slot_b));
    if (fp8->scales != LtScales::Scalar) {
#if defined(CUBLAS_VERSION) && CUBLAS_VERSION >= 120900
      const bool block = fp8->scales == LtScales::Block;
      const int32_t mode_a = block ? CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F : CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
      const int32_t mode_b = block ? CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F : CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
      const int32_t slot_mode_a = swap_ab_ ? mode_b : mode_a, slot_mode_b = swap_ab_ ? mode_a : mode_b;
      const cublasStatus_t sa = cublasLtMatmulDescSetAttribute(op_.get(), CUBLASLT_MATMUL_DESC_A_SCALE_MODE,
                                                               &slot_mode_a, sizeof slot_mode_a);
      const cublasStatus_t sb = sa != CUBLAS_STATUS_SUCCESS ? sa
                                : cublasLtMatmulDescSetAttribute(op_.get(), CUBLASLT_MATMUL_DESC_B_SCALE_MODE,
                                                                 &slot_mode_b, sizeof slot_mode_b);
      if (sb != CUBLAS_STATUS_SUCCESS) {
        if (!required) return;  // found_ stays false
        CLI_CUBLAS_CHECK(sb);
      }
#else
      if (!required) return;
      throw CliError(kExitCudaError, "cuBLASLt: these headers have no row-wise or block fp8 scales");
#endif
    }
    const int8_t fast = fp8->fast_accum ? 1 : 0;
    CLI_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op_.get(), CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast));
  }
  cublasLtMatmulPreference_t raw = nullptr;
  CLI_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&raw));
  LtPtr<cublasLtMatmulPreference_t> pref(raw, cublasLtMatmulPreferenceDestroy);
  const uint64_t max_ws = workspace_bytes;
  CLI_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref.get(), CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws,
                                                        sizeof max_ws));
  cublasLtMatmulHeuristicResult_t result{};
  int returned = 0;
  const cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(handle_, op_.get(), a_.get(), b_.get(), cd_.get(),
                                                          cd_.get(), pref.get(), 1, &result, &returned);
  if (!required && s == CUBLAS_STATUS_NOT_SUPPORTED) return;  // found_ stays false
  CLI_CUBLAS_CHECK(s);
  if (returned == 0) {
    if (!required) return;
    throw CliError(kExitCudaError, std::string("cuBLASLt: no algorithm for this problem (D ") + dtype_name(d_dtype) +
                                       ")");
  }
  algo_ = result.algo;
  found_ = true;
}

cublasStatus_t LtGemm::try_run(const void* a, const void* b, const void* c, void* d, void* workspace,
                               cudaStream_t stream) const {
  // With beta == 0 cuBLASLt does not read C, but it still wants a valid pointer: D is one.
  if (!found_) throw CliError(kExitCudaError, "cuBLASLt: run() without an algorithm");
  const void* c_or_d = beta_ != 0.0f ? c : d;
  const void* alpha = int_scale_ ? static_cast<const void*>(&alpha_i_) : &alpha_;
  const void* beta = int_scale_ ? static_cast<const void*>(&beta_i_) : &beta_;
  return cublasLtMatmul(handle_, op_.get(), alpha, swap_ab_ ? b : a, a_.get(), swap_ab_ ? a : b, b_.get(), beta,
                        c_or_d, cd_.get(), d, cd_.get(), &algo_, workspace, workspace_bytes_, stream);
}

void LtGemm::run(const void* a, const void* b, const void* c, void* d, void* workspace, cudaStream_t stream) const {
  CLI_CUBLAS_CHECK(try_run(a, b, c, d, workspace, stream));
}

}  // namespace tessera_cli
