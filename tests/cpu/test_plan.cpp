// Canonicalisation (gemm/plan.cpp): every combination of op/layout of A and B, D's layout and C's
// layout maps to the kernels' problem "row-major D (M x N) = A (M x K) * B^T (B stored N x K),
// each K- or MN-major". Checked two ways:
//  - brute force: small random problems evaluated on host floats through the ORIGINAL arguments
//    and through the canonical GemmParams (reading A/B/C and writing D only through the plan's
//    pointers and strides), compared exactly (small integers: every sum is exact);
//  - explicit expectations for the BLAS-style combinations (swap, majors, strides, epilogue).
// Plus the alignment / padding decisions and the workspace size.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <algorithm>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gemm/launch_batched.hpp"
#include "gemm/plan.hpp"
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
using ti::GemmPlan;
using ti::make_plan;
using ti::OperandPlan;
using ti::validate;

const void* P(uintptr_t x) { return reinterpret_cast<const void*>(x); }
int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
const char* name(Op o) { return o == Op::N ? "N" : "T"; }
const char* name(Layout l) { return l == Layout::RowMajor ? "row" : "col"; }

// ---- host model of the ORIGINAL arguments --------------------------------------------------------

int64_t batch_offset(const Matrix& m, int64_t l) { return m.batch_count == 1 ? 0 : l * m.batch_stride; }
// Stored element (r, c) of batch l.
int64_t offset(const Matrix& m, int64_t l, int64_t r, int64_t c) {
  return batch_offset(m, l) + (m.layout == Layout::RowMajor ? r * m.ld + c : r + c * m.ld);
}

struct HostMatrix {
  std::vector<float> buf;
  Matrix m;
};

// A (batched) rows x cols matrix with ld = inner + ld_extra and the batch stride given (-1: packed
// plus a random extra), backed by host floats holding small integers.
HostMatrix host_matrix(std::mt19937& rng, DType dt, int64_t rows, int64_t cols, Layout layout, int64_t batch_count,
                       int64_t ld_extra, int64_t batch_stride) {
  HostMatrix h;
  Matrix& m = h.m;
  m.dtype = dt;
  m.rows = rows;
  m.cols = cols;
  m.layout = layout;
  const int64_t inner = layout == Layout::RowMajor ? cols : rows;
  const int64_t outer = layout == Layout::RowMajor ? rows : cols;
  m.ld = std::max<int64_t>(1, inner) + ld_extra;
  m.batch_count = batch_count;
  const int64_t one = outer > 0 && inner > 0 ? (outer - 1) * m.ld + inner : 0;
  m.batch_stride = batch_stride >= 0 ? batch_stride : one + int64_t(rng() % 4);
  const int64_t span = batch_count > 1 ? (batch_count - 1) * m.batch_stride + one : one;
  h.buf.resize(size_t(std::max<int64_t>(span, 1)));
  std::uniform_int_distribution<int> v(-3, 3);
  for (float& x : h.buf) x = float(v(rng));
  m.ptr = h.buf.data();
  return h;
}

// Bounds-checked read of a canonical operand: `p` must point into one of the buffers and the whole
// access must stay inside it.
struct Buffers {
  std::vector<const std::vector<float>*> all;
  float read(const void* p, int64_t off) const {
    const auto addr = reinterpret_cast<uintptr_t>(p);
    for (const auto* b : all) {
      const auto lo = reinterpret_cast<uintptr_t>(b->data());
      if (addr >= lo && addr < lo + b->size() * sizeof(float)) {
        EXPECT_EQ((addr - lo) % sizeof(float), 0u);
        const int64_t idx = int64_t((addr - lo) / sizeof(float)) + off;
        EXPECT_GE(idx, 0);
        EXPECT_LT(idx, int64_t(b->size()));
        return idx >= 0 && idx < int64_t(b->size()) ? (*b)[size_t(idx)] : NAN;
      }
    }
    ADD_FAILURE() << "canonical pointer outside every operand buffer";
    return NAN;
  }
};

struct Combo {
  Op op_a, op_b;
  Layout la, lb, lc, ld;
};

std::string describe(const Combo& c, int64_t M, int64_t N, int64_t K, int64_t batch) {
  return std::string("op_a=") + name(c.op_a) + " op_b=" + name(c.op_b) + " A " + name(c.la) + " B " + name(c.lb) +
         " C " + name(c.lc) + " D " + name(c.ld) + " M=" + std::to_string(M) + " N=" + std::to_string(N) +
         " K=" + std::to_string(K) + " batch=" + std::to_string(batch);
}

// The alignment rule the plan must implement (see plan.hpp).
void check_operand_rule(const OperandPlan& op, int64_t batch, const std::string& what) {
  const int64_t contiguous = op.k_major ? op.k : op.rows;
  const int64_t outer = op.k_major ? op.rows : op.k;
  const bool broadcast = op.batch_stride == 0;
  const bool aligned = op.k == 0 || (reinterpret_cast<uintptr_t>(op.ptr) % 16 == 0 && op.ld % 8 == 0 &&
                                     contiguous % 8 == 0 && (broadcast || op.batch_stride % 8 == 0));
  EXPECT_EQ(op.aligned, aligned) << what;
  EXPECT_EQ(op.padded_ld, round_up(contiguous, 8)) << what;
  EXPECT_EQ(op.padded_batches, broadcast ? 1 : batch) << what;
  EXPECT_EQ(op.pad_bytes, aligned ? 0u : size_t(round_up(op.padded_ld * outer * op.padded_batches * 2, 256))) << what;
}

void run_brute_force_case(std::mt19937& rng, const Combo& cb) {
  std::uniform_int_distribution<int> dim(1, 11), kdim(0, 11), extra(0, 3), coin(0, 1);
  const int64_t M = dim(rng), N = dim(rng), K = kdim(rng);
  const int64_t batch = std::uniform_int_distribution<int>(1, 3)(rng);
  const float alpha = float(std::uniform_int_distribution<int>(-2, 2)(rng));
  const float beta = coin(rng) ? 0.0f : float(std::uniform_int_distribution<int>(-2, 2)(rng));
  const bool in_place = beta != 0.0f && cb.lc == cb.ld && coin(rng) && coin(rng);

  // A: op(A) is M x K; B: op(B) is K x N. Each operand batched, broadcast by count or by stride.
  auto operand_batching = [&](int64_t* count, int64_t* stride) {
    const int mode = std::uniform_int_distribution<int>(0, 2)(rng);
    *count = mode == 0 ? 1 : batch;
    *stride = mode == 2 ? 0 : -1;  // mode 2: batch_count == batch with stride 0 (broadcast)
  };
  int64_t a_count, a_stride, b_count, b_stride, c_count, c_stride;
  operand_batching(&a_count, &a_stride);
  operand_batching(&b_count, &b_stride);
  operand_batching(&c_count, &c_stride);
  const int64_t ar = cb.op_a == Op::N ? M : K, ac = cb.op_a == Op::N ? K : M;
  const int64_t br = cb.op_b == Op::N ? K : N, bc = cb.op_b == Op::N ? N : K;
  HostMatrix A = host_matrix(rng, DType::F16, ar, ac, cb.la, a_count, extra(rng), a_stride);
  HostMatrix B = host_matrix(rng, DType::F16, br, bc, cb.lb, b_count, extra(rng), b_stride);
  HostMatrix D = host_matrix(rng, DType::F32, M, N, cb.ld, batch, extra(rng), -1);
  HostMatrix C = host_matrix(rng, DType::F32, M, N, cb.lc, c_count, extra(rng), c_stride);

  GemmArgs g;
  g.op_a = cb.op_a;
  g.op_b = cb.op_b;
  g.a = A.m;
  g.b = B.m;
  g.d = D.m;
  g.c = in_place ? D.m : C.m;
  g.alpha = alpha;
  g.beta = beta;
  const std::vector<float>& cbuf = in_place ? D.buf : C.buf;

  // Bias: none, per column (N values) or per row (M values); one vector per batch (with a gap of
  // 0..3) or one for all. The activation only has to reach the kernels' parameters.
  const int bias_pick = std::uniform_int_distribution<int>(0, 2)(rng);
  const tessera::BiasMode bias_mode = bias_pick == 0   ? tessera::BiasMode::None
                                      : bias_pick == 1 ? tessera::BiasMode::PerColumn
                                                       : tessera::BiasMode::PerRow;
  const bool per_column = bias_mode == tessera::BiasMode::PerColumn;
  const int64_t bias_len = per_column ? N : M;
  const int64_t bias_stride = coin(rng) ? 0 : bias_len + extra(rng);
  std::vector<float> bias_buf(size_t((batch - 1) * bias_stride + bias_len));
  for (float& x : bias_buf) x = float(std::uniform_int_distribution<int>(-3, 3)(rng));
  const auto activation = tessera::Activation(std::uniform_int_distribution<int>(0, 4)(rng));
  if (bias_mode != tessera::BiasMode::None) {
    g.bias = bias_buf.data();
    g.bias_mode = bias_mode;
    g.bias_batch_stride = bias_stride;
  }
  g.activation = activation;

  const std::string what = describe(cb, M, N, K, batch) + (in_place ? " in-place" : "") +
                           " alpha=" + std::to_string(alpha) + " beta=" + std::to_string(beta) + " bias " +
                           (bias_pick == 0 ? "none" : per_column ? "per-column" : "per-row") +
                           " stride=" + std::to_string(bias_stride);
  SCOPED_TRACE(what);
  ASSERT_TRUE(validate(g).ok()) << validate(g).message;

  // Reference through the original arguments.
  std::vector<float> want(D.buf.size(), -777.0f);
  for (int64_t l = 0; l < batch; ++l)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        float acc = 0.0f;
        for (int64_t k = 0; k < K; ++k) {
          const float a = cb.op_a == Op::N ? A.buf[offset(A.m, l, i, k)] : A.buf[offset(A.m, l, k, i)];
          const float b = cb.op_b == Op::N ? B.buf[offset(B.m, l, k, j)] : B.buf[offset(B.m, l, j, k)];
          acc += a * b;
        }
        float out = alpha * acc;
        if (beta != 0.0f) out += beta * cbuf[offset(g.c, l, i, j)];
        if (g.bias) out += bias_buf[size_t(l * bias_stride + (per_column ? j : i))];
        want[offset(D.m, l, i, j)] = out;
      }

  // The same through the canonical problem only, in both orientations (the flipped one writes a
  // column-major canonical D).
  for (bool flip : {false, true}) {
  SCOPED_TRACE(flip ? "flipped" : "natural");
  const GemmPlan plan = make_plan(g, flip);
  const auto& p = plan.params;
  ASSERT_FALSE(plan.empty);
  EXPECT_EQ(p.epi.d_col_major, flip);
  EXPECT_EQ(plan.swapped, (cb.ld == Layout::ColMajor) != flip);
  EXPECT_EQ(p.m, plan.swapped ? N : M);
  EXPECT_EQ(p.n, plan.swapped ? M : N);
  EXPECT_EQ(p.k, K);
  EXPECT_EQ(p.batch, batch);
  EXPECT_EQ(plan.a.rows, p.m);
  EXPECT_EQ(plan.b.rows, p.n);
  EXPECT_EQ(plan.a.k, K);
  EXPECT_EQ(plan.b.k, K);
  EXPECT_EQ(p.a, plan.a.ptr);
  EXPECT_EQ(p.b, plan.b.ptr);
  EXPECT_EQ(p.lda, plan.a.ld);
  EXPECT_EQ(p.ldb, plan.b.ld);
  EXPECT_EQ(p.batch_stride_a, plan.a.batch_stride);
  EXPECT_EQ(p.batch_stride_b, plan.b.batch_stride);
  check_operand_rule(plan.a, batch, "canonical A");
  check_operand_rule(plan.b, batch, "canonical B");
  EXPECT_EQ(plan.workspace_bytes, plan.a.pad_bytes + plan.b.pad_bytes);
  EXPECT_EQ(plan.a.pad_bytes + plan.b.pad_bytes, make_plan(g, !flip).a.pad_bytes + make_plan(g, !flip).b.pad_bytes);
  EXPECT_FALSE(plan.flip_ok) << "an fp32 D cannot take the transposed TMA store";

  Buffers ops{{&A.buf, &B.buf}};
  Buffers cs{{&cbuf}};
  const auto& e = p.epi;
  EXPECT_EQ(e.d, static_cast<void*>(D.buf.data()));
  EXPECT_EQ(e.d_dtype, ti::kF32);
  EXPECT_EQ(e.alpha, alpha);
  EXPECT_EQ(e.beta, beta);
  if (beta == 0.0f) {
    EXPECT_EQ(e.c, nullptr) << "C must not be read when beta == 0";
  }
  Buffers bs{{&bias_buf}};
  EXPECT_EQ(e.bias, g.bias);
  EXPECT_EQ(e.activation, int(activation));
  if (e.bias) {
    EXPECT_TRUE((e.bias_stride_m == 0) != (e.bias_stride_n == 0)) << "a bias is a vector along m or along n";
    EXPECT_EQ(e.bias_vec, e.bias_stride_n == 1 && reinterpret_cast<uintptr_t>(e.bias) % 16 == 0 &&
                              e.batch_stride_bias % 4 == 0);
  }
  std::vector<float> got(D.buf.size(), -777.0f);
  for (int64_t l = 0; l < p.batch; ++l)
    for (int64_t mm = 0; mm < p.m; ++mm)
      for (int64_t nn = 0; nn < p.n; ++nn) {
        float acc = 0.0f;
        for (int64_t kk = 0; kk < p.k; ++kk) {
          const float a = ops.read(p.a, l * p.batch_stride_a + (plan.a.k_major ? mm * p.lda + kk : mm + kk * p.lda));
          const float b = ops.read(p.b, l * p.batch_stride_b + (plan.b.k_major ? nn * p.ldb + kk : nn + kk * p.ldb));
          acc += a * b;
        }
        float out = e.alpha * acc;
        if (e.beta != 0.0f) out += e.beta * cs.read(e.c, l * e.batch_stride_c + mm * e.c_stride_m + nn * e.c_stride_n);
        if (e.bias) out += bs.read(e.bias, l * e.batch_stride_bias + mm * e.bias_stride_m + nn * e.bias_stride_n);
        const int64_t idx = (static_cast<float*>(e.d) - D.buf.data()) + l * e.batch_stride_d +
                            (e.d_col_major ? mm + nn * e.ldd : mm * e.ldd + nn);
        ASSERT_GE(idx, 0);
        ASSERT_LT(idx, int64_t(got.size()));
        EXPECT_EQ(got[size_t(idx)], -777.0f) << "canonical D writes element " << idx << " twice";
        got[size_t(idx)] = out;
      }
  // Exactly the same addresses written with exactly the same values (and nothing else written).
  for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << "D element at offset " << i;
  }
}

TEST(Plan, BruteForceAgainstOriginalArguments) {
  std::mt19937 rng(20240611);
  int cases = 0;
  for (Op op_a : {Op::N, Op::T})
    for (Op op_b : {Op::N, Op::T})
      for (Layout la : {Layout::RowMajor, Layout::ColMajor})
        for (Layout lb : {Layout::RowMajor, Layout::ColMajor})
          for (Layout lc : {Layout::RowMajor, Layout::ColMajor})
            for (Layout ld : {Layout::RowMajor, Layout::ColMajor})
              for (int rep = 0; rep < 40; ++rep) {
                run_brute_force_case(rng, Combo{op_a, op_b, la, lb, lc, ld});
                ++cases;
                if (HasFatalFailure() || HasFailure()) return;
              }
  EXPECT_EQ(cases, 64 * 40);
}

// ---- explicit expectations: BLAS-style (A, B column-major), all 8 (op_a, op_b, D layout) -------

struct BlasCase {
  Op op_a, op_b;
  Layout d_layout;
};

class PlanBlas : public ::testing::TestWithParam<BlasCase> {};

constexpr uintptr_t kA = 0x10000000, kB = 0x20000000, kC = 0x30000000, kD = 0x40000000;

TEST_P(PlanBlas, SwapMajorsAndStrides) {
  const BlasCase bc = GetParam();
  const int64_t M = 24, N = 40, K = 16, batch = 3;
  GemmArgs g;
  g.op_a = bc.op_a;
  g.op_b = bc.op_b;
  // Column-major storage as in BLAS, with padded leading dimensions and padded batch strides.
  g.a = tessera::dense(P(kA), DType::BF16, bc.op_a == Op::N ? M : K, bc.op_a == Op::N ? K : M, Layout::ColMajor,
                       batch);
  g.a.ld += 8;
  g.a.batch_stride = g.a.ld * g.a.cols + 16;
  g.b = tessera::dense(P(kB), DType::BF16, bc.op_b == Op::N ? K : N, bc.op_b == Op::N ? N : K, Layout::ColMajor, 1);
  g.b.ld += 16;  // B broadcast
  g.d = tessera::dense(P(kD), DType::F16, M, N, bc.d_layout, batch);
  ASSERT_TRUE(validate(g).ok()) << validate(g).message;
  const GemmPlan plan = make_plan(g);
  const auto& p = plan.params;

  // op(A) of a column-major A is M-major for N, K-major for T; op(B) is K-major for N.
  const bool a_k_major = bc.op_a == Op::T;
  const bool b_k_major = bc.op_b == Op::N;
  const bool swapped = bc.d_layout == Layout::ColMajor;
  EXPECT_EQ(plan.swapped, swapped);
  EXPECT_FALSE(plan.empty);
  EXPECT_EQ(plan.ab_dtype, ti::kBF16);
  EXPECT_EQ(p.k, K);
  EXPECT_EQ(p.batch, batch);
  if (!swapped) {
    EXPECT_EQ(p.m, M);
    EXPECT_EQ(p.n, N);
    EXPECT_EQ(p.a, P(kA));
    EXPECT_EQ(p.b, P(kB));
    EXPECT_EQ(p.lda, g.a.ld);
    EXPECT_EQ(p.ldb, g.b.ld);
    EXPECT_EQ(p.batch_stride_a, g.a.batch_stride);
    EXPECT_EQ(p.batch_stride_b, 0);
    EXPECT_EQ(plan.a.k_major, a_k_major);
    EXPECT_EQ(plan.b.k_major, b_k_major);
  } else {
    // D^T = op(B)^T op(A)^T: B plays A (rows N), A plays B (rows M).
    EXPECT_EQ(p.m, N);
    EXPECT_EQ(p.n, M);
    EXPECT_EQ(p.a, P(kB));
    EXPECT_EQ(p.b, P(kA));
    EXPECT_EQ(p.lda, g.b.ld);
    EXPECT_EQ(p.ldb, g.a.ld);
    EXPECT_EQ(p.batch_stride_a, 0);
    EXPECT_EQ(p.batch_stride_b, g.a.batch_stride);
    EXPECT_EQ(plan.a.k_major, b_k_major);
    EXPECT_EQ(plan.b.k_major, a_k_major);
  }
  // Epilogue: D is addressed row-major through ldd either way (a column-major D is D^T row-major).
  EXPECT_EQ(p.epi.d, P(kD));
  EXPECT_EQ(p.epi.ldd, g.d.ld);
  EXPECT_EQ(p.epi.batch_stride_d, g.d.batch_stride);
  EXPECT_EQ(p.epi.d_dtype, ti::kF16);
  EXPECT_EQ(p.epi.c, nullptr);
  // A: aligned (ld and stride multiples of 8, extents 24/16). B too.
  EXPECT_TRUE(plan.a.aligned);
  EXPECT_TRUE(plan.b.aligned);
  EXPECT_EQ(plan.workspace_bytes, 0u);
}

TEST_P(PlanBlas, EpilogueCStridesForEitherCLayout) {
  const BlasCase bc = GetParam();
  const int64_t M = 24, N = 40, K = 16;
  for (Layout lc : {Layout::RowMajor, Layout::ColMajor}) {
    GemmArgs g;
    g.op_a = bc.op_a;
    g.op_b = bc.op_b;
    g.a = tessera::dense(P(kA), DType::F16, bc.op_a == Op::N ? M : K, bc.op_a == Op::N ? K : M, Layout::ColMajor);
    g.b = tessera::dense(P(kB), DType::F16, bc.op_b == Op::N ? K : N, bc.op_b == Op::N ? N : K, Layout::ColMajor);
    g.d = tessera::dense(P(kD), DType::F32, M, N, bc.d_layout);
    g.c = tessera::dense(P(kC), DType::F32, M, N, lc);
    g.c.ld += 4;
    g.beta = 0.5f;
    ASSERT_TRUE(validate(g).ok()) << validate(g).message;
    const GemmPlan plan = make_plan(g);
    const auto& e = plan.params.epi;
    // Canonical C(m, n) = C(m, n) (not swapped) or C(n, m) (swapped).
    const bool canonical_row_major = (lc == Layout::RowMajor) != plan.swapped;
    SCOPED_TRACE(std::string("C ") + name(lc));
    EXPECT_EQ(e.c, P(kC));
    EXPECT_EQ(e.c_stride_m, canonical_row_major ? g.c.ld : 1);
    EXPECT_EQ(e.c_stride_n, canonical_row_major ? 1 : g.c.ld);
    EXPECT_EQ(e.batch_stride_c, 0);
    EXPECT_EQ(e.beta, 0.5f);
    // 16-byte C loads only along a unit n stride, with ld a multiple of 4 floats.
    EXPECT_EQ(e.c_vec, canonical_row_major);
    EXPECT_TRUE(e.d_vec);
  }
}

std::string blas_string(const BlasCase& c) {
  return std::string(c.op_a == Op::N ? "n" : "t") + (c.op_b == Op::N ? "n" : "t") + "_D" +
         (c.d_layout == Layout::RowMajor ? "row" : "col");
}
std::string blas_name(const ::testing::TestParamInfo<BlasCase>& info) { return blas_string(info.param); }
// Readable parameters in gtest (and ctest) output.
void PrintTo(const BlasCase& c, std::ostream* os) { *os << blas_string(c); }

INSTANTIATE_TEST_SUITE_P(AllEight, PlanBlas,
                         ::testing::Values(BlasCase{Op::N, Op::N, Layout::RowMajor},
                                           BlasCase{Op::N, Op::T, Layout::RowMajor},
                                           BlasCase{Op::T, Op::N, Layout::RowMajor},
                                           BlasCase{Op::T, Op::T, Layout::RowMajor},
                                           BlasCase{Op::N, Op::N, Layout::ColMajor},
                                           BlasCase{Op::N, Op::T, Layout::ColMajor},
                                           BlasCase{Op::T, Op::N, Layout::ColMajor},
                                           BlasCase{Op::T, Op::T, Layout::ColMajor}),
                         blas_name);

// Row-major storage: op N of a row-major A is K-major; op N of a row-major B is N-major.
TEST(Plan, RowMajorOperandMajors) {
  for (Op op_a : {Op::N, Op::T})
    for (Op op_b : {Op::N, Op::T}) {
      GemmArgs g;
      g.op_a = op_a;
      g.op_b = op_b;
      g.a = tessera::dense(P(kA), DType::F16, op_a == Op::N ? 32 : 16, op_a == Op::N ? 16 : 32);
      g.b = tessera::dense(P(kB), DType::F16, op_b == Op::N ? 16 : 48, op_b == Op::N ? 48 : 16);
      g.d = tessera::dense(P(kD), DType::F32, 32, 48);
      ASSERT_TRUE(validate(g).ok());
      const GemmPlan plan = make_plan(g);
      EXPECT_EQ(plan.a.k_major, op_a == Op::N);
      EXPECT_EQ(plan.b.k_major, op_b == Op::T);
    }
}

// ---- empty problems -----------------------------------------------------------------------------

TEST(Plan, EmptyWhenMNOrBatchIsZeroButNotK) {
  auto args = [](int64_t M, int64_t N, int64_t K, int64_t batch) {
    GemmArgs g;
    g.a = tessera::dense(P(kA), DType::F16, M, K, Layout::ColMajor, batch);
    g.b = tessera::dense(P(kB), DType::F16, K, N, Layout::ColMajor, batch);
    g.d = tessera::dense(P(kD), DType::F32, M, N, Layout::ColMajor, batch);
    g.a.ld = std::max<int64_t>(g.a.ld, 1);
    g.b.ld = std::max<int64_t>(g.b.ld, 1);
    g.d.ld = std::max<int64_t>(g.d.ld, 1);
    g.a.batch_count = g.b.batch_count = g.d.batch_count = batch;
    return g;
  };
  for (auto [M, N, K, batch, empty] : std::vector<std::tuple<int, int, int, int, bool>>{
           {0, 8, 8, 1, true}, {8, 0, 8, 1, true}, {8, 8, 8, 0, true}, {8, 8, 0, 1, false}, {8, 8, 8, 1, false}}) {
    const GemmArgs g = args(M, N, K, batch);
    ASSERT_TRUE(validate(g).ok()) << validate(g).message;
    EXPECT_EQ(make_plan(g).empty, empty) << M << "x" << N << "x" << K << " batch " << batch;
  }
  // K = 0: both operands count as aligned (nothing is read), no workspace.
  GemmArgs g = args(7, 9, 0, 1);
  g.a.ptr = P(kA + 2);
  const GemmPlan plan = make_plan(g);
  EXPECT_TRUE(plan.a.aligned);
  EXPECT_TRUE(plan.b.aligned);
  EXPECT_EQ(plan.workspace_bytes, 0u);
}

// ---- alignment and padding decisions ----------------------------------------------------------------

// Row-major A (M x K, K-major) and row-major B (K x N, N-major), D row-major: not swapped.
GemmArgs rr_args(int64_t M, int64_t N, int64_t K, int64_t batch = 1) {
  GemmArgs g;
  g.a = tessera::dense(P(kA), DType::F16, M, K, Layout::RowMajor, batch);
  g.b = tessera::dense(P(kB), DType::F16, K, N, Layout::RowMajor, batch);
  g.d = tessera::dense(P(kD), DType::F32, M, N, Layout::RowMajor, batch);
  return g;
}

GemmPlan checked_plan(const GemmArgs& g) {
  const tessera::Status s = validate(g);
  EXPECT_TRUE(s.ok()) << s.message;
  return make_plan(g);
}

TEST(PlanAlignment, AlignedOperandsNeedNoWorkspace) {
  const GemmPlan plan = checked_plan(rr_args(64, 48, 32, 2));
  EXPECT_TRUE(plan.a.aligned);
  EXPECT_TRUE(plan.b.aligned);
  EXPECT_TRUE(plan.a.k_major);
  EXPECT_FALSE(plan.b.k_major);
  EXPECT_EQ(plan.a.pad_bytes, 0u);
  EXPECT_EQ(plan.b.pad_bytes, 0u);
  EXPECT_EQ(plan.workspace_bytes, 0u);
}

TEST(PlanAlignment, BaseNot16ByteAligned) {
  GemmArgs g = rr_args(64, 48, 32);
  g.a.ptr = P(kA + 8);  // 2-byte aligned (valid) but not 16
  const GemmPlan plan = checked_plan(g);
  EXPECT_FALSE(plan.a.aligned);
  EXPECT_TRUE(plan.b.aligned);
  EXPECT_EQ(plan.a.padded_ld, 32);
  EXPECT_EQ(plan.a.padded_batches, 1);
  EXPECT_EQ(plan.a.pad_bytes, size_t(round_up(32 * 64 * 2, 256)));
  EXPECT_EQ(plan.workspace_bytes, plan.a.pad_bytes);
}

TEST(PlanAlignment, LdNotMultipleOf8) {
  GemmArgs g = rr_args(64, 48, 32);
  g.a.ld = 36;
  const GemmPlan plan = checked_plan(g);
  EXPECT_FALSE(plan.a.aligned);
  EXPECT_EQ(plan.a.padded_ld, 32) << "the copy is packed to the contiguous extent, not to ld";
  EXPECT_EQ(plan.a.pad_bytes, 4096u);
  g = rr_args(64, 48, 32);
  g.a.ld = 40;  // padded but a multiple of 8: fine
  EXPECT_TRUE(checked_plan(g).a.aligned);
}

TEST(PlanAlignment, ContiguousExtentNotMultipleOf8) {
  // A: K = 33 contiguous; B: N = 20 contiguous. 17 x 20 x 33.
  const GemmPlan plan = checked_plan(rr_args(17, 20, 33));
  EXPECT_FALSE(plan.a.aligned);
  EXPECT_FALSE(plan.b.aligned);
  EXPECT_EQ(plan.a.padded_ld, 40);
  EXPECT_EQ(plan.b.padded_ld, 24);
  EXPECT_EQ(plan.a.pad_bytes, size_t(round_up(40 * 17 * 2, 256)));  // 1360 -> 1536
  EXPECT_EQ(plan.b.pad_bytes, size_t(round_up(24 * 33 * 2, 256)));  // 1584 -> 1792
  EXPECT_EQ(plan.a.pad_bytes, 1536u);
  EXPECT_EQ(plan.b.pad_bytes, 1792u);
  EXPECT_EQ(plan.workspace_bytes, 1536u + 1792u);
  size_t bytes = 0;
  ASSERT_TRUE(tessera::gemm_workspace_size(rr_args(17, 20, 33), &bytes).ok());
  EXPECT_EQ(bytes, 3328u);
}

TEST(PlanAlignment, MNMajorExtentIsTheRows) {
  // Column-major A with op N: M contiguous. M = 20 is not a multiple of 8 even though K is.
  GemmArgs g = rr_args(20, 48, 32);
  g.a = tessera::dense(P(kA), DType::F16, 20, 32, Layout::ColMajor);
  g.a.ld = 24;
  const GemmPlan plan = checked_plan(g);
  EXPECT_FALSE(plan.a.k_major);
  EXPECT_FALSE(plan.a.aligned);
  EXPECT_EQ(plan.a.padded_ld, 24);
  EXPECT_EQ(plan.a.pad_bytes, size_t(round_up(24 * 32 * 2, 256)));
}

TEST(PlanAlignment, BatchStrideNotMultipleOf8) {
  GemmArgs g = rr_args(64, 48, 32, 3);
  g.b.batch_stride = 32 * 48 + 4;
  const GemmPlan plan = checked_plan(g);
  EXPECT_TRUE(plan.a.aligned);
  EXPECT_FALSE(plan.b.aligned);
  EXPECT_EQ(plan.b.padded_batches, 3);
  EXPECT_EQ(plan.b.pad_bytes, size_t(round_up(48 * 32 * 3 * 2, 256)));
  EXPECT_EQ(plan.workspace_bytes, plan.b.pad_bytes);
}

TEST(PlanAlignment, BroadcastIgnoresBatchStride) {
  GemmArgs g = rr_args(64, 48, 32, 3);
  g.b.batch_count = 1;
  g.b.batch_stride = 5;  // irrelevant: one B for every batch
  GemmPlan plan = checked_plan(g);
  EXPECT_TRUE(plan.b.aligned);
  EXPECT_EQ(plan.b.batch_stride, 0);
  // Broadcast by stride 0 with batch_count = batch.
  g = rr_args(17, 20, 33, 3);
  g.a.batch_stride = 0;
  plan = checked_plan(g);
  EXPECT_EQ(plan.a.batch_stride, 0);
  EXPECT_EQ(plan.a.padded_batches, 1) << "a broadcast operand is padded once, not per batch";
  EXPECT_EQ(plan.a.pad_bytes, 1536u);
  EXPECT_EQ(plan.b.padded_batches, 3);
  EXPECT_EQ(plan.b.pad_bytes, size_t(round_up(24 * 33 * 3 * 2, 256)));
}

TEST(PlanAlignment, SwappedOperandsCarryTheirPadding) {
  // D column-major: canonical A is the caller's B. A unaligned (K = 33), B aligned.
  GemmArgs g = rr_args(16, 24, 33);
  g.b = tessera::dense(P(kB), DType::F16, 33, 24, Layout::ColMajor);  // K x N, K contiguous
  g.b.ld = 40;
  g.d = tessera::dense(P(kD), DType::F32, 16, 24, Layout::ColMajor);
  const GemmPlan plan = checked_plan(g);
  ASSERT_TRUE(plan.swapped);
  EXPECT_EQ(plan.a.ptr, P(kB));
  EXPECT_EQ(plan.b.ptr, P(kA));
  EXPECT_FALSE(plan.a.aligned) << "B's K = 33 is contiguous";
  EXPECT_FALSE(plan.b.aligned);
  EXPECT_EQ(plan.a.pad_bytes, size_t(round_up(40 * 24 * 2, 256)));
  EXPECT_EQ(plan.b.pad_bytes, size_t(round_up(40 * 16 * 2, 256)));
  EXPECT_EQ(plan.workspace_bytes, plan.a.pad_bytes + plan.b.pad_bytes);
}

TEST(PlanAlignment, OutputVectorFlags) {
  // f32 D: 16-byte stores need base % 16, ldd % 4 and batch stride % 4.
  GemmArgs g = rr_args(64, 48, 32, 2);
  EXPECT_TRUE(checked_plan(g).params.epi.d_vec);
  g.d.ld = 50;
  g.d.batch_stride = 64 * 50;
  EXPECT_FALSE(checked_plan(g).params.epi.d_vec);
  g = rr_args(64, 48, 32, 2);
  g.d.ld = 52;
  g.d.batch_stride = 64 * 52;
  EXPECT_TRUE(checked_plan(g).params.epi.d_vec);
  g.d.batch_stride = 64 * 52 + 2;
  EXPECT_FALSE(checked_plan(g).params.epi.d_vec);
  g = rr_args(64, 48, 32, 2);
  g.d.ptr = P(kD + 4);
  EXPECT_FALSE(checked_plan(g).params.epi.d_vec);
  // f16 D: multiples of 8 elements.
  g = rr_args(64, 48, 32);
  g.d.dtype = DType::F16;
  g.d.ld = 52;
  EXPECT_FALSE(checked_plan(g).params.epi.d_vec);
  g.d.ld = 56;
  EXPECT_TRUE(checked_plan(g).params.epi.d_vec);
  EXPECT_EQ(checked_plan(g).params.epi.d_dtype, ti::kF16);
  // A single batch: D's batch stride is irrelevant.
  g = rr_args(64, 48, 32);
  g.d.batch_stride = 3;
  EXPECT_EQ(checked_plan(g).params.epi.batch_stride_d, 0);
  EXPECT_TRUE(checked_plan(g).params.epi.d_vec);
}

// The TMA store writes a row's last 16-byte chunk whole (H100: N = 390 bf16 with ldd = 392 wrote the
// padding after every row), so d_tma (and c_tma, flip_ok) also need D's contiguous extent in whole
// chunks; d_vec (the threads' 16-byte stores, which stop at the extent) does not.
TEST(PlanAlignment, TmaNeedsWholeChunks) {
  for (bool col : {false, true})
    for (int64_t extent : {390, 392, 130, 136, 1}) {
      const int64_t m = col ? extent : 130, n = col ? 200 : extent;
      GemmArgs g = rr_args(m, n, 64, 2);
      g.a.dtype = g.b.dtype = g.d.dtype = DType::BF16;
      g.d = tessera::dense(P(kD), DType::BF16, m, n, col ? Layout::ColMajor : Layout::RowMajor, 2);
      g.d.ld = (extent + 7) / 8 * 8 + 8;  // padded: 16-byte aligned rows (columns)
      g.d.batch_stride = g.d.ld * (col ? n : m);
      g.beta = 1.0f;
      g.c = g.d;
      g.c.ptr = P(kC);
      const bool whole = extent % 8 == 0;
      for (bool flip : {false, true}) {
        const GemmPlan plan = make_plan(g, flip);
        EXPECT_TRUE(plan.params.epi.d_vec) << extent;
        EXPECT_EQ(plan.params.epi.d_tma, whole) << extent << (col ? " column-major" : " row-major");
        EXPECT_EQ(plan.params.epi.c_tma, whole) << extent << (col ? " column-major" : " row-major");
        EXPECT_EQ(plan.flip_ok, whole) << extent;
      }
    }
}

TEST(PlanAlignment, CVectorFlags) {
  GemmArgs g = rr_args(64, 48, 32, 2);
  g.beta = 1.0f;
  g.c = tessera::dense(P(kC), DType::F32, 64, 48, Layout::RowMajor, 2);
  EXPECT_TRUE(checked_plan(g).params.epi.c_vec);
  EXPECT_EQ(checked_plan(g).params.epi.batch_stride_c, 64 * 48);
  g.c.ptr = P(kC + 8);
  EXPECT_FALSE(checked_plan(g).params.epi.c_vec);
  g.c.ptr = P(kC);
  g.c.ld = 49;
  g.c.batch_stride = 64 * 49;
  EXPECT_FALSE(checked_plan(g).params.epi.c_vec);
  g = rr_args(64, 48, 32, 2);
  g.beta = 1.0f;
  g.c = tessera::dense(P(kC), DType::F32, 64, 48, Layout::RowMajor, 1);  // broadcast C
  EXPECT_EQ(checked_plan(g).params.epi.batch_stride_c, 0);
  EXPECT_TRUE(checked_plan(g).params.epi.c_vec);
  g.c = tessera::dense(P(kC), DType::F32, 64, 48, Layout::ColMajor, 1);  // column-major C, row-major D
  EXPECT_EQ(checked_plan(g).params.epi.c_stride_n, 64);
  EXPECT_FALSE(checked_plan(g).params.epi.c_vec);
  // beta == 0: C is not used at all.
  g.beta = 0.0f;
  EXPECT_EQ(checked_plan(g).params.epi.c, nullptr);
  EXPECT_FALSE(checked_plan(g).params.epi.c_vec);
}

// The flipped orientation (make_plan's `flip`): only a 16-bit D of the operands' type, 16-byte
// aligned, with C (beta != 0) stored like D and as aligned, can take it (the transposed TMA store);
// C's TMA flag then follows the column-major canonical D.
TEST(PlanFlip, FlipOkOnlyForATmaStorableD) {
  GemmArgs g = rr_args(64, 48, 32, 2);
  g.d.dtype = DType::F16;
  EXPECT_TRUE(checked_plan(g).flip_ok);
  g.d.dtype = DType::BF16;
  EXPECT_FALSE(checked_plan(g).flip_ok) << "D of the other 16-bit type";
  g.d.dtype = DType::F32;
  EXPECT_FALSE(checked_plan(g).flip_ok) << "fp32 D";
  g.d.dtype = DType::F16;
  g.d.ld = 52;
  g.d.batch_stride = 64 * 52;
  EXPECT_FALSE(checked_plan(g).flip_ok) << "ldd not a multiple of 8 elements";
  g = rr_args(64, 48, 32, 2);
  g.d.dtype = DType::F16;
  g.beta = 0.5f;
  g.c = tessera::dense(P(kC), DType::F16, 64, 48, Layout::RowMajor, 2);
  EXPECT_TRUE(checked_plan(g).flip_ok);
  const GemmPlan flipped = make_plan(g, true);
  EXPECT_TRUE(flipped.swapped) << "a row-major D computed as D^T";
  EXPECT_TRUE(flipped.params.epi.d_col_major);
  EXPECT_EQ(flipped.params.m, 48);
  EXPECT_EQ(flipped.params.n, 64);
  EXPECT_EQ(flipped.params.epi.c_stride_m, 1);
  EXPECT_EQ(flipped.params.epi.c_stride_n, 48);
  EXPECT_TRUE(flipped.params.epi.c_tma) << "C contiguous along the column-major canonical D's m";
  EXPECT_FALSE(flipped.params.epi.c_vec) << "the staging's 16-byte C loads run along n";
  EXPECT_TRUE(checked_plan(g).params.epi.c_tma);
  g.c = tessera::dense(P(kC), DType::F16, 64, 48, Layout::ColMajor, 2);
  EXPECT_FALSE(checked_plan(g).flip_ok) << "C stored unlike D";
  EXPECT_FALSE(checked_plan(g).params.epi.c_tma);
  EXPECT_FALSE(make_plan(g, true).params.epi.c_tma) << "C stored unlike D is unlike the canonical D either way";
  g.c = tessera::dense(P(kC + 2), DType::F16, 64, 48, Layout::RowMajor, 2);
  EXPECT_FALSE(checked_plan(g).flip_ok) << "C not 16-byte aligned";
  EXPECT_FALSE(make_plan(g, true).params.epi.c_tma);
}

// The bias in the canonical orientation: a user per-column bias (N values, indexed by D's column)
// runs along the canonical n for a row-major D and along the canonical m for a column-major D,
// which the kernels compute as D^T; per-row the other way round.
TEST_P(PlanBlas, EpilogueBiasForEitherMode) {
  const BlasCase bc = GetParam();
  const int64_t M = 24, N = 40, K = 16, batch = 3;
  for (auto mode : {tessera::BiasMode::PerColumn, tessera::BiasMode::PerRow})
    for (int64_t stride : {int64_t(0), int64_t(64)}) {
      GemmArgs g;
      g.op_a = bc.op_a;
      g.op_b = bc.op_b;
      g.a = tessera::dense(P(kA), DType::F16, bc.op_a == Op::N ? M : K, bc.op_a == Op::N ? K : M, Layout::ColMajor,
                           batch);
      g.b = tessera::dense(P(kB), DType::F16, bc.op_b == Op::N ? K : N, bc.op_b == Op::N ? N : K, Layout::ColMajor,
                           batch);
      g.d = tessera::dense(P(kD), DType::BF16, M, N, bc.d_layout, batch);
      g.bias = P(kC);
      g.bias_mode = mode;
      g.bias_batch_stride = stride;
      g.activation = tessera::Activation::Silu;
      ASSERT_TRUE(validate(g).ok()) << validate(g).message;
      const GemmPlan plan = make_plan(g);
      const auto& e = plan.params.epi;
      const bool along_n = (mode == tessera::BiasMode::PerColumn) != plan.swapped;
      SCOPED_TRACE(std::string(mode == tessera::BiasMode::PerColumn ? "per-column" : "per-row") + " stride " +
                   std::to_string(stride));
      EXPECT_EQ(e.bias, P(kC));
      EXPECT_EQ(e.bias_stride_m, along_n ? 0 : 1);
      EXPECT_EQ(e.bias_stride_n, along_n ? 1 : 0);
      EXPECT_EQ(e.batch_stride_bias, stride);
      // 16-byte loads along a contiguous canonical row (base 16-byte aligned, stride a multiple of 8).
      EXPECT_EQ(e.bias_vec, along_n);
      EXPECT_EQ(e.activation, ti::kActSilu);
      // The vector has the extent of the canonical mode it runs along.
      EXPECT_EQ(along_n ? plan.params.n : plan.params.m, mode == tessera::BiasMode::PerColumn ? N : M);
    }
}

TEST(PlanAlignment, BiasFields) {
  // No bias: nothing set, whatever the activation.
  GemmArgs g = rr_args(64, 48, 32, 2);
  g.activation = tessera::Activation::Gelu;
  EXPECT_EQ(checked_plan(g).params.epi.bias, nullptr);
  EXPECT_FALSE(checked_plan(g).params.epi.bias_vec);
  EXPECT_EQ(checked_plan(g).params.epi.activation, ti::kActGelu);
  g.activation = tessera::Activation::None;
  EXPECT_EQ(checked_plan(g).params.epi.activation, ti::kActNone);
  // f32 per-column bias, row-major D: vector loads need base % 16 and batch stride % 4.
  g.bias = P(kC);
  g.bias_mode = tessera::BiasMode::PerColumn;
  g.bias_batch_stride = 48;
  EXPECT_TRUE(checked_plan(g).params.epi.bias_vec);
  EXPECT_EQ(checked_plan(g).params.epi.batch_stride_bias, 48);
  g.bias_batch_stride = 50;
  EXPECT_FALSE(checked_plan(g).params.epi.bias_vec);
  g.bias_batch_stride = 0;  // shared by the batches
  EXPECT_TRUE(checked_plan(g).params.epi.bias_vec);
  g.bias = P(kC + 4);
  EXPECT_FALSE(checked_plan(g).params.epi.bias_vec);
  // f16: batch strides in multiples of 8 elements.
  g = rr_args(64, 48, 32, 2);
  g.d.dtype = DType::F16;
  g.bias = P(kC);
  g.bias_mode = tessera::BiasMode::PerColumn;
  g.bias_batch_stride = 52;
  EXPECT_FALSE(checked_plan(g).params.epi.bias_vec);
  g.bias_batch_stride = 56;
  EXPECT_TRUE(checked_plan(g).params.epi.bias_vec);
  // Per-row bias on a row-major D: one value per row, never a vector load.
  g.bias_mode = tessera::BiasMode::PerRow;
  EXPECT_FALSE(checked_plan(g).params.epi.bias_vec);
  EXPECT_EQ(checked_plan(g).params.epi.bias_stride_m, 1);
  EXPECT_EQ(checked_plan(g).params.epi.bias_stride_n, 0);
  // A single batch: the bias batch stride is irrelevant (and dropped).
  g = rr_args(64, 48, 32);
  g.bias = P(kC);
  g.bias_mode = tessera::BiasMode::PerColumn;
  g.bias_batch_stride = 3;
  EXPECT_EQ(checked_plan(g).params.epi.batch_stride_bias, 0);
  EXPECT_TRUE(checked_plan(g).params.epi.bias_vec);
  // Column-major D: the per-column bias becomes the canonical per-row one.
  g.d.layout = Layout::ColMajor;
  g.d.ld = 64;
  EXPECT_TRUE(checked_plan(g).swapped);
  EXPECT_EQ(checked_plan(g).params.epi.bias_stride_m, 1);
  EXPECT_EQ(checked_plan(g).params.epi.bias_stride_n, 0);
  EXPECT_FALSE(checked_plan(g).params.epi.bias_vec);
  g.bias_mode = tessera::BiasMode::PerRow;
  EXPECT_EQ(checked_plan(g).params.epi.bias_stride_m, 0);
  EXPECT_EQ(checked_plan(g).params.epi.bias_stride_n, 1);
  EXPECT_TRUE(checked_plan(g).params.epi.bias_vec);
}

TEST(PlanAlignment, WorkspaceSizeMatchesThePlan) {
  std::mt19937 rng(7);
  for (int it = 0; it < 500; ++it) {
    const int64_t M = 1 + rng() % 70, N = 1 + rng() % 70, K = 1 + rng() % 70, batch = 1 + rng() % 3;
    GemmArgs g;
    g.op_a = rng() % 2 ? Op::T : Op::N;
    g.op_b = rng() % 2 ? Op::T : Op::N;
    const Layout la = rng() % 2 ? Layout::ColMajor : Layout::RowMajor;
    const Layout lb = rng() % 2 ? Layout::ColMajor : Layout::RowMajor;
    const Layout ld = rng() % 2 ? Layout::ColMajor : Layout::RowMajor;
    g.a = tessera::dense(P(kA + 2 * (rng() % 3)), DType::F16, g.op_a == Op::N ? M : K, g.op_a == Op::N ? K : M, la,
                         batch);
    g.b = tessera::dense(P(kB), DType::F16, g.op_b == Op::N ? K : N, g.op_b == Op::N ? N : K, lb, batch);
    g.d = tessera::dense(P(kD), DType::F32, M, N, ld, batch);
    ASSERT_TRUE(validate(g).ok()) << validate(g).message;
    const GemmPlan plan = make_plan(g);
    size_t bytes = 1;
    ASSERT_TRUE(tessera::gemm_workspace_size(g, &bytes).ok());
    EXPECT_EQ(bytes, plan.workspace_bytes);
    EXPECT_EQ(bytes, plan.a.pad_bytes + plan.b.pad_bytes + plan.splitk_bytes);
    EXPECT_EQ(bytes % 256, 0u);
    check_operand_rule(plan.a, batch, "A");
    check_operand_rule(plan.b, batch, "B");
  }
}

}  // namespace

// ---- fp32 operands: copied K-major (and split for 3xTF32) into the workspace -------------------------

TEST(PlanF32, KMajorAlignedOperandsAreReadAsTheyAre) {
  GemmArgs g = rr_args(64, 48, 32);
  g.a.dtype = g.b.dtype = DType::F32;
  g.b = tessera::dense(P(kB), DType::F32, 48, 32, Layout::RowMajor);  // op(B) = B^T: K-major
  g.op_b = Op::T;
  const GemmPlan plan = checked_plan(g);
  EXPECT_TRUE(plan.a.aligned && plan.a.k_major && plan.a.f32);
  EXPECT_TRUE(plan.b.aligned && plan.b.k_major);
  EXPECT_EQ(plan.workspace_bytes, 0u);
  EXPECT_EQ(plan.kernel_k, 32);
  EXPECT_EQ(plan.ab_dtype, ti::kF32);
  EXPECT_FALSE(plan.flip_ok);  // the transposed store is 16-bit only
}

TEST(PlanF32, MNMajorOrRaggedOperandsAreCopiedKMajor) {
  GemmArgs g = rr_args(64, 48, 30);  // B row-major K x N: N-major; K = 30 not a multiple of 4
  g.a = tessera::dense(P(kA), DType::F32, 64, 30, Layout::RowMajor);
  g.b = tessera::dense(P(kB), DType::F32, 30, 48, Layout::RowMajor);
  const GemmPlan plan = checked_plan(g);
  for (const ti::OperandPlan* op : {&plan.a, &plan.b}) {
    EXPECT_FALSE(op->aligned);
    EXPECT_EQ(op->padded_k, 32);
    EXPECT_EQ(op->padded_ld, 32);
    EXPECT_EQ(op->pad_bytes, size_t(round_up(32 * op->rows * 4, 256)));
    EXPECT_EQ(op->split, ti::kSplitNone);
  }
  EXPECT_FALSE(plan.b.k_major);  // as stored; the copy is K-major
  EXPECT_EQ(plan.kernel_k, 30);
  EXPECT_GE(plan.workspace_bytes, plan.a.pad_bytes + plan.b.pad_bytes);
}

// s8 operands: read K-major only (16-byte aligned, K a multiple of 16), else copied K-major with K
// padded to 16; the scales follow the rows and columns through the swap.
TEST(PlanS8, KMajorAlignedOperandsAreReadAsTheyAre) {
  GemmArgs g = rr_args(64, 48, 32);
  g.a.dtype = DType::S8;
  g.b = tessera::dense(P(kB), DType::S8, 48, 32, Layout::RowMajor);
  g.op_b = Op::T;
  g.d.dtype = DType::S32;
  const GemmPlan plan = checked_plan(g);
  EXPECT_TRUE(plan.a.aligned && plan.a.k_major && plan.a.b8);
  EXPECT_TRUE(plan.b.aligned && plan.b.k_major);
  EXPECT_EQ(plan.workspace_bytes, 0u);
  EXPECT_EQ(plan.ab_dtype, ti::kS8);
  EXPECT_EQ(plan.params.epi.d_dtype, ti::kS32);
  EXPECT_TRUE(plan.params.epi.d_vec);  // 48 int32 per row: 16-byte rows
  EXPECT_FALSE(plan.flip_ok);
  EXPECT_EQ(plan.params.scale_m, nullptr);
}

TEST(PlanS8, MNMajorOrRaggedOperandsAreCopiedKMajor) {
  GemmArgs g = rr_args(64, 48, 40);  // B row-major K x N: N-major; K = 40 not a multiple of 16
  g.a = tessera::dense(P(kA), DType::S8, 64, 40, Layout::RowMajor);
  g.b = tessera::dense(P(kB), DType::S8, 40, 48, Layout::RowMajor);
  g.d.dtype = DType::S32;
  const GemmPlan plan = checked_plan(g);
  for (const ti::OperandPlan* op : {&plan.a, &plan.b}) {
    EXPECT_FALSE(op->aligned);
    EXPECT_TRUE(op->kernel_k_major());
    EXPECT_EQ(op->padded_k, 48);
    EXPECT_EQ(op->padded_ld, 48);
    EXPECT_EQ(op->pad_bytes, size_t(round_up(48 * op->rows, 256)));
  }
  EXPECT_FALSE(plan.b.k_major);  // as stored; the copy is K-major
  EXPECT_EQ(plan.kernel_k, 40);
  EXPECT_GE(plan.workspace_bytes, plan.a.pad_bytes + plan.b.pad_bytes);
  // K-major but K = 40: still copied (a 16-byte TMA row stride needs K a multiple of 16).
  g.b = tessera::dense(P(kB), DType::S8, 48, 40, Layout::RowMajor);
  g.op_b = Op::T;
  EXPECT_FALSE(checked_plan(g).b.aligned);
}

TEST(PlanFp8, ReadKMajorAndPromotedUnlessFastAccumulation) {
  GemmArgs g = rr_args(64, 48, 40);  // B N-major, K = 40: both copied K-major (K padded to 48)
  g.a = tessera::dense(P(kA), DType::E4M3, 64, 40, Layout::RowMajor);
  g.b = tessera::dense(P(kB), DType::E4M3, 40, 48, Layout::RowMajor);
  g.d.dtype = DType::BF16;
  GemmPlan plan = checked_plan(g);
  EXPECT_EQ(plan.ab_dtype, ti::kE4M3);
  EXPECT_TRUE(plan.promote);
  EXPECT_TRUE(plan.a.b8 && plan.b.b8);
  EXPECT_FALSE(plan.a.aligned);
  EXPECT_FALSE(plan.b.aligned);
  EXPECT_EQ(plan.a.padded_k, 48);
  EXPECT_EQ(plan.b.pad_bytes, size_t(round_up(48 * 48, 256)));
  EXPECT_FALSE(plan.flip_ok);
  g.precision = tessera::Precision::Fp8FastAccum;
  EXPECT_FALSE(checked_plan(g).promote);
  g.a.dtype = g.b.dtype = DType::E5M2;
  g.precision = tessera::Precision::Default;
  plan = checked_plan(g);
  EXPECT_EQ(plan.ab_dtype, ti::kE5M2);
  EXPECT_TRUE(plan.promote);
  // 16-bit operands never promote; 3xTF32 does.
  g.a.dtype = g.b.dtype = DType::BF16;
  EXPECT_FALSE(checked_plan(g).promote);
}

// Block scales: applied in the mainloop (GemmParams::block, never the epilogue's scale_m), at the
// strides the caller gave ({0, 0}: row-major), promoted even with fast accumulation asked for.
TEST(PlanFp8, BlockScalesReachTheKernelsWithTheirStrides) {
  GemmArgs g = rr_args(300, 200, 1000);  // 8 K blocks, 2 N blocks
  g.a = tessera::dense(P(kA), DType::E4M3, 300, 1000, Layout::RowMajor);
  g.b = tessera::dense(P(kB), DType::E4M3, 200, 1000, Layout::RowMajor);
  g.op_b = Op::T;
  g.d.dtype = DType::BF16;
  const float* sa = reinterpret_cast<const float*>(uintptr_t(0x50000000));
  const float* sb = reinterpret_cast<const float*>(uintptr_t(0x60000000));
  g.scale_a = sa, g.scale_b = sb;
  g.scale_mode = tessera::ScaleMode::Block;
  g.precision = tessera::Precision::Fp8FastAccum;
  GemmPlan plan = checked_plan(g);
  EXPECT_TRUE(plan.promote);
  EXPECT_FALSE(plan.swapped);
  EXPECT_EQ(plan.params.scale_m, nullptr);  // the epilogue scales nothing more
  EXPECT_EQ(plan.params.block.row, sa);
  EXPECT_EQ(plan.params.block.col, sb);
  EXPECT_EQ(plan.params.block.row_stride_m, 8);
  EXPECT_EQ(plan.params.block.row_stride_k, 1);
  EXPECT_EQ(plan.params.block.col_stride_k, 2);
  EXPECT_EQ(plan.params.block.col_stride_n, 1);
  g.scale_a_strides[0] = 1, g.scale_a_strides[1] = 304;  // M-major, rows padded to 304
  g.scale_b_strides[0] = 1, g.scale_b_strides[1] = 8;    // column-major
  plan = checked_plan(g);
  EXPECT_EQ(plan.params.block.row_stride_m, 1);
  EXPECT_EQ(plan.params.block.row_stride_k, 304);
  EXPECT_EQ(plan.params.block.col_stride_k, 1);
  EXPECT_EQ(plan.params.block.col_stride_n, 8);
  g.scale_mode = tessera::ScaleMode::RowWise;  // other modes leave the block scales unset
  g.scale_a_strides[0] = g.scale_a_strides[1] = g.scale_b_strides[0] = g.scale_b_strides[1] = 0;
  plan = checked_plan(g);
  EXPECT_EQ(plan.params.block.row, nullptr);
  EXPECT_EQ(plan.params.scale_m, sa);
}

TEST(PlanFp8, BlockScaleLayouts) {
  using tessera::gemm_impl::block_scale_layout;
  auto check = [](int64_t rows, int64_t cols, int64_t s0, int64_t s1, bool ok, bool row_major, int64_t ld) {
    const int64_t strides[2] = {s0, s1};
    const auto l = block_scale_layout(rows, cols, strides);
    EXPECT_EQ(l.ok, ok) << rows << "x" << cols << " {" << s0 << ", " << s1 << "}";
    if (ok && l.ok) {
      EXPECT_EQ(l.row_major, row_major) << rows << "x" << cols << " {" << s0 << ", " << s1 << "}";
      EXPECT_EQ(l.ld, ld) << rows << "x" << cols << " {" << s0 << ", " << s1 << "}";
    }
  };
  check(4, 3, 0, 0, true, true, 3);     // the default: row-major, contiguous
  check(4, 3, 5, 1, true, true, 5);     // row-major, padded rows
  check(4, 3, 1, 4, true, false, 4);    // column-major
  check(4, 3, 1, 8, true, false, 8);    // column-major, padded (cuBLASLt's rounded-up layouts)
  check(4, 3, 2, 1, false, true, 0);    // rows overlap
  check(4, 3, 1, 3, false, true, 0);    // columns overlap
  check(4, 3, 3, 3, false, true, 0);    // neither major
  check(4, 1, 1, 7, true, true, 1);     // one column: any stride along it (torch reports (1, 1) or (1, M))
  check(4, 1, 9, 7, true, true, 9);     // ... rows 9 apart
  check(1, 3, 7, 1, true, true, 3);     // one row
  check(1, 1, 9, 9, true, true, 1);     // one value
  check(4, 3, 0, 1, false, true, 0);    // a broadcast row is not a block-scale matrix
}

TEST(PlanS8, ScalesFollowTheOrientation) {
  GemmArgs g = rr_args(64, 48, 32);
  g.a.dtype = g.b.dtype = DType::S8;
  g.d.dtype = DType::BF16;
  const float* sa = reinterpret_cast<const float*>(uintptr_t(0x50000000));
  const float* sb = reinterpret_cast<const float*>(uintptr_t(0x60000000));
  g.scale_a = sa, g.scale_b = sb;
  g.scale_mode = tessera::ScaleMode::RowWise;
  GemmPlan plan = checked_plan(g);
  EXPECT_EQ(plan.params.scale_m, sa);
  EXPECT_EQ(plan.params.scale_n, sb);
  EXPECT_EQ(plan.params.scale_step, 1);
  g.d = tessera::dense(P(kD), DType::BF16, 64, 48, Layout::ColMajor);  // computed as D^T: roles swap
  plan = checked_plan(g);
  EXPECT_TRUE(plan.swapped);
  EXPECT_EQ(plan.params.scale_m, sb);
  EXPECT_EQ(plan.params.scale_n, sa);
  g.scale_mode = tessera::ScaleMode::Tensor;
  EXPECT_EQ(checked_plan(g).params.scale_step, 0);
}

// Batches past one grid's 65535 run in chunks whose pointers advance by the chunk's first batch, in
// bytes of each matrix's own element type (s8 operands 1, fp32 4, an s32 D 4).
TEST(LaunchBatched, ChunksAdvanceByEachMatrixsElementBytes) {
  for (auto [ab, ab_bytes, d, d_bytes] : std::vector<std::tuple<int, int, int, int>>{
           {ti::kS8, 1, ti::kS32, 4}, {ti::kE4M3, 1, ti::kBF16, 2}, {ti::kE5M2, 1, ti::kF32, 4}, {ti::kF32, 4, ti::kBF16, 2}, {ti::kBF16, 2, ti::kF32, 4}, {ti::kF16, 2, ti::kF16, 2}}) {
    ti::GemmParams p;
    p.batch = 2 * ti::kMaxGridBatch + 3;
    p.a = reinterpret_cast<const void*>(uintptr_t(1) << 40);
    p.b = reinterpret_cast<const void*>(uintptr_t(2) << 40);
    p.epi.d = reinterpret_cast<void*>(uintptr_t(3) << 40);
    p.batch_stride_a = 100, p.batch_stride_b = 0, p.epi.batch_stride_d = 10;
    p.epi.d_dtype = d;
    std::vector<ti::GemmParams> chunks;
    EXPECT_EQ(ti::launch_batched(p, ab, [&](const ti::GemmParams& q) { chunks.push_back(q); return cudaSuccess; }),
              cudaSuccess);
    ASSERT_EQ(chunks.size(), 3u);
    for (int i = 0; i < 3; ++i) {
      const int64_t first = int64_t(i) * ti::kMaxGridBatch;
      EXPECT_EQ(chunks[i].batch, i < 2 ? ti::kMaxGridBatch : 3);
      EXPECT_EQ(uintptr_t(chunks[i].a) - uintptr_t(p.a), uintptr_t(first * 100 * ab_bytes)) << ab;
      EXPECT_EQ(chunks[i].b, p.b);  // broadcast
      EXPECT_EQ(uintptr_t(chunks[i].epi.d) - uintptr_t(p.epi.d), uintptr_t(first * 10 * d_bytes)) << d;
    }
  }
}

TEST(PlanF32, Tf32x3SplitsBothOperandsIntoThreeKRanges) {
  GemmArgs g = rr_args(64, 48, 32);
  g.a = tessera::dense(P(kA), DType::F32, 64, 32, Layout::RowMajor);
  g.b = tessera::dense(P(kB), DType::F32, 48, 32, Layout::RowMajor);
  g.op_b = Op::T;
  g.precision = Precision::TF32x3;
  const GemmPlan plan = checked_plan(g);
  EXPECT_FALSE(plan.a.aligned);
  EXPECT_FALSE(plan.b.aligned);
  EXPECT_EQ(plan.a.split, ti::kSplitA);
  EXPECT_EQ(plan.b.split, ti::kSplitB);
  EXPECT_EQ(plan.a.padded_ld, 96);
  EXPECT_EQ(plan.kernel_k, 96);
  EXPECT_EQ(plan.a.pad_bytes, size_t(round_up(96 * 64 * 4, 256)));
  // A column-major D swaps the roles; the patterns follow the canonical roles.
  g.d = tessera::dense(P(kD), DType::F32, 64, 48, Layout::ColMajor);
  const GemmPlan swapped = checked_plan(g);
  EXPECT_TRUE(swapped.swapped);
  EXPECT_EQ(swapped.a.split, ti::kSplitA);
  EXPECT_EQ(swapped.b.split, ti::kSplitB);
  EXPECT_EQ(swapped.a.rows, 48);
}
