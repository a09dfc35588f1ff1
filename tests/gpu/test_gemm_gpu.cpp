// tessera GEMM on the GPU against cuBLAS (see harness.hpp for what one case checks). Every test
// skips with "no CUDA device" on a machine without a usable sm_80+ GPU.
//
// Replay a failure: the message prints the seed; run
//   TESSERA_TEST_SEED=<seed> tessera_gpu_tests --gtest_filter=<the case>
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "gemm/configs.hpp"
#include "gemm/skinny/skinny.hpp"
#include "harness.hpp"
#include "tessera/tessera.h"
#include "tessera/tessera.hpp"

namespace {

namespace tt = tessera_test;
namespace ti = tessera::gemm_impl;
using tessera::Activation;
using tessera::BiasMode;
using tessera::DType;
using tessera::Layout;
using tessera::Op;
using tt::Case;
using tt::MatSpec;
using tt::Workspace;

// ---- fixtures ------------------------------------------------------------------------------------

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!tt::device_ok(&why)) GTEST_SKIP() << why;
  }
};

template <class P>
class GpuParamTest : public ::testing::TestWithParam<P> {
 protected:
  void SetUp() override {
    std::string why;
    if (!tt::device_ok(&why)) GTEST_SKIP() << why;
  }
};

// Runs a case, records it under (suite, group) and expects it to pass; the message carries the seed.
tt::Outcome check(const std::string& suite, const std::string& group, const Case& c) {
  const tt::Outcome o = tt::run_case(c);
  tt::record(suite, group, c, o);
  EXPECT_TRUE(o.passed()) << tt::describe(c) << "\n  " << o.problems << "\n  seed " << o.seed
                          << " (replay with TESSERA_TEST_SEED=" << o.seed << ")";
  return o;
}

// ---- helpers -------------------------------------------------------------------------------------------

struct Shape {
  int64_t m, n, k;
};
std::string shape_name(const Shape& s) {
  return std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k);
}

std::string sanitize(std::string s) {
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

std::vector<std::string> all_config_names() {
  std::vector<std::string> v;
  for (const tessera::ConfigInfo& c : tessera::gemm_configs()) v.push_back(c.name);
  return v;
}
// The tensor-core configs (sm80 mma.sync and sm90 TMA/WGMMA): they need aligned operands, so an
// unaligned one is padded into the workspace or refused.
std::vector<std::string> tensor_core_config_names() {
  std::vector<std::string> v;
  for (const ti::Config& c : ti::configs())
    if (c.kernel != ti::Kernel::Fallback) v.push_back(c.name);
  return v;
}

struct DeviceFacts {
  int sm_count = 0, cc = 0, smem_optin = 0;
};
DeviceFacts device_facts() {
  DeviceFacts f;
  int dev = 0, major = 0, minor = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  cudaDeviceGetAttribute(&f.sm_count, cudaDevAttrMultiProcessorCount, dev);
  cudaDeviceGetAttribute(&f.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
  f.cc = major * 10 + minor;
  return f;
}

// The skinny kernel's rule (gemm/configs.hpp skinny_runs): op(A) and op(B) K-major and a side of at
// most skinny::kMaxRows; K = 0 runs on the fallback. (Alignment is the workspace's business.)
bool skinny_can_run(const Case& c) {
  const bool a_k_major = (c.a.layout == Layout::RowMajor) != (c.op_a == Op::T);
  const bool b_k_major = (c.b.layout == Layout::RowMajor) == (c.op_b == Op::T);
  return c.k == 0 || (a_k_major && b_k_major && std::min(c.m, c.n) <= ti::skinny::kMaxRows);
}

// An explicitly requested config this device cannot run (shared memory, arch), or the skinny
// kernel on a problem outside its rule, must be refused with NOT_SUPPORTED, without writing D.
void expect_support(Case& c) {
  if (c.config.empty()) return;
  const ti::Config* cfg = ti::find_config(c.config);
  const DeviceFacts f = device_facts();
  if (cfg && (cfg->smem_bytes > f.smem_optin || cfg->min_cc > f.cc || cfg->max_cc < f.cc ||
              (cfg->kernel == ti::Kernel::Skinny && !skinny_can_run(c)))) {
    c.expect = TESSERA_STATUS_NOT_SUPPORTED;
    c.expect_message = "config";
  }
}

bool needs_alignment(const std::string& config) {
  const ti::Config* cfg = ti::find_config(config);
  return cfg && cfg->kernel != ti::Kernel::Fallback;
}

// Layout combination index: bit 0 op_a = T, bit 1 op_b = T, bit 2 D column-major. A and B are
// stored column-major (BLAS), so "tn" has both operands K-major.
void apply_layout(Case& c, int combo) {
  c.op_a = combo & 1 ? Op::T : Op::N;
  c.op_b = combo & 2 ? Op::T : Op::N;
  c.a.layout = Layout::ColMajor;
  c.b.layout = Layout::ColMajor;
  c.d.layout = combo & 4 ? Layout::ColMajor : Layout::RowMajor;
  c.c.layout = c.d.layout;
}
std::string layout_name(int combo) {
  return std::string(combo & 1 ? "t" : "n") + (combo & 2 ? "t" : "n") + (combo & 4 ? "_Dcol" : "_Drow");
}

const char* dn(DType t) { return tt::dtype_name(t); }

// ===================================================================================================
// 1. The cross product: every config x A/B dtype x D dtype x 8 layouts x 7 shapes x 2 (alpha, beta).
// ===================================================================================================

struct CrossParam {
  std::string config;
  DType ab, dt;
  int combo;
  Shape shape;
  bool scaled;  // alpha = 0.5, beta = -1.25 with a random C (else alpha = 1, beta = 0, no C)
};

std::vector<CrossParam> cross_params() {
  // 2100 x 2100 x 136: more tiles than SMs (the persistent kernels loop), ragged M, N and K tiles.
  const Shape shapes[] = {{1, 1, 1},         {17, 33, 7},        {128, 128, 32}, {1000, 1000, 1000},
                          {777, 1025, 4099}, {64, 80, 1},        {2100, 2100, 136}};
  std::vector<CrossParam> v;
  for (const std::string& cfg : all_config_names())
    for (DType ab : {DType::F16, DType::BF16})
      for (DType dt : {ab, DType::F32})
        for (int combo = 0; combo < 8; ++combo)
          for (const Shape& s : shapes)
            for (bool scaled : {false, true}) v.push_back({cfg, ab, dt, combo, s, scaled});
  return v;
}

void PrintTo(const CrossParam& p, std::ostream* os) {
  *os << p.config << " " << dn(p.ab) << "->" << dn(p.dt) << " " << layout_name(p.combo) << " " << shape_name(p.shape)
      << (p.scaled ? " alpha=0.5 beta=-1.25" : " alpha=1 beta=0");
}

class GemmCross : public GpuParamTest<CrossParam> {
 public:
  static void TearDownTestSuite() { tt::print_summary("GemmCross"); }
};

TEST_P(GemmCross, MatchesCublas) {
  const CrossParam& p = GetParam();
  Case c;
  c.config = p.config;
  c.ab = p.ab;
  c.dt = p.dt;
  apply_layout(c, p.combo);
  c.m = p.shape.m;
  c.n = p.shape.n;
  c.k = p.shape.k;
  if (p.scaled) {
    c.alpha = 0.5f;
    c.beta = -1.25f;
  }
  expect_support(c);
  check("GemmCross", p.config + " " + dn(p.ab) + "->" + dn(p.dt), c);
}

INSTANTIATE_TEST_SUITE_P(All, GemmCross, ::testing::ValuesIn(cross_params()),
                         [](const ::testing::TestParamInfo<CrossParam>& i) {
                           const CrossParam& p = i.param;
                           return sanitize(p.config + "_" + dn(p.ab) + "_to_" + dn(p.dt) + "_" +
                                           layout_name(p.combo) + "_" + shape_name(p.shape) +
                                           (p.scaled ? "_a0p5_bm1p25" : "_a1_b0"));
                         });

// fp32 operands: every config that runs them (the tf32 rows, the fallback in fp32) and the heuristic,
// tf32 and 3xTF32, every major (K-major operands read in place, the others copied K-major into the
// workspace), ragged extents, an fp32 and a bf16 D, scaled with C; a config without a tf32 kernel
// refuses by name. Oracle: cuBLAS in fp32 (CUBLAS_COMPUTE_32F, no tf32).
class GemmF32 : public GpuTest {
 public:
  static void TearDownTestSuite() { tt::print_summary("GemmF32"); }
};

TEST_F(GemmF32, Tf32AndTf32x3OnEveryConfigThatRunsThem) {
  std::vector<std::string> names = {""};
  for (const ti::Config& c : ti::configs())
    if (c.tf32) names.push_back(c.name);
  const Shape shapes[] = {{1, 1, 1}, {17, 33, 7}, {128, 256, 512}, {777, 1025, 1029}, {2100, 700, 136}};
  for (const std::string& cfg : names)
    for (tessera::Precision prec : {tessera::Precision::TF32, tessera::Precision::TF32x3})
      for (DType dt : {DType::F32, DType::BF16})
        for (int combo = 0; combo < 8; ++combo)
          for (const Shape& s : shapes) {
            Case c;
            c.config = cfg;
            c.ab = DType::F32;
            c.dt = dt;
            c.precision = prec;
            apply_layout(c, combo);
            c.m = s.m, c.n = s.n, c.k = s.k;
            if (combo == 5) c.alpha = 0.5f, c.beta = -1.25f;
            // The activation on sums of many terms: on a one-term sum gelu's tail multiplies tf32's
            // operand error by its relative slope (x = -4: 15x), which no tolerance bounds.
            if (combo == 6 && s.k >= 64) c.bias = tessera::BiasMode::PerColumn, c.activation = tessera::Activation::Gelu;
            expect_support(c);
            const ti::Config* row = ti::find_config(cfg);
            if (row && prec == tessera::Precision::TF32x3 && !row->tf32x3 && c.expect == TESSERA_STATUS_SUCCESS) {
              c.expect = TESSERA_STATUS_NOT_SUPPORTED;  // its accumulators cannot be promoted: 3xTF32 is refused
              c.expect_message = "no kernel for f32 operands (tf32x3)";
            }
            check("GemmF32", (cfg.empty() ? "heuristic" : cfg) + (prec == tessera::Precision::TF32x3 ? " x3 " : " ") +
                                 "f32->" + dn(dt) + " " + layout_name(combo) + " " + shape_name(s), c);
          }
  for (const ti::Config& c : ti::configs())
    if (!c.tf32) {
      Case x;
      x.config = c.name;
      x.ab = DType::F32;
      x.m = x.n = x.k = 64;
      x.expect = TESSERA_STATUS_NOT_SUPPORTED;
      x.expect_message = "no kernel for f32";
      check("GemmF32", std::string("refuses ") + c.name, x);
    }
}

// The skinny kernel on decode shapes: every side of at most 64 rows in both orientations (a column-
// major D makes the tokens canonical N), ragged K (padded into the workspace), the fused epilogue,
// batches, a W of 30+ waves of 8-row CTAs (24-row CTAs, a ragged last one); forced, and what the
// heuristic picks for the decode rows.
class GemmSkinny : public GpuTest {
 public:
  static void TearDownTestSuite() { tt::print_summary("GemmSkinny"); }
};

TEST_F(GemmSkinny, DecodeShapes) {
  const std::string skinny = ti::skinny_config().name;
  for (int64_t tokens : {1, 2, 7, 16, 17, 33, 64})
    for (auto [w, k] : {std::pair<int64_t, int64_t>{2048, 2048}, {520, 1000}, {24, 5632}, {4099, 136}, {70001, 72}})
      for (int combo : {1, 1 | 4})  // "tn" (both K-major) with a row- and a column-major D
        for (const std::string& cfg : {skinny, std::string()}) {
          Case c;
          c.config = cfg;
          c.ab = (tokens + w) % 2 ? DType::BF16 : DType::F16;
          c.dt = tokens % 3 == 0 ? DType::F32 : c.ab;
          apply_layout(c, combo);
          c.m = tokens;
          c.n = w;
          c.k = k;
          c.batch = w == 24 ? 3 : 1;
          if (tokens % 2) {
            c.alpha = 0.5f;
            c.beta = -1.25f;
          }
          if (tokens == 7 || tokens == 16) {
            c.bias = BiasMode::PerColumn;
            c.activation = Activation::Silu;
          }
          expect_support(c);
          check("GemmSkinny", std::string(cfg.empty() ? "heuristic " : "forced ") + dn(c.ab) + "->" + dn(c.dt), c);
          // The heuristic's pick (9-16 rows against more weight rows than one wave: the sm90 tiles).
          if (cfg.empty() && c.k % 8 == 0 && tokens <= ti::kSkinnyAutoRows && (tokens <= 8 || w <= 6336)) {
            // The same problem at far-apart addresses: selection reads shapes and alignment only.
            tessera::GemmArgs g;
            g.op_a = c.op_a;
            g.op_b = c.op_b;
            g.a = tessera::dense(reinterpret_cast<void*>(uintptr_t(1) << 40), c.ab, c.k, c.m, Layout::ColMajor, c.batch);
            g.b = tessera::dense(reinterpret_cast<void*>(uintptr_t(2) << 40), c.ab, c.k, c.n, Layout::ColMajor, c.batch);
            g.d = tessera::dense(reinterpret_cast<void*>(uintptr_t(3) << 40), c.dt, c.m, c.n, c.d.layout, c.batch);
            std::string name;
            ASSERT_TRUE(tessera::gemm_select_config(g, &name).ok());
            EXPECT_EQ(name, skinny) << describe(c);
          }
        }
}

// ===================================================================================================
// 2. 4096^3 with the heuristic config (tn / nn, f16 / bf16).
// ===================================================================================================

struct LargeParam {
  DType ab;
  int combo;
};

void PrintTo(const LargeParam& p, std::ostream* os) { *os << dn(p.ab) << " " << layout_name(p.combo); }

class GemmLarge : public GpuParamTest<LargeParam> {
 public:
  static void TearDownTestSuite() { tt::print_summary("GemmLarge"); }
};

TEST_P(GemmLarge, Square4096) {
  Case c;
  c.ab = c.dt = GetParam().ab;
  apply_layout(c, GetParam().combo);
  c.m = c.n = c.k = 4096;
  check("GemmLarge", std::string("heuristic ") + dn(c.ab) + " " + layout_name(GetParam().combo), c);
}

INSTANTIATE_TEST_SUITE_P(Heuristic, GemmLarge,
                         ::testing::Values(LargeParam{DType::F16, 1 | 4}, LargeParam{DType::F16, 0 | 4},
                                           LargeParam{DType::BF16, 1 | 4}, LargeParam{DType::BF16, 0 | 4}),
                         [](const ::testing::TestParamInfo<LargeParam>& i) {
                           return sanitize(std::string(dn(i.param.ab)) + "_" + layout_name(i.param.combo));
                         });

// ===================================================================================================
// 3. Unaligned problems without workspace: the heuristic falls back to simt_fallback.
// ===================================================================================================

struct NoWsParam {
  Shape shape;
  int combo;
  DType ab, dt;
};

void PrintTo(const NoWsParam& p, std::ostream* os) {
  *os << shape_name(p.shape) << " " << layout_name(p.combo) << " " << dn(p.ab) << "->" << dn(p.dt);
}

class GemmNoWorkspace : public GpuParamTest<NoWsParam> {
 public:
  static void TearDownTestSuite() { tt::print_summary("GemmNoWorkspace"); }
};

TEST_P(GemmNoWorkspace, HeuristicFallsBack) {
  const NoWsParam& p = GetParam();
  Case c;
  c.ab = p.ab;
  c.dt = p.dt;
  apply_layout(c, p.combo);
  c.m = p.shape.m;
  c.n = p.shape.n;
  c.k = p.shape.k;
  c.alpha = 0.5f;
  c.beta = -1.25f;
  c.workspace = Workspace::None;
  const tt::Outcome o = check("GemmNoWorkspace", std::string("heuristic ") + dn(p.ab) + "->" + dn(p.dt), c);
  EXPECT_EQ(o.workspace_bytes, 0u);
}

std::vector<NoWsParam> nows_params() {
  const Shape shapes[] = {{1, 1, 1}, {17, 33, 7}, {64, 80, 1}, {100, 36, 29}, {777, 1025, 4099}};
  std::vector<NoWsParam> v;
  for (const Shape& s : shapes)
    for (int combo = 0; combo < 8; ++combo)
      for (DType ab : {DType::F16, DType::BF16})
        for (DType dt : {ab, DType::F32}) v.push_back({s, combo, ab, dt});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Unaligned, GemmNoWorkspace, ::testing::ValuesIn(nows_params()),
                         [](const ::testing::TestParamInfo<NoWsParam>& i) {
                           const NoWsParam& p = i.param;
                           return sanitize(shape_name(p.shape) + "_" + layout_name(p.combo) + "_" + dn(p.ab) + "_to_" +
                                           dn(p.dt));
                         });

// ===================================================================================================
// 4. An explicit tensor-core config and the workspace.
// ===================================================================================================

class GemmExplicitConfig : public GpuParamTest<std::string> {
 public:
  static void TearDownTestSuite() { tt::print_summary("GemmExplicitConfig"); }
};

TEST_P(GemmExplicitConfig, UnalignedWithoutWorkspaceIsNotSupported) {
  for (const Shape& s : {Shape{17, 33, 7}, Shape{1, 1, 1}, Shape{64, 80, 1}, Shape{100, 36, 29}})
    for (Workspace ws : {Workspace::None, Workspace::TooSmall})
      for (int combo : {0, 1, 6}) {
        Case c;
        c.config = GetParam();
        apply_layout(c, combo);
        c.m = s.m;
        c.n = s.n;
        c.k = s.k;
        c.workspace = ws;
        const bool needs = tt::workspace_needed(c) > 0;  // e.g. 64x80x1 "nt": both operands aligned
        if (needs) {
          c.expect = TESSERA_STATUS_NOT_SUPPORTED;
          c.expect_message = "workspace";
        }
        expect_support(c);  // (an unrunnable config is refused for that reason instead)
        check("GemmExplicitConfig", GetParam() + (needs ? " refused, D untouched" : " aligned, no workspace"), c);
      }
}

TEST_P(GemmExplicitConfig, MisalignedBaseWithoutWorkspaceIsNotSupported) {
  Case c;
  c.config = GetParam();
  apply_layout(c, 1);
  c.m = 128;
  c.n = 96;
  c.k = 64;
  c.a.elem_offset = 1;  // 2 bytes: element aligned, not 16-byte aligned
  c.workspace = Workspace::None;
  ASSERT_GT(tt::workspace_needed(c), 0u);
  c.expect = TESSERA_STATUS_NOT_SUPPORTED;
  c.expect_message = "workspace";
  expect_support(c);
  check("GemmExplicitConfig", GetParam() + " refused, D untouched", c);
}

TEST_P(GemmExplicitConfig, AlignedNeedsNoWorkspace) {
  for (int combo = 0; combo < 8; ++combo) {
    Case c;
    c.config = GetParam();
    apply_layout(c, combo);
    c.m = 256;
    c.n = 136;
    c.k = 72;
    c.workspace = Workspace::None;
    c.alpha = 0.5f;
    c.beta = -1.25f;
    expect_support(c);
    check("GemmExplicitConfig", GetParam() + " aligned, no workspace", c);
  }
}

TEST_P(GemmExplicitConfig, WorkspaceSizeIsEnough) {
  // The padded path with exactly gemm_workspace_size bytes, both operands unaligned and batched.
  Case c;
  c.config = GetParam();
  apply_layout(c, 2 | 4);
  c.m = 45;
  c.n = 77;
  c.k = 91;
  c.batch = 3;
  c.alpha = 0.5f;
  c.beta = -1.25f;
  expect_support(c);
  const tt::Outcome o = check("GemmExplicitConfig", GetParam() + " padded path", c);
  if (c.expect == TESSERA_STATUS_SUCCESS) {
    EXPECT_GT(o.workspace_bytes, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(TensorCore, GemmExplicitConfig, ::testing::ValuesIn(tensor_core_config_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return sanitize(i.param); });

// ===================================================================================================
// 5. Batched: packed, broadcast A / B / C (by count or by stride 0), padded strides, interleaved D.
// ===================================================================================================

struct BatchParam {
  std::string config;
  std::string variant;
  Shape shape;
  DType ab;
  int combo;
};

void apply_batch_variant(Case& c, const std::string& v) {
  c.batch = 3;
  if (v == "a_bcast") c.a.batched = false;
  else if (v == "a_bcast_stride0") c.a.stride_zero = true;
  else if (v == "b_bcast") c.b.batched = false;
  else if (v == "b_bcast_stride0") c.b.stride_zero = true;
  else if (v == "c_bcast") c.c.batched = false;
  else if (v == "padded_strides8") c.a.stride_pad = c.b.stride_pad = c.c.stride_pad = c.d.stride_pad = 8;
  else if (v == "padded_strides3") c.a.stride_pad = c.b.stride_pad = c.c.stride_pad = c.d.stride_pad = 3;
  else if (v == "interleaved_d") {
    // Batch l of D's row r at r * (3 * cols) + l * cols (row-major D), or column-major alike.
    const bool row = c.d.layout == Layout::RowMajor;
    c.d.ld_abs = 3 * (row ? c.n : c.m);
    c.d.stride_abs = row ? c.n : c.m;
  }
}

void PrintTo(const BatchParam& p, std::ostream* os) {
  *os << p.config << " " << p.variant << " " << shape_name(p.shape) << " " << dn(p.ab) << " " << layout_name(p.combo);
}

class GemmBatched : public GpuParamTest<BatchParam> {
 public:
  static void TearDownTestSuite() { tt::print_summary("GemmBatched"); }
};

TEST_P(GemmBatched, MatchesCublas) {
  const BatchParam& p = GetParam();
  Case c;
  c.config = p.config;
  c.ab = p.ab;
  c.dt = p.ab == DType::F16 ? DType::F32 : DType::BF16;
  apply_layout(c, p.combo);
  c.m = p.shape.m;
  c.n = p.shape.n;
  c.k = p.shape.k;
  c.alpha = 0.5f;
  c.beta = -1.25f;
  apply_batch_variant(c, p.variant);
  expect_support(c);
  check("GemmBatched", p.config + " " + p.variant, c);
}

std::vector<BatchParam> batch_params() {
  const char* variants[] = {"packed",   "a_bcast",         "a_bcast_stride0", "b_bcast",      "b_bcast_stride0",
                            "c_bcast",  "padded_strides8", "padded_strides3", "interleaved_d"};
  std::vector<BatchParam> v;
  for (const std::string& cfg : all_config_names())
    for (const char* var : variants)
      for (const Shape& s : {Shape{128, 96, 64}, Shape{33, 17, 40}})
        for (DType ab : {DType::F16, DType::BF16})
          for (int combo : {1, 2 | 4}) v.push_back({cfg, var, s, ab, combo});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Batch3, GemmBatched, ::testing::ValuesIn(batch_params()),
                         [](const ::testing::TestParamInfo<BatchParam>& i) {
                           const BatchParam& p = i.param;
                           return sanitize(p.config + "_" + p.variant + "_" + shape_name(p.shape) + "_" + dn(p.ab) +
                                           "_" + layout_name(p.combo));
                         });

// ===================================================================================================
// 6. Leading dimensions larger than packed (aligned +8, unaligned +3, only D or only C padded).
// ===================================================================================================

struct LdParam {
  std::string config;
  std::string variant;
  int combo;
  Shape shape;
};

void PrintTo(const LdParam& p, std::ostream* os) {
  *os << p.config << " " << p.variant << " " << layout_name(p.combo) << " " << shape_name(p.shape);
}

class GemmPaddedLd : public GpuParamTest<LdParam> {
 public:
  static void TearDownTestSuite() { tt::print_summary("GemmPaddedLd"); }
};

TEST_P(GemmPaddedLd, MatchesCublas) {
  const LdParam& p = GetParam();
  Case c;
  c.config = p.config;
  c.ab = DType::BF16;
  c.dt = DType::F32;
  apply_layout(c, p.combo);
  c.m = p.shape.m;
  c.n = p.shape.n;
  c.k = p.shape.k;
  c.alpha = 0.5f;
  c.beta = -1.25f;
  if (p.variant == "all_ld+8") c.a.ld_pad = c.b.ld_pad = c.c.ld_pad = c.d.ld_pad = 8;
  else if (p.variant == "all_ld+3") c.a.ld_pad = c.b.ld_pad = c.c.ld_pad = c.d.ld_pad = 3;
  else if (p.variant == "d_ld+1") c.d.ld_pad = 1;
  else if (p.variant == "c_ld+5") c.c.ld_pad = 5;
  expect_support(c);
  check("GemmPaddedLd", p.config + " " + p.variant, c);
}

std::vector<LdParam> ld_params() {
  std::vector<LdParam> v;
  for (const std::string& cfg : all_config_names())
    for (const char* var : {"all_ld+8", "all_ld+3", "d_ld+1", "c_ld+5"})
      for (int combo = 0; combo < 8; ++combo)
        for (const Shape& s : {Shape{128, 96, 64}, Shape{100, 36, 29}}) v.push_back({cfg, var, combo, s});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Ld, GemmPaddedLd, ::testing::ValuesIn(ld_params()),
                         [](const ::testing::TestParamInfo<LdParam>& i) {
                           const LdParam& p = i.param;
                           return sanitize(p.config + "_" + p.variant + "_" + layout_name(p.combo) + "_" +
                                           shape_name(p.shape));
                         });

// ===================================================================================================
// 7. Misaligned (element-aligned only) base pointers; C in the other layout than D; C == D in place;
//    K = 0; empty problems; a batch count beyond one grid's limit.
// ===================================================================================================

struct ConfigDtParam {
  std::string config;
  DType ab, dt;
};

std::vector<ConfigDtParam> config_dt_params() {
  std::vector<ConfigDtParam> v;
  for (const std::string& cfg : all_config_names()) {
    v.push_back({cfg, DType::F16, DType::F16});
    v.push_back({cfg, DType::BF16, DType::F32});
  }
  return v;
}
std::string config_dt_name(const ::testing::TestParamInfo<ConfigDtParam>& i) {
  return sanitize(i.param.config + "_" + dn(i.param.ab) + "_to_" + dn(i.param.dt));
}

void PrintTo(const ConfigDtParam& p, std::ostream* os) { *os << p.config << " " << dn(p.ab) << "->" << dn(p.dt); }

class GemmEdge : public GpuParamTest<ConfigDtParam> {
 public:
  static void TearDownTestSuite() { tt::print_summary("GemmEdge"); }

 protected:
  Case base(int combo, Shape s) const {
    Case c;
    c.config = GetParam().config;
    c.ab = GetParam().ab;
    c.dt = GetParam().dt;
    apply_layout(c, combo);
    c.m = s.m;
    c.n = s.n;
    c.k = s.k;
    c.alpha = 0.5f;
    c.beta = -1.25f;
    return c;
  }
  std::string group(const char* what) const {
    return GetParam().config + " " + dn(GetParam().ab) + "->" + dn(GetParam().dt) + " " + what;
  }
};

TEST_P(GemmEdge, MisalignedBasePointers) {
  for (const char* which : {"A+1", "B+3", "C+1", "D+1"})
    for (Workspace ws : {Workspace::Full, Workspace::None})
      for (int combo : {1, 6}) {
        Case c = base(combo, Shape{128, 96, 64});
        c.workspace = ws;
        if (which[0] == 'A') c.a.elem_offset = 1;
        if (which[0] == 'B') c.b.elem_offset = 3;
        if (which[0] == 'C') c.c.elem_offset = 1;
        if (which[0] == 'D') c.d.elem_offset = 1;
        const bool operand = which[0] == 'A' || which[0] == 'B';
        // A misaligned operand is padded into the workspace, except by the CUDA-core fallback,
        // which reads any alignment: its plan needs none.
        EXPECT_EQ(tt::workspace_needed(c) > 0, operand && needs_alignment(c.config)) << which;
        if (operand && ws == Workspace::None && needs_alignment(c.config)) {
          c.expect = TESSERA_STATUS_NOT_SUPPORTED;
          c.expect_message = "workspace";
        }
        expect_support(c);
        SCOPED_TRACE(std::string(which) + (ws == Workspace::None ? " no workspace" : " workspace"));
        check("GemmEdge", group("misaligned base"), c);
      }
}

TEST_P(GemmEdge, CInTheOtherLayout) {
  for (const Shape& s : {Shape{128, 96, 64}, Shape{17, 33, 7}, Shape{1000, 1000, 1000}})
    for (int combo : {1, 1 | 4, 2, 2 | 4}) {
      Case c = base(combo, s);
      c.c.layout = c.d.layout == Layout::RowMajor ? Layout::ColMajor : Layout::RowMajor;
      expect_support(c);
      check("GemmEdge", group("C layout != D layout"), c);
    }
}

TEST_P(GemmEdge, InPlaceCIsD) {
  for (const Shape& s : {Shape{128, 96, 64}, Shape{17, 33, 7}})
    for (int combo : {1, 2 | 4})
      for (int64_t batch : {1, 3}) {
        Case c = base(combo, s);
        c.in_place = true;
        c.batch = batch;
        expect_support(c);
        check("GemmEdge", group("in place C == D"), c);
      }
}

TEST_P(GemmEdge, KZeroWritesBetaC) {
  for (float beta : {0.0f, -1.25f})
    for (int combo : {0, 1 | 4}) {
      Case c = base(combo, Shape{40, 24, 0});
      c.beta = beta;  // D = beta * C (or 0): every element written
      expect_support(c);
      check("GemmEdge", group("K = 0"), c);
    }
}

TEST_P(GemmEdge, EmptyProblemsWriteNothing) {
  for (const Shape& s : {Shape{0, 24, 16}, Shape{24, 0, 16}}) {
    Case c = base(1, s);
    check("GemmEdge", group("empty"), c);
  }
  Case c = base(1, Shape{24, 24, 16});
  c.batch = 0;
  check("GemmEdge", group("empty"), c);
}

TEST_P(GemmEdge, CApi) {
  for (int combo : {1, 6}) {
    Case c = base(combo, Shape{100, 36, 29});
    c.use_c_abi = true;
    expect_support(c);
    check("GemmEdge", group("C ABI"), c);
  }
}

INSTANTIATE_TEST_SUITE_P(Edge, GemmEdge, ::testing::ValuesIn(config_dt_params()), config_dt_name);

class GemmBigBatch : public GpuTest {
 public:
  static void TearDownTestSuite() { tt::print_summary("GemmBigBatch"); }
};

TEST_F(GemmBigBatch, MoreBatchesThanOneGridHolds) {
  // 65537 > 65535 (the grid's y limit): the launcher splits the batches.
  for (const std::string& cfg : {std::string(), std::string("simt_fallback")})
    for (const Shape& s : {Shape{8, 16, 8}, Shape{3, 5, 7}}) {
      Case c;
      c.config = cfg;
      apply_layout(c, 1);
      c.m = s.m;
      c.n = s.n;
      c.k = s.k;
      c.batch = 65537;
      c.alpha = 0.5f;
      c.beta = -1.25f;
      check("GemmBigBatch", (cfg.empty() ? std::string("heuristic") : cfg) + " batch 65537", c);
    }
}

// ===================================================================================================
// 8. Streams: a created non-blocking stream; capture into a CUDA graph (any launch on another stream
//    or a synchronous call would break the capture).
// ===================================================================================================

class GemmStream : public GpuTest {
 public:
  static void TearDownTestSuite() { tt::print_summary("GemmStream"); }

 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    ASSERT_EQ(cudaStreamCreateWithFlags(&nonblocking_, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaStreamCreate(&blocking_), cudaSuccess);
  }
  void TearDown() override {
    if (nonblocking_) cudaStreamDestroy(nonblocking_);
    if (blocking_) cudaStreamDestroy(blocking_);
  }
  cudaStream_t nonblocking_ = nullptr, blocking_ = nullptr;
};

TEST_F(GemmStream, NonDefaultStream) {
  for (const std::string& cfg : all_config_names())
    for (const Shape& s : {Shape{256, 136, 72}, Shape{17, 33, 7}})
      for (Workspace ws : {Workspace::Full, Workspace::None}) {
        Case c;
        c.config = cfg;
        apply_layout(c, 1 | 4);
        c.m = s.m;
        c.n = s.n;
        c.k = s.k;
        c.batch = 2;
        c.alpha = 0.5f;
        c.beta = -1.25f;
        c.workspace = ws;
        c.stream = nonblocking_;
        if (ws == Workspace::None && tt::workspace_needed(c) > 0 && needs_alignment(cfg)) {
          c.expect = TESSERA_STATUS_NOT_SUPPORTED;
          c.expect_message = "workspace";
        }
        expect_support(c);
        check("GemmStream", "non-blocking stream", c);
      }
  // Heuristic without workspace on an unaligned problem: the fallback, on the stream too.
  Case c;
  apply_layout(c, 0);
  c.m = 17;
  c.n = 33;
  c.k = 7;
  c.workspace = Workspace::None;
  c.stream = nonblocking_;
  check("GemmStream", "non-blocking stream", c);
}

TEST_F(GemmStream, CapturedInACudaGraph) {
  for (const std::string& cfg : all_config_names())
    for (const Shape& s : {Shape{256, 136, 72}, Shape{17, 33, 7}}) {
      Case c;
      c.config = cfg;
      apply_layout(c, 1);
      c.m = s.m;
      c.n = s.n;
      c.k = s.k;
      c.alpha = 0.5f;
      c.beta = -1.25f;
      c.stream = blocking_;
      expect_support(c);
      if (c.expect != TESSERA_STATUS_SUCCESS) continue;
      check("GemmStream", "warm-up before capture", c);  // first launches set kernel attributes
      c.capture_graph = true;
      check("GemmStream", "graph capture + replay", c);
    }
}

// ===================================================================================================
// 9. Invalid arguments with real device memory: INVALID_ARGUMENT and nothing written.
// ===================================================================================================

class GemmInvalid : public GpuTest {};

struct Buf {
  void* p = nullptr;
  size_t bytes = 0;
  explicit Buf(size_t n) : bytes(n) { EXPECT_EQ(cudaMalloc(&p, n), cudaSuccess); }
  ~Buf() { cudaFree(p); }
  char* c() const { return static_cast<char*>(p); }
  std::vector<unsigned char> host() const {
    std::vector<unsigned char> h(bytes);
    EXPECT_EQ(cudaMemcpy(h.data(), p, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
};

// The table of an invalid-arguments test (s8, fp8, fp8 block scales): each case the test's valid
// arguments for a D dtype with one edit, and the text the message must name. expect_each_refused()
// wants each case refused with INVALID_ARGUMENT naming it through the C++ API, the C ABI (to_c carrying
// the scale strides), gemm_workspace_size and gemm_select_config, and every kept buffer as it was; call
// it under ASSERT_NO_FATAL_FAILURE.
class BadArgsTable {
 public:
  using Valid = std::function<tessera::GemmArgs(DType)>;
  using Edit = std::function<void(tessera::GemmArgs&)>;
  // A device buffer's contents when kept, compared after each case; `name` for the failure message.
  struct Kept {
    Kept(const Buf& b, const char* n) : buf(&b), name(n), before(b.host()) {}
    const Buf* buf;
    const char* name;
    std::vector<unsigned char> before;
  };

  explicit BadArgsTable(Valid valid) : valid_(std::move(valid)) {}

  void add(const char* what, DType dt, const char* needle, const Edit& edit) {
    tessera::GemmArgs g = valid_(dt);
    edit(g);
    bad_.push_back({what, g, needle});
  }

  void expect_each_refused(const std::vector<Kept>& kept) const {
    for (const Bad& x : bad_) {
      SCOPED_TRACE(x.what);
      const tessera::Status s = tessera::gemm(x.g, nullptr, nullptr, 0);
      EXPECT_EQ(s.code, TESSERA_STATUS_INVALID_ARGUMENT) << s.message;
      EXPECT_NE(s.message.find(x.needle), std::string::npos) << s.message;
      const tessera_gemm_args_t ca = tessera::to_c(x.g);
      EXPECT_EQ(ca.scale_a_strides[0], x.g.scale_a_strides[0]);
      EXPECT_EQ(ca.scale_b_strides[1], x.g.scale_b_strides[1]);
      EXPECT_EQ(tessera_gemm(&ca, nullptr, 0, nullptr), TESSERA_STATUS_INVALID_ARGUMENT);
      EXPECT_NE(std::string(tessera_last_error()).find(x.needle), std::string::npos) << tessera_last_error();
      size_t bytes = 0;
      EXPECT_EQ(tessera::gemm_workspace_size(x.g, &bytes).code, TESSERA_STATUS_INVALID_ARGUMENT);
      std::string name;
      EXPECT_EQ(tessera::gemm_select_config(x.g, &name).code, TESSERA_STATUS_INVALID_ARGUMENT);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      for (const Kept& k : kept) EXPECT_TRUE(k.buf->host() == k.before) << k.name << " modified";
    }
  }

 private:
  struct Bad {
    const char* what;
    tessera::GemmArgs g;
    const char* needle;
  };
  Valid valid_;
  std::vector<Bad> bad_;
};

// An invalid-arguments test's buffers as BadArgsTable's tests start them: A and B with `one` in every
// byte, D with 0xFF (NaN) and the scales with zeros. Call it under ASSERT_NO_FATAL_FAILURE.
void fill_bad_args_buffers(const Buf& a, const Buf& b, const Buf& d, const Buf& sc, int one) {
  ASSERT_EQ(cudaMemset(a.p, one, a.bytes), cudaSuccess);
  ASSERT_EQ(cudaMemset(b.p, one, b.bytes), cudaSuccess);
  ASSERT_EQ(cudaMemset(d.p, 0xFF, d.bytes), cudaSuccess);
  ASSERT_EQ(cudaMemset(sc.p, 0, sc.bytes), cudaSuccess);
}

// The valid call closing an invalid-arguments test wrote D: each of its first `count` elements of type T
// is `want` (`what`, if any, said after the element's index). Call it under ASSERT_NO_FATAL_FAILURE.
template <typename T>
void expect_each_element(const Buf& d, int64_t count, T want, const char* what = "") {
  const auto h = d.host();
  for (int64_t i = 0; i < count; ++i) {
    T v;
    std::memcpy(&v, &h[size_t(i) * sizeof(T)], sizeof(T));
    ASSERT_EQ(v, want) << "element " << i << what;
  }
}

TEST_F(GemmInvalid, NothingWrittenOnInvalidArguments) {
  const int64_t M = 64, N = 48, K = 32;
  Buf a(4 * M * K * 2), b(4 * K * N * 2), d(4 * M * N * 4), ws(1 << 20);
  ASSERT_EQ(cudaMemset(a.p, 0x3C, a.bytes), cudaSuccess);  // f16 1.0
  ASSERT_EQ(cudaMemset(b.p, 0x3C, b.bytes), cudaSuccess);
  ASSERT_EQ(cudaMemset(d.p, 0xFF, d.bytes), cudaSuccess);
  const auto a0 = a.host(), b0 = b.host(), d0 = d.host();

  auto valid = [&] {
    tessera::GemmArgs g;
    g.a = tessera::dense(a.p, DType::F16, M, K);
    g.b = tessera::dense(b.p, DType::F16, K, N);
    g.d = tessera::dense(d.p, DType::F32, M, N);
    return g;
  };
  struct Bad {
    const char* what;
    tessera::GemmArgs g;
    void* ws;
    size_t ws_bytes;
    const char* needle;
  };
  std::vector<Bad> bad;
  {
    auto g = valid();
    g.b.rows = K + 1;
    g.b.cols = N - 1;
    g.b.ld = N - 1;
    bad.push_back({"K mismatch", g, nullptr, 0, "K must agree"});
  }
  {
    auto g = valid();
    g.d.ptr = a.p;  // D on top of A
    g.d.dtype = DType::F32;
    bad.push_back({"D overlaps A", g, nullptr, 0, "overlaps a"});
  }
  {
    auto g = valid();
    g.beta = 1.0f;
    g.c = g.d;
    g.c.ptr = d.c() + 4;
    bad.push_back({"C partially overlaps D", g, nullptr, 0, "c: overlaps d"});
  }
  {
    auto g = valid();
    g.d.batch_count = 2;
    g.d.batch_stride = 0;
    bad.push_back({"D batches overlap", g, nullptr, 0, "d.batch_stride"});
  }
  {
    auto g = valid();
    g.config = "no_such_config";
    bad.push_back({"unknown config", g, nullptr, 0, "config"});
  }
  bad.push_back({"workspace misaligned", valid(), ws.c() + 16, 4096, "workspace"});
  bad.push_back({"workspace null with bytes", valid(), nullptr, 4096, "workspace"});
  {
    auto g = valid();
    g.a.ptr = a.c() + 1;  // not element aligned
    bad.push_back({"A not element aligned", g, nullptr, 0, "a.ptr"});
  }
  for (const Bad& x : bad) {
    SCOPED_TRACE(x.what);
    const tessera::Status s = tessera::gemm(x.g, nullptr, x.ws, x.ws_bytes);
    EXPECT_EQ(s.code, TESSERA_STATUS_INVALID_ARGUMENT) << s.message;
    EXPECT_NE(s.message.find(x.needle), std::string::npos) << s.message;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_TRUE(d.host() == d0) << "D modified";
    EXPECT_TRUE(a.host() == a0) << "A modified";
    EXPECT_TRUE(b.host() == b0) << "B modified";
  }
  // And the valid call does write D (the buffers work).
  ASSERT_TRUE(tessera::gemm(valid(), nullptr, nullptr, 0).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_FALSE(d.host() == d0);
}

// ===================================================================================================
// 10. Configuration selection on this device; TESSERA_GEMM_CONFIG.
// ===================================================================================================

class GemmConfigSelection : public GpuTest {
 public:
  static void TearDownTestSuite() { tt::print_summary("GemmConfigSelection"); }
};

tessera::GemmArgs fake_args(int64_t m, int64_t n, int64_t k, int64_t batch = 1) {
  // select_config and gemm_workspace_size never touch memory: fake aligned pointers suffice.
  tessera::GemmArgs g;
  g.a = tessera::dense(reinterpret_cast<const void*>(uintptr_t(1) << 40), DType::F16, m, k, Layout::ColMajor, batch);
  g.b = tessera::dense(reinterpret_cast<const void*>(uintptr_t(2) << 40), DType::F16, k, n, Layout::ColMajor, batch);
  g.d = tessera::dense(reinterpret_cast<const void*>(uintptr_t(3) << 40), DType::F32, m, n, Layout::ColMajor, batch);
  return g;
}

TEST_F(GemmConfigSelection, HeuristicMatchesTheTableForThisDevice) {
  const DeviceFacts f = device_facts();
  for (const Shape& s : {Shape{4096, 4096, 4096}, Shape{128, 16384, 4096}, Shape{17, 33, 7}, Shape{1000, 1000, 1000},
                         Shape{1, 1, 1}}) {
    std::string name;
    const tessera::Status st = tessera::gemm_select_config(fake_args(s.m, s.n, s.k), &name);
    ASSERT_TRUE(st.ok()) << st.message;
    // D column-major: the canonical problem is N x M.
    // gemm_select_config assumes the workspace of gemm_workspace_size: TMA-ready whenever K > 0.
    const ti::Config& want =
        ti::select_config(ti::HeuristicInput{s.n, s.m, s.k, 1, f.sm_count, f.cc, f.smem_optin, s.k > 0});
    EXPECT_EQ(name, want.name) << shape_name(s);
    const ti::Config* got = ti::find_config(name);
    ASSERT_NE(got, nullptr);
    EXPECT_LE(got->smem_bytes, f.smem_optin);
    // The C ABI returns the same name in static storage.
    const tessera_gemm_args_t c = tessera::to_c(fake_args(s.m, s.n, s.k));
    const char* cname = nullptr;
    ASSERT_EQ(tessera_gemm_select_config(&c, &cname), TESSERA_STATUS_SUCCESS);
    EXPECT_EQ(name, cname);
  }
  // A large square on a big GPU gets its family's preferred config when it fits: the highest
  // throughput (the first of equals: sm80 rows all say 100 and list the preferred one first).
  const ti::Kernel family = f.cc == 90 ? ti::Kernel::Sm90 : ti::Kernel::Sm80;
  const ti::Config* best = nullptr;
  for (const ti::Config& c : ti::configs())
    if (c.kernel == family && (!best || c.throughput > best->throughput)) best = &c;
  ASSERT_NE(best, nullptr);
  const ti::Config& preferred = *best;
  if (f.sm_count >= 100 && f.smem_optin >= preferred.smem_bytes) {
    std::string name;
    ASSERT_TRUE(tessera::gemm_select_config(fake_args(4096, 4096, 4096), &name).ok());
    EXPECT_EQ(name, preferred.name);
  }
  // An explicit config is reported as chosen.
  for (const std::string& cfg : all_config_names()) {
    tessera::GemmArgs g = fake_args(512, 512, 512);
    g.config = cfg;
    std::string name;
    const tessera::Status st = tessera::gemm_select_config(g, &name);
    const ti::Config* x = ti::find_config(cfg);
    // (The skinny kernel takes a side of at most 64: 512 x 512 is refused, with the reason.)
    if (x->smem_bytes > f.smem_optin || f.cc < x->min_cc || f.cc > x->max_cc || x->kernel == ti::Kernel::Skinny) {
      EXPECT_EQ(st.code, TESSERA_STATUS_NOT_SUPPORTED);
      continue;
    }
    ASSERT_TRUE(st.ok()) << st.message;
    EXPECT_EQ(name, cfg);
  }
}

// Sets an environment variable for the scope (the library reads the environment once: re-read it).
struct EnvGuard {
  std::string name;
  explicit EnvGuard(const char* n, const std::string& value) : name(n) {
    setenv(n, value.c_str(), 1);
    tessera::reread_environment();
  }
  ~EnvGuard() {
    unsetenv(name.c_str());
    tessera::reread_environment();
  }
};

TEST_F(GemmConfigSelection, EnvironmentOverride) {
  for (const std::string& cfg : all_config_names()) {
    EnvGuard env("TESSERA_GEMM_CONFIG", cfg);
    std::string name;
    const tessera::Status st = tessera::gemm_select_config(fake_args(4096, 4096, 4096), &name);
    Case c;
    apply_layout(c, 1);
    c.m = 100;
    c.n = 36;
    c.k = 29;
    if (st.ok()) {
      EXPECT_EQ(name, cfg);
    } else {
      EXPECT_EQ(st.code, TESSERA_STATUS_NOT_SUPPORTED) << st.message;
      // The skinny kernel refuses 4096^3 by its rule but runs 100 x 36 (both operands K-major).
      if (ti::find_config(cfg)->kernel != ti::Kernel::Skinny) c.expect = TESSERA_STATUS_NOT_SUPPORTED;
    }
    check("GemmConfigSelection", "TESSERA_GEMM_CONFIG", c);
  }
  {
    EnvGuard env("TESSERA_GEMM_CONFIG", "no_such_config");
    Case c;
    apply_layout(c, 1);
    c.m = 64;
    c.n = 64;
    c.k = 64;
    c.expect = TESSERA_STATUS_INVALID_ARGUMENT;
    c.expect_message = "TESSERA_GEMM_CONFIG";
    check("GemmConfigSelection", "TESSERA_GEMM_CONFIG unknown: refused", c);
    // The args' config wins over the environment.
    c.config = "simt_fallback";
    c.expect = TESSERA_STATUS_SUCCESS;
    c.expect_message.clear();
    check("GemmConfigSelection", "args.config over TESSERA_GEMM_CONFIG", c);
  }
}

// Sweeps of the sm90 decompositions, forced through the environment on every sm90 config.
struct SweepShape {
  int64_t m, n, k, batch;
  int layout;
  float beta;
};

std::vector<std::string> sm90_config_names() {
  std::vector<std::string> out;
  if (device_facts().cc != 90) return out;
  for (const std::string& cfg : all_config_names())
    if (ti::find_config(cfg)->kernel == ti::Kernel::Sm90) out.push_back(cfg);
  return out;
}

Case sweep_case(const std::string& cfg, const SweepShape& sh, DType ab, DType dt) {
  Case c;
  c.config = cfg;
  c.ab = ab;
  c.dt = dt;
  apply_layout(c, sh.layout);
  c.m = sh.m;
  c.n = sh.n;
  c.k = sh.k;
  c.batch = sh.batch;
  c.beta = sh.beta;
  return c;
}

// A malformed value of `var` is refused with a message naming it, D untouched.
void expect_env_refused(const char* var, const char* value) {
  EnvGuard env(var, value);
  Case c;
  apply_layout(c, 1);
  c.m = c.n = c.k = 64;
  c.expect = TESSERA_STATUS_INVALID_ARGUMENT;
  c.expect_message = var;
  check("GemmConfigSelection", std::string(var) + "=" + value + ": refused", c);
}

// Split-K with the number of K ranges forced (TESSERA_GEMM_SPLITS): 1 range, fewer and more than
// one fix-up group of 4, ranges of a single k-tile, and more ranges than k-tiles (empty ranges).
// gemm_workspace_size makes room for the forced count.
TEST_F(GemmConfigSelection, SplitKSweep) {
  const SweepShape shapes[] = {{300, 520, 1000, 2, 1, 0.5f},  // 15 tiles of 128x128, 16 k-tiles, batched, beta
                               {256, 136, 4099, 1, 0, 0.0f},  // ragged N and K (65 k-tiles)
                               {130, 70, 200, 1, 2, -1.0f}};  // 4 k-tiles: splits beyond it leave ranges empty
  for (const std::string& cfg : sm90_config_names())
    for (int splits : {1, 2, 3, 4, 5, 8, 16}) {
      EnvGuard env("TESSERA_GEMM_SPLITS", std::to_string(splits));
      for (const SweepShape& sh : shapes)
        check("GemmConfigSelection", cfg + " TESSERA_GEMM_SPLITS sweep",
              sweep_case(cfg, sh, DType::BF16, splits % 2 ? DType::BF16 : DType::F32));
    }
  expect_env_refused("TESSERA_GEMM_SPLITS", "0");
}

// A split-K launch captured in a graph replays the same kernel parameters every time, so it cannot
// sign its ranges in by a per-launch epoch (the flags of the previous replay would already read
// "done"): captured, the ranges count in on counters that the graph's memset clears. Replayed three
// times with A changed in between (exact sums: f16 1.0 / 2.125 times 1.0 over K = 2112), on the
// narrow tiles whose 33 ranges fold in parallel.
TEST_F(GemmStream, SplitKGraphReplaysWithNewInputs) {
  if (device_facts().cc != 90) GTEST_SKIP() << "split-K runs on the sm90 path only";
  const int64_t M = 128, N = 128, K = 64 * 33;
  EnvGuard env("TESSERA_GEMM_SPLITS", "33");
  for (const char* cfg : {"sm90_128x128x64_s6_coop", "sm90_64x64x64_s13_c1x2_coop"}) {
    SCOPED_TRACE(cfg);
    tt::DeviceBuffer a, b, d, ws;
    ASSERT_EQ(a.alloc(M * K * 2), cudaSuccess);
    ASSERT_EQ(b.alloc(K * N * 2), cudaSuccess);
    ASSERT_EQ(d.alloc(M * N * 4), cudaSuccess);
    ASSERT_EQ(cudaMemset(b.p, 0, K * N * 2), cudaSuccess);
    ASSERT_EQ(cudaMemset2D(static_cast<char*>(b.p) + 1, 2, 0x3C, 1, K * N), cudaSuccess);  // f16 1.0 = 0x3C00
    tessera::GemmArgs g;
    g.a = tessera::dense(a.p, DType::F16, M, K);
    g.b = tessera::dense(b.p, DType::F16, K, N);
    g.d = tessera::dense(d.p, DType::F32, M, N);
    g.config = cfg;
    size_t bytes = 0;
    ASSERT_TRUE(tessera::gemm_workspace_size(g, &bytes).ok());
    ASSERT_GT(bytes, 0u);
    ASSERT_EQ(ws.alloc(bytes), cudaSuccess);
    ASSERT_EQ(cudaMemset(ws.p, 0xA5, bytes), cudaSuccess);
    cudaStream_t s = blocking_;
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    ASSERT_TRUE(tessera::gemm(g, s, ws.p, bytes).ok());  // first launches set kernel attributes
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    const tessera::Status st = tessera::gemm(g, s, ws.p, bytes);
    ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
    ASSERT_TRUE(st.ok()) << st.message;
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    for (int replay = 0; replay < 3; ++replay) {
      // f16 1.0 (0x3C00) or 2.125 (0x4040) in every element of A
      ASSERT_EQ(cudaMemset(a.p, replay % 2 ? 0x40 : 0, M * K * 2), cudaSuccess);
      if (replay % 2 == 0) {
        ASSERT_EQ(cudaMemset2D(static_cast<char*>(a.p) + 1, 2, 0x3C, 1, M * K), cudaSuccess);
      }
      ASSERT_EQ(cudaMemset(d.p, 0xFF, M * N * 4), cudaSuccess);  // NaN
      ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
      std::vector<float> h(M * N);
      ASSERT_EQ(cudaMemcpy(h.data(), d.p, M * N * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      const float want = (replay % 2 ? 2.125f : 1.0f) * float(K);
      int wrong = 0;
      for (float x : h) wrong += x != want;
      EXPECT_EQ(wrong, 0) << "replay " << replay << ": want " << want << ", e.g. " << h[0] << " / " << h[M * N - 1];
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
}

// Split-K in one round (every unit its own worker): all of a tile's ranges wait for each other and
// each folds its share of the tile's rows over every partial (kernel.cuh, parallel fold), with up
// to 32 lanes a chunk. Many ranges of few tiles (a weight gradient's long K), ranges of one k-tile,
// empty ranges, ragged edges, batches, beta, fp32 D; every result twice, bitwise equal (the fold's
// order depends on the ranges and the tile only). 64 ranges of 4+ tiles exceed one wave: the
// serial fold of the last range to arrive, with as many ranges.
TEST_F(GemmConfigSelection, SplitKParallelFold) {
  const SweepShape shapes[] = {{200, 136, 8200, 1, 0, 0.0f},   // 4 tiles of 128x128 x 129 k-tiles (ragged K)
                               {64, 64, 4096, 1, 1, 0.5f},     // one 64-wide tile: up to 32 lanes a chunk
                               {130, 70, 1000, 2, 2, -1.0f}};  // batched; 16 k-tiles, so ranges of one and none
  int i = 0;
  for (const std::string& cfg : sm90_config_names())
    for (int splits : {7, 33, 64}) {
      EnvGuard env("TESSERA_GEMM_SPLITS", std::to_string(splits));
      for (const SweepShape& sh : shapes) {
        const DType ab = (i % 3) ? DType::BF16 : DType::F16;
        Case c = sweep_case(cfg, sh, ab, (i++ % 2) ? DType::F32 : ab);
        c.repeat_bitwise = true;
        check("GemmConfigSelection", cfg + " TESSERA_GEMM_SPLITS one-round sweep", c);
      }
    }
}

// Stream-K forced on (TESSERA_GEMM_STREAMK=1): tiles cut among several workers (fewer tiles than
// SMs, a tile spread over up to ~33 shares), whole data-parallel waves and then the partial wave
// streamed, ragged edges and cluster ranks past the last tile, batches, beta, fp32 D, both D
// layouts; every result twice, bitwise equal (the fix-up adds the partials in worker order
// whichever finishes first). gemm_workspace_size makes room for it.
TEST_F(GemmConfigSelection, StreamKSweep) {
  const SweepShape shapes[] = {{300, 520, 1000, 2, 1, 0.5f},    // 30 tiles of 128x128 x 16 k-tiles: ~4 shares a tile
                               {256, 136, 4099, 1, 0, 0.0f},    // 4 tiles x 65 k-tiles: ~33 shares a tile
                               {2100, 2100, 1000, 1, 1, 0.0f},  // every config: whole waves, then a streamed partial wave
                               {2100, 2100, 136, 1, 2, 0.0f},   // partial waves of too few k-tiles to share: data-parallel
                               {1000, 1000, 1000, 1, 3, -1.0f}, // 64 tiles x 16 k-tiles
                               {130, 70, 200, 1, 2, -1.0f}};    // 8 k-tiles in all: too few to stream
  EnvGuard env("TESSERA_GEMM_STREAMK", "1");
  for (const std::string& cfg : sm90_config_names()) {
    int i = 0;
    for (const SweepShape& sh : shapes)
      for (bool f32_out : {false, true}) {
        const DType ab = (i++ % 3) ? DType::BF16 : DType::F16;
        Case c = sweep_case(cfg, sh, ab, f32_out ? DType::F32 : ab);
        c.repeat_bitwise = true;
        check("GemmConfigSelection", cfg + " TESSERA_GEMM_STREAMK=1 sweep", c);
      }
  }
  expect_env_refused("TESSERA_GEMM_STREAMK", "2");
}

// The L2 warm-up at entry forced (TESSERA_GEMM_L2_WARM) on every config that carries it: none, one
// k-tile, more than the ring and more k-tiles than K has; decode shapes of one wave (where the
// heuristic warms) and beyond it, ragged edges, batches, beta, a flipped decode shape. A prefetch
// only moves bytes into L2, so D is checked against the reference like any other call.
TEST_F(GemmConfigSelection, L2WarmSweep) {
  const SweepShape shapes[] = {{128, 4096, 512, 1, 1, 0.0f},   // one wave of decode tiles, 8 k-tiles
                               {4096, 128, 1000, 1, 0, 0.5f},  // the other orientation, ragged K, beta
                               {130, 390, 200, 2, 2, -1.0f},   // ragged, batched, 4 k-tiles
                               {128, 2048, 64, 1, 3, 0.0f}};   // one k-tile
  for (const std::string& cfg : sm90_config_names()) {
    if (!ti::find_config(cfg)->l2_warm) continue;
    for (int warm : {0, 1, 4, 17, 64}) {
      EnvGuard env("TESSERA_GEMM_L2_WARM", std::to_string(warm));
      for (const SweepShape& sh : shapes)
        check("GemmConfigSelection", cfg + " TESSERA_GEMM_L2_WARM=" + std::to_string(warm),
              sweep_case(cfg, sh, warm % 2 ? DType::F16 : DType::BF16, DType::BF16));
      Case flipped = sweep_case(cfg + "+flip", shapes[1], DType::BF16, DType::BF16);
      if (ti::find_config(cfg)->flip)
        check("GemmConfigSelection", cfg + "+flip TESSERA_GEMM_L2_WARM=" + std::to_string(warm), flipped);
    }
  }
  expect_env_refused("TESSERA_GEMM_L2_WARM", "65");
}

// The one-tile kernel (sm90 launch.cuh, Traits::kOneTile: a one-wave launch whose CTAs each have one
// tile and whose epilogue only scales) against the general kernel on the same problems:
// TESSERA_GEMM_ONE_TILE=0 / 1 on every sm90 config and, where it can, its flipped orientation (the
// transposed store), both D layouts, ragged edges, one and many k-tiles, batches (the grid's z), f16
// and bf16. beta != 0 and an fp32 D take the general kernel either way; a problem of more than one
// wave too (the last shape on the small tiles).
TEST_F(GemmConfigSelection, OneTileSweep) {
  const SweepShape shapes[] = {{128, 1000, 520, 1, 1, 0.0f},   // one row of tiles, ragged N and K
                               {200, 136, 64, 3, 4, 0.0f},     // ragged M, one k-tile, 3 batches, D col-major
                               {96, 264, 4096, 1, 2, 0.0f},    // 64 k-tiles
                               {130, 70, 200, 2, 7, 0.5f},     // beta
                               {1100, 1100, 96, 1, 0, 0.0f}};  // 81+ tiles of 128: several waves on 64x64
  for (const std::string& cfg : sm90_config_names())
    for (const char* on : {"0", "1"}) {
      EnvGuard env("TESSERA_GEMM_ONE_TILE", on);
      for (const SweepShape& sh : shapes)
        for (DType dt : {DType::BF16, DType::F16}) {
          check("GemmConfigSelection", cfg + " TESSERA_GEMM_ONE_TILE=" + on, sweep_case(cfg, sh, dt, dt));
          // The flipped orientation takes a D whose contiguous extent is whole 16-byte chunks.
          const bool flip_ok = ((sh.layout & 4) ? sh.m : sh.n) % 8 == 0;
          if (ti::find_config(cfg)->flip && flip_ok)
            check("GemmConfigSelection", cfg + "+flip TESSERA_GEMM_ONE_TILE=" + on, sweep_case(cfg + "+flip", sh, dt, dt));
        }
      check("GemmConfigSelection", cfg + " fp32 D TESSERA_GEMM_ONE_TILE=" + on,
            sweep_case(cfg, shapes[0], DType::BF16, DType::F32));
    }
  expect_env_refused("TESSERA_GEMM_ONE_TILE", "2");
}

// ===================================================================================================
// 10b. The flipped orientation (gemm/plan.hpp, make_plan's `flip`): the canonical D column-major,
//      written by the sm90 transposed TMA-store epilogue (stmatrix.trans sub-tiles, D^T's
//      descriptor; beta * C loaded by TMA into them, read back by ldmatrix.trans). Forced with
//      TESSERA_GEMM_FLIP=1 on every config that can (Config::flip) for both D layouts, all majors,
//      both dtypes, ragged and batched shapes, with C, bias and activation; and chosen by the heuristic
//      on the decode shape it exists for.
// ===================================================================================================

class GemmFlip : public GpuTest {
 public:
  static void TearDownTestSuite() { tt::print_summary("GemmFlip"); }
};

// D (and C, stored like D) padded by 8 elements per row (column) after an extent rounded up to 8, and
// a batch stride that is a multiple of 8: what the flipped orientation needs D and C to be where the
// extent itself is a multiple of 8 (GemmPlan::flip_ok), with padding the TMA store must leave alone.
// (The harness packs batches tightly, (outer - 1) * ld + inner apart.)
void align_out(Case& c) {
  const bool row = c.d.layout == Layout::RowMajor;
  const int64_t inner = row ? c.n : c.m, outer = row ? c.m : c.n;
  c.d.ld_pad = (inner + 7) / 8 * 8 - inner + 8;
  const int64_t one = (outer - 1) * (inner + c.d.ld_pad) + inner;
  c.d.stride_pad = (one + 7) / 8 * 8 - one;
  c.c.ld_pad = c.d.ld_pad;
  c.c.stride_pad = c.d.stride_pad;
}

std::vector<std::string> flip_config_names() {
  std::vector<std::string> out;
  for (const std::string& cfg : sm90_config_names())
    if (ti::find_config(cfg)->flip) out.push_back(cfg);
  return out;
}

TEST_F(GemmFlip, ForcedOnEveryConfigThatCan) {
  if (device_facts().cc != 90) GTEST_SKIP() << "the flipped orientation runs on the sm90 path only";
  const std::vector<std::string> cfgs = flip_config_names();
  ASSERT_GE(cfgs.size(), size_t(5));
  // Spelt "+flip", so that a case the flip cannot run fails (NOT_SUPPORTED) instead of passing on the
  // natural orientation; TESSERA_GEMM_FLIP=1 is checked below.
  // M and N multiples of 8 (D's extent in whole 16-byte chunks, as the flip needs), ragged in tiles.
  const SweepShape shapes[] = {{200, 136, 72, 2, 0, 0.0f},     // ragged M and N, batched
                               {136, 392, 520, 3, 0, 0.0f},    // ragged, several tiles, 9 k-tiles
                               {1000, 1000, 1000, 1, 0, 0.0f},  // many tiles: the persistent loop
                               {64, 96, 64, 1, 0, 0.0f}};       // one 64x96 tile exactly
  for (const std::string& cfg : cfgs)
    for (DType ab : {DType::F16, DType::BF16})
      for (int combo = 0; combo < 8; ++combo)
        for (int s = 0; s < 4; ++s) {
          const SweepShape& sh = shapes[s];
          Case c = sweep_case(cfg + "+flip", sh, ab, ab);
          c.op_a = combo & 1 ? Op::T : Op::N;
          c.op_b = combo & 2 ? Op::T : Op::N;
          c.d.layout = c.c.layout = combo & 4 ? Layout::ColMajor : Layout::RowMajor;
          align_out(c);
          switch ((s + combo) % 4) {  // every shape meets every epilogue variant across the combos
            case 0: break;
            case 1:  // beta * C by TMA into the transposed sub-tiles, a per-row bias, GELU
              c.alpha = 0.5f, c.beta = -1.25f;
              c.bias = tessera::BiasMode::PerRow;
              c.activation = tessera::Activation::Gelu;
              break;
            case 2:  // a per-column bias, one vector for every batch, SiLU
              c.bias = tessera::BiasMode::PerColumn;
              c.bias_spec.batched = false;
              c.activation = tessera::Activation::Silu;
              break;
            default:  // in place: C is D
              c.beta = 1.0f, c.in_place = true;
              break;
          }
          check("GemmFlip", cfg + "+flip", c);
        }
  EnvGuard env("TESSERA_GEMM_FLIP", "1");
  for (const std::string& cfg : cfgs) {  // the override flips a requested config that can
    Case c = sweep_case(cfg, shapes[1], DType::BF16, DType::BF16);
    align_out(c);
    c.beta = 0.5f;
    check("GemmFlip", cfg + " TESSERA_GEMM_FLIP=1", c);
  }
  // Configs that cannot flip ignore the override: the natural orientation, still right.
  for (const std::string& cfg : sm90_config_names()) {
    if (ti::find_config(cfg)->flip) continue;
    Case c = sweep_case(cfg, shapes[0], DType::BF16, DType::BF16);
    align_out(c);
    c.beta = 0.5f;
    check("GemmFlip", cfg + " TESSERA_GEMM_FLIP=1 (cannot flip)", c);
  }
  expect_env_refused("TESSERA_GEMM_FLIP", "2");
}

// "<config>+flip" asks for the flipped orientation explicitly (what `tessera tune` times and caches):
// every config that can, right in both D layouts with C, bias and activation and reported as chosen;
// a call the flip cannot run (an fp32 D, a C laid out unlike D, D's extent ragged to 16 bytes) is
// refused as NOT_SUPPORTED with D untouched, as is the spelling under TESSERA_GEMM_FLIP=0.
TEST_F(GemmFlip, ExplicitSpelling) {
  if (device_facts().cc != 90) GTEST_SKIP() << "the flipped orientation runs on the sm90 path only";
  for (const std::string& cfg : flip_config_names()) {
    const std::string flipped = cfg + "+flip";
    for (int combo : {0, 2 | 4, 1 | 4}) {
      Case c = sweep_case(flipped, {136, 200, 136, 2, 0, 0.0f}, DType::BF16, DType::BF16);
      c.op_a = combo & 1 ? Op::T : Op::N;
      c.op_b = combo & 2 ? Op::T : Op::N;
      c.d.layout = c.c.layout = combo & 4 ? Layout::ColMajor : Layout::RowMajor;
      align_out(c);
      c.beta = 0.75f;
      c.bias = tessera::BiasMode::PerColumn;
      c.activation = tessera::Activation::Relu;
      check("GemmFlip", "explicit +flip", c);
    }
    tessera::GemmArgs g = fake_args(256, 512, 512);
    g.d.dtype = g.a.dtype;  // a 16-bit D: the flip can run
    g.config = flipped;
    std::string name;
    const tessera::Status st = tessera::gemm_select_config(g, &name);
    ASSERT_TRUE(st.ok()) << st.message;
    EXPECT_EQ(name, flipped);
    // The C ABI hands the spelling out in static storage.
    tessera_gemm_args_t cg = tessera::to_c(g);
    const char* cname = nullptr;
    ASSERT_EQ(tessera_gemm_select_config(&cg, &cname), TESSERA_STATUS_SUCCESS);
    EXPECT_STREQ(cname, flipped.c_str());

    Case fp32 = sweep_case(flipped, {130, 200, 136, 1, 0, 0.0f}, DType::BF16, DType::F32);
    fp32.expect = TESSERA_STATUS_NOT_SUPPORTED;
    fp32.expect_message = "cannot run on the flipped orientation";
    check("GemmFlip", "explicit +flip refused", fp32);
    Case mixed = sweep_case(flipped, {130, 200, 136, 1, 0, 0.0f}, DType::BF16, DType::BF16);
    mixed.d.layout = Layout::RowMajor;
    mixed.c.layout = Layout::ColMajor;
    align_out(mixed);
    mixed.c.ld_pad = (mixed.m + 7) / 8 * 8 - mixed.m;
    mixed.beta = 1.0f;
    mixed.expect = TESSERA_STATUS_NOT_SUPPORTED;
    check("GemmFlip", "explicit +flip refused", mixed);
    // K = 0 (D = beta * C) has no product to orient: it runs like any K = 0 call.
    Case k0 = sweep_case(flipped, {136, 200, 0, 2, 4, 0.5f}, DType::BF16, DType::BF16);
    align_out(k0);
    check("GemmFlip", "explicit +flip K = 0", k0);
    // D's contiguous extent not in whole 16-byte chunks (130 values): the TMA store cannot write it.
    Case ragged = sweep_case(flipped, {130, 200, 136, 2, 4, 0.0f}, DType::BF16, DType::BF16);
    align_out(ragged);
    ragged.expect = TESSERA_STATUS_NOT_SUPPORTED;
    check("GemmFlip", "explicit +flip refused", ragged);
    EnvGuard off("TESSERA_GEMM_FLIP", "0");
    Case refused = sweep_case(flipped, {136, 200, 136, 1, 0, 0.0f}, DType::BF16, DType::BF16);
    align_out(refused);
    refused.expect = TESSERA_STATUS_NOT_SUPPORTED;
    check("GemmFlip", "explicit +flip refused", refused);
  }
}

// The heuristic flips 128 x 6144 x 4096 with a column-major D (64x96 pairs on the weights, see
// configs.def) on an H100's 132 SMs; the result is right in either D layout, with and without C.
TEST_F(GemmFlip, HeuristicDecodeShape) {
  const DeviceFacts f = device_facts();
  if (f.cc != 90) GTEST_SKIP() << "the flipped orientation runs on the sm90 path only";
  for (int combo : {2 | 4, 2, 4})
    for (float beta : {0.0f, 1.0f}) {
      Case c;
      c.ab = c.dt = DType::BF16;
      apply_layout(c, combo);
      c.m = 128, c.n = 6144, c.k = 4096;
      c.beta = beta;
      check("GemmFlip", "heuristic 128x6144x4096", c);
    }
  // The choice is reported with its orientation.
  if (f.sm_count == 132) {
    tessera::GemmArgs g = fake_args(128, 6144, 4096);
    g.a.dtype = g.b.dtype = g.d.dtype = DType::BF16;
    g.op_a = tessera::Op::T;  // K-major A (A^T stored column-major)
    g.a = tessera::dense(g.a.ptr, DType::BF16, 4096, 128, Layout::ColMajor);
    std::string name;
    ASSERT_TRUE(tessera::gemm_select_config(g, &name).ok());
    EXPECT_EQ(name, "sm90_64x96x64_s10_c2_coop+flip");
    // An override that rules the flip out for gemm() rules it out of the report too (it ignored
    // TESSERA_GEMM_SPLITS and TESSERA_GEMM_STREAMK once).
    for (const auto& [var, value] : {std::pair{"TESSERA_GEMM_SPLITS", "2"}, std::pair{"TESSERA_GEMM_STREAMK", "1"},
                                     std::pair{"TESSERA_GEMM_FLIP", "0"}, std::pair{"TESSERA_SM90_EPILOGUE", "staged"}}) {
      EnvGuard env(var, value);
      ASSERT_TRUE(tessera::gemm_select_config(g, &name).ok()) << var;
      EXPECT_EQ(name.find("+flip"), std::string::npos) << var << "=" << value << ": " << name;
    }
  }
}

// ===================================================================================================
// 11. Fused bias + activation, D = act(alpha * op(A) op(B) + beta * C + bias): every activation x
//     {per-row, per-column} bias on a ragged shape, batched with one bias vector per batch and with
//     one shared, for both D layouts (a column-major D swaps the bias's canonical orientation), on
//     forced configs of every kernel family; then forced split-K, misaligned / odd-strided bias
//     vectors (the scalar path), K = 0 and more batches than one grid holds.
// ===================================================================================================

const tessera::Activation kActivations[] = {tessera::Activation::None, tessera::Activation::Relu,
                                            tessera::Activation::Gelu, tessera::Activation::GeluTanh,
                                            tessera::Activation::Silu};
const tessera::BiasMode kBiasModes[] = {tessera::BiasMode::PerRow, tessera::BiasMode::PerColumn};

std::string epilogue_group(const std::string& config, tessera::BiasMode mode) {
  return config + (mode == tessera::BiasMode::PerRow ? " bias per row" : " bias per column");
}

class GemmEpilogue : public GpuParamTest<std::string> {
 public:
  static void TearDownTestSuite() { tt::print_summary("GemmEpilogue"); }

 protected:
  // 200 x 136 x 72, batch 2: ragged M tiles for every config, ragged N for the 128- and 192-wide
  // ones, a partial k-tile. D dtypes rotate with `variant` so that each of f16, bf16 and f32 meets
  // every activation across the bias modes.
  Case base(tessera::BiasMode mode, tessera::Activation act, int combo, int variant) const {
    const ti::Config* cfg = ti::find_config(GetParam());
    EXPECT_NE(cfg, nullptr) << GetParam() << " is not a configuration (renamed? update the list)";
    Case c;
    c.config = GetParam();
    const DType dts[] = {DType::F16, DType::BF16, DType::F32};
    c.dt = dts[variant % 3];
    c.ab = c.dt == DType::F32 ? DType::BF16 : c.dt;
    apply_layout(c, combo);
    c.m = 200;
    c.n = 136;
    c.k = 72;
    c.batch = 2;
    c.bias = mode;
    c.activation = act;
    return c;
  }
};

TEST_P(GemmEpilogue, EveryActivationWithEitherBias) {
  int variant = 0;
  for (tessera::Activation act : kActivations)
    for (tessera::BiasMode mode : kBiasModes) {
      ++variant;
      for (int combo : {1, 1 | 4, 2, 2 | 4})  // tn / nt, D row- and column-major
        for (bool batched_bias : {true, false}) {
          Case c = base(mode, act, combo, variant + combo);
          c.bias_spec.batched = batched_bias;
          if (batched_bias) {  // the batched-bias cases also carry C: all four epilogue terms
            c.alpha = 0.5f;
            c.beta = -1.25f;
          }
          expect_support(c);
          check("GemmEpilogue", epilogue_group(GetParam(), mode), c);
        }
    }
}

TEST_P(GemmEpilogue, BiasVectorLayouts) {
  // Element-aligned but not 16-byte aligned bias bases, and batch strides that are not a multiple
  // of 16 bytes, take the scalar bias loads; a bias of 1 x 1 problems too.
  for (tessera::BiasMode mode : kBiasModes)
    for (int combo : {1, 1 | 4})
      for (int64_t offset : {0, 1, 3})
        for (int64_t stride_pad : {0, 3}) {
          Case c = base(mode, tessera::Activation::Silu, combo, int(offset + stride_pad));
          c.bias_spec.elem_offset = offset;
          c.bias_spec.stride_pad = stride_pad;
          c.beta = 0.75f;
          expect_support(c);
          check("GemmEpilogue", epilogue_group(GetParam(), mode) + " misaligned / odd stride", c);
        }
  for (tessera::BiasMode mode : kBiasModes) {
    Case c = base(mode, tessera::Activation::Relu, 1, 0);
    c.m = c.n = c.k = 1;
    c.batch = 3;
    expect_support(c);
    check("GemmEpilogue", epilogue_group(GetParam(), mode) + " 1x1x1", c);
  }
}

TEST_P(GemmEpilogue, InPlaceAndKZero) {
  for (tessera::BiasMode mode : kBiasModes)
    for (int combo : {1, 2 | 4}) {
      Case c = base(mode, tessera::Activation::Gelu, combo, combo);
      c.in_place = true;  // C == D, read before the bias is added and the result written
      c.beta = -1.25f;
      expect_support(c);
      check("GemmEpilogue", epilogue_group(GetParam(), mode) + " in place", c);
      // K = 0: D = act(beta * C + bias), no product at all.
      Case z = base(mode, tessera::Activation::GeluTanh, combo, combo + 1);
      z.k = 0;
      z.beta = 0.5f;
      expect_support(z);
      check("GemmEpilogue", epilogue_group(GetParam(), mode) + " K = 0", z);
    }
}

// A 16-bit D with padded rows (columns): nothing but D's elements may change. D's extent ragged to
// 16 bytes (130 values) or whole (136), either layout, with and without beta * C, batched. The TMA
// store writes a row's last 16-byte chunk whole, so a ragged extent must leave by the threads'
// stores (EpilogueParams::d_tma); before that rule it wrote the padding after every row.
TEST_P(GemmEpilogue, TmaStoreKeepsThePadding) {
  int variant = 0;
  for (int combo : {1, 2 | 4, 3, 4})
    for (int64_t extent : {130, 136})
      for (float beta : {0.0f, 0.75f}) {
        Case c = base(tessera::BiasMode::None, tessera::Activation::None, combo, variant++ % 2);
        const bool row = c.d.layout == Layout::RowMajor;
        (row ? c.n : c.m) = extent;
        const int64_t inner = extent, outer = row ? c.m : c.n;
        c.d.ld_pad = c.c.ld_pad = (inner + 7) / 8 * 8 - inner + 8;
        const int64_t one = (outer - 1) * (inner + c.d.ld_pad) + inner;
        c.d.stride_pad = c.c.stride_pad = (one + 7) / 8 * 8 - one;
        c.beta = beta;
        if (beta != 0.0f) c.bias = tessera::BiasMode::PerRow;
        expect_support(c);
        check("GemmEpilogue", GetParam() + " padded 16-bit D", c);
      }
}

INSTANTIATE_TEST_SUITE_P(Configs, GemmEpilogue,
                         ::testing::Values("sm90_128x128x64_s6_coop", "sm90_128x192x64_s5_c2_coop",
                                           "sm90_64x256x64_s5_c2_pingpong",
                                           "sm80_64x64x32_s3_w4", "simt_fallback"),
                         [](const ::testing::TestParamInfo<std::string>& i) { return sanitize(i.param); });

class GemmEpilogueSplitK : public GpuTest {
 public:
  static void TearDownTestSuite() { tt::print_summary("GemmEpilogueSplitK"); }
};

// A ragged, batched 200 x 136 x 1000 problem (16 k-tiles) with bias and activation on config `cfg`;
// combo 1: bf16 D, beta 0; combo 2 | 4: fp32 D, beta -1.25 (apply_layout's D layouts differ too).
Case cut_k_case(const char* cfg, tessera::BiasMode mode, tessera::Activation act, int combo) {
  Case c;
  c.config = cfg;
  c.ab = DType::BF16;
  c.dt = combo & 4 ? DType::F32 : DType::BF16;
  apply_layout(c, combo);
  c.m = 200;
  c.n = 136;
  c.k = 1000;
  c.batch = 2;
  c.alpha = 0.5f;
  c.beta = combo & 4 ? -1.25f : 0.0f;
  c.bias = mode;
  c.activation = act;
  return c;
}

// Split-K applies the epilogue once, in the unit that finishes a tile, to the reduced sum: a bias
// or activation applied per K range would show as a wrong result. Forced ranges on the sm90 path.
TEST_F(GemmEpilogueSplitK, ForcedSplits) {
  const DeviceFacts f = device_facts();
  if (f.cc != 90) GTEST_SKIP() << "split-K runs on the sm90 path only (this device is sm_" << f.cc << ")";
  for (const char* cfg : {"sm90_128x128x64_s6_coop", "sm90_128x192x64_s5_c2_coop", "sm90_64x256x64_s5_c2_pingpong"})
    for (int splits : {2, 3}) {
      EnvGuard env("TESSERA_GEMM_SPLITS", std::to_string(splits));
      for (tessera::BiasMode mode : kBiasModes)
        for (tessera::Activation act : {tessera::Activation::Relu, tessera::Activation::Silu})
          for (int combo : {1, 2 | 4}) {
            Case c = cut_k_case(cfg, mode, act, combo);  // 16 k-tiles over 2 or 3 ranges
            c.beta = -1.25f;
            ASSERT_GE(tt::workspace_needed(c), size_t(1)) << "no split-K workspace asked for";
            check("GemmEpilogueSplitK", epilogue_group(cfg, mode) + " TESSERA_GEMM_SPLITS", c);
          }
    }
}

// Stream-K likewise: the owner of a tile cut among workers applies the epilogue once, to the sum
// (4 tiles of 16 k-tiles among 132 SMs: every tile cut among many workers); bitwise repeatable.
TEST_F(GemmEpilogueSplitK, ForcedStreamK) {
  const DeviceFacts f = device_facts();
  if (f.cc != 90) GTEST_SKIP() << "stream-K runs on the sm90 path only (this device is sm_" << f.cc << ")";
  EnvGuard env("TESSERA_GEMM_STREAMK", "1");
  for (const char* cfg : {"sm90_128x128x64_s6_coop", "sm90_128x256x64_s4_c2_coop", "sm90_128x64x64_s8_c1x2_coop",
                          "sm90_64x256x64_s5_c2_pingpong", "sm90_64x64x64_s13_c2_coop", "sm90_64x64x64_s13_c1x2_coop"})
    for (tessera::BiasMode mode : kBiasModes)
      for (tessera::Activation act : {tessera::Activation::Gelu, tessera::Activation::Silu})
        for (int combo : {1, 2 | 4}) {
          Case c = cut_k_case(cfg, mode, act, combo);
          c.repeat_bitwise = true;
          check("GemmEpilogueSplitK", epilogue_group(cfg, mode) + " TESSERA_GEMM_STREAMK", c);
        }
}

class GemmEpilogueBigBatch : public GpuTest {
 public:
  static void TearDownTestSuite() { tt::print_summary("GemmEpilogueBigBatch"); }
};

// More batches than one grid holds: the launcher advances the bias with the other pointers.
TEST_F(GemmEpilogueBigBatch, MoreBatchesThanOneGridHolds) {
  for (const std::string& cfg : {std::string(), std::string("simt_fallback")})
    for (tessera::BiasMode mode : kBiasModes) {
      Case c;
      c.config = cfg;
      apply_layout(c, 1);
      c.m = 8;
      c.n = 16;
      c.k = 8;
      c.batch = 65537;
      c.bias = mode;
      c.activation = tessera::Activation::Relu;
      check("GemmEpilogueBigBatch", (cfg.empty() ? std::string("heuristic") : cfg) + " batch 65537 with a bias", c);
    }
}

// ===================================================================================================
// 12. int8 operands (DType::S8): the exact int32 sums (an S32 D) and dequantised float D.
// ===================================================================================================
//
// Oracle: exact int64 sums from a plain GPU kernel (harness.hpp); an S32 D must match bit for bit, a
// float D act(alpha * scale_a[i] * scale_b[j] * sum + beta * C + bias) within D's rounding. The
// configs: the heuristic and every row with Config::s8 (the sm90 rows of TESSERA_SM90_S8 in
// configs.def, and the fallback) forced by name; every other row must refuse s8 by name.

using tessera::ScaleMode;

std::vector<std::string> s8_config_names() {
  std::vector<std::string> v = {""};
  for (const ti::Config& c : ti::configs())
    if (c.s8) v.push_back(c.name);
  return v;
}

const DType kS8Outputs[] = {DType::S32, DType::BF16, DType::F16, DType::F32};

// What this device and workspace make of an explicit config on an s8 case: expect_support's rules,
// and a tensor-core row without the workspace for the K-major copies refuses (the heuristic falls
// back to the CUDA cores instead).
void expect_s8_support(Case& c) {
  expect_support(c);
  if (c.expect != TESSERA_STATUS_SUCCESS || !needs_alignment(c.config) || c.workspace == Workspace::Full) return;
  if (tt::workspace_needed(c) > 0) {
    c.expect = TESSERA_STATUS_NOT_SUPPORTED;
    c.expect_message = "workspace";
  }
}

// An s8 case of order-1 float outputs: scales (Case::scale_mode) of about 1 / (128 K^(1/4)), or
// without scales alpha = 1 / (128^2 sqrt(K)) (so that f16's range holds D). An S32 D takes no scales.
Case s8_case(const std::string& cfg, DType dt, ScaleMode scales, int combo, const Shape& s) {
  Case c;
  c.config = cfg;
  c.ab = DType::S8;
  c.dt = dt;
  apply_layout(c, combo);
  c.m = s.m;
  c.n = s.n;
  c.k = s.k;
  c.scale_mode = dt == DType::S32 ? ScaleMode::None : scales;
  if (dt != DType::S32 && c.scale_mode == ScaleMode::None)
    c.alpha = float(1.0 / (16384.0 * std::sqrt(double(std::max<int64_t>(s.k, 1)))));
  return c;
}

std::string s8_group(const std::string& cfg, DType dt) {
  return (cfg.empty() ? std::string("heuristic") : cfg) + " s8->" + dn(dt);
}

class GemmS8 : public GpuTest {
 public:
  static void TearDownTestSuite() { tt::print_summary("GemmS8"); }
};

// Every config x 8 layouts (op_a, op_b, D's layout) x the four D dtypes x ragged shapes, the scale
// modes rotating (none, tensor, row-wise) so that each meets every float dtype and config; padded
// leading dimensions on half the shapes (D's padding must stay as it was); the heuristic also
// without workspace (non-K-major or unaligned operands then run on the CUDA cores).
TEST_F(GemmS8, EveryLayoutAndOutput) {
  const Shape shapes[] = {{1, 1, 1}, {7, 16, 33}, {128, 256, 64}, {257, 100, 129}, {130, 300, 4096}};
  for (const std::string& cfg : s8_config_names())
    for (int combo = 0; combo < 8; ++combo)
      for (DType dt : kS8Outputs)
        for (int si = 0; si < 5; ++si)
          for (Workspace ws : {Workspace::Full, Workspace::None}) {
            if (ws == Workspace::None && !cfg.empty()) continue;
            Case c = s8_case(cfg, dt, ScaleMode((combo + si + int(dt)) % 3), combo, shapes[si]);
            if (si % 2) {  // ld > packed: A's by 16 (its rows stay 16-byte aligned where K's are), B's and D's by 3
              c.a.ld_pad = 16;
              c.b.ld_pad = 3;
              c.d.ld_pad = 3;
            }
            c.workspace = ws;
            expect_s8_support(c);
            check("GemmS8", s8_group(cfg, dt) + (ws == Workspace::None ? " no workspace" : ""), c);
          }
}

// More tiles than SMs (the persistent kernels loop over tiles).
TEST_F(GemmS8, MoreTilesThanSms) {
  for (const std::string& cfg : s8_config_names())
    for (int combo : {1, 1 | 4})
      for (DType dt : {DType::S32, DType::BF16}) {
        Case c = s8_case(cfg, dt, ScaleMode::RowWise, combo, {3000, 2900, 48});
        expect_s8_support(c);
        check("GemmS8", s8_group(cfg, dt) + " 3000x2900x48", c);
      }
}

// Ragged M and N (1 ... 257) with K rotating through 0 ... 33, 64, 100 and 4096; then every such K on
// two fixed shapes. Layouts, D dtypes and scale modes rotate too.
TEST_F(GemmS8, RaggedExtents) {
  const int64_t extents[] = {1, 7, 16, 33, 100, 128, 257};
  std::vector<int64_t> ks;
  for (int64_t k = 0; k <= 33; ++k) ks.push_back(k);
  for (int64_t k : {64, 100, 4096}) ks.push_back(k);
  int v = 0;
  for (const std::string& cfg : s8_config_names()) {
    for (int64_t m : extents)
      for (int64_t n : extents) {
        const DType dt = kS8Outputs[v % 4];
        Case c = s8_case(cfg, dt, ScaleMode(v % 3), v % 8, {m, n, ks[size_t(v) % ks.size()]});
        ++v;
        expect_s8_support(c);
        check("GemmS8", s8_group(cfg, dt) + " ragged M, N", c);
      }
    for (int64_t k : ks)
      for (const Shape& s : {Shape{33, 100, k}, Shape{128, 257, k}}) {
        const DType dt = ++v % 2 ? DType::S32 : DType::F32;
        Case c = s8_case(cfg, dt, ScaleMode::RowWise, int(k % 8), s);
        expect_s8_support(c);
        check("GemmS8", s8_group(cfg, dt) + " K sweep", c);
      }
  }
}

// The fused epilogue on a dequantised D: bias per column and per row (one per batch, or shared),
// relu and gelu (silu and gelu_tanh once each), beta * C, C in place of D, scales per tensor and
// row-wise; batch 2, ragged tiles.
TEST_F(GemmS8, DequantisedEpilogue) {
  int v = 0;
  for (const std::string& cfg : s8_config_names())
    for (DType dt : {DType::BF16, DType::F16, DType::F32}) {
      for (tessera::BiasMode mode : kBiasModes)
        for (Activation act : {Activation::Relu, Activation::Gelu})
          for (int combo : {1, 2 | 4}) {
            ++v;
            Case c = s8_case(cfg, dt, v % 2 ? ScaleMode::Tensor : ScaleMode::RowWise, combo, {200, 136, 72});
            c.batch = 2;
            c.bias = mode;
            c.activation = act;
            c.bias_spec.batched = v % 3 != 0;
            c.alpha = 0.5f;
            c.beta = -1.25f;
            expect_s8_support(c);
            check("GemmS8", s8_group(cfg, dt) + " epilogue", c);
          }
      for (Activation act : {Activation::Silu, Activation::GeluTanh}) {
        Case c = s8_case(cfg, dt, ScaleMode::RowWise, 3, {65, 90, 300});
        c.bias = tessera::BiasMode::PerColumn;
        c.activation = act;
        expect_s8_support(c);
        check("GemmS8", s8_group(cfg, dt) + " epilogue", c);
      }
      for (int combo : {1, 2 | 4}) {  // C is D: read before D is written
        Case c = s8_case(cfg, dt, ScaleMode::RowWise, combo, {100, 72, 40});
        c.in_place = true;
        c.beta = 0.75f;
        c.bias = tessera::BiasMode::PerRow;
        expect_s8_support(c);
        check("GemmS8", s8_group(cfg, dt) + " in place", c);
      }
    }
}

// Batches: packed, A / B broadcast (by count or by stride 0), C broadcast, padded strides, D with
// interleaved batches; the scales are shared by every batch.
TEST_F(GemmS8, Batched) {
  const char* variants[] = {"packed",   "a_bcast",         "a_bcast_stride0", "b_bcast",      "b_bcast_stride0",
                            "c_bcast",  "padded_strides8", "padded_strides3", "interleaved_d"};
  for (const std::string& cfg : s8_config_names())
    for (const char* var : variants)
      for (DType dt : {DType::S32, DType::BF16})
        for (int combo : {1, 2 | 4}) {
          Case c = s8_case(cfg, dt, ScaleMode::RowWise, combo, {33, 17, 40});
          apply_batch_variant(c, var);
          if (dt != DType::S32) {
            c.beta = -1.25f;
            c.bias = tessera::BiasMode::PerColumn;
          }
          expect_s8_support(c);
          check("GemmS8", s8_group(cfg, dt) + " batched " + var, c);
        }
}

// Base pointers 1 ... 15 bytes past 16-byte alignment (A, B; D and the scales by whole elements),
// with and without workspace: explicit tensor-core rows refuse without it, the heuristic falls back
// to the CUDA cores. Aligned K-major operands need no workspace on any s8 row.
TEST_F(GemmS8, UnalignedPointers) {
  for (const std::string& cfg : s8_config_names())
    for (Workspace ws : {Workspace::Full, Workspace::None})
      for (int64_t off = 1; off <= 15; ++off) {
        const DType dt = off % 2 ? DType::S32 : off % 4 ? DType::BF16 : DType::F32;
        Case c = s8_case(cfg, dt, off % 3 ? ScaleMode::RowWise : ScaleMode::Tensor, off % 5 ? 1 : 2 | 4,
                         {100, 129, 64});
        c.a.elem_offset = off;
        c.b.elem_offset = 16 - off;
        c.d.elem_offset = off % 4;
        c.scale_offset = off % 3;
        c.workspace = ws;
        expect_s8_support(c);
        check("GemmS8", s8_group(cfg, dt) + " unaligned" + (ws == Workspace::None ? ", no workspace" : ""), c);
      }
  for (const std::string& cfg : s8_config_names())
    for (DType dt : {DType::S32, DType::F16})
      for (int combo : {1, 1 | 4}) {
        Case c = s8_case(cfg, dt, ScaleMode::Tensor, combo, {128, 256, 64});
        c.workspace = Workspace::None;
        EXPECT_EQ(tt::workspace_needed(c), 0u) << tt::describe(c);
        expect_s8_support(c);
        check("GemmS8", s8_group(cfg, dt) + " aligned, no workspace", c);
      }
}

// Every config without an s8 kernel refuses s8 by name (NOT_SUPPORTED, D untouched); so does the
// flipped orientation of an s8 row (it needs a 16-bit D of the operands' dtype).
TEST_F(GemmS8, ConfigsWithoutS8Refuse) {
  for (const ti::Config& cfg : ti::configs())
    for (DType dt : {DType::S32, DType::BF16}) {
      Case c = s8_case(cfg.name, dt, ScaleMode::Tensor, 1, {64, 64, 64});
      if (!cfg.s8) {
        c.expect = TESSERA_STATUS_NOT_SUPPORTED;
        c.expect_message = "no kernel for s8 operands";
        check("GemmS8", std::string("refuses ") + cfg.name, c);
      } else if (cfg.flip) {
        c.config = std::string(cfg.name) + "+flip";
        c.expect = TESSERA_STATUS_NOT_SUPPORTED;
        c.expect_message = "config";
        check("GemmS8", std::string("refuses ") + cfg.name + "+flip", c);
      }
    }
}

// The heuristic (and gemm_select_config) picks a config that runs s8, on Hopper an sm90 row (the
// operands are copied K-major where TMA cannot read them as they are); s8 runs data-parallel, so
// aligned K-major operands need no workspace at all, even where 16-bit operands would split K.
TEST_F(GemmS8, SelectionPicksAnS8Config) {
  const DeviceFacts f = device_facts();
  for (const Shape& s : {Shape{4096, 4096, 4096}, Shape{128, 4096, 4096}, Shape{128, 128, 16384}, Shape{17, 33, 7},
                         Shape{1000, 1000, 1000}, Shape{1, 1, 1}})
    for (int combo : {1, 0, 1 | 4})
      for (DType dt : {DType::S32, DType::BF16}) {
        tessera::GemmArgs g;
        g.op_a = combo & 1 ? Op::T : Op::N;
        g.op_b = combo & 2 ? Op::T : Op::N;
        g.a = tessera::dense(reinterpret_cast<const void*>(uintptr_t(1) << 40), DType::S8, g.op_a == Op::N ? s.m : s.k,
                             g.op_a == Op::N ? s.k : s.m, Layout::ColMajor);
        g.b = tessera::dense(reinterpret_cast<const void*>(uintptr_t(2) << 40), DType::S8, g.op_b == Op::N ? s.k : s.n,
                             g.op_b == Op::N ? s.n : s.k, Layout::ColMajor);
        g.d = tessera::dense(reinterpret_cast<const void*>(uintptr_t(3) << 40), dt, s.m, s.n,
                             combo & 4 ? Layout::ColMajor : Layout::RowMajor);
        if (dt != DType::S32) {
          g.scale_mode = ScaleMode::RowWise;
          g.scale_a = reinterpret_cast<const float*>(uintptr_t(4) << 40);
          g.scale_b = reinterpret_cast<const float*>(uintptr_t(5) << 40);
        }
        const std::string what = shape_name(s) + " " + layout_name(combo) + " s8->" + dn(dt);
        std::string name;
        const tessera::Status st = tessera::gemm_select_config(g, &name);
        ASSERT_TRUE(st.ok()) << what << ": " << st.message;
        const ti::Config* cfg = ti::find_config(name);
        ASSERT_NE(cfg, nullptr) << what << ": '" << name << "' (s8 has no flipped orientation)";
        EXPECT_TRUE(cfg->s8) << what << ": " << name;
        if (f.cc == 90 && s.k >= 16) {
          EXPECT_EQ(cfg->kernel, ti::Kernel::Sm90) << what << ": " << name;
        }
        size_t bytes = 1;
        ASSERT_TRUE(tessera::gemm_workspace_size(g, &bytes).ok()) << what;
        if (combo == 1 && s.k % 16 == 0) {
          EXPECT_EQ(bytes, 0u) << what << ": K-major and aligned: no copy, no split-K";
        }
        if (combo == 0 && f.cc == 90) {
          EXPECT_GT(bytes, 0u) << what << ": A is not K-major: its K-major copy";
        }
      }
}

// Split-K and stream-K forced through the environment do not apply to s8 (its int32 sums have no
// fix-up): the sums stay exact, bit for bit on a second run.
TEST_F(GemmS8, SplitKAndStreamKOverridesDoNotApply) {
  if (device_facts().cc != 90) GTEST_SKIP() << "split-K and stream-K run on the sm90 path only";
  for (auto [var, value] : {std::pair<const char*, const char*>{"TESSERA_GEMM_SPLITS", "3"},
                            {"TESSERA_GEMM_STREAMK", "1"}}) {
    EnvGuard env(var, value);
    for (const std::string& cfg : s8_config_names())
      for (DType dt : {DType::S32, DType::BF16}) {
        Case c = s8_case(cfg, dt, ScaleMode::RowWise, 1, {200, 136, 1000});
        c.repeat_bitwise = true;
        expect_s8_support(c);
        check("GemmS8", s8_group(cfg, dt) + " " + var, c);
      }
  }
}

// The host path: a non-default stream, a CUDA graph (the K-major copies into the workspace are
// captured too), the C ABI (the scale fields cross it), a second run bit for bit.
TEST_F(GemmS8, StreamsGraphsAndTheCAbi) {
  cudaStream_t st = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  std::vector<std::string> cfgs = {""};
  if (device_facts().cc == 90)
    for (const ti::Config& c : ti::configs())
      if (c.s8 && c.kernel == ti::Kernel::Sm90) cfgs.push_back(c.name);
  for (const std::string& cfg : cfgs)
    for (DType dt : {DType::S32, DType::BF16})
      for (int variant = 0; variant < 4; ++variant) {
        Case c = s8_case(cfg, dt, ScaleMode::RowWise, 2 | 4, {100, 129, 77});  // "nt": both operands copied
        c.stream = st;
        c.capture_graph = variant == 1;
        c.use_c_abi = variant == 2;
        c.repeat_bitwise = variant == 3;
        expect_s8_support(c);
        check("GemmS8", s8_group(cfg, dt) + " stream / graph / C ABI / repeat", c);
      }
  ASSERT_EQ(cudaStreamDestroy(st), cudaSuccess);
}

// Invalid s8 arguments with real device memory: INVALID_ARGUMENT naming the argument through the C++
// API, the C ABI, gemm_workspace_size and gemm_select_config, and nothing written.
TEST_F(GemmS8, InvalidArgumentsWriteNothing) {
  const int64_t M = 64, N = 48, K = 32;
  Buf a(4 * M * K), b(4 * K * N), d(4 * M * N), sc(4 * (M + N) + 64);
  ASSERT_NO_FATAL_FAILURE(fill_bad_args_buffers(a, b, d, sc, 0x01));  // s8 1
  const std::vector<BadArgsTable::Kept> kept = {{d, "D"}, {a, "A"}, {b, "B"}};
  const float* sa = static_cast<const float*>(sc.p);
  const float* sb = sa + M;
  auto valid = [&](DType dt) {
    tessera::GemmArgs g;
    g.a = tessera::dense(a.p, DType::S8, M, K, Layout::RowMajor);
    g.b = tessera::dense(b.p, DType::S8, K, N, Layout::ColMajor);
    g.d = tessera::dense(d.p, dt, M, N);
    if (dt != DType::S32) {
      g.scale_mode = ScaleMode::RowWise;
      g.scale_a = sa;
      g.scale_b = sb;
    }
    return g;
  };
  BadArgsTable bad(valid);
  bad.add("s32 D with scales", DType::S32, "scale_mode", [&](tessera::GemmArgs& g) {
    g.scale_mode = ScaleMode::Tensor;
    g.scale_a = sa;
    g.scale_b = sb;
  });
  bad.add("s32 D with alpha 2", DType::S32, "alpha", [](tessera::GemmArgs& g) { g.alpha = 2.0f; });
  bad.add("s32 D with beta 1 (C = D)", DType::S32, "beta", [](tessera::GemmArgs& g) {
    g.beta = 1.0f;
    g.c = g.d;
  });
  bad.add("s32 D with a bias", DType::S32, "bias_mode", [&](tessera::GemmArgs& g) {
    g.bias = sc.p;
    g.bias_mode = tessera::BiasMode::PerColumn;
  });
  bad.add("s32 D with relu", DType::S32, "activation", [](tessera::GemmArgs& g) { g.activation = Activation::Relu; });
  bad.add("tensor scales, scale_a null", DType::BF16, "scale_a", [](tessera::GemmArgs& g) {
    g.scale_mode = ScaleMode::Tensor;
    g.scale_a = nullptr;
  });
  bad.add("row-wise scales, scale_b null", DType::BF16, "scale_b", [](tessera::GemmArgs& g) { g.scale_b = nullptr; });
  bad.add("scale_a without a scale mode", DType::F32, "scale_a", [](tessera::GemmArgs& g) {
    g.scale_mode = ScaleMode::None;
    g.scale_b = nullptr;
  });
  bad.add("scale_a 2 bytes past 4-byte alignment", DType::BF16, "scale_a", [&](tessera::GemmArgs& g) {
    g.scale_a = reinterpret_cast<const float*>(sc.c() + 2);
  });
  bad.add("scale_b on top of D", DType::BF16, "scale_b",
          [&](tessera::GemmArgs& g) { g.scale_b = static_cast<const float*>(d.p); });
  bad.add("scale mode 7", DType::BF16, "scale_mode", [](tessera::GemmArgs& g) { g.scale_mode = ScaleMode(7); });
  bad.add("scales on f16 operands", DType::BF16, "scale_mode",
          [](tessera::GemmArgs& g) { g.a.dtype = g.b.dtype = DType::F16; });
  bad.add("s8 A with f16 B", DType::BF16, "b.dtype", [](tessera::GemmArgs& g) { g.b.dtype = DType::F16; });
  bad.add("s32 operands", DType::S32, "a.dtype", [](tessera::GemmArgs& g) { g.a.dtype = g.b.dtype = DType::S32; });
  bad.add("s8 D", DType::S32, "d.dtype", [](tessera::GemmArgs& g) { g.d.dtype = DType::S8; });
  bad.add("f16 operands with an s32 D", DType::S32, "d.dtype",
          [](tessera::GemmArgs& g) { g.a.dtype = g.b.dtype = DType::F16; });
  bad.add("tf32 precision on s8 operands", DType::F32, "precision",
          [](tessera::GemmArgs& g) { g.precision = tessera::Precision::TF32; });
  ASSERT_NO_FATAL_FAILURE(bad.expect_each_refused(kept));
  // And a valid call does write D: K products of 1 * 1 (0x01 bytes) each.
  ASSERT_TRUE(tessera::gemm(valid(DType::S32), nullptr, nullptr, 0).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_NO_FATAL_FAILURE(expect_each_element(d, M * N, int32_t(K)));
}

// More batches than one grid holds (65535): the launcher advances A and B by their 1-byte elements
// and an s32 D by 4-byte ones, chunk by chunk; the scales stay shared. Last of the s8 tests: a launch
// that faults leaves the process's CUDA context unusable for the tests that run after it.
TEST_F(GemmS8, MoreBatchesThanOneGridHolds) {
  for (const std::string& cfg : s8_config_names())
    for (DType dt : {DType::S32, DType::BF16}) {
      Case c = s8_case(cfg, dt, ScaleMode::RowWise, 1, {8, 16, 32});
      c.batch = 65537;
      if (dt != DType::S32) c.bias = tessera::BiasMode::PerColumn;
      expect_s8_support(c);
      check("GemmS8", s8_group(cfg, dt) + " batch 65537", c);
    }
}

// ===================================================================================================
// 13. fp8 operands (DType::E4M3 / E5M2, sm_90 only): fp32 sums dequantised into a bf16 / f16 / f32 D.
// ===================================================================================================
//
// Oracle: fp64 sums of the operands' values (exact; gpu_helpers.hpp fp8_gemm_reference), then
// act(alpha * scale_a[i] * scale_b[j] * sum + beta * C + bias) in fp64; tolerance by D's dtype, the
// precision and K (harness.cpp tolerance: promoted bf16 1e-2, f16 3e-3, f32 1e-3; fast accumulation
// at least 2e-2 * sqrt(K / 4096)). The configs: the heuristic and the rows with fp8 kernels forced by
// name, Precision::Default (the tensor cores' sums promoted into fp32 every 128 K) on the rows that
// promote and Fp8FastAccum on every one; every other row, and Default on a row that does not promote,
// refuses with NOT_SUPPORTED, D untouched. Operands that TMA cannot read as they are (not K-major, or
// not 16-byte aligned) are copied K-major into the workspace; without it the heuristic runs the CUDA
// cores and an explicit sm90 row refuses. On a GPU that is not sm_90 every fp8 call is NOT_SUPPORTED:
// each test checks one such call, then skips.

struct Fp8Row {
  const char* name;
  bool promote;  // also runs Precision::Default (registers for the promoted accumulators)
  bool block;    // also runs block scales (promotes, a tile within one 128-column scale block)
};
// The rows with fp8 kernels. Keep in step with the library's table (the fp8 rows of
// src/gemm/sm90/configs.def and the fallback's flags in src/gemm/configs.cpp); the CUDA-core fallback
// sums in plain fp32 whichever the precision.
const Fp8Row kFp8Rows[] = {{"sm90_128x128x64_s6_coop", true, true},
                           {"sm90_128x128x64_s6_c2_coop", true, true},
                           {"sm90_128x64x64_s8_c1x2_coop", true, true},
                           {"sm90_128x192x64_s5_c2_coop", true, false},
                           {"sm90_128x256x64_s4_c2_coop", false, false},
                           {"simt_fallback", true, true}};

const Fp8Row* fp8_row(const std::string& name) {
  for (const Fp8Row& r : kFp8Rows)
    if (name == r.name) return &r;
  return nullptr;
}

// "" (the heuristic) and every fp8 row.
std::vector<std::string> fp8_config_names() {
  std::vector<std::string> v = {""};
  for (const Fp8Row& r : kFp8Rows) v.push_back(r.name);
  return v;
}

// The sm90 fp8 rows (split-K, stream-K, graphs of the K-major copies).
std::vector<std::string> fp8_sm90_config_names() {
  std::vector<std::string> v;
  for (const Fp8Row& r : kFp8Rows)
    if (const ti::Config* c = ti::find_config(r.name); c && c->kernel == ti::Kernel::Sm90) v.push_back(r.name);
  return v;
}

const DType kFp8Types[] = {DType::E4M3, DType::E5M2};
const DType kFp8Outputs[] = {DType::BF16, DType::F16, DType::F32};
const tessera::Precision kFp8Precisions[] = {tessera::Precision::Default, tessera::Precision::Fp8FastAccum};

bool fast_accum(tessera::Precision p) { return p == tessera::Precision::Fp8FastAccum; }

// The precision a config runs: `wanted`, or Fp8FastAccum on a row that does not promote (so that a
// rotation over both precisions still runs every case on such a row).
tessera::Precision fp8_precision_for(const std::string& cfg, tessera::Precision wanted) {
  const Fp8Row* row = fp8_row(cfg);
  return row && !row->promote ? tessera::Precision::Fp8FastAccum : wanted;
}

// Whether an fp8 operand reaches TMA as it is, with no K-major copy in the workspace (gemm/plan.cpp's
// rule for one-byte operands): K-major, and its base, leading dimension, K and batch stride whole
// multiples of 16 bytes (or K = 0). `rows` x `cols` as stored.
bool fp8_operand_in_place(const MatSpec& s, bool k_major, int64_t rows, int64_t cols, int64_t k, int64_t batch) {
  if (k == 0) return true;
  const bool row_major = s.layout == Layout::RowMajor;
  const int64_t inner = row_major ? cols : rows, outer = row_major ? rows : cols;
  const int64_t ld = s.ld_abs > 0 ? s.ld_abs : std::max<int64_t>(1, inner) + s.ld_pad;
  const bool broadcast = !s.batched || s.stride_zero || batch <= 1;
  const int64_t stride = s.stride_abs >= 0 ? s.stride_abs : (outer - 1) * ld + inner + s.stride_pad;
  return k_major && s.elem_offset % 16 == 0 && ld % 16 == 0 && k % 16 == 0 && (broadcast || stride % 16 == 0);
}

bool fp8_operands_in_place(const Case& c) {
  const bool a_k_major = (c.a.layout == Layout::RowMajor) != (c.op_a == Op::T);
  const bool b_k_major = (c.b.layout == Layout::RowMajor) == (c.op_b == Op::T);
  return fp8_operand_in_place(c.a, a_k_major, c.op_a == Op::N ? c.m : c.k, c.op_a == Op::N ? c.k : c.m, c.k,
                              c.batch) &&
         fp8_operand_in_place(c.b, b_k_major, c.op_b == Op::N ? c.k : c.n, c.op_b == Op::N ? c.n : c.k, c.k,
                              c.batch);
}

// What an explicit config makes of an fp8 case: expect_support's rules; a row without fp8 kernels, or
// Default precision on a row that does not promote, refuses by name; a tensor-core row without the
// workspace for the K-major copies refuses (the heuristic runs the CUDA cores instead).
void expect_fp8_support(Case& c) {
  expect_support(c);
  if (c.expect != TESSERA_STATUS_SUCCESS || c.config.empty()) return;
  const Fp8Row* row = fp8_row(c.config);
  if (!row || (!row->promote && !fast_accum(c.precision))) {
    c.expect = TESSERA_STATUS_NOT_SUPPORTED;
    c.expect_message = "config";
    return;
  }
  if (needs_alignment(c.config) && c.workspace != Workspace::Full && !fp8_operands_in_place(c)) {
    c.expect = TESSERA_STATUS_NOT_SUPPORTED;
    c.expect_message = "workspace";
  }
}

// An fp8 case of order-1 outputs: scales (Case::scale_mode) of about 1 / (4 K^(1/4)), or without
// scales alpha = 1 / (16 sqrt(K)) (sums of K products of values in [-4, 4]: 16 sqrt(K) / 3).
Case fp8_case(const std::string& cfg, DType ab, DType dt, tessera::Precision prec, ScaleMode scales, int combo,
              const Shape& s) {
  Case c;
  c.config = cfg;
  c.ab = ab;
  c.dt = dt;
  c.precision = prec;
  apply_layout(c, combo);
  c.m = s.m;
  c.n = s.n;
  c.k = s.k;
  c.scale_mode = scales;
  if (scales == ScaleMode::None) c.alpha = float(1.0 / (16.0 * std::sqrt(double(std::max<int64_t>(s.k, 1)))));
  return c;
}

std::string fp8_group(const std::string& cfg, tessera::Precision prec) {
  return (cfg.empty() ? std::string("heuristic") : cfg) + (fast_accum(prec) ? " fast-accum" : " promoted");
}

class GemmFp8 : public GpuTest {
 public:
  static void TearDownTestSuite() { tt::print_summary("GemmFp8"); }

 protected:
  // fp8 GEMMs run on sm_90 only: elsewhere gemm() must refuse them (NOT_SUPPORTED, D untouched), and
  // the test skips.
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    const int cc = device_facts().cc;
    if (cc == 90) return;
    for (DType ab : kFp8Types)
      for (ScaleMode mode : {ScaleMode::Tensor, ScaleMode::Block}) {
        Case c = fp8_case("", ab, DType::BF16, tessera::Precision::Default, mode, 1, {64, 64, 256});
        c.expect = TESSERA_STATUS_NOT_SUPPORTED;
        check("GemmFp8", "not sm_90: refused", c);
      }
    GTEST_SKIP() << "fp8 GEMMs run on sm_90 only; this device is sm_" << cc
                 << " (gemm() answered NOT_SUPPORTED, D untouched)";
  }
};

// Every fp8 config x both precisions x 8 layouts (op_a, op_b, D's layout) x the three D dtypes x ragged
// shapes (K from 1 to 4096: one and many promotion intervals), e4m3 and e5m2 and the scale modes
// (none, tensor, row-wise) rotating; padded leading dimensions on half the shapes (A's by 16, B's and
// D's by 3: D's padding must stay as it was); the heuristic also without workspace (operands TMA cannot
// read as they are then run on the CUDA cores).
TEST_F(GemmFp8, EveryLayoutAndOutput) {
  const Shape shapes[] = {{1, 1, 1}, {7, 16, 33}, {128, 256, 128}, {257, 100, 129}, {130, 300, 4096}};
  for (const std::string& cfg : fp8_config_names())
    for (tessera::Precision prec : kFp8Precisions)
      for (int combo = 0; combo < 8; ++combo)
        for (DType dt : kFp8Outputs)
          for (int si = 0; si < 5; ++si)
            for (Workspace ws : {Workspace::Full, Workspace::None}) {
              if (ws == Workspace::None && !cfg.empty()) continue;
              const int r = combo + si + int(dt);
              Case c = fp8_case(cfg, kFp8Types[(combo / 2 + si + int(dt)) % 2], dt, prec, ScaleMode(r % 3), combo,
                                shapes[si]);
              if (si % 2) {
                c.a.ld_pad = 16;
                c.b.ld_pad = 3;
                c.d.ld_pad = 3;
              }
              c.workspace = ws;
              expect_fp8_support(c);
              check("GemmFp8", fp8_group(cfg, prec) + (ws == Workspace::None ? " no workspace" : ""), c);
            }
}

// More tiles than SMs (the persistent kernels loop over tiles), two promotion intervals.
TEST_F(GemmFp8, MoreTilesThanSms) {
  for (const std::string& cfg : fp8_config_names())
    for (tessera::Precision prec : kFp8Precisions)
      for (int combo : {1, 1 | 4}) {
        Case c = fp8_case(cfg, combo & 4 ? DType::E5M2 : DType::E4M3, DType::BF16, prec, ScaleMode::RowWise, combo,
                          {2000, 2100, 256});
        expect_fp8_support(c);
        check("GemmFp8", fp8_group(cfg, prec) + " 2000x2100x256", c);
      }
}

// Ragged M and N (1 ... 257) with K rotating through 1 ... 33, 64, 100 and 4096; then every such K on
// two fixed shapes. Layouts, dtypes, precisions and scale modes rotate too.
TEST_F(GemmFp8, RaggedExtents) {
  const int64_t extents[] = {1, 7, 16, 33, 100, 128, 257};
  std::vector<int64_t> ks;
  for (int64_t k = 1; k <= 33; ++k) ks.push_back(k);
  for (int64_t k : {64, 100, 4096}) ks.push_back(k);
  int v = 0;
  for (const std::string& cfg : fp8_config_names()) {
    for (int64_t m : extents)
      for (int64_t n : extents) {
        const tessera::Precision prec = fp8_precision_for(cfg, kFp8Precisions[(v / 8) % 2]);
        Case c = fp8_case(cfg, kFp8Types[(v / 3) % 2], kFp8Outputs[v % 3], prec, ScaleMode((v / 2) % 3), v % 8,
                          {m, n, ks[size_t(v) % ks.size()]});
        ++v;
        expect_fp8_support(c);
        check("GemmFp8", fp8_group(cfg, prec) + " ragged M, N", c);
      }
    for (int64_t k : ks)
      for (const Shape& s : {Shape{33, 100, k}, Shape{128, 257, k}}) {
        ++v;
        const tessera::Precision prec = fp8_precision_for(cfg, kFp8Precisions[v % 2]);
        Case c = fp8_case(cfg, kFp8Types[(v / 2) % 2], (v / 4) % 2 ? DType::F32 : DType::BF16, prec,
                          ScaleMode::RowWise, int(k % 8), s);
        expect_fp8_support(c);
        check("GemmFp8", fp8_group(cfg, prec) + " K sweep", c);
      }
  }
}

// The fused epilogue on the dequantised sums: bias per column and per row (one per batch, or shared),
// relu and gelu (silu and gelu_tanh once each), beta * C, C in place of D, scales per tensor and
// row-wise; batch 2, ragged tiles and a ragged last promotion interval (K = 272).
TEST_F(GemmFp8, Epilogue) {
  int v = 0;
  for (const std::string& cfg : fp8_config_names())
    for (DType dt : kFp8Outputs) {
      for (tessera::BiasMode mode : kBiasModes)
        for (Activation act : {Activation::Relu, Activation::Gelu})
          for (int combo : {1, 2 | 4}) {
            ++v;
            const tessera::Precision prec = fp8_precision_for(cfg, kFp8Precisions[v % 2]);
            Case c = fp8_case(cfg, kFp8Types[(v / 2) % 2], dt, prec, v % 3 ? ScaleMode::Tensor : ScaleMode::RowWise,
                              combo, {200, 136, 272});
            c.batch = 2;
            c.bias = mode;
            c.activation = act;
            c.bias_spec.batched = v % 3 != 0;
            c.alpha = 0.5f;
            c.beta = -1.25f;
            expect_fp8_support(c);
            check("GemmFp8", fp8_group(cfg, prec) + " epilogue", c);
          }
      for (Activation act : {Activation::Silu, Activation::GeluTanh}) {
        ++v;
        const tessera::Precision prec = fp8_precision_for(cfg, kFp8Precisions[v % 2]);
        Case c = fp8_case(cfg, kFp8Types[(v / 2) % 2], dt, prec, ScaleMode::RowWise, 3, {65, 90, 300});
        c.bias = tessera::BiasMode::PerColumn;
        c.activation = act;
        expect_fp8_support(c);
        check("GemmFp8", fp8_group(cfg, prec) + " epilogue", c);
      }
      for (int combo : {1, 2 | 4}) {  // C is D: read before D is written
        ++v;
        const tessera::Precision prec = fp8_precision_for(cfg, kFp8Precisions[v % 2]);
        Case c = fp8_case(cfg, kFp8Types[(v / 2) % 2], dt, prec, ScaleMode::RowWise, combo, {100, 72, 40});
        c.in_place = true;
        c.beta = 0.75f;
        c.bias = tessera::BiasMode::PerRow;
        expect_fp8_support(c);
        check("GemmFp8", fp8_group(cfg, prec) + " in place", c);
      }
    }
}

// Batches: packed, A / B broadcast (by count or by stride 0), C broadcast, padded strides (by 8 and 3
// elements: batches off 16-byte alignment, copied), D with interleaved batches; the scales are shared
// by every batch.
TEST_F(GemmFp8, Batched) {
  const char* variants[] = {"packed",   "a_bcast",         "a_bcast_stride0", "b_bcast",      "b_bcast_stride0",
                            "c_bcast",  "padded_strides8", "padded_strides3", "interleaved_d"};
  int v = 0;
  for (const std::string& cfg : fp8_config_names())
    for (const char* var : variants)
      for (int combo : {1, 2 | 4}) {
        ++v;
        const tessera::Precision prec = fp8_precision_for(cfg, kFp8Precisions[v % 2]);
        Case c = fp8_case(cfg, kFp8Types[(v / 2) % 2], kFp8Outputs[v % 3], prec, ScaleMode::RowWise, combo,
                          {33, 17, 48});
        apply_batch_variant(c, var);
        c.beta = -1.25f;
        c.bias = tessera::BiasMode::PerColumn;
        expect_fp8_support(c);
        check("GemmFp8", fp8_group(cfg, prec) + " batched " + var, c);
      }
}

// Base pointers 1 ... 15 bytes past 16-byte alignment (A, B; D and the scales by whole elements), with
// and without workspace: explicit sm90 rows refuse without it, the heuristic runs the CUDA cores. Then
// aligned K-major operands, which need no copy: every row runs them without workspace.
TEST_F(GemmFp8, UnalignedPointers) {
  int v = 0;
  for (const std::string& cfg : fp8_config_names())
    for (Workspace ws : {Workspace::Full, Workspace::None})
      for (int64_t off = 1; off <= 15; ++off) {
        ++v;
        const tessera::Precision prec = fp8_precision_for(cfg, kFp8Precisions[v % 2]);
        Case c = fp8_case(cfg, kFp8Types[(v / 2) % 2], kFp8Outputs[off % 3], prec,
                          off % 3 ? ScaleMode::RowWise : ScaleMode::Tensor, off % 5 ? 1 : 2 | 4, {100, 129, 128});
        c.a.elem_offset = off;
        c.b.elem_offset = 16 - off;
        c.d.elem_offset = off % 4;
        c.scale_offset = off % 3;
        c.workspace = ws;
        expect_fp8_support(c);
        check("GemmFp8", fp8_group(cfg, prec) + " unaligned" + (ws == Workspace::None ? ", no workspace" : ""), c);
      }
  for (const std::string& cfg : fp8_config_names())
    for (DType dt : {DType::BF16, DType::F32})
      for (int combo : {1, 1 | 4}) {
        const tessera::Precision prec = fp8_precision_for(cfg, tessera::Precision::Default);
        Case c = fp8_case(cfg, combo & 4 ? DType::E5M2 : DType::E4M3, dt, prec, ScaleMode::Tensor, combo,
                          {128, 256, 128});
        c.workspace = Workspace::None;
        EXPECT_TRUE(fp8_operands_in_place(c)) << tt::describe(c);
        expect_fp8_support(c);
        EXPECT_EQ(c.expect, TESSERA_STATUS_SUCCESS) << tt::describe(c);
        check("GemmFp8", fp8_group(cfg, prec) + " aligned, no workspace", c);
      }
}

// Every row without fp8 kernels refuses fp8 by name (NOT_SUPPORTED, D untouched), at either precision;
// a row that does not promote refuses Precision::Default. (And the rows this suite names exist.)
TEST_F(GemmFp8, ConfigsWithoutFp8Refuse) {
  for (const Fp8Row& r : kFp8Rows) EXPECT_NE(ti::find_config(r.name), nullptr) << r.name << ": not in the table";
  for (const ti::Config& cfg : ti::configs())
    for (tessera::Precision prec : kFp8Precisions)
      for (DType ab : kFp8Types) {
        const Fp8Row* row = fp8_row(cfg.name);
        if (row && (row->promote || fast_accum(prec))) continue;
        Case c = fp8_case(cfg.name, ab, DType::BF16, prec, ScaleMode::Tensor, 1, {64, 64, 64});
        c.expect = TESSERA_STATUS_NOT_SUPPORTED;
        c.expect_message = "config";
        check("GemmFp8", std::string("refuses ") + cfg.name + (fast_accum(prec) ? " fast-accum" : " promoted"), c);
      }
}

// The heuristic (and gemm_select_config) picks a row that runs fp8 at the call's precision, on Hopper
// an sm90 row wherever K allows (the operands are copied K-major where TMA cannot read them as they
// are); a non-K-major operand needs workspace for its copy.
TEST_F(GemmFp8, SelectionPicksAnFp8Config) {
  int v = 0;
  for (const Shape& s : {Shape{4096, 4096, 4096}, Shape{128, 4096, 4096}, Shape{128, 128, 16384}, Shape{17, 33, 7},
                         Shape{1000, 1000, 1000}, Shape{1, 1, 1}})
    for (int combo : {1, 0, 1 | 4})
      for (tessera::Precision prec : kFp8Precisions) {
        const DType ab = kFp8Types[v++ % 2];
        tessera::GemmArgs g;
        g.op_a = combo & 1 ? Op::T : Op::N;
        g.op_b = combo & 2 ? Op::T : Op::N;
        g.a = tessera::dense(reinterpret_cast<const void*>(uintptr_t(1) << 40), ab, g.op_a == Op::N ? s.m : s.k,
                             g.op_a == Op::N ? s.k : s.m, Layout::ColMajor);
        g.b = tessera::dense(reinterpret_cast<const void*>(uintptr_t(2) << 40), ab, g.op_b == Op::N ? s.k : s.n,
                             g.op_b == Op::N ? s.n : s.k, Layout::ColMajor);
        g.d = tessera::dense(reinterpret_cast<const void*>(uintptr_t(3) << 40), DType::BF16, s.m, s.n,
                             combo & 4 ? Layout::ColMajor : Layout::RowMajor);
        g.precision = prec;
        g.scale_mode = ScaleMode::RowWise;
        g.scale_a = reinterpret_cast<const float*>(uintptr_t(4) << 40);
        g.scale_b = reinterpret_cast<const float*>(uintptr_t(5) << 40);
        const std::string what = shape_name(s) + " " + layout_name(combo) + " " + dn(ab) + "->bf16" +
                                 (fast_accum(prec) ? " fast-accum" : " promoted");
        std::string name;
        const tessera::Status st = tessera::gemm_select_config(g, &name);
        ASSERT_TRUE(st.ok()) << what << ": " << st.message;
        const ti::Config* cfg = ti::find_config_choice(name).config;
        ASSERT_NE(cfg, nullptr) << what << ": '" << name << "'";
        const Fp8Row* row = fp8_row(cfg->name);
        ASSERT_NE(row, nullptr) << what << ": " << name << " has no fp8 kernels";
        if (!fast_accum(prec)) {
          EXPECT_TRUE(row->promote) << what << ": " << name << " does not promote its sums";
        }
        if (s.k >= 16) {
          EXPECT_EQ(cfg->kernel, ti::Kernel::Sm90) << what << ": " << name;
        }
        size_t bytes = 0;
        ASSERT_TRUE(tessera::gemm_workspace_size(g, &bytes).ok()) << what;
        if (combo == 0) {
          EXPECT_GT(bytes, 0u) << what << ": A is not K-major: its K-major copy";
        }
      }
}

// Split-K (TESSERA_GEMM_SPLITS: 1 range, a few, more ranges than k-tiles) and stream-K
// (TESSERA_GEMM_STREAMK=1) on the sm90 fp8 rows: the fp32 partials of promoted (or fast) sums fold
// in a fixed order, so a second run is bit for bit the same. Batches, beta, ragged K.
TEST_F(GemmFp8, SplitKAndStreamK) {
  const SweepShape shapes[] = {{300, 520, 1000, 2, 1, 0.5f},  // 8 k-tiles of 128, batched, beta
                               {256, 136, 4099, 1, 0, 0.0f},  // ragged N and K (33 k-tiles), A not K-major
                               {130, 70, 200, 1, 2, -1.0f}};  // 2 k-tiles: most ranges empty
  int v = 0;
  for (const std::string& cfg : fp8_sm90_config_names()) {
    for (int splits : {1, 2, 3, 5, 16}) {
      EnvGuard env("TESSERA_GEMM_SPLITS", std::to_string(splits));
      for (const SweepShape& sh : shapes) {
        ++v;
        const tessera::Precision prec = fp8_precision_for(cfg, kFp8Precisions[v % 2]);
        Case c = fp8_case(cfg, kFp8Types[(v / 2) % 2], kFp8Outputs[v % 3], prec, ScaleMode(v % 3), sh.layout,
                          {sh.m, sh.n, sh.k});
        c.batch = sh.batch;
        c.beta = sh.beta;
        c.repeat_bitwise = true;
        expect_fp8_support(c);
        check("GemmFp8", fp8_group(cfg, prec) + " TESSERA_GEMM_SPLITS", c);
      }
    }
    EnvGuard env("TESSERA_GEMM_STREAMK", "1");
    const SweepShape sk_shapes[] = {{300, 520, 1000, 2, 1, 0.5f},
                                    {256, 136, 4099, 1, 0, 0.0f},
                                    {2100, 2100, 1000, 1, 1, 0.0f},
                                    {1000, 1000, 1000, 1, 3, -1.0f}};
    for (const SweepShape& sh : sk_shapes) {
      ++v;
      const tessera::Precision prec = fp8_precision_for(cfg, kFp8Precisions[v % 2]);
      Case c = fp8_case(cfg, kFp8Types[(v / 2) % 2], kFp8Outputs[v % 3], prec, ScaleMode::RowWise, sh.layout,
                        {sh.m, sh.n, sh.k});
      c.batch = sh.batch;
      c.beta = sh.beta;
      c.repeat_bitwise = true;
      expect_fp8_support(c);
      check("GemmFp8", fp8_group(cfg, prec) + " TESSERA_GEMM_STREAMK=1", c);
    }
  }
}

// The host path: a non-default stream, a CUDA graph (the K-major copies into the workspace are
// captured too), the C ABI (the fp8 dtypes, the precision and the scale fields cross it), a second run
// bit for bit.
TEST_F(GemmFp8, StreamsGraphsAndTheCAbi) {
  cudaStream_t st = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  std::vector<std::string> cfgs = {""};
  for (const std::string& cfg : fp8_sm90_config_names()) cfgs.push_back(cfg);
  for (const std::string& cfg : cfgs)
    for (DType ab : kFp8Types)
      for (int variant = 0; variant < 4; ++variant) {
        const tessera::Precision prec = fp8_precision_for(cfg, kFp8Precisions[variant % 2]);
        Case c = fp8_case(cfg, ab, variant % 2 ? DType::F32 : DType::BF16, prec, ScaleMode::RowWise, 2 | 4,
                          {100, 129, 77});  // "nt": both operands copied
        c.stream = st;
        c.capture_graph = variant == 1;
        c.use_c_abi = variant == 2;
        c.repeat_bitwise = variant == 3;
        expect_fp8_support(c);
        check("GemmFp8", fp8_group(cfg, prec) + " stream / graph / C ABI / repeat", c);
      }
  ASSERT_EQ(cudaStreamDestroy(st), cudaSuccess);
}

// The valid arguments of the fp8 invalid-arguments tests, valid(dt): e4m3 A (M x K, row-major) times B
// (K x N, column-major) into a row-major M x N D of dt, with `mode` scales: scale_a at the start of sc,
// scale_b sb_offset floats on.
struct Fp8ValidArgs {
  const Buf& a;
  const Buf& b;
  const Buf& d;
  const Buf& sc;
  int64_t M, N, K;
  ScaleMode mode;
  int64_t sb_offset;

  tessera::GemmArgs operator()(DType dt) const {
    const float* sa = static_cast<const float*>(sc.p);
    tessera::GemmArgs g;
    g.a = tessera::dense(a.p, DType::E4M3, M, K, Layout::RowMajor);
    g.b = tessera::dense(b.p, DType::E4M3, K, N, Layout::ColMajor);
    g.d = tessera::dense(d.p, dt, M, N);
    g.scale_mode = mode;
    g.scale_a = sa;
    g.scale_b = sa + sb_offset;
    return g;
  }
};

// Invalid fp8 arguments with real device memory: INVALID_ARGUMENT naming the argument through the C++
// API, the C ABI, gemm_workspace_size and gemm_select_config, and nothing written.
TEST_F(GemmFp8, InvalidArgumentsWriteNothing) {
  const int64_t M = 64, N = 48, K = 32;
  Buf a(4 * M * K), b(4 * K * N), d(4 * M * N), sc(4 * (M + N) + 64);
  ASSERT_NO_FATAL_FAILURE(fill_bad_args_buffers(a, b, d, sc, 0x38));  // e4m3 1.0
  const std::vector<BadArgsTable::Kept> kept = {{d, "D"}, {a, "A"}, {b, "B"}};
  const Fp8ValidArgs valid{a, b, d, sc, M, N, K, ScaleMode::RowWise, M};
  BadArgsTable bad(valid);
  bad.add("e4m3 D", DType::E4M3, "d.dtype", [](tessera::GemmArgs&) {});
  bad.add("e5m2 D", DType::E5M2, "d.dtype", [](tessera::GemmArgs&) {});
  bad.add("e5m2 D of e5m2 operands", DType::E5M2, "d.dtype",
          [](tessera::GemmArgs& g) { g.a.dtype = g.b.dtype = DType::E5M2; });
  bad.add("s32 D of e4m3 operands", DType::S32, "d.dtype", [](tessera::GemmArgs&) {});
  bad.add("s32 D of e4m3 operands, no scales", DType::S32, "d.dtype", [](tessera::GemmArgs& g) {
    g.scale_mode = ScaleMode::None;
    g.scale_a = g.scale_b = nullptr;
  });
  bad.add("e4m3 A with e5m2 B", DType::BF16, "b.dtype", [](tessera::GemmArgs& g) { g.b.dtype = DType::E5M2; });
  bad.add("e5m2 A with e4m3 B", DType::BF16, "b.dtype", [](tessera::GemmArgs& g) { g.a.dtype = DType::E5M2; });
  bad.add("e4m3 A with bf16 B", DType::BF16, "b.dtype", [](tessera::GemmArgs& g) { g.b.dtype = DType::BF16; });
  bad.add("tf32 precision on e4m3 operands", DType::F32, "precision",
          [](tessera::GemmArgs& g) { g.precision = tessera::Precision::TF32; });
  bad.add("tf32x3 precision on e5m2 operands", DType::F32, "precision", [](tessera::GemmArgs& g) {
    g.a.dtype = g.b.dtype = DType::E5M2;
    g.precision = tessera::Precision::TF32x3;
  });
  bad.add("precision 7", DType::BF16, "precision", [](tessera::GemmArgs& g) { g.precision = tessera::Precision(7); });
  bad.add("fast accumulation on bf16 operands", DType::BF16, "precision", [](tessera::GemmArgs& g) {
    g.a.dtype = g.b.dtype = DType::BF16;
    g.scale_mode = ScaleMode::None;
    g.scale_a = g.scale_b = nullptr;
    g.precision = tessera::Precision::Fp8FastAccum;
  });
  bad.add("tensor scales, scale_a null", DType::BF16, "scale_a", [](tessera::GemmArgs& g) {
    g.scale_mode = ScaleMode::Tensor;
    g.scale_a = nullptr;
  });
  bad.add("row-wise scales, scale_b null", DType::F16, "scale_b", [](tessera::GemmArgs& g) { g.scale_b = nullptr; });
  bad.add("scale_b on top of D", DType::F32, "scale_b",
          [&](tessera::GemmArgs& g) { g.scale_b = static_cast<const float*>(d.p); });
  ASSERT_NO_FATAL_FAILURE(bad.expect_each_refused(kept));
  // And a valid call does write D: K products of 1 * 1 (e4m3 0x38 bytes) each, no scales: bf16 32.0.
  tessera::GemmArgs g = valid(DType::BF16);
  g.scale_mode = ScaleMode::None;
  g.scale_a = g.scale_b = nullptr;
  const tessera::Status ok = tessera::gemm(g, nullptr, nullptr, 0);
  ASSERT_TRUE(ok.ok()) << ok.message;
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_NO_FATAL_FAILURE(expect_each_element(d, M * N, uint16_t(0x4200), " (bf16 32.0 = 0x4200)"));
}

// ---- block scales (ScaleMode::Block, DeepSeek-V3's recipe) -----------------------------------------
//
// scale_a M x ceil(K/128), one per row of op(A) and 128-deep block of K; scale_b ceil(K/128) x
// ceil(N/128), one per 128 x 128 block of op(B); fp32 at element strides (GemmArgs::scale_a_strides /
// scale_b_strides: row- or column-major, {0, 0} packed row-major), shared by every batch. Each block's
// sums are scaled as they are promoted, so only the rows that promote run them, at either precision
// (Fp8FastAccum is accepted and promotes all the same), and D is row-major. Oracle: each block's exact
// fp64 sum times its two scales (gpu_helpers.hpp fp8_block_gemm_reference), the scales base * 2^u with u
// uniform in [-4, 2] (harness.hpp Case::scale_a_strides), so that a scale taken from the wrong block
// (along K, N or M) is off by up to 64x; every float of the scales' allocations that is not an element
// is NaN. Tolerance: that of promoted sums (harness.cpp tolerance), whatever the precision.

// The configs that run block scales: the heuristic and the fp8 rows that take them.
std::vector<std::string> block_config_names() {
  std::vector<std::string> v = {""};
  for (const Fp8Row& r : kFp8Rows)
    if (r.block) v.push_back(r.name);
  return v;
}

// The sm90 fp8 rows that take block scales (split-K, stream-K, graphs of the K-major copies).
std::vector<std::string> block_sm90_config_names() {
  std::vector<std::string> v;
  for (const std::string& name : fp8_sm90_config_names())
    if (fp8_row(name)->block) v.push_back(name);
  return v;
}

// What an explicit config makes of a block-scaled case: a row without fp8 kernels, or one that does not
// take block scales, refuses by name at either precision; otherwise expect_fp8_support's rules (this
// device, and the workspace for the K-major copies).
void expect_block_support(Case& c) {
  expect_support(c);
  if (c.expect != TESSERA_STATUS_SUCCESS || c.config.empty()) return;
  const Fp8Row* row = fp8_row(c.config);
  if (!row || !row->block) {
    c.expect = TESSERA_STATUS_NOT_SUPPORTED;
    c.expect_message = "config";
    return;
  }
  expect_fp8_support(c);
}

// How a block-scale matrix (rows x cols) is laid out: the {0, 0} shorthand, row-major with a packed or
// padded leading dimension, column-major likewise.
enum class ScaleLayout { Default, RowPacked, RowPadded, ColPacked, ColPadded };
const ScaleLayout kScaleLayouts[] = {ScaleLayout::Default, ScaleLayout::RowPacked, ScaleLayout::RowPadded,
                                     ScaleLayout::ColPacked, ScaleLayout::ColPadded};

const char* scale_layout_name(ScaleLayout l) {
  switch (l) {
    case ScaleLayout::Default: return "{0,0}";
    case ScaleLayout::RowPacked: return "row";
    case ScaleLayout::RowPadded: return "row+3";
    case ScaleLayout::ColPacked: return "col";
    case ScaleLayout::ColPadded: return "col+5";
  }
  return "?";
}

void set_scale_strides(int64_t (&s)[2], ScaleLayout l, int64_t rows, int64_t cols) {
  switch (l) {
    case ScaleLayout::Default: s[0] = 0, s[1] = 0; break;
    case ScaleLayout::RowPacked: s[0] = std::max<int64_t>(cols, 1), s[1] = 1; break;
    case ScaleLayout::RowPadded: s[0] = cols + 3, s[1] = 1; break;
    case ScaleLayout::ColPacked: s[0] = 1, s[1] = std::max<int64_t>(rows, 1); break;
    case ScaleLayout::ColPadded: s[0] = 1, s[1] = rows + 5; break;
  }
}

int64_t k_blocks(int64_t k) { return (k + 127) / 128; }

// A block-scaled fp8 case (order-1 outputs, harness.hpp) with scale_a laid out `la`, scale_b `lb`.
Case block_case(const std::string& cfg, DType ab, DType dt, tessera::Precision prec, int combo, const Shape& s,
                ScaleLayout la, ScaleLayout lb) {
  Case c = fp8_case(cfg, ab, dt, prec, ScaleMode::Block, combo, s);
  set_scale_strides(c.scale_a_strides, la, s.m, k_blocks(s.k));
  set_scale_strides(c.scale_b_strides, lb, k_blocks(s.k), k_blocks(s.n));
  return c;
}

std::string block_group(const std::string& cfg, const std::string& what) {
  return (cfg.empty() ? std::string("heuristic") : cfg) + " block scales, " + what;
}

// The operand layouts of a block-scaled case (D row-major: bit 2 clear): tn (both K-major, read in
// place where aligned), nn, tt and nt (one or both copied K-major into the workspace).
const int kBlockCombos[] = {1, 0, 3, 2};

// Every config that runs block scales x ragged shapes x the three D dtypes: K of one block, two, a
// ragged last block (1000 = 7 x 128 + 104), 4096 and 8192; M and N of 1, 77, 129, 300, 1000 and 2048
// (above and below 128, N not a multiple of 128, so scale_b's last column of blocks is partly
// outside); e4m3 / e5m2, the precision, the scales' layouts (25 pairs) and, on every fifth case, the
// operands' majors rotating.
TEST_F(GemmFp8, BlockScalesShapesAndOutputs) {
  const Shape shapes[] = {{1, 1, 128},       {77, 129, 128},   {129, 77, 256},  {300, 129, 128},
                          {300, 1000, 1000}, {1000, 300, 4096}, {77, 300, 8192}, {129, 2048, 1000},
                          {2048, 2048, 256}, {1, 1000, 4096},  {2048, 1, 1000}, {1000, 77, 8192}};
  int v = 0;
  for (const std::string& cfg : block_config_names())
    for (const Shape& s : shapes)
      for (DType dt : kFp8Outputs) {
        ++v;
        const int combo = v % 5 == 0 ? kBlockCombos[(v / 5) % 4] : 1;
        Case c = block_case(cfg, kFp8Types[v % 2], dt, kFp8Precisions[(v / 2) % 2], combo, s, kScaleLayouts[v % 5],
                            kScaleLayouts[(v / 5) % 5]);
        expect_block_support(c);
        check("GemmFp8", block_group(cfg, "shapes"), c);
      }
}

// Every pair of scale layouts (packed {0, 0}, explicit row-major packed and padded, column-major packed
// and padded) on two ragged shapes, the scales 4-byte but not 16-byte aligned on some; then modes of
// extent 1, whose stride may be anything: a single row of scale_a (M = 1), a single K block (K <= 128),
// a single column of N blocks (N <= 128).
TEST_F(GemmFp8, BlockScalesLayouts) {
  std::vector<std::string> cfgs = {""};
  for (const std::string& cfg : block_sm90_config_names()) cfgs.push_back(cfg);
  int v = 0;
  for (const std::string& cfg : cfgs)
    for (ScaleLayout la : kScaleLayouts)
      for (ScaleLayout lb : kScaleLayouts) {
        ++v;
        const Shape s = v % 2 ? Shape{300, 1000, 1000} : Shape{129, 130, 300};
        Case c = block_case(cfg, kFp8Types[(v / 2) % 2], kFp8Outputs[v % 3], tessera::Precision::Default, 1, s, la, lb);
        c.scale_offset = v % 3;
        expect_block_support(c);
        SCOPED_TRACE(std::string("scale_a ") + scale_layout_name(la) + ", scale_b " + scale_layout_name(lb));
        check("GemmFp8", block_group(cfg, "scale layouts"), c);
      }
  struct Unit {
    Shape s;
    int64_t sa[2], sb[2];
  };
  const Unit units[] = {
      {{1, 300, 1000}, {7, 1}, {0, 0}},         // M = 1: scale_a's row stride any (here < its 8 columns)
      {{1, 300, 1000}, {1, 1}, {1, 8}},         // ... 1, as if column-major
      {{77, 300, 100}, {1, 5}, {9, 1}},         // K <= 128: one K block, its strides any
      {{77, 300, 100}, {1, 77}, {1, 1}},        // ... the column-major forms
      {{200, 100, 1000}, {0, 0}, {1, 3}},       // N <= 128: one column of N blocks, its stride any
      {{200, 100, 1000}, {8, 1}, {1, 0}},       // ... even 0
      {{200, 100, 100}, {1, 200}, {5, 9}},      // K and N <= 128: scale_b one value, strides any
  };
  for (const Unit& u : units)
    for (const std::string& cfg : cfgs) {
      ++v;
      Case c = block_case(cfg, kFp8Types[v % 2], kFp8Outputs[v % 3], kFp8Precisions[(v / 2) % 2], 1, u.s,
                          ScaleLayout::Default, ScaleLayout::Default);
      for (int i = 0; i < 2; ++i) c.scale_a_strides[i] = u.sa[i], c.scale_b_strides[i] = u.sb[i];
      expect_block_support(c);
      check("GemmFp8", block_group(cfg, "strides of modes of extent 1"), c);
    }
}

// The operands' majors and storage: tn read in place where aligned, nn / tt / nt copied K-major into
// the workspace (so the copies meet the scales' indexing), padded leading dimensions and misaligned base
// pointers; with and without workspace (without it explicit sm90 rows refuse operands they cannot read
// as they are, and the heuristic runs them on the CUDA cores, block scales included).
TEST_F(GemmFp8, BlockScalesOperandMajorsAndAlignment) {
  int v = 0;
  for (const std::string& cfg : block_config_names())
    for (int combo : kBlockCombos)
      for (Workspace ws : {Workspace::Full, Workspace::None})
        for (int variant = 0; variant < 3; ++variant) {
          ++v;
          const Shape s = variant == 2 ? Shape{200, 136, 1024} : Shape{129, 300, 1000};
          Case c = block_case(cfg, kFp8Types[v % 2], kFp8Outputs[v % 3], kFp8Precisions[(v / 3) % 2], combo, s,
                              kScaleLayouts[v % 5], kScaleLayouts[(v + 2) % 5]);
          if (variant == 0) {
            c.a.ld_pad = 16;
            c.b.ld_pad = 3;
            c.d.ld_pad = 3;  // D's padding must stay as it was
          } else if (variant == 1) {
            c.a.elem_offset = 1 + v % 15;
            c.b.elem_offset = 16 - (1 + v % 15);
            c.d.elem_offset = v % 4;
          }
          c.workspace = ws;
          expect_block_support(c);
          check("GemmFp8", block_group(cfg, std::string("majors, alignment") +
                                                (ws == Workspace::None ? ", no workspace" : "")),
                c);
        }
}

// The epilogue on the block-scaled sums: batch 3 with B broadcast (by count or stride 0: the weight
// shared, as in a linear layer), packed batches, interleaved D; alpha, beta * C, bias per column and per
// row (one per batch or shared), each activation; C in place of D; K = 0 (D = beta C + bias; the scale
// matrices are empty and passed as null pointers).
TEST_F(GemmFp8, BlockScalesEpilogue) {
  const char* variants[] = {"b_bcast", "b_bcast_stride0", "packed", "interleaved_d"};
  const Activation acts[] = {Activation::Relu, Activation::Gelu, Activation::Silu, Activation::GeluTanh,
                             Activation::None};
  int v = 0;
  for (const std::string& cfg : block_config_names())
    for (DType dt : kFp8Outputs) {
      for (int rep = 0; rep < 2; ++rep) {
        ++v;
        Case c = block_case(cfg, kFp8Types[v % 2], dt, kFp8Precisions[(v / 2) % 2], kBlockCombos[v % 2],
                            {200, 300, 1000}, kScaleLayouts[v % 5], kScaleLayouts[(v / 2) % 5]);
        apply_batch_variant(c, variants[v % 4]);
        c.alpha = 0.5f;
        c.beta = -1.25f;
        c.bias = kBiasModes[v % 2];
        c.bias_spec.batched = v % 3 != 0;
        c.activation = acts[v % 5];
        expect_block_support(c);
        check("GemmFp8", block_group(cfg, std::string("epilogue, batched ") + variants[v % 4]), c);
      }
      {  // C is D: read before D is written
        ++v;
        Case c = block_case(cfg, kFp8Types[v % 2], dt, tessera::Precision::Default, 1, {100, 136, 300},
                            ScaleLayout::ColPacked, ScaleLayout::Default);
        c.in_place = true;
        c.beta = 0.75f;
        c.bias = tessera::BiasMode::PerRow;
        c.activation = Activation::Relu;
        expect_block_support(c);
        check("GemmFp8", block_group(cfg, "in place"), c);
      }
      {  // K = 0: no blocks
        ++v;
        Case c = block_case(cfg, kFp8Types[v % 2], dt, tessera::Precision::Default, 1, {65, 90, 0},
                            ScaleLayout::Default, ScaleLayout::Default);
        c.beta = 0.5f;
        c.bias = tessera::BiasMode::PerColumn;
        expect_block_support(c);
        check("GemmFp8", block_group(cfg, "K = 0"), c);
      }
    }
}

// Split-K (TESSERA_GEMM_SPLITS: a few ranges, more ranges than k-tiles) and stream-K
// (TESSERA_GEMM_STREAMK=1) on the sm90 rows that promote: every range's partials already carry their
// blocks' scales, so the fold must add them as they are (no scale applied twice or lost at a range's
// edge, ranges that start mid-way through K); a second run bit for bit the same. Then the heuristic on
// long-K, few-tile shapes, where it may cut K itself.
TEST_F(GemmFp8, BlockScalesSplitKAndStreamK) {
  const SweepShape shapes[] = {{300, 520, 1000, 2, 1, 0.5f},   // 8 blocks, batched, beta
                               {256, 136, 4099, 1, 0, 0.0f},   // ragged N and K (33 blocks), A not K-major
                               {130, 70, 200, 1, 2, -1.0f},    // 2 blocks: most ranges empty
                               {64, 200, 8192, 1, 1, 0.0f}};   // 64 blocks, few tiles
  int v = 0;
  // One case of the sweep, its dtypes and scale layouts rotating with v, run twice (bit for bit).
  auto sweep = [&](const std::string& cfg, const SweepShape& sh, const char* override) {
    ++v;
    Case c = block_case(cfg, kFp8Types[(v / 2) % 2], kFp8Outputs[v % 3], kFp8Precisions[(v / 3) % 2], sh.layout,
                        {sh.m, sh.n, sh.k}, kScaleLayouts[v % 5], kScaleLayouts[(v / 5) % 5]);
    c.batch = sh.batch;
    c.beta = sh.beta;
    c.repeat_bitwise = true;
    expect_block_support(c);
    check("GemmFp8", block_group(cfg, override), c);
  };
  for (const std::string& cfg : block_sm90_config_names()) {
    for (int splits : {2, 3, 5, 16}) {
      EnvGuard env("TESSERA_GEMM_SPLITS", std::to_string(splits));
      for (const SweepShape& sh : shapes) sweep(cfg, sh, "TESSERA_GEMM_SPLITS");
    }
    EnvGuard env("TESSERA_GEMM_STREAMK", "1");
    const SweepShape sk_shapes[] = {{300, 520, 1000, 2, 1, 0.5f},
                                    {256, 136, 4099, 1, 0, 0.0f},
                                    {2100, 2100, 1000, 1, 1, 0.0f},
                                    {1000, 1000, 1000, 1, 3, -1.0f}};
    for (const SweepShape& sh : sk_shapes) sweep(cfg, sh, "TESSERA_GEMM_STREAMK=1");
  }
  for (const Shape& s : {Shape{128, 128, 16384}, Shape{64, 256, 8192}, Shape{256, 129, 12000}}) {
    ++v;
    Case c = block_case("", kFp8Types[v % 2], kFp8Outputs[v % 3], kFp8Precisions[v % 2], 1, s, ScaleLayout::ColPacked,
                        ScaleLayout::RowPacked);
    c.repeat_bitwise = true;
    check("GemmFp8", block_group("", "long K, few tiles"), c);
  }
}

// The host path: a non-default stream, a CUDA graph (the K-major copies into the workspace captured
// too), the C ABI (scale_mode block and both stride pairs cross it: column-major and padded scales
// here), a second run bit for bit.
TEST_F(GemmFp8, BlockScalesStreamsGraphsAndTheCAbi) {
  cudaStream_t st = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  std::vector<std::string> cfgs = {""};
  for (const std::string& cfg : block_sm90_config_names()) cfgs.push_back(cfg);
  for (const std::string& cfg : cfgs)
    for (DType ab : kFp8Types)
      for (int variant = 0; variant < 4; ++variant) {
        Case c = block_case(cfg, ab, variant % 2 ? DType::F32 : DType::BF16, kFp8Precisions[variant / 2], 2,
                            {100, 129, 300},  // "nt": both operands copied; 3 K blocks, 2 N blocks
                            ScaleLayout::ColPadded, variant % 2 ? ScaleLayout::ColPacked : ScaleLayout::RowPadded);
        c.stream = st;
        c.capture_graph = variant == 1;
        c.use_c_abi = variant == 2;
        c.repeat_bitwise = variant == 3;
        expect_block_support(c);
        check("GemmFp8", block_group(cfg, "stream / graph / C ABI / repeat"), c);
      }
  ASSERT_EQ(cudaStreamDestroy(st), cudaSuccess);
}

// Rows that do not promote their sums (the 128x256 fast-accumulation row), rows whose tile spans more
// than one 128-column scale block (128x192, which promotes) and rows without fp8 kernels refuse block
// scales by name at either precision (NOT_SUPPORTED, D untouched): Fp8FastAccum does not make a
// non-promoting row run them.
TEST_F(GemmFp8, BlockScalesRefusedByRowsThatDoNotPromote) {
  int refused = 0;
  for (const ti::Config& cfg : ti::configs())
    for (tessera::Precision prec : kFp8Precisions)
      for (DType ab : kFp8Types) {
        const Fp8Row* row = fp8_row(cfg.name);
        if (row && row->block) continue;
        Case c = block_case(cfg.name, ab, DType::BF16, prec, 1, {64, 64, 256}, ScaleLayout::Default,
                            ScaleLayout::Default);
        c.expect = TESSERA_STATUS_NOT_SUPPORTED;
        c.expect_message = "config";
        ++refused;
        check("GemmFp8", std::string("block scales refused by ") + cfg.name, c);
      }
  EXPECT_TRUE(fp8_row("sm90_128x256x64_s4_c2_coop") && !fp8_row("sm90_128x256x64_s4_c2_coop")->promote)
      << "kFp8Rows: the non-promoting row this test names";
  EXPECT_TRUE(fp8_row("sm90_128x192x64_s5_c2_coop") && fp8_row("sm90_128x192x64_s5_c2_coop")->promote &&
              !fp8_row("sm90_128x192x64_s5_c2_coop")->block)
      << "kFp8Rows: the promoting row without block scales this test names";
  EXPECT_GT(refused, 0);
}

// The heuristic (and gemm_select_config) picks a row that promotes for block scales at either precision
// (fast accumulation does not apply: the same choice as Default, where the 128x256 fast-accumulation row
// would win without block scales), an sm90 row wherever K allows; a non-K-major operand needs workspace
// for its copy.
TEST_F(GemmFp8, BlockScalesSelection) {
  int v = 0;
  for (const Shape& s : {Shape{4096, 4096, 4096}, Shape{128, 4096, 4096}, Shape{128, 128, 16384}, Shape{17, 33, 7},
                         Shape{1000, 1000, 1000}, Shape{1, 1, 1}, Shape{8192, 8192, 1024}})
    for (int combo : {1, 0, 3}) {
      const DType ab = kFp8Types[v++ % 2];
      std::string names[2];
      for (int pi = 0; pi < 2; ++pi) {
        const tessera::Precision prec = kFp8Precisions[pi];
        tessera::GemmArgs g;
        g.op_a = combo & 1 ? Op::T : Op::N;
        g.op_b = combo & 2 ? Op::T : Op::N;
        g.a = tessera::dense(reinterpret_cast<const void*>(uintptr_t(1) << 40), ab, g.op_a == Op::N ? s.m : s.k,
                             g.op_a == Op::N ? s.k : s.m, Layout::ColMajor);
        g.b = tessera::dense(reinterpret_cast<const void*>(uintptr_t(2) << 40), ab, g.op_b == Op::N ? s.k : s.n,
                             g.op_b == Op::N ? s.n : s.k, Layout::ColMajor);
        g.d = tessera::dense(reinterpret_cast<const void*>(uintptr_t(3) << 40), DType::BF16, s.m, s.n);
        g.precision = prec;
        g.scale_mode = ScaleMode::Block;
        g.scale_a = reinterpret_cast<const float*>(uintptr_t(4) << 40);
        g.scale_b = reinterpret_cast<const float*>(uintptr_t(5) << 40);
        if (combo == 3) {  // column-major scale_a (M x KB), as torch's DeepSeek recipes store it
          g.scale_a_strides[0] = 1;
          g.scale_a_strides[1] = s.m;
        }
        const std::string what = shape_name(s) + " " + layout_name(combo) + " " + dn(ab) + "->bf16 block" +
                                 (fast_accum(prec) ? " fast-accum" : " promoted");
        const tessera::Status st = tessera::gemm_select_config(g, &names[pi]);
        ASSERT_TRUE(st.ok()) << what << ": " << st.message;
        const ti::Config* cfg = ti::find_config_choice(names[pi]).config;
        ASSERT_NE(cfg, nullptr) << what << ": '" << names[pi] << "'";
        const Fp8Row* row = fp8_row(cfg->name);
        ASSERT_NE(row, nullptr) << what << ": " << names[pi] << " has no fp8 kernels";
        EXPECT_TRUE(row->block) << what << ": " << names[pi] << " does not take block scales";
        if (s.k >= 16) {
          EXPECT_EQ(cfg->kernel, ti::Kernel::Sm90) << what << ": " << names[pi];
        }
        size_t bytes = 0;
        ASSERT_TRUE(tessera::gemm_workspace_size(g, &bytes).ok()) << what;
        if (combo == 0) {
          EXPECT_GT(bytes, 0u) << what << ": A is not K-major: its K-major copy";
        }
      }
      EXPECT_EQ(names[0], names[1]) << shape_name(s) << " " << layout_name(combo)
                                    << ": block scales choose the same config at either precision";
    }
}

// Exact results, computed by hand: operands all 1.0 (e4m3 0x38, e5m2 0x3C), scales powers of two that
// differ per row, per K block and per N block, M = 130, N = 300, K = 300 (K blocks of 128, 128 and 44;
// N blocks of 128, 128 and 44): D[m][n] = sum_kb scale_a[m][kb] * scale_b[kb][n / 128] * len(kb), every
// term and sum exact in fp32, so an f32 D must hold exactly that (an independent check of the block
// indexing and of the ragged last blocks). scale_a column-major with a padded stride, scale_b row-major
// padded; on every config that runs block scales, and on the sm90 rows with K split three ways.
TEST_F(GemmFp8, BlockScalesExactValues) {
  const int64_t M = 130, N = 300, K = 300, KB = 3, NB = 3;
  const int64_t sa_ld = M + 3, sb_ld = NB + 2;  // scale_a strides {1, sa_ld}; scale_b strides {sb_ld, 1}
  std::vector<float> sa_host(size_t(sa_ld * KB), std::nanf("")), sb_host(size_t(sb_ld * KB), std::nanf(""));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t kb = 0; kb < KB; ++kb) sa_host[size_t(m + kb * sa_ld)] = std::ldexp(1.0f, int((m + kb) % 3) - 1);
  for (int64_t kb = 0; kb < KB; ++kb)
    for (int64_t nb = 0; nb < NB; ++nb) sb_host[size_t(kb * sb_ld + nb)] = std::ldexp(1.0f, -int((kb + 2 * nb) % 4));
  std::vector<float> want(size_t(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double sum = 0;
      for (int64_t kb = 0; kb < KB; ++kb)
        sum += double(sa_host[size_t(m + kb * sa_ld)]) * double(sb_host[size_t(kb * sb_ld + n / 128)]) *
               double(std::min<int64_t>(128, K - 128 * kb));
      want[size_t(m * N + n)] = float(sum);
    }
  Buf a(size_t(M * K)), b(size_t(K * N)), d(size_t(M * N) * 4), sa(sa_host.size() * 4), sb(sb_host.size() * 4);
  ASSERT_EQ(cudaMemcpy(sa.p, sa_host.data(), sa.bytes, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(sb.p, sb_host.data(), sb.bytes, cudaMemcpyHostToDevice), cudaSuccess);
  struct Run {
    std::string cfg;
    int splits;
  };
  std::vector<Run> runs;
  for (const std::string& cfg : block_config_names()) runs.push_back({cfg, 0});
  for (const std::string& cfg : block_sm90_config_names()) runs.push_back({cfg, 3});
  for (DType ab : kFp8Types) {
    const int one = ab == DType::E4M3 ? 0x38 : 0x3C;
    ASSERT_EQ(cudaMemset(a.p, one, a.bytes), cudaSuccess);
    ASSERT_EQ(cudaMemset(b.p, one, b.bytes), cudaSuccess);
    for (const Run& r : runs)
      for (tessera::Precision prec : kFp8Precisions) {
        const std::string what = std::string(dn(ab)) + " " + (r.cfg.empty() ? "heuristic" : r.cfg) +
                                 (r.splits ? " TESSERA_GEMM_SPLITS=" + std::to_string(r.splits) : std::string()) +
                                 (fast_accum(prec) ? " fast-accum" : " promoted");
        SCOPED_TRACE(what);
        std::unique_ptr<EnvGuard> env;
        if (r.splits) env = std::make_unique<EnvGuard>("TESSERA_GEMM_SPLITS", std::to_string(r.splits));
        tessera::GemmArgs g;
        g.a = tessera::dense(a.p, ab, M, K, Layout::RowMajor);
        g.b = tessera::dense(b.p, ab, K, N, Layout::ColMajor);
        g.d = tessera::dense(d.p, DType::F32, M, N);
        g.config = r.cfg;
        g.precision = prec;
        g.scale_mode = ScaleMode::Block;
        g.scale_a = static_cast<const float*>(sa.p);
        g.scale_b = static_cast<const float*>(sb.p);
        g.scale_a_strides[0] = 1;
        g.scale_a_strides[1] = sa_ld;
        g.scale_b_strides[0] = sb_ld;
        g.scale_b_strides[1] = 1;
        size_t bytes = 0;
        const tessera::Status ws = tessera::gemm_workspace_size(g, &bytes);
        ASSERT_TRUE(ws.ok()) << ws.message;
        Buf w(std::max<size_t>(bytes, 1));
        ASSERT_EQ(cudaMemset(d.p, 0xFF, d.bytes), cudaSuccess);  // NaN
        const tessera::Status st = tessera::gemm(g, nullptr, w.p, bytes);
        ASSERT_TRUE(st.ok()) << st.message;
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        const auto got = d.host();
        int64_t bad = 0;
        for (int64_t i = 0; i < M * N; ++i) {
          float x;
          std::memcpy(&x, &got[size_t(i) * 4], 4);
          if (!(x == want[size_t(i)]) && bad++ < 5)
            ADD_FAILURE() << "D[" << i / N << "][" << i % N << "] = " << x << ", want " << want[size_t(i)];
        }
        EXPECT_EQ(bad, 0) << "of " << M * N << " elements";
      }
  }
}

// Invalid block-scale arguments with real device memory: INVALID_ARGUMENT naming the argument through
// the C++ API, the C ABI, gemm_workspace_size and gemm_select_config, and nothing written. M = 64,
// N = 300, K = 300: scale_a 64 x 3, scale_b 3 x 3.
TEST_F(GemmFp8, BlockScalesInvalidArgumentsWriteNothing) {
  const int64_t M = 64, N = 300, K = 300, KB = 3, NB = 3;
  Buf a(size_t(M * K)), b(size_t(K * N)), d(size_t(M * N) * 4), sc(size_t(4 * (M * KB + KB * NB) + 256));
  ASSERT_NO_FATAL_FAILURE(fill_bad_args_buffers(a, b, d, sc, 0x38));  // e4m3 1.0 (s8 1 ... 56: any values will do)
  const std::vector<BadArgsTable::Kept> kept = {{d, "D"}, {a, "A"}, {b, "B"}, {sc, "the scales"}};
  const Fp8ValidArgs valid{a, b, d, sc, M, N, K, ScaleMode::Block, M * KB + 4};
  BadArgsTable bad(valid);
  auto strides = [](int64_t (&s)[2], int64_t s0, int64_t s1) { s[0] = s0, s[1] = s1; };
  bad.add("block scales on s8 operands", DType::BF16, "scale_mode",
          [](tessera::GemmArgs& g) { g.a.dtype = g.b.dtype = DType::S8; });
  bad.add("block scales on s8 operands, s32 D", DType::S32, "scale_mode",
          [](tessera::GemmArgs& g) { g.a.dtype = g.b.dtype = DType::S8; });
  bad.add("block scales on bf16 operands", DType::BF16, "scale_mode",
          [](tessera::GemmArgs& g) { g.a.dtype = g.b.dtype = DType::BF16; });
  bad.add("column-major D", DType::BF16, "d.layout", [&](tessera::GemmArgs& g) {
    g.d = tessera::dense(d.p, DType::BF16, M, N, Layout::ColMajor);
  });
  bad.add("column-major D, f32, fast accumulation", DType::F32, "d.layout", [&](tessera::GemmArgs& g) {
    g.d = tessera::dense(d.p, DType::F32, M, N, Layout::ColMajor);
    g.precision = tessera::Precision::Fp8FastAccum;
  });
  bad.add("scale_a null", DType::BF16, "scale_a: null pointer", [](tessera::GemmArgs& g) { g.scale_a = nullptr; });
  bad.add("scale_b null", DType::F16, "scale_b: null pointer", [](tessera::GemmArgs& g) { g.scale_b = nullptr; });
  bad.add("scale_a null, K = 1 (one K block)", DType::BF16, "scale_a: null pointer", [&](tessera::GemmArgs& g) {
    g.a = tessera::dense(a.p, DType::E4M3, M, 1, Layout::RowMajor);
    g.b = tessera::dense(b.p, DType::E4M3, 1, N, Layout::ColMajor);
    g.scale_a = nullptr;
  });
  bad.add("scale_a not 4-byte aligned", DType::BF16, "scale_a",
          [&](tessera::GemmArgs& g) { g.scale_a = reinterpret_cast<const float*>(sc.c() + 2); });
  // Scale strides that refuse: scale_a's, or scale_b's where on_b.
  struct BadStrides {
    const char* what;
    DType dt;
    bool on_b;
    int64_t s0, s1;
  };
  const BadStrides bad_strides[] = {
      {"scale_a_strides {2, 2}: neither stride 1", DType::BF16, false, 2, 2},
      {"scale_a_strides {KB - 1, 1}: rows overlap", DType::BF16, false, KB - 1, 1},
      {"scale_a_strides {1, M - 1}: columns overlap", DType::BF16, false, 1, M - 1},
      {"scale_a_strides {0, 1}: rows broadcast", DType::BF16, false, 0, 1},
      {"scale_a_strides {1, 0}: K blocks broadcast", DType::BF16, false, 1, 0},
      {"scale_a_strides {-KB, 1}: negative", DType::BF16, false, -KB, 1},
      {"scale_a_strides {1, 1}", DType::BF16, false, 1, 1},
      {"scale_b_strides {NB - 1, 1}: rows overlap", DType::BF16, true, NB - 1, 1},
      {"scale_b_strides {1, KB - 1}: columns overlap", DType::F32, true, 1, KB - 1},
      {"scale_b_strides {1, 1}", DType::BF16, true, 1, 1},
      {"scale_b_strides {3, 3}: neither stride 1", DType::F16, true, 3, 3},
      {"scale_b_strides {NB, -1}: negative", DType::BF16, true, NB, -1},
  };
  for (const BadStrides& x : bad_strides)
    bad.add(x.what, x.dt, x.on_b ? "scale_b_strides" : "scale_a_strides",
            [&](tessera::GemmArgs& g) { strides(x.on_b ? g.scale_b_strides : g.scale_a_strides, x.s0, x.s1); });
  bad.add("scale_a_strides with tensor scales", DType::BF16, "scale_a_strides", [&](tessera::GemmArgs& g) {
    g.scale_mode = ScaleMode::Tensor;
    strides(g.scale_a_strides, 1, M);
  });
  bad.add("scale_a_strides with row-wise scales", DType::F32, "scale_a_strides", [&](tessera::GemmArgs& g) {
    g.scale_mode = ScaleMode::RowWise;
    strides(g.scale_a_strides, KB, 1);
  });
  bad.add("scale_a_strides without scales", DType::BF16, "scale_a_strides", [&](tessera::GemmArgs& g) {
    g.scale_mode = ScaleMode::None;
    g.scale_a = g.scale_b = nullptr;
    strides(g.scale_a_strides, 0, 1);
  });
  bad.add("scale_b_strides with row-wise scales", DType::BF16, "scale_b_strides", [&](tessera::GemmArgs& g) {
    g.scale_mode = ScaleMode::RowWise;
    strides(g.scale_b_strides, 1, KB);
  });
  bad.add("scale_b_strides with tensor scales on s8 operands", DType::BF16, "scale_b_strides",
          [&](tessera::GemmArgs& g) {
            g.a.dtype = g.b.dtype = DType::S8;
            g.scale_mode = ScaleMode::Tensor;
            strides(g.scale_b_strides, NB, 1);
          });
  bad.add("scale_a on top of D", DType::F32, "scale_a: overlaps d",
          [&](tessera::GemmArgs& g) { g.scale_a = static_cast<const float*>(d.p); });
  bad.add("scale_b's last element on D's first", DType::F32, "scale_b: overlaps d", [&](tessera::GemmArgs& g) {
    // column-major with ld KB + 1: its last element 2 * (KB + 1) + KB - 1 floats past the pointer
    strides(g.scale_b_strides, 1, KB + 1);
    g.scale_b = static_cast<const float*>(d.p) - (2 * (KB + 1) + KB - 1);
  });
  ASSERT_NO_FATAL_FAILURE(bad.expect_each_refused(kept));
  // Valid neighbours of the cases above: empty scale matrices (K = 0) may be null; a mode of extent 1
  // takes any stride; and a valid call does write D (scales 0: an f32 D of zeros).
  {
    tessera::GemmArgs g = valid(DType::F32);
    g.a = tessera::dense(a.p, DType::E4M3, M, 0, Layout::RowMajor);
    g.b = tessera::dense(b.p, DType::E4M3, 0, N, Layout::ColMajor);
    g.a.ld = g.b.ld = 1;  // (at least 1, whatever the extent)
    g.scale_a = g.scale_b = nullptr;
    size_t bytes = 0;
    EXPECT_TRUE(tessera::gemm_workspace_size(g, &bytes).ok()) << "K = 0, null scales";
    std::string name;
    const tessera::Status st = tessera::gemm_select_config(g, &name);
    EXPECT_TRUE(st.ok()) << "K = 0, null scales: " << st.message;
  }
  {
    tessera::GemmArgs g = valid(DType::F32);
    g.a = tessera::dense(a.p, DType::E4M3, 1, K, Layout::RowMajor);  // M = 1: scale_a's row stride any
    g.d = tessera::dense(d.p, DType::F32, 1, N);
    strides(g.scale_a_strides, 2, 1);
    size_t bytes = 0;
    const tessera::Status st = tessera::gemm_workspace_size(g, &bytes);
    EXPECT_TRUE(st.ok()) << "M = 1, scale_a_strides {2, 1}: " << st.message;
  }
  tessera::GemmArgs g = valid(DType::F32);
  strides(g.scale_a_strides, 1, M);
  strides(g.scale_b_strides, 1, KB);
  size_t bytes = 0;
  ASSERT_TRUE(tessera::gemm_workspace_size(g, &bytes).ok());
  Buf w(std::max<size_t>(bytes, 1));
  const tessera::Status ok = tessera::gemm(g, nullptr, w.p, bytes);
  ASSERT_TRUE(ok.ok()) << ok.message;
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_NO_FATAL_FAILURE(expect_each_element(d, M * N, 0.0f));
}

// More batches than one grid holds (65535): the launcher advances A and B by their 1-byte elements,
// chunk by chunk; the scales stay shared (row-wise; and block scales, with B broadcast like a weight,
// on the configs that run them). Last of the fp8 tests: a launch that faults leaves the process's CUDA
// context unusable for the tests that run after it.
TEST_F(GemmFp8, MoreBatchesThanOneGridHolds) {
  for (const std::string& cfg : fp8_config_names()) {
    Case c = fp8_case(cfg, DType::E4M3, DType::BF16, fp8_precision_for(cfg, tessera::Precision::Default),
                      ScaleMode::RowWise, 1, {8, 16, 32});
    c.batch = 65537;
    c.bias = tessera::BiasMode::PerColumn;
    expect_fp8_support(c);
    check("GemmFp8", fp8_group(cfg, c.precision) + " batch 65537", c);
  }
  for (const std::string& cfg : block_config_names()) {  // 2 K blocks, 2 N blocks
    Case c = block_case(cfg, DType::E5M2, DType::BF16, tessera::Precision::Default, 1, {2, 136, 200},
                        ScaleLayout::ColPadded, ScaleLayout::RowPadded);
    c.batch = 65537;
    c.b.batched = false;
    c.bias = tessera::BiasMode::PerColumn;
    expect_block_support(c);
    check("GemmFp8", block_group(cfg, "batch 65537"), c);
  }
}

}  // namespace

