// Every argument rule of the GEMM API (gemm/validate.cpp and the pre-launch checks of
// gemm/api.cpp), one test per rule, plus the C ABI's bookkeeping (statuses, last error, config
// table). Pointers are fake but aligned device addresses: validation never dereferences them.
#include <gtest/gtest.h>

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>
#include <thread>

#include <cuda_runtime_api.h>

#include "gemm/configs.hpp"
#include "gemm/plan.hpp"
#include "tessera/tessera.h"
#include "tessera/tessera.hpp"

// The library's internal namespace (headers under src/).
namespace ti = tessera::gemm_impl;

namespace {

using tessera::DType;
using tessera::GemmArgs;
using tessera::Layout;
using tessera::Matrix;
using tessera::Op;
using tessera::Precision;
using tessera::ScaleMode;
using tessera::Status;

const void* P(uintptr_t x) { return reinterpret_cast<const void*>(x); }

// Far apart (1 TiB) so that even the huge matrices below do not overlap by accident.
constexpr uintptr_t kA = uintptr_t(1) << 40, kB = uintptr_t(2) << 40, kC = uintptr_t(3) << 40,
                    kD = uintptr_t(4) << 40, kW = uintptr_t(5) << 40, kScaleA = uintptr_t(6) << 40,
                    kScaleB = uintptr_t(7) << 40;
constexpr int64_t kM = 64, kN = 48, kK = 32;

// D (64 x 48, f32, row-major) = A (64 x 32, f16, row-major) * B (32 x 48, f16, row-major); C is set
// (a valid f32 64 x 48 matrix) but beta = 0.
GemmArgs valid_args() {
  GemmArgs g;
  g.a = tessera::dense(P(kA), DType::F16, kM, kK);
  g.b = tessera::dense(P(kB), DType::F16, kK, kN);
  g.c = tessera::dense(P(kC), DType::F32, kM, kN);
  g.d = tessera::dense(P(kD), DType::F32, kM, kN);
  return g;
}

// A batched variant: 3 batches, every matrix batched and packed.
GemmArgs batched_args(int64_t batch = 3) {
  GemmArgs g;
  g.a = tessera::dense(P(kA), DType::F16, kM, kK, Layout::RowMajor, batch);
  g.b = tessera::dense(P(kB), DType::F16, kK, kN, Layout::RowMajor, batch);
  g.c = tessera::dense(P(kC), DType::F32, kM, kN, Layout::RowMajor, batch);
  g.d = tessera::dense(P(kD), DType::F32, kM, kN, Layout::RowMajor, batch);
  return g;
}

bool has_cuda_device() {
  int n = 0;
  const bool ok = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  cudaGetLastError();
  return ok;
}

::testing::AssertionResult contains(const std::string& s, const std::string& needle) {
  if (s.find(needle) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "message \"" << s << "\" does not contain \"" << needle << "\"";
}

// The rule must fail in validate() with INVALID_ARGUMENT and a message naming `needle`, and every
// public entry must report the same without writing anything.
void expect_invalid(const GemmArgs& g, const std::string& needle) {
  const Status s = tessera::gemm_impl::validate(g);
  EXPECT_EQ(s.code, TESSERA_STATUS_INVALID_ARGUMENT) << s.message;
  EXPECT_TRUE(contains(s.message, needle));

  size_t bytes = 12345;
  const Status w = tessera::gemm_workspace_size(g, &bytes);
  EXPECT_EQ(w.code, TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(w.message, s.message);
  EXPECT_EQ(bytes, 12345u) << "gemm_workspace_size wrote its output on invalid input";
  EXPECT_EQ(std::string(tessera_last_error()), s.message);

  // gemm() validates before it looks for a device, so this is safe (and the same) with or without
  // a GPU: nothing is launched.
  const Status r = tessera::gemm(g, nullptr, nullptr, 0);
  EXPECT_EQ(r.code, TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(r.message, s.message);

  // The C ABI agrees.
  const tessera_gemm_args_t c = tessera::to_c(g);
  EXPECT_EQ(tessera_gemm(&c, nullptr, 0, nullptr), TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(std::string(tessera_last_error()), s.message);
}

void expect_valid(const GemmArgs& g) {
  const Status s = tessera::gemm_impl::validate(g);
  EXPECT_TRUE(s.ok()) << s.message;
  size_t bytes = 0;
  EXPECT_TRUE(tessera::gemm_workspace_size(g, &bytes).ok());
}

// ---- the baseline -----------------------------------------------------------------------------

TEST(Validate, BaselineIsValid) {
  expect_valid(valid_args());
  expect_valid(batched_args());
}

// ---- ops, dtype and layout enums ----------------------------------------------------------------

TEST(Validate, OpAMustBeNOrT) {
  GemmArgs g = valid_args();
  g.op_a = Op(2);
  expect_invalid(g, "op_a");
}

TEST(Validate, OpBMustBeNOrT) {
  GemmArgs g = valid_args();
  g.op_b = Op(-1);
  expect_invalid(g, "op_b");
}

TEST(Validate, DtypeMustBeATesseraDtype) {
  for (const char* which : {"a", "b", "d"}) {
    GemmArgs g = valid_args();
    Matrix& m = which[0] == 'a' ? g.a : which[0] == 'b' ? g.b : g.d;
    m.dtype = DType(7);
    expect_invalid(g, std::string(which) + ".dtype");
  }
}

TEST(Validate, LayoutMustBeRowOrColumnMajor) {
  GemmArgs g = valid_args();
  g.b.layout = Layout(5);
  expect_invalid(g, "b.layout");
}

// ---- negative sizes -------------------------------------------------------------------------------

TEST(Validate, NegativeRows) {
  GemmArgs g = valid_args();
  g.a.rows = -1;
  expect_invalid(g, "a.rows");
  g = valid_args();
  g.d.rows = -64;
  expect_invalid(g, "d.rows");
}

TEST(Validate, NegativeCols) {
  GemmArgs g = valid_args();
  g.b.cols = -1;
  expect_invalid(g, "b.cols");
  g = valid_args();
  g.d.cols = -2;
  expect_invalid(g, "d.cols");
}

TEST(Validate, NegativeBatchCount) {
  GemmArgs g = valid_args();
  g.d.batch_count = -1;
  expect_invalid(g, "d.batch_count");
}

TEST(Validate, NegativeBatchStride) {
  GemmArgs g = batched_args();
  g.a.batch_stride = -kM * kK;
  expect_invalid(g, "a.batch_stride");
  g = batched_args();
  g.d.batch_stride = -1;
  expect_invalid(g, "d.batch_stride");
}

// ---- leading dimensions ---------------------------------------------------------------------------

TEST(Validate, LdTooSmallRowMajor) {
  GemmArgs g = valid_args();
  g.a.ld = kK - 1;  // row-major: ld >= cols
  expect_invalid(g, "a.ld");
  expect_invalid(g, "cols");
  g = valid_args();
  g.d.ld = kN - 1;
  expect_invalid(g, "d.ld");
}

TEST(Validate, LdTooSmallColumnMajor) {
  GemmArgs g = valid_args();
  g.b = tessera::dense(P(kB), DType::F16, kK, kN, Layout::ColMajor);
  expect_valid(g);
  g.b.ld = kK - 1;  // column-major: ld >= rows
  expect_invalid(g, "b.ld");
  expect_invalid(g, "rows");
  g = valid_args();
  g.c = tessera::dense(P(kC), DType::F32, kM, kN, Layout::ColMajor);
  g.beta = 1.0f;
  expect_valid(g);
  g.c.ld = kN;  // would be enough for row-major, not for column-major
  expect_invalid(g, "c.ld");
}

TEST(Validate, LdAtLeastOneEvenForAnEmptyMatrix) {
  GemmArgs g = valid_args();
  g.a.cols = 0;  // K = 0
  g.b.rows = 0;
  g.a.ld = 0;
  g.b.ld = kN;
  expect_invalid(g, "a.ld");
  g.a.ld = 1;
  expect_valid(g);
}

// ---- pointers -------------------------------------------------------------------------------------

TEST(Validate, NullPointerForNonEmptyMatrix) {
  for (char which : {'a', 'b', 'd'}) {
    GemmArgs g = valid_args();
    Matrix& m = which == 'a' ? g.a : which == 'b' ? g.b : g.d;
    m.ptr = nullptr;
    expect_invalid(g, std::string(1, which) + ".ptr");
  }
  GemmArgs g = valid_args();
  g.beta = 0.5f;
  g.c.ptr = nullptr;
  expect_invalid(g, "c.ptr");
}

TEST(Validate, NullPointerAllowedForEmptyMatrices) {
  GemmArgs g = valid_args();
  g.a.rows = 0;  // M = 0: A and D have no elements
  g.d.rows = 0;
  g.c.rows = 0;
  g.a.ptr = nullptr;
  g.d.ptr = nullptr;
  expect_valid(g);
  g = valid_args();
  g.a.cols = 0;  // K = 0: A and B have no elements (D does)
  g.b.rows = 0;
  g.a.ld = 1;
  g.a.ptr = nullptr;
  g.b.ptr = nullptr;
  expect_valid(g);
}

TEST(Validate, PointerMustBeElementAligned) {
  GemmArgs g = valid_args();
  g.a.ptr = P(kA + 1);  // f16: 2-byte elements
  expect_invalid(g, "a.ptr");
  expect_invalid(g, "element size");
  g = valid_args();
  g.d.ptr = P(kD + 2);  // f32: 4-byte elements
  expect_invalid(g, "d.ptr");
  g = valid_args();
  g.beta = 1.0f;
  g.c.ptr = P(kC + 6);
  expect_invalid(g, "c.ptr");
  // Element aligned but not 16-byte aligned is valid (it takes the padded or fallback path).
  g = valid_args();
  g.a.ptr = P(kA + 2);
  g.d.ptr = P(kD + 4);
  expect_valid(g);
}

// ---- dtypes -----------------------------------------------------------------------------------------

// fp32 operands run as tf32 (or 3xTF32); precision is theirs alone.
TEST(Validate, F32OperandsAndPrecision) {
  GemmArgs g = valid_args();
  g.a.dtype = DType::F32;
  g.b.dtype = DType::F32;
  expect_valid(g);
  g.precision = Precision::TF32x3;
  expect_valid(g);
  g.precision = Precision::TF32;
  expect_valid(g);
  g.precision = Precision(7);
  expect_invalid(g, "precision");
  expect_invalid(g, "tf32x3 (2)");
  g.a.dtype = g.b.dtype = DType::BF16;
  g.precision = Precision::TF32;
  expect_invalid(g, "precision");
  expect_invalid(g, "bf16");
  g.precision = Precision::Default;
  expect_valid(g);
  g.a.dtype = DType::F32;  // mixed operand dtypes
  expect_invalid(g, "b.dtype");
}

// s8 operands: an s32 D takes the exact sums (no alpha, beta, bias, activation or scales); a 16-bit
// or f32 D takes them dequantised, with scales per tensor or row-wise.
TEST(Validate, S8OperandsS32OutputAndScales) {
  GemmArgs g = valid_args();  // M = kM, N = kN
  g.a.dtype = g.b.dtype = DType::S8;
  g.d.dtype = DType::S32;
  expect_valid(g);
  g.alpha = 2.0f;
  expect_invalid(g, "alpha");
  g.alpha = 1.0f;
  g.beta = 1.0f;
  g.c.dtype = DType::S32;
  expect_invalid(g, "beta");
  g.beta = 0.0f;
  g.activation = tessera::Activation::Relu;
  expect_invalid(g, "activation");
  g.activation = tessera::Activation::None;
  g.bias_mode = tessera::BiasMode::PerColumn;
  g.bias = P(kW);
  expect_invalid(g, "bias_mode");
  g.bias_mode = tessera::BiasMode::None;
  g.bias = nullptr;
  const float* sa = reinterpret_cast<const float*>(kScaleA);
  const float* sb = reinterpret_cast<const float*>(kScaleB);
  g.scale_a = sa;
  expect_invalid(g, "scale_a: must be null");
  g.scale_mode = ScaleMode::Tensor;
  g.scale_b = sb;
  expect_invalid(g, "s32 D takes the int32 sums");  // scales need a float D
  for (DType out : {DType::F16, DType::BF16, DType::F32}) {
    g.d.dtype = out;
    g.scale_mode = ScaleMode::Tensor;
    expect_valid(g);
    g.scale_mode = ScaleMode::RowWise;
    expect_valid(g);
    g.activation = tessera::Activation::Gelu;
    g.alpha = 0.5f;
    expect_valid(g);
    g.activation = tessera::Activation::None;
    g.alpha = 1.0f;
  }
  g.scale_b = nullptr;
  expect_invalid(g, "scale_b: null pointer with scale_mode row-wise (N = ");
  g.scale_b = reinterpret_cast<const float*>(kScaleB + 2);
  expect_invalid(g, "scale_b: not aligned");
  g.scale_b = sb;
  g.scale_mode = ScaleMode(9);
  expect_invalid(g, "scale_mode: must be none (0), tensor (1), row-wise (2) or block (3)");
  g.scale_mode = ScaleMode::Tensor;
  g.scale_a = reinterpret_cast<const float*>(kD);  // on D
  expect_invalid(g, "scale_a: overlaps d");
  g.scale_a = sa;
  expect_valid(g);
  // Unscaled s8 with a float D: the sums converted, alpha applied.
  g.scale_mode = ScaleMode::None;
  g.scale_a = g.scale_b = nullptr;
  expect_valid(g);
  // Types that do not pair.
  g.d.dtype = DType::S8;
  expect_invalid(g, "d.dtype: s8 is an operand type");
  g.d.dtype = DType::S32;
  g.a.dtype = g.b.dtype = DType::BF16;
  expect_invalid(g, "d.dtype: s32 is the output of s8 operands");
  g.d.dtype = DType::BF16;
  g.scale_mode = ScaleMode::Tensor;
  g.scale_a = sa, g.scale_b = sb;
  expect_invalid(g, "scale_mode: scales dequantise s8 and fp8 operands");
  g.scale_mode = ScaleMode::None;
  g.scale_a = g.scale_b = nullptr;
  g.a.dtype = g.b.dtype = DType::S32;
  expect_invalid(g, "a.dtype: s32 is an output type");
  g.a.dtype = DType::S8;
  expect_invalid(g, "b.dtype");  // mixed operand dtypes
  g.b.dtype = DType::S8;
  g.precision = Precision::TF32;
  expect_invalid(g, "precision");
}

// fp8 operands: a float D (never fp8 or s32), scales as for s8, fast accumulation as their precision.
TEST(Validate, Fp8OperandsScalesAndPrecision) {
  GemmArgs g = valid_args();  // D f32
  for (DType t : {DType::E4M3, DType::E5M2}) {
    g.a.dtype = g.b.dtype = t;
    g.precision = Precision::Default;
    g.scale_mode = ScaleMode::None;
    g.scale_a = g.scale_b = nullptr;
    expect_valid(g);
    g.precision = Precision::Fp8FastAccum;
    expect_valid(g);
    g.scale_mode = ScaleMode::RowWise;
    g.scale_a = reinterpret_cast<const float*>(kScaleA);
    g.scale_b = reinterpret_cast<const float*>(kScaleB);
    expect_valid(g);
    g.precision = Precision::TF32;
    expect_invalid(g, "precision: tf32 and tf32x3 apply to f32 operands");
    g.precision = Precision::Default;
    g.d.dtype = t;
    expect_invalid(g, "is an operand type");
    g.d.dtype = DType::S32;
    expect_invalid(g, "d.dtype: s32 is the output of s8 operands");
    g.d.dtype = DType::BF16;
    expect_valid(g);
    g.d.dtype = DType::F32;
  }
  g.b.dtype = DType::E4M3;  // e5m2 x e4m3: one fp8 type per call
  expect_invalid(g, "b.dtype");
  g.a.dtype = g.b.dtype = DType::BF16;
  g.scale_mode = ScaleMode::None;
  g.scale_a = g.scale_b = nullptr;
  g.precision = Precision::Fp8FastAccum;
  expect_invalid(g, "precision: fp8 fast accumulation applies to e4m3 / e5m2 operands");
  g.precision = Precision(4);
  expect_invalid(g, "fp8 fast accumulation (3)");
}

// fp8 block scales: scale_a M x ceil(K/128), scale_b ceil(K/128) x ceil(N/128), row- or column-major at
// the given strides ({0, 0}: row-major, contiguous); fp8 only, D row-major; strides only with this mode.
TEST(Validate, Fp8BlockScales) {
  GemmArgs g = valid_args();  // M = 64, N = 48, K = 32: one K block, one N block
  g.a.dtype = g.b.dtype = DType::E4M3;
  g.d.dtype = DType::BF16;
  g.scale_mode = ScaleMode::Block;
  g.scale_a = reinterpret_cast<const float*>(kScaleA);
  g.scale_b = reinterpret_cast<const float*>(kScaleB);
  expect_valid(g);
  g.precision = Precision::Fp8FastAccum;  // accepted: block scales are applied as the sums are promoted
  expect_valid(g);
  g.precision = Precision::Default;
  g.scale_a_strides[0] = 1, g.scale_a_strides[1] = kM;  // column-major (M-major, as cuBLASLt's)
  expect_valid(g);
  g.scale_a_strides[0] = 2, g.scale_a_strides[1] = 1;  // row-major, rows 2 apart: one K block fits
  expect_valid(g);
  g.scale_a_strides[0] = 3, g.scale_a_strides[1] = 5;  // the one K block's stride is free: still fine
  expect_valid(g);
  g.scale_a_strides[0] = 0;  // but not rows on top of each other
  expect_invalid(g, "scale_a_strides: {0, 5} is not a row- or column-major 64 x 1 matrix");
  g.a = tessera::dense(P(kA), DType::E4M3, kM, 300);  // K = 300: 3 K blocks
  g.b = tessera::dense(P(kB), DType::E4M3, 300, 200);  // N = 200: 2 N blocks
  g.d = tessera::dense(P(kD), DType::BF16, kM, 200);
  g.scale_a_strides[0] = 3, g.scale_a_strides[1] = 1;
  expect_valid(g);
  g.scale_a_strides[0] = 2;  // rows overlap
  expect_invalid(g, "scale_a_strides: {2, 1} is not a row- or column-major 64 x 3 matrix");
  g.scale_a_strides[0] = 1, g.scale_a_strides[1] = 63;  // columns overlap
  expect_invalid(g, "scale_a_strides");
  g.scale_a_strides[0] = 0, g.scale_a_strides[1] = 0;
  g.scale_b_strides[0] = 0, g.scale_b_strides[1] = 3;
  expect_invalid(g, "scale_b_strides: {0, 3} is not a row- or column-major 3 x 2 matrix");
  g.scale_b_strides[0] = 1, g.scale_b_strides[1] = 3;
  expect_valid(g);
  g.scale_b_strides[0] = g.scale_b_strides[1] = 0;
  g.scale_b = nullptr;
  expect_invalid(g, "scale_b: null pointer with scale_mode block (ceil(K/128) x ceil(N/128) = 3 x 2 values)");
  g.scale_b = reinterpret_cast<const float*>(kScaleB + 2);
  expect_invalid(g, "scale_b: not aligned to 4 bytes");
  g.scale_b = reinterpret_cast<const float*>(kScaleB);
  g.scale_a = reinterpret_cast<const float*>(kD + 64);  // inside D
  expect_invalid(g, "scale_a: overlaps d");
  g.scale_a = reinterpret_cast<const float*>(kScaleA);
  g.d = tessera::dense(P(kD), DType::BF16, kM, 200, Layout::ColMajor);
  expect_invalid(g, "d.layout: block-scaled fp8 writes a row-major D");
  g.d = tessera::dense(P(kD), DType::BF16, kM, 200);
  expect_valid(g);
  g.a.dtype = g.b.dtype = DType::S8;
  expect_invalid(g, "scale_mode: block scales (1 x 128 of A, 128 x 128 of B) are for fp8 operands; a and b are s8");
  g.a.dtype = g.b.dtype = DType::E5M2;
  expect_valid(g);
  g.scale_mode = ScaleMode::RowWise;  // strides belong to block scales only
  g.scale_a_strides[1] = 1;
  expect_invalid(g, "scale_a_strides: must be {0, 0} unless scale_mode is block");
  g.scale_a_strides[1] = 0;
  g.scale_b_strides[0] = 4;
  expect_invalid(g, "scale_b_strides: must be {0, 0} unless scale_mode is block");
}

TEST(Validate, BDtypeMustEqualADtype) {
  GemmArgs g = valid_args();
  g.b.dtype = DType::BF16;
  expect_invalid(g, "b.dtype");
  g.a.dtype = DType::BF16;
  expect_valid(g);
}

TEST(Validate, CDtypeMustEqualDDtypeWhenBetaNonZero) {
  GemmArgs g = valid_args();
  g.beta = 2.0f;
  g.c.dtype = DType::F16;  // D is f32
  expect_invalid(g, "c.dtype");
  g.beta = 0.0f;  // C is not read: its dtype does not matter
  expect_valid(g);
}

TEST(Validate, AllOutputDtypesAccepted) {
  for (DType ab : {DType::F16, DType::BF16})
    for (DType dt : {DType::F16, DType::BF16, DType::F32}) {
      GemmArgs g = valid_args();
      g.a.dtype = g.b.dtype = ab;
      g.c.dtype = g.d.dtype = dt;
      g.beta = 1.0f;
      expect_valid(g);
    }
}

// ---- shapes ------------------------------------------------------------------------------------------

TEST(Validate, KMustAgree) {
  GemmArgs g = valid_args();
  g.b = tessera::dense(P(kB), DType::F16, kK + 1, kN);
  expect_invalid(g, "b:");
  expect_invalid(g, "K must agree");
  // op() is taken into account: op_b = T with B stored N x K is fine.
  g = valid_args();
  g.op_b = Op::T;
  g.b = tessera::dense(P(kB), DType::F16, kN, kK);
  expect_valid(g);
  g.op_a = Op::T;  // now op(A) = A^T is 32 x 64: K = 64 != 32
  expect_invalid(g, "K must agree");
}

TEST(Validate, DShapeMustBeMxN) {
  GemmArgs g = valid_args();
  g.d = tessera::dense(P(kD), DType::F32, kM + 1, kN);
  expect_invalid(g, "d:");
  expect_invalid(g, "64 x 48");
  g = valid_args();
  g.d = tessera::dense(P(kD), DType::F32, kN, kM);  // transposed
  expect_invalid(g, "d:");
}

TEST(Validate, CShapeMustBeMxNOnlyWhenBetaNonZero) {
  GemmArgs g = valid_args();
  g.c = tessera::dense(P(kC), DType::F32, kM, kN + 1);
  g.beta = -1.0f;
  expect_invalid(g, "c:");
  expect_invalid(g, "beta != 0");
  g.beta = 0.0f;
  expect_valid(g);
}

TEST(Validate, CIgnoredWhenBetaIsZero) {
  // beta == 0: C is not read, so nothing about it is checked (not even a null or garbage matrix).
  GemmArgs g = valid_args();
  g.c = Matrix{};
  expect_valid(g);
  g.c.ptr = P(kD + 4);  // would partially overlap D
  g.c.rows = -5;
  g.c.ld = 0;
  g.c.dtype = DType(9);
  g.c.batch_count = 77;
  expect_valid(g);
  g.c = g.d;  // in place, fine either way
  expect_valid(g);
}

// ---- batch counts -------------------------------------------------------------------------------------

TEST(Validate, OperandBatchCountMustBeOneOrD) {
  GemmArgs g = batched_args(3);
  g.a.batch_count = 2;
  expect_invalid(g, "a.batch_count");
  g = batched_args(3);
  g.b.batch_count = 4;
  expect_invalid(g, "b.batch_count");
  g = batched_args(3);
  g.beta = 1.0f;
  g.c.batch_count = 0;
  expect_invalid(g, "c.batch_count");
  g.beta = 0.0f;  // C ignored
  expect_valid(g);
}

TEST(Validate, BroadcastOperandsAreValid) {
  GemmArgs g = batched_args(3);
  g.a.batch_count = 1;  // one A for every batch
  g.a.batch_stride = 0;
  expect_valid(g);
  g = batched_args(3);
  g.b.batch_stride = 0;  // batch_count = 3 with stride 0 broadcasts too
  expect_valid(g);
  g = batched_args(3);
  g.beta = 1.0f;
  g.c.batch_count = 1;
  g.c.batch_stride = 0;
  expect_valid(g);
}

TEST(Validate, DBatchesMustNotOverlap) {
  GemmArgs g = batched_args(3);
  g.d.batch_stride = 0;  // every batch writes the same memory
  expect_invalid(g, "d.batch_stride");
  g = batched_args(3);
  g.d.batch_stride = kM * kN - 1;  // one element too small
  expect_invalid(g, "d.batch_stride");
  g = batched_args(3);
  g.d.batch_stride = kM * kN;  // packed
  expect_valid(g);
  g.d.batch_stride = kM * kN + 17;  // padded
  expect_valid(g);
  g = valid_args();
  g.d.batch_stride = 0;  // a single batch may have stride 0
  expect_valid(g);
}

TEST(Validate, InterleavedBatchesOfDAreLegal) {
  // Row-major: batch l of row r at r * (batch * N) + l * N: ld = batch * cols, batch_stride = cols.
  GemmArgs g = batched_args(3);
  g.d.ld = 3 * kN;
  g.d.batch_stride = kN;
  expect_valid(g);
  g.d.ld = 3 * kN - 1;  // rows then overlap the next batch's
  expect_invalid(g, "d.batch_stride");
  // Column-major interleaved.
  g = batched_args(3);
  g.d = tessera::dense(P(kD), DType::F32, kM, kN, Layout::ColMajor, 3);
  g.d.ld = 3 * kM;
  g.d.batch_stride = kM;
  expect_valid(g);
  g.d.batch_stride = kM - 1;
  expect_invalid(g, "d.batch_stride");
}

// ---- aliasing -------------------------------------------------------------------------------------------

TEST(Validate, DMustNotOverlapA) {
  GemmArgs g = valid_args();
  g.d.ptr = P(kA);
  expect_invalid(g, "d: overlaps a");
  // D starting on A's last element overlaps; D starting right after A's last byte does not.
  const uintptr_t a_end = kA + uintptr_t(kM * kK * 2);
  g.d.ptr = P(a_end - 4);
  expect_invalid(g, "d: overlaps a");
  g.d.ptr = P(a_end);
  expect_valid(g);
  // D ending right before A.
  g.d.ptr = P(kA - uintptr_t(kM * kN * 4));
  expect_valid(g);
  g.d.ptr = P(kA - uintptr_t(kM * kN * 4) + 4);
  expect_invalid(g, "d: overlaps a");
}

TEST(Validate, DMustNotOverlapB) {
  GemmArgs g = valid_args();
  g.d.ptr = P(kB + 64);
  expect_invalid(g, "d: overlaps b");
}

TEST(Validate, DMustNotOverlapABatches) {
  // Overlap with a later batch of A counts too.
  GemmArgs g = batched_args(3);
  g.d.ptr = P(kA + uintptr_t(2 * kM * kK * 2));  // A's third batch
  expect_invalid(g, "d: overlaps a");
}

TEST(Validate, CMayBeDInPlace) {
  GemmArgs g = valid_args();
  g.beta = 1.0f;
  g.c = g.d;
  expect_valid(g);
  g = batched_args(3);
  g.beta = 1.0f;
  g.c = g.d;
  expect_valid(g);
}

TEST(Validate, CMustNotPartiallyOverlapD) {
  GemmArgs g = valid_args();
  g.beta = 1.0f;
  g.c.ptr = P(kD + 4);  // shifted by one element
  expect_invalid(g, "c: overlaps d");
  g = valid_args();
  g.beta = 1.0f;
  g.c = g.d;
  g.c.ld = kN + 8;  // same pointer but a different matrix
  g.d.ld = kN;
  expect_invalid(g, "c: overlaps d");
  g = valid_args();
  g.beta = 1.0f;
  g.c = g.d;
  g.c.layout = Layout::ColMajor;  // same memory read transposed
  g.c.ld = kM;
  expect_invalid(g, "c: overlaps d");
  g = batched_args(3);
  g.beta = 1.0f;
  g.c = g.d;
  g.c.batch_count = 1;  // C's single batch aliases D's first batch
  g.c.batch_stride = 0;
  expect_invalid(g, "c: overlaps d");
}

// ---- 32-bit problem dimensions and 64-bit spans ----------------------------------------------------------

TEST(Validate, ProblemSizesBelow2To31) {
  const int64_t big = int64_t(1) << 31;
  const int64_t max_extent = big - 1025;  // tile coordinates must fit in 32 bits
  // M = 2^31 (A: M x 1, B: 1 x 1, D: M x 1).
  GemmArgs g;
  g.a = tessera::dense(P(kA), DType::F16, big, 1);
  g.b = tessera::dense(P(kB), DType::F16, 1, 1);
  g.d = tessera::dense(P(kD), DType::F32, big, 1);
  expect_invalid(g, "2^31");
  expect_invalid(g, "M=2147483648");
  g.a.rows = g.d.rows = max_extent + 1;
  expect_invalid(g, "2^31 - 1025");
  g.a.rows = g.d.rows = max_extent;  // the largest accepted
  expect_valid(g);
  // N = 2^31.
  g = GemmArgs{};
  g.a = tessera::dense(P(kA), DType::F16, 1, 1);
  g.b = tessera::dense(P(kB), DType::F16, 1, big);
  g.d = tessera::dense(P(kD), DType::F32, 1, big);
  expect_invalid(g, "N=2147483648");
  // K = 2^31.
  g = GemmArgs{};
  g.a = tessera::dense(P(kA), DType::F16, 1, big);
  g.b = tessera::dense(P(kB), DType::F16, big, 1);
  g.d = tessera::dense(P(kD), DType::F32, 1, 1);
  expect_invalid(g, "K=2147483648");
  // batch = 2^31.
  g = GemmArgs{};
  g.a = tessera::dense(P(kA), DType::F16, 1, 1);
  g.b = tessera::dense(P(kB), DType::F16, 1, 1);
  g.d = tessera::dense(P(kD), DType::F32, 1, 1);
  g.d.batch_count = big;
  g.d.batch_stride = 1;
  expect_invalid(g, "batch=2147483648");
}

TEST(Validate, SpanMustNotOverflow) {
  GemmArgs g = valid_args();
  g.a.ld = int64_t(1) << 62;  // (rows - 1) * ld overflows int64
  expect_invalid(g, "a:");
  expect_invalid(g, "2^63");
  g = batched_args(3);
  g.b.batch_stride = int64_t(1) << 62;  // (batch - 1) * stride overflows
  expect_invalid(g, "b:");
  g = valid_args();
  // Fits in int64 elements but not in bytes (f32: 4 bytes per element).
  g.d.ld = (int64_t(1) << 62) / (kM - 1) + 1;
  expect_invalid(g, "d:");
  expect_invalid(g, "2^63");
}

// ---- bias and activation --------------------------------------------------------------------------------

// valid_args() with a per-column (N = 48) or per-row (M = 64) f32 bias at kW.
GemmArgs with_bias(tessera::BiasMode mode, uintptr_t at = kW) {
  GemmArgs g = valid_args();
  g.bias = P(at);
  g.bias_mode = mode;
  return g;
}

TEST(Validate, BiasAndActivationCodesMatchTheKernels) {
  static_assert(TESSERA_BIAS_NONE == 0 && TESSERA_BIAS_PER_COLUMN == 1 && TESSERA_BIAS_PER_ROW == 2);
  static_assert(int(TESSERA_ACTIVATION_NONE) == ti::kActNone && int(TESSERA_ACTIVATION_RELU) == ti::kActRelu &&
                int(TESSERA_ACTIVATION_GELU) == ti::kActGelu &&
                int(TESSERA_ACTIVATION_GELU_TANH) == ti::kActGeluTanh && int(TESSERA_ACTIVATION_SILU) == ti::kActSilu);
  const GemmArgs g;  // the defaults: no bias, no activation
  EXPECT_EQ(g.bias, nullptr);
  EXPECT_EQ(g.bias_mode, tessera::BiasMode::None);
  EXPECT_EQ(g.bias_batch_stride, 0);
  EXPECT_EQ(g.activation, tessera::Activation::None);
}

TEST(Validate, EveryBiasModeAndActivationAccepted) {
  for (auto mode : {tessera::BiasMode::None, tessera::BiasMode::PerColumn, tessera::BiasMode::PerRow})
    for (auto act : {tessera::Activation::None, tessera::Activation::Relu, tessera::Activation::Gelu,
                     tessera::Activation::GeluTanh, tessera::Activation::Silu}) {
      GemmArgs g = with_bias(mode);
      if (mode == tessera::BiasMode::None) g.bias = nullptr;
      g.activation = act;
      expect_valid(g);
      g = batched_args(3);  // batched, with one bias vector per batch
      g.bias = mode == tessera::BiasMode::None ? nullptr : P(kW);
      g.bias_mode = mode;
      g.bias_batch_stride = mode == tessera::BiasMode::None ? 0 : 64;
      g.activation = act;
      expect_valid(g);
    }
}

TEST(Validate, BiasModeMustBeKnown) {
  GemmArgs g = with_bias(tessera::BiasMode(3));
  expect_invalid(g, "bias_mode");
  g.bias_mode = tessera::BiasMode(-1);
  expect_invalid(g, "bias_mode");
}

TEST(Validate, ActivationMustBeKnown) {
  GemmArgs g = valid_args();
  g.activation = tessera::Activation(5);
  expect_invalid(g, "activation");
  g.activation = tessera::Activation(-1);
  expect_invalid(g, "activation");
}

TEST(Validate, BiasNullWithAMode) {
  for (auto mode : {tessera::BiasMode::PerColumn, tessera::BiasMode::PerRow}) {
    GemmArgs g = with_bias(mode);
    g.bias = nullptr;
    expect_invalid(g, "bias: null pointer");
    expect_invalid(g, mode == tessera::BiasMode::PerColumn ? "N = 48" : "M = 64");
  }
  // As for the matrices, an empty vector may be null: per-row with M = 0, or no batches.
  GemmArgs g = with_bias(tessera::BiasMode::PerRow, 0);
  g.a.rows = g.d.rows = 0;
  expect_valid(g);
  g = batched_args(0);
  g.bias_mode = tessera::BiasMode::PerColumn;
  expect_valid(g);
}

TEST(Validate, BiasWithoutAMode) {
  GemmArgs g = with_bias(tessera::BiasMode::None);
  expect_invalid(g, "bias: must be null when bias_mode is none");
}

TEST(Validate, BiasMustBeElementAligned) {
  GemmArgs g = with_bias(tessera::BiasMode::PerColumn, kW + 2);  // D (and so the bias) is f32
  expect_invalid(g, "bias: not aligned");
  g.bias = P(kW + 4);  // element aligned but not 16-byte aligned: valid (scalar loads)
  expect_valid(g);
  g.c.dtype = g.d.dtype = DType::BF16;  // 2-byte bias
  g.bias = P(kW + 1);
  expect_invalid(g, "bias: not aligned");
  g.bias = P(kW + 2);
  expect_valid(g);
}

TEST(Validate, BiasBatchStrideMustBeNonNegative) {
  GemmArgs g = batched_args(3);
  g.bias = P(kW);
  g.bias_mode = tessera::BiasMode::PerRow;
  g.bias_batch_stride = -64;
  expect_invalid(g, "bias_batch_stride");
  g.bias_batch_stride = 0;  // one vector for every batch
  expect_valid(g);
  g.bias_batch_stride = 1;  // overlapping vectors are only read: fine
  expect_valid(g);
}

TEST(Validate, BiasSpanMustNotOverflow) {
  GemmArgs g = batched_args(3);
  g.bias = P(kW);
  g.bias_mode = tessera::BiasMode::PerColumn;
  g.bias_batch_stride = int64_t(1) << 62;  // (batch - 1) * stride overflows
  expect_invalid(g, "bias:");
  expect_invalid(g, "2^63");
  g.bias_batch_stride = (int64_t(1) << 61);  // fits in elements, not in bytes (f32)
  expect_invalid(g, "2^63");
  g = valid_args();  // a single batch never steps: any stride is harmless
  g.bias = P(kW);
  g.bias_mode = tessera::BiasMode::PerColumn;
  g.bias_batch_stride = int64_t(1) << 62;
  expect_valid(g);
}

TEST(Validate, BiasMustNotOverlapD) {
  const uintptr_t d_end = kD + uintptr_t(kM * kN * 4);
  expect_invalid(with_bias(tessera::BiasMode::PerColumn, kD), "bias: overlaps d");
  expect_invalid(with_bias(tessera::BiasMode::PerColumn, d_end - 4), "bias: overlaps d");
  expect_valid(with_bias(tessera::BiasMode::PerColumn, d_end));
  // Right before D: N = 48 values fit in front of it, M = 64 (per-row) do not.
  const uintptr_t before = kD - uintptr_t(kN * 4);
  expect_valid(with_bias(tessera::BiasMode::PerColumn, before));
  expect_invalid(with_bias(tessera::BiasMode::PerRow, before), "bias: overlaps d");
  // A later batch's vector landing in D counts too; a shared (stride 0) vector has only the first.
  GemmArgs g = batched_args(3);
  g.bias_mode = tessera::BiasMode::PerColumn;
  g.bias = P(kD - 4000 * 4);
  g.bias_batch_stride = 4000;  // batch 1's vector starts at D
  expect_invalid(g, "bias: overlaps d");
  g.bias_batch_stride = 0;
  expect_valid(g);
  // Reading the same memory as A, B or C is fine: none of them is written.
  expect_valid(with_bias(tessera::BiasMode::PerRow, kA));
  expect_valid(with_bias(tessera::BiasMode::PerRow, kB + 64));
  g = with_bias(tessera::BiasMode::PerColumn, kC);
  g.beta = 1.0f;
  expect_valid(g);
}

// ---- configuration names ---------------------------------------------------------------------------------

TEST(Validate, UnknownConfigName) {
  GemmArgs g = valid_args();
  g.config = "sm80_no_such_tile";
  expect_invalid(g, "config");
  expect_invalid(g, "sm80_no_such_tile");
  expect_invalid(g, "sm80_128x256x64_s3_w8");  // the message lists the known ones
}

TEST(Validate, EveryKnownConfigNameAccepted) {
  int flippable = 0;
  for (const tessera::ConfigInfo& c : tessera::gemm_configs()) {
    GemmArgs g = valid_args();
    g.config = c.name;
    expect_valid(g);
    // "+flip" (the flipped orientation) only after a config that can take it; the argument check
    // does not look at the problem (gemm() refuses a call the flip cannot run as NOT_SUPPORTED).
    g.config = c.name + "+flip";
    if (c.flippable) {
      expect_valid(g);
      ++flippable;
    } else {
      expect_invalid(g, "config");
      expect_invalid(g, "cannot run on the flipped orientation");
    }
  }
  EXPECT_GE(flippable, 1);
}

TEST(Validate, FlipSpellings) {
  GemmArgs g = valid_args();
  for (const char* bad : {"+flip", "sm90_64x96x64_s10_c2_coop+Flip", "sm90_64x96x64_s10_c2_coop+flip+flip",
                          "sm90_64x96x64_s10_c2_coop flip", "sm90_no_such+flip"}) {
    g.config = bad;
    expect_invalid(g, "config");
    expect_invalid(g, "+flip after");  // the message says how to spell it, and after which configs
  }
  // The spelling helpers agree with the table.
  for (const ti::Config& c : ti::configs()) {
    const ti::ConfigChoice natural = ti::find_config_choice(c.name);
    EXPECT_EQ(natural.config, &c);
    EXPECT_FALSE(natural.flip);
    const ti::ConfigChoice flipped = ti::find_config_choice(std::string(c.name) + "+flip");
    EXPECT_EQ(flipped.config, c.flip ? &c : nullptr);  // refused on a config that cannot flip
    EXPECT_EQ(flipped.flip, c.flip);
    EXPECT_STREQ(ti::config_spelling(c, false), c.name);
    EXPECT_EQ(std::string(ti::config_spelling(c, true)), std::string(c.name) + "+flip");
    if (!c.flip) {
      EXPECT_NE(ti::spelling_error(ti::config_spelling(c, true)).find("cannot run on the flipped"), std::string::npos);
    }
  }
}

// ---- api.cpp's checks before the device is touched ----------------------------------------------------------

TEST(ApiChecks, WorkspaceNullWithBytes) {
  const Status s = tessera::gemm(valid_args(), nullptr, nullptr, 1024);
  EXPECT_EQ(s.code, TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(s.message, "workspace"));
  EXPECT_EQ(std::string(tessera_last_error()), s.message);
}

TEST(ApiChecks, WorkspaceMustBe256Aligned) {
  for (uintptr_t off : {2u, 16u, 128u, 255u}) {
    const Status s = tessera::gemm(valid_args(), nullptr, reinterpret_cast<void*>(kW + off), 4096);
    EXPECT_EQ(s.code, TESSERA_STATUS_INVALID_ARGUMENT) << off;
    EXPECT_TRUE(contains(s.message, "workspace"));
    EXPECT_TRUE(contains(s.message, "256"));
  }
}

TEST(ApiChecks, ValidationComesBeforeWorkspaceChecks) {
  GemmArgs g = valid_args();
  g.a.rows = -1;
  const Status s = tessera::gemm(g, nullptr, reinterpret_cast<void*>(kW + 1), 4096);
  EXPECT_EQ(s.code, TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(s.message, "a.rows"));
}

TEST(ApiChecks, WorkspaceSizeNullOutput) {
  const Status s = tessera::gemm_workspace_size(valid_args(), nullptr);
  EXPECT_EQ(s.code, TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(s.message, "bytes"));
}

TEST(ApiChecks, SelectConfigNullOutput) {
  const Status s = tessera::gemm_select_config(valid_args(), nullptr);
  EXPECT_EQ(s.code, TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(s.message, "name"));
}

TEST(ApiChecks, SelectConfigValidatesFirst) {
  GemmArgs g = valid_args();
  g.d.cols = kN + 1;
  std::string name = "untouched";
  const Status s = tessera::gemm_select_config(g, &name);
  EXPECT_EQ(s.code, TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(name, "untouched");
}

// The measurement overrides in the environment are validated before the device: a malformed value
// is an argument error naming the variable (not silently the default).
TEST(ApiChecks, EnvironmentOverridesAreValidatedBeforeTheDevice) {
  struct Env {  // the library reads the environment once: re-read it
    const char* name;
    Env(const char* n, const char* v) : name(n) {
      ::setenv(n, v, 1);
      tessera::reread_environment();
    }
    ~Env() {
      ::unsetenv(name);
      tessera::reread_environment();
    }
  };
  struct Bad {
    const char* var;
    std::vector<const char*> values;
    const char* good;
  };
  const Bad cases[] = {{"TESSERA_GEMM_SPLITS", {"0", "129", "-1", "2x", "many"}, "4"},
                       {"TESSERA_GEMM_STREAMK", {"2", "-1", "yes", "1 "}, "1"},
                       {"TESSERA_SM90_EPILOGUE", {"TMA", "smem", "fp32", "auto"}, "staged"},
                       {"TESSERA_GEMM_PDL", {"2", "on", "off", "0 "}, "0"},
                       {"TESSERA_GEMM_ONE_TILE", {"2", "on", "off", "1 "}, "0"},
                       {"TESSERA_GEMM_FLIP", {"2", "-1", "yes", "1 "}, "1"},
                       {"TESSERA_GEMM_L2_WARM", {"-1", "65", "4k", "some"}, "8"}};
  for (const Bad& c : cases) {
    for (const char* bad : c.values) {
      Env e(c.var, bad);
      const Status s = tessera::gemm(valid_args(), nullptr, nullptr, 0);
      EXPECT_EQ(s.code, TESSERA_STATUS_INVALID_ARGUMENT) << c.var << "=" << bad << ": " << s.message;
      EXPECT_TRUE(contains(s.message, c.var)) << s.message;
    }
    if (!has_cuda_device()) {  // a valid value gets as far as the missing device
      Env e(c.var, c.good);
      EXPECT_EQ(tessera::gemm(valid_args(), nullptr, nullptr, 0).code, TESSERA_STATUS_CUDA_ERROR) << c.var;
    }
  }
}

TEST(ApiChecks, ZeroSizeProblemsSucceedWithoutADevice) {
  // M = 0, N = 0 or batch = 0: nothing to do, SUCCESS before any device query (even on a machine
  // without a GPU, and with null pointers for the empty matrices).
  GemmArgs m0 = valid_args();
  m0.a.rows = m0.c.rows = m0.d.rows = 0;
  m0.a.ptr = m0.d.ptr = nullptr;
  GemmArgs n0 = valid_args();
  n0.b.cols = n0.c.cols = n0.d.cols = 0;
  n0.b.ld = n0.c.ld = n0.d.ld = 1;
  n0.b.ptr = n0.d.ptr = nullptr;
  GemmArgs b0 = batched_args(3);
  b0.a.batch_count = b0.b.batch_count = b0.c.batch_count = b0.d.batch_count = 0;
  b0.a.ptr = b0.b.ptr = b0.d.ptr = nullptr;
  for (const GemmArgs* g : {&m0, &n0, &b0}) {
    tessera_gemm(nullptr, nullptr, 0, nullptr);  // leave an error behind
    const Status s = tessera::gemm(*g, nullptr, nullptr, 0);
    EXPECT_TRUE(s.ok()) << s.message;
    EXPECT_STREQ(tessera_last_error(), "") << "success must clear the last error";
    size_t bytes = 99;
    EXPECT_TRUE(tessera::gemm_workspace_size(*g, &bytes).ok());
    EXPECT_EQ(bytes, 0u);
    const tessera_gemm_args_t c = tessera::to_c(*g);
    EXPECT_EQ(tessera_gemm(&c, nullptr, 0, nullptr), TESSERA_STATUS_SUCCESS);
  }
}

TEST(ApiChecks, ValidCallWithoutADeviceIsACudaError) {
  if (has_cuda_device()) GTEST_SKIP() << "a CUDA device is present (this test needs a machine without one)";
  for (const GemmArgs& g : {valid_args(), batched_args(3)}) {
    const Status s = tessera::gemm(g, nullptr, nullptr, 0);
    EXPECT_EQ(s.code, TESSERA_STATUS_CUDA_ERROR) << s.message;
    EXPECT_FALSE(s.message.empty());
    EXPECT_STRNE(tessera_last_error(), "");
  }
  // K = 0 is not empty (D = beta * C must still be written): it needs the device too.
  GemmArgs k0 = valid_args();
  k0.a.cols = 0;
  k0.a.ld = 1;
  k0.b.rows = 0;
  EXPECT_EQ(tessera::gemm(k0, nullptr, nullptr, 0).code, TESSERA_STATUS_CUDA_ERROR);
  // So does choosing a configuration.
  std::string name;
  EXPECT_EQ(tessera::gemm_select_config(valid_args(), &name).code, TESSERA_STATUS_CUDA_ERROR);
  const tessera_gemm_args_t c = tessera::to_c(valid_args());
  const char* cname = nullptr;
  EXPECT_EQ(tessera_gemm_select_config(&c, &cname), TESSERA_STATUS_CUDA_ERROR);
}

// ---- C ABI ------------------------------------------------------------------------------------------

TEST(CApi, NullArgs) {
  size_t bytes = 0;
  const char* name = nullptr;
  EXPECT_EQ(tessera_gemm(nullptr, nullptr, 0, nullptr), TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(tessera_last_error(), "args"));
  EXPECT_EQ(tessera_gemm_workspace_size(nullptr, &bytes), TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(tessera_last_error(), "args"));
  EXPECT_EQ(tessera_gemm_select_config(nullptr, &name), TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(tessera_last_error(), "args"));
  const tessera_gemm_args_t c = tessera::to_c(valid_args());
  EXPECT_EQ(tessera_gemm_select_config(&c, nullptr), TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(tessera_last_error(), "name"));
  EXPECT_EQ(tessera_gemm_workspace_size(&c, nullptr), TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(tessera_last_error(), "bytes"));
}

TEST(CApi, LastErrorSetOnFailureClearedOnSuccess) {
  tessera_gemm_args_t c = tessera::to_c(valid_args());
  size_t bytes = 0;
  ASSERT_EQ(tessera_gemm_workspace_size(&c, &bytes), TESSERA_STATUS_SUCCESS);
  EXPECT_STREQ(tessera_last_error(), "");
  c.a.rows = -3;
  EXPECT_EQ(tessera_gemm_workspace_size(&c, &bytes), TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(tessera_last_error(), "a.rows"));
  c.a.rows = kM;
  EXPECT_EQ(tessera_gemm_workspace_size(&c, &bytes), TESSERA_STATUS_SUCCESS);
  EXPECT_STREQ(tessera_last_error(), "");
}

TEST(CApi, LastErrorIsPerThread) {
  tessera_gemm_args_t bad = tessera::to_c(valid_args());
  bad.op_a = tessera_op_t(9);
  size_t bytes = 0;
  ASSERT_EQ(tessera_gemm_workspace_size(&bad, &bytes), TESSERA_STATUS_INVALID_ARGUMENT);
  const std::string mine = tessera_last_error();
  EXPECT_TRUE(contains(mine, "op_a"));
  std::string other;
  std::thread t([&] {
    other = tessera_last_error();  // nothing failed on this thread yet
    tessera_gemm(nullptr, nullptr, 0, nullptr);
  });
  t.join();
  EXPECT_EQ(other, "");
  EXPECT_EQ(std::string(tessera_last_error()), mine);
}

TEST(CApi, InvalidEnumsThroughTheCStructs) {
  tessera_gemm_args_t c = tessera::to_c(valid_args());
  c.b.dtype = tessera_dtype_t(42);
  size_t bytes = 0;
  EXPECT_EQ(tessera_gemm_workspace_size(&c, &bytes), TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(tessera_last_error(), "b.dtype"));
  c = tessera::to_c(valid_args());
  c.d.layout = tessera_layout_t(3);
  EXPECT_EQ(tessera_gemm(&c, nullptr, 0, nullptr), TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(tessera_last_error(), "d.layout"));
  c = tessera::to_c(valid_args());
  c.op_b = tessera_op_t(2);
  EXPECT_EQ(tessera_gemm(&c, nullptr, 0, nullptr), TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(tessera_last_error(), "op_b"));
  c = tessera::to_c(valid_args());
  c.bias_mode = tessera_bias_mode_t(7);
  EXPECT_EQ(tessera_gemm(&c, nullptr, 0, nullptr), TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(tessera_last_error(), "bias_mode"));
  c = tessera::to_c(valid_args());
  c.activation = tessera_activation_t(9);
  EXPECT_EQ(tessera_gemm_workspace_size(&c, &bytes), TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(tessera_last_error(), "activation"));
}

TEST(CApi, ZeroInitialisedBiasFieldsMeanNone) {
  // A caller written before the bias fields existed zero-initialises the struct and fills the rest.
  tessera_gemm_args_t c{};
  const tessera_gemm_args_t full = tessera::to_c(valid_args());
  c.op_a = full.op_a;
  c.op_b = full.op_b;
  c.a = full.a;
  c.b = full.b;
  c.c = full.c;
  c.d = full.d;
  c.alpha = 1.0f;
  const GemmArgs r = tessera::from_c(c);
  EXPECT_EQ(r.bias, nullptr);
  EXPECT_EQ(r.bias_mode, tessera::BiasMode::None);
  EXPECT_EQ(r.activation, tessera::Activation::None);
  size_t bytes = 0;
  EXPECT_EQ(tessera_gemm_workspace_size(&c, &bytes), TESSERA_STATUS_SUCCESS);
  // And the C ABI enforces the bias rules.
  c.bias_mode = TESSERA_BIAS_PER_ROW;
  EXPECT_EQ(tessera_gemm_workspace_size(&c, &bytes), TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(tessera_last_error(), "bias: null pointer"));
  c.bias = P(kW);
  EXPECT_EQ(tessera_gemm_workspace_size(&c, &bytes), TESSERA_STATUS_SUCCESS);
}

TEST(CApi, ConfigStringNullEmptyAndUnknown) {
  tessera_gemm_args_t c = tessera::to_c(valid_args());
  size_t bytes = 0;
  c.config = nullptr;
  EXPECT_EQ(tessera_gemm_workspace_size(&c, &bytes), TESSERA_STATUS_SUCCESS);
  c.config = "";
  EXPECT_EQ(tessera_gemm_workspace_size(&c, &bytes), TESSERA_STATUS_SUCCESS);
  c.config = "bogus";
  EXPECT_EQ(tessera_gemm_workspace_size(&c, &bytes), TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(tessera_last_error(), "bogus"));
  c.config = tessera_gemm_config_name(0);
  EXPECT_EQ(tessera_gemm_workspace_size(&c, &bytes), TESSERA_STATUS_SUCCESS);
  c.config = "sm90_64x96x64_s10_c2_coop+flip";
  EXPECT_EQ(tessera_gemm_workspace_size(&c, &bytes), TESSERA_STATUS_SUCCESS);
  c.config = "sm80_128x256x64_s3_w8+flip";  // an sm80 tile has no flipped orientation
  EXPECT_EQ(tessera_gemm_workspace_size(&c, &bytes), TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(tessera_last_error(), "flipped orientation"));
}

TEST(CApi, RoundTripThroughCStructs) {
  GemmArgs g = batched_args(3);
  g.op_a = Op::T;
  g.a.layout = Layout::ColMajor;
  g.alpha = 0.25f;
  g.beta = -2.0f;
  g.config = "simt_fallback";
  g.bias = P(kW);
  g.bias_mode = tessera::BiasMode::PerRow;
  g.bias_batch_stride = 72;
  g.activation = tessera::Activation::GeluTanh;
  const tessera_gemm_args_t c = tessera::to_c(g);
  EXPECT_EQ(c.bias, P(kW));
  EXPECT_EQ(c.bias_mode, TESSERA_BIAS_PER_ROW);
  EXPECT_EQ(c.bias_batch_stride, 72);
  EXPECT_EQ(c.activation, TESSERA_ACTIVATION_GELU_TANH);
  EXPECT_EQ(c.op_a, TESSERA_OP_T);
  EXPECT_EQ(c.a.layout, TESSERA_COL_MAJOR);
  EXPECT_EQ(c.d.batch_stride, kM * kN);
  EXPECT_STREQ(c.config, "simt_fallback");
  const GemmArgs r = tessera::from_c(c);
  EXPECT_EQ(r.op_a, g.op_a);
  EXPECT_EQ(r.op_b, g.op_b);
  EXPECT_EQ(r.a.ptr, g.a.ptr);
  EXPECT_EQ(r.a.layout, g.a.layout);
  EXPECT_EQ(r.b.ld, g.b.ld);
  EXPECT_EQ(r.c.dtype, g.c.dtype);
  EXPECT_EQ(r.d.batch_count, g.d.batch_count);
  EXPECT_EQ(r.d.batch_stride, g.d.batch_stride);
  EXPECT_EQ(r.alpha, g.alpha);
  EXPECT_EQ(r.beta, g.beta);
  EXPECT_EQ(r.config, g.config);
  EXPECT_EQ(r.bias, g.bias);
  EXPECT_EQ(r.bias_mode, g.bias_mode);
  EXPECT_EQ(r.bias_batch_stride, g.bias_batch_stride);
  EXPECT_EQ(r.activation, g.activation);
}

TEST(CApi, StatusStrings) {
  std::set<std::string> seen;
  for (tessera_status_t s : {TESSERA_STATUS_SUCCESS, TESSERA_STATUS_INVALID_ARGUMENT, TESSERA_STATUS_NOT_SUPPORTED,
                             TESSERA_STATUS_CUDA_ERROR, TESSERA_STATUS_INTERNAL_ERROR}) {
    const char* str = tessera_status_string(s);
    ASSERT_NE(str, nullptr);
    EXPECT_GT(std::string(str).size(), 0u);
    EXPECT_TRUE(seen.insert(str).second) << "duplicate status string " << str;
  }
  ASSERT_NE(tessera_status_string(tessera_status_t(77)), nullptr);
  EXPECT_FALSE(seen.count(tessera_status_string(tessera_status_t(77)))) << "an unknown code reads like a known one";
  EXPECT_STREQ(tessera_status_string(TESSERA_STATUS_SUCCESS), "success");
}

TEST(CApi, ConfigTable) {
  const int n = tessera_gemm_config_count();
  const auto infos = tessera::gemm_configs();
  ASSERT_EQ(n, int(infos.size()));
  ASSERT_GE(n, 2);
  std::set<std::string> names;
  for (int i = 0; i < n; ++i) {
    const char* name = tessera_gemm_config_name(i);
    const char* desc = tessera_gemm_config_description(i);
    ASSERT_NE(name, nullptr);
    ASSERT_NE(desc, nullptr);
    EXPECT_GT(std::string(desc).size(), 20u) << name << ": descriptions explain the choice";
    EXPECT_EQ(infos[i].name, name);
    EXPECT_EQ(infos[i].description, desc);
    EXPECT_TRUE(names.insert(name).second) << "duplicate config name " << name;
    ASSERT_NE(tessera::gemm_impl::find_config(name), nullptr);
  }
  EXPECT_EQ(tessera_gemm_config_name(-1), nullptr);
  EXPECT_EQ(tessera_gemm_config_name(n), nullptr);
  EXPECT_EQ(tessera_gemm_config_description(-1), nullptr);
  EXPECT_EQ(tessera_gemm_config_description(n), nullptr);
  EXPECT_TRUE(names.count("sm80_128x256x64_s3_w8"));
  EXPECT_TRUE(names.count("simt_fallback"));
  EXPECT_STREQ(tessera_gemm_config_name(n - 1), "simt_fallback");
}

TEST(CApi, Version) {
  ASSERT_NE(tessera_version(), nullptr);
  EXPECT_GT(std::string(tessera_version()).size(), 0u);
}

}  // namespace
