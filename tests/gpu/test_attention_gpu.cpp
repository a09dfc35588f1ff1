// tessera attention on the GPU against an fp32 reference and a same-precision reference (see
// attention_harness.hpp for what one case checks and tools/attention_gpu_reference.hpp for the
// criterion). Every test skips with "no CUDA device" without a usable sm_80+ GPU.
//
// Replay a failure: the message prints the seed; run
//   TESSERA_TEST_SEED=<seed> tessera_gpu_tests --gtest_filter='Attn*<the case>*'
//
// Sizes: ~1200 cases; the largest (4096 x 4096, only for d = 64 and 128) dominate. The naive
// reference costs about as much as everything else together; the whole file is meant to stay well
// under two minutes on an H100.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "attention_harness.hpp"
#include "harness.hpp"
#include "tessera/tessera.h"
#include "tessera/tessera.hpp"

namespace {

namespace tt = tessera_test;
using tessera::DType;
using tt::AttnCase;
using tt::AttnLayout;
using tt::AttnWorkspace;

const int64_t kHeadDims[] = {64, 96, 128, 256};
const DType kDtypes[] = {DType::F16, DType::BF16};
const AttnLayout kLayouts[] = {AttnLayout::BSHD, AttnLayout::BHSD, AttnLayout::Strided};

struct SeqPair {
  int64_t sq, sk;
};
// All five equal pairs of {1, 17, 128, 1000, 4096}, then the unequal ones (decode-like 1 x 4096,
// Sq < Sk and Sq > Sk where causal leaves the first Sq - Sk rows without keys).
const SeqPair kSeqPairs[] = {{1, 1},     {17, 17},     {128, 128},   {1000, 1000}, {4096, 4096}, {1, 4096},
                             {17, 1000}, {1000, 17}, {128, 4096}, {4096, 128},   {1000, 4096}};

std::string dtype_str(DType t) { return tt::dtype_name(t); }

// Runs a case, records it under (suite, group) and expects it to pass; the message carries the seed.
tt::AttnOutcome check(const std::string& suite, const std::string& group, const AttnCase& c) {
  const tt::AttnOutcome o = tt::run_attention_case(c);
  tt::record_result(suite, group, o.passed(), o.measured, o.err.max_err, o.bound,
                    o.measured && o.err.lse_checked ? o.err.max_lse_err : -1.0);
  EXPECT_TRUE(o.passed()) << tt::describe(c) << "\n  " << o.problems << "\n  max|O-ref32| " << o.err.max_err
                          << ", max|O_lowp-ref32| " << o.err.max_err_lowp << ", max|dLSE| " << o.err.max_lse_err
                          << "\n  seed " << o.seed << " (replay with TESSERA_TEST_SEED=" << o.seed << ")";
  return o;
}

void label(const std::string& suite) { tt::set_summary_labels(suite, "|O-ref32|", "bound", "|dLSE|"); }

class AttnGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!tt::device_ok(&why)) GTEST_SKIP() << why;
  }
};

template <class P>
class AttnGpuParamTest : public ::testing::TestWithParam<P> {
 protected:
  void SetUp() override {
    std::string why;
    if (!tt::device_ok(&why)) GTEST_SKIP() << why;
  }
};

// ---- the fp32 GPU reference itself, against the CPU fp64 reference ------------------------------

class AttnReference : public AttnGpuTest {};

TEST_F(AttnReference, MatchesFp64OnSmallShapes) {
  std::vector<AttnCase> cases;
  auto add = [&](int64_t d, DType dt, int64_t b, int64_t sq, int64_t sk, int64_t hq, int64_t hkv, bool causal,
                 AttnLayout layout, float scale = 0.0f) {
    AttnCase c;
    c.d = d;
    c.dtype = dt;
    c.batch = b;
    c.sq = sq;
    c.sk = sk;
    c.hq = hq;
    c.hkv = hkv;
    c.causal = causal;
    c.layout = layout;
    c.scale = scale;
    cases.push_back(c);
  };
  add(64, DType::BF16, 2, 17, 33, 4, 2, true, AttnLayout::Strided);   // GQA, causal with Sk > Sq
  add(96, DType::F16, 2, 33, 17, 2, 2, true, AttnLayout::BHSD);       // rows without keys
  add(128, DType::BF16, 1, 9, 9, 3, 1, false, AttnLayout::Strided);   // MQA, packed QKV
  add(256, DType::F16, 2, 5, 300, 2, 2, false, AttnLayout::BSHD, 0.3f);
  add(128, DType::F16, 1, 3, 5000, 2, 1, false, AttnLayout::BSHD);    // > 4096 keys: the chunked path
  add(64, DType::BF16, 1, 2, 4500, 1, 1, true, AttnLayout::BHSD);     // chunked and causal
  // Windows and softcaps: the key range moves away from key 0 (left side), rows without keys (a
  // right side before the first key), a window past the keys, and a softcap that saturates.
  auto local = [&](int64_t wl, int64_t wr, float softcap) {
    cases.back().window_left = wl;
    cases.back().window_right = wr;
    cases.back().softcap = softcap;
  };
  add(64, DType::F16, 2, 40, 70, 4, 2, false, AttnLayout::BSHD);
  local(5, 3, 0.0f);
  add(96, DType::BF16, 1, 70, 40, 2, 2, false, AttnLayout::BHSD);  // rows 0..28 see no key
  local(2, 0, 0.0f);
  add(128, DType::F16, 1, 33, 33, 2, 1, true, AttnLayout::Strided);
  local(0, -1, 0.0f);  // the diagonal only
  add(256, DType::BF16, 1, 9, 300, 2, 2, false, AttnLayout::BSHD, 0.5f);
  local(-1, -1, 2.0f);  // scaled scores of several units: tanh saturates
  add(64, DType::BF16, 1, 3, 5000, 2, 1, true, AttnLayout::BSHD);  // chunked: 4501 keys from key 497 on
  local(4500, 7, 30.0f);
  add(128, DType::BF16, 1, 20, 20, 2, 2, false, AttnLayout::BHSD);
  local(1000, 1000, 30.0f);  // wider than the sequence: no window
  for (const AttnCase& c : cases) {
    const tt::ReferenceCheck r = tt::check_gpu_reference(c);
    tt::record_result("AttnReference", "fp32 GPU ref vs fp64 CPU ref", r.problems.empty(), true, r.max_o32_diff,
                      1e-5, r.max_lse_diff);
    EXPECT_TRUE(r.problems.empty()) << tt::describe(c) << "\n  " << r.problems << "\n  max|O32-O64| "
                                    << r.max_o32_diff << ", max|Olow-O64| " << r.max_olow_diff << ", max|dLSE| "
                                    << r.max_lse_diff << ", seed " << r.seed;
    if ((c.causal || c.window_right == 0) && c.sq > c.sk) {
      EXPECT_GT(r.empty_rows, 0) << tt::describe(c);
    }
  }
  tt::set_summary_labels("AttnReference", "|O32-O64|", "tol", "|dLSE|");
  tt::print_summary("AttnReference");
}

// ---- the main cross product ---------------------------------------------------------------------

struct CrossParam {
  int64_t d;
  DType dtype;
  bool causal;
  SeqPair seq;
  AttnLayout layout;
};

std::vector<CrossParam> cross_params() {
  std::vector<CrossParam> v;
  for (int64_t d : kHeadDims)
    for (DType dt : kDtypes)
      for (bool causal : {false, true})
        for (const SeqPair& s : kSeqPairs) {
          // 4096 x 4096 only for the two most common head dims (time).
          if (s.sq == 4096 && s.sk == 4096 && d != 64 && d != 128) continue;
          for (AttnLayout l : kLayouts) v.push_back({d, dt, causal, s, l});
        }
  return v;
}

std::string cross_name(const ::testing::TestParamInfo<CrossParam>& info) {
  const CrossParam& p = info.param;
  return "d" + std::to_string(p.d) + "_" + dtype_str(p.dtype) + (p.causal ? "_causal_" : "_full_") +
         std::to_string(p.seq.sq) + "x" + std::to_string(p.seq.sk) + "_" + tt::layout_name(p.layout);
}

class AttnCross : public AttnGpuParamTest<CrossParam> {
 protected:
  static void SetUpTestSuite() { label("AttnCross"); }
  static void TearDownTestSuite() { tt::print_summary("AttnCross"); }
};

TEST_P(AttnCross, MatchesReference) {
  const CrossParam& p = GetParam();
  AttnCase c;
  c.d = p.d;
  c.dtype = p.dtype;
  c.causal = p.causal;
  c.sq = p.seq.sq;
  c.sk = p.seq.sk;
  c.batch = 2;
  c.hq = c.hkv = 2;
  c.layout = p.layout;
  check("AttnCross", "d" + std::to_string(p.d) + " " + dtype_str(p.dtype) + (p.causal ? " causal" : " full"), c);
}

INSTANTIATE_TEST_SUITE_P(All, AttnCross, ::testing::ValuesIn(cross_params()), cross_name);

// ---- GQA 8:1 (Hq 16, Hkv 2) and MQA (Hq 4, Hkv 1) ----------------------------------------------

struct GqaParam {
  int64_t hq, hkv, d;
  DType dtype;
  bool causal;
  SeqPair seq;
  AttnLayout layout;
};

std::vector<GqaParam> gqa_params() {
  const SeqPair seqs[] = {{128, 128}, {1000, 1000}, {17, 1000}, {1000, 17}};
  std::vector<GqaParam> v;
  int i = 0;
  for (auto [hq, hkv] : {std::pair<int64_t, int64_t>{16, 2}, {4, 1}})
    for (int64_t d : kHeadDims)
      for (DType dt : kDtypes)
        for (bool causal : {false, true})
          for (const SeqPair& s : seqs) v.push_back({hq, hkv, d, dt, causal, s, kLayouts[i++ % 3]});  // layouts rotate
  return v;
}

std::string gqa_name(const ::testing::TestParamInfo<GqaParam>& info) {
  const GqaParam& p = info.param;
  return std::string(p.hkv == 1 ? "mqa" : "gqa") + std::to_string(p.hq) + "x" + std::to_string(p.hkv) + "_d" +
         std::to_string(p.d) + "_" + dtype_str(p.dtype) + (p.causal ? "_causal_" : "_full_") +
         std::to_string(p.seq.sq) + "x" + std::to_string(p.seq.sk) + "_" + tt::layout_name(p.layout);
}

class AttnGqa : public AttnGpuParamTest<GqaParam> {
 protected:
  static void SetUpTestSuite() { label("AttnGqa"); }
  static void TearDownTestSuite() { tt::print_summary("AttnGqa"); }
};

TEST_P(AttnGqa, MatchesReference) {
  const GqaParam& p = GetParam();
  AttnCase c;
  c.d = p.d;
  c.dtype = p.dtype;
  c.causal = p.causal;
  c.sq = p.seq.sq;
  c.sk = p.seq.sk;
  c.batch = 2;
  c.hq = p.hq;
  c.hkv = p.hkv;
  c.layout = p.layout;
  check("AttnGqa",
        std::string(p.hkv == 1 ? "MQA " : "GQA ") + std::to_string(p.hq) + ":" + std::to_string(p.hkv) + " d" +
            std::to_string(p.d) + " " + dtype_str(p.dtype),
        c);
}

INSTANTIATE_TEST_SUITE_P(All, AttnGqa, ::testing::ValuesIn(gqa_params()), gqa_name);

// ---- decode shapes: seqlen_q <= 16 runs the decode family (packed GQA rows, split keys) ------------

struct DecodeParam {
  int64_t batch, sq, sk, hq, hkv, d;
  DType dtype;
  bool causal;
  AttnLayout layout;
  AttnWorkspace ws;
};

std::vector<DecodeParam> decode_params() {
  // One token against caches below, at and past a 16-key block and long enough to split; a few
  // tokens (speculative decoding; causal: bottom-right, rows differ by a key); 16 tokens (the
  // longest decode query: 8 row tiles at 8 query heads per KV head); Sq > Sk (causal: rows without
  // keys). Heads: MHA, GQA 32/8 and an odd group (12/1).
  const std::pair<int64_t, int64_t> seqs[] = {{1, 1}, {1, 17}, {1, 1000}, {1, 8193}, {3, 4100}, {16, 2048}, {5, 3}};
  const std::pair<int64_t, int64_t> heads[] = {{4, 4}, {32, 8}, {12, 1}};
  const AttnWorkspace ws[] = {AttnWorkspace::Full, AttnWorkspace::Full, AttnWorkspace::None, AttnWorkspace::Half};
  std::vector<DecodeParam> v;
  int i = 0;
  for (int64_t d : kHeadDims)
    for (auto [hq, hkv] : heads)
      for (auto [sq, sk] : seqs)
        for (bool causal : {false, true}) {
          v.push_back({i % 3 == 0 ? 1 : 3, sq, sk, hq, hkv, d, kDtypes[i % 2], causal, kLayouts[i % 3], ws[i % 4]});
          ++i;
        }
  return v;
}

std::string decode_name(const ::testing::TestParamInfo<DecodeParam>& info) {
  const DecodeParam& p = info.param;
  const char* ws[] = {"nows", "ws", "halfws"};
  return "b" + std::to_string(p.batch) + "_" + std::to_string(p.sq) + "x" + std::to_string(p.sk) + "_h" +
         std::to_string(p.hq) + "x" + std::to_string(p.hkv) + "_d" + std::to_string(p.d) + "_" + dtype_str(p.dtype) +
         (p.causal ? "_causal_" : "_full_") + tt::layout_name(p.layout) + "_" + ws[int(p.ws)];
}

class AttnDecode : public AttnGpuParamTest<DecodeParam> {
 protected:
  static void SetUpTestSuite() { label("AttnDecode"); }
  static void TearDownTestSuite() { tt::print_summary("AttnDecode"); }
};

TEST_P(AttnDecode, MatchesReference) {
  const DecodeParam& p = GetParam();
  AttnCase c;
  c.batch = p.batch;
  c.sq = p.sq;
  c.sk = p.sk;
  c.hq = p.hq;
  c.hkv = p.hkv;
  c.d = p.d;
  c.dtype = p.dtype;
  c.causal = p.causal;
  c.layout = p.layout;
  c.workspace = p.ws;
  check("AttnDecode", "decode d" + std::to_string(p.d) + " " + dtype_str(p.dtype), c);
}

INSTANTIATE_TEST_SUITE_P(All, AttnDecode, ::testing::ValuesIn(decode_params()), decode_name);

// ---- local windows and softcap (both prefill families; decode shapes too) ------------------------

struct WindowParam {
  int64_t d;
  DType dtype;
  bool causal;
  SeqPair seq;
  int64_t wl, wr;  // window_left, window_right (-1 = unlimited)
  float softcap;   // 0 = none
  float scale;     // 0 = 1/sqrt(d)
  int64_t hq, hkv;
  AttnLayout layout;
};

std::vector<WindowParam> window_params() {
  struct W {
    int64_t wl, wr;
  };
  // No window (the softcap alone), left only (a sliding window), right only, both (odd sizes, and
  // spanning several key blocks), left 0 (with causal: the diagonal only), the diagonal, a causal
  // sliding window, and one wider than every sequence here (no window at all).
  const W windows[] = {{-1, -1}, {64, -1}, {-1, 100}, {37, 21}, {200, 130}, {0, -1}, {0, 0}, {300, 0}, {5000, 5000}};
  // Sq == Sk at and off the 128-row / 32-, 64-, 128-key tiles, and Sq != Sk both ways (Sq > Sk:
  // with causal or a right side, the first rows see no key).
  const SeqPair prefill[] = {{100, 100}, {257, 257}, {1000, 1000}, {100, 1000}, {1000, 100}, {257, 1000}};
  // Decode shapes (seqlen_q <= 16: the decode family), with Sq > Sk once.
  const SeqPair decode[] = {{1, 1}, {1, 1000}, {3, 300}, {16, 1000}, {5, 3}};
  const float caps[] = {0.0f, 30.0f, 2.0f};
  const std::pair<int64_t, int64_t> heads[] = {{2, 2}, {8, 2}, {4, 1}};
  // Everything but (head dim, window, causal) rotates with all three indices, so that no window
  // always meets the same dtype, sequences, softcap, heads or layout.
  std::vector<WindowParam> v;
  auto push = [&](int di, int wi, int c, const SeqPair& seq, const W& w) {
    WindowParam p;
    p.d = kHeadDims[di];
    p.dtype = kDtypes[(di + wi + c) % 2];
    p.causal = c == 1;
    p.seq = seq;
    p.wl = w.wl;
    p.wr = w.wr;
    // Without a window, always a softcap (else the case is AttnCross's).
    p.softcap = w.wl < 0 && w.wr < 0 ? caps[1 + (di + c) % 2] : caps[(di + wi + 2 * c) % 3];
    // Larger scores now and then, so that a softcap of 2 flattens them well into tanh's bend.
    p.scale = p.softcap == 2.0f && (di + c) % 2 == 0 ? 0.5f : 0.0f;
    p.hq = heads[(2 * di + wi + c) % 3].first;
    p.hkv = heads[(2 * di + wi + c) % 3].second;
    p.layout = kLayouts[(di + wi + 2 * c) % 3];
    v.push_back(p);
  };
  for (int di = 0; di < 4; ++di)
    for (int wi = 0; wi < 9; ++wi)
      for (int c = 0; c < 2; ++c) push(di, wi, c, prefill[(di + 2 * wi + c) % 6], windows[wi]);
  // Decode shapes: a few windows per head dim.
  const W dec_windows[] = {{8, -1}, {0, 0}, {-1, 2}, {100, 3}, {-1, -1}};
  for (int di = 0; di < 4; ++di)
    for (int wi = 0; wi < 5; ++wi)
      for (int c = 0; c < 2; ++c) push(di, wi, c, decode[(di + 2 * wi + c) % 5], dec_windows[wi]);
  return v;
}

std::string window_name(const ::testing::TestParamInfo<WindowParam>& info) {
  const WindowParam& p = info.param;
  auto side = [](int64_t w) { return w < 0 ? std::string("inf") : std::to_string(w); };
  std::string cap = p.softcap == 0.0f ? "nocap" : "cap" + std::to_string(int(p.softcap));
  return "d" + std::to_string(p.d) + "_" + dtype_str(p.dtype) + (p.causal ? "_causal_" : "_full_") +
         std::to_string(p.seq.sq) + "x" + std::to_string(p.seq.sk) + "_w" + side(p.wl) + "_" + side(p.wr) + "_" + cap +
         (p.scale != 0.0f ? "_scale05" : "") + "_h" + std::to_string(p.hq) + "x" + std::to_string(p.hkv) + "_" +
         tt::layout_name(p.layout);
}

class AttnWindow : public AttnGpuParamTest<WindowParam> {
 protected:
  static void SetUpTestSuite() { label("AttnWindow"); }
  static void TearDownTestSuite() { tt::print_summary("AttnWindow"); }
};

TEST_P(AttnWindow, MatchesReference) {
  const WindowParam& p = GetParam();
  AttnCase c;
  c.d = p.d;
  c.dtype = p.dtype;
  c.causal = p.causal;
  c.sq = p.seq.sq;
  c.sk = p.seq.sk;
  c.batch = 2;
  c.hq = p.hq;
  c.hkv = p.hkv;
  c.layout = p.layout;
  c.window_left = p.wl;
  c.window_right = p.wr;
  c.softcap = p.softcap;
  c.scale = p.scale;
  const bool windowed = p.wl >= 0 || p.wr >= 0;
  check("AttnWindow",
        std::string(p.seq.sq <= 16 ? "decode " : "") + "d" + std::to_string(p.d) + (windowed ? " window" : "") +
            (p.softcap > 0.0f ? " softcap" : ""),
        c);
}

INSTANTIATE_TEST_SUITE_P(All, AttnWindow, ::testing::ValuesIn(window_params()), window_name);

// ---- tile boundaries, odd sizes, scales, broadcast K/V, no LSE ------------------------------------

class AttnEdge : public AttnGpuTest {
 protected:
  static void SetUpTestSuite() { label("AttnEdge"); }
  static void TearDownTestSuite() { tt::print_summary("AttnEdge"); }
};

// Query blocks are 128 rows and key blocks 32, 64 or 128 (configs.def): one below, at and above
// multiples of them.
TEST_F(AttnEdge, TileBoundaries) {
  const int64_t qs[] = {127, 128, 129, 255, 257};
  const int64_t ks[] = {31, 33, 63, 64, 65, 127, 129, 191, 193, 256};
  int i = 0;
  for (int64_t d : kHeadDims)
    for (int64_t sq : qs)
      for (int64_t sk : ks) {
        AttnCase c;
        c.d = d;
        c.dtype = kDtypes[i % 2];
        c.causal = (i / 2) % 2 == 1;
        c.layout = kLayouts[i % 3];
        c.sq = sq;
        c.sk = sk;
        c.batch = 1;
        c.hq = c.hkv = 2;
        ++i;
        check("AttnEdge", "tile boundaries d" + std::to_string(d), c);
      }
}

TEST_F(AttnEdge, OddBatchesAndHeads) {
  struct S {
    int64_t b, hq, hkv, sq, sk;
  };
  const S shapes[] = {{1, 1, 1, 1, 1}, {1, 1, 1, 7, 300}, {3, 3, 3, 33, 77}, {5, 6, 3, 65, 65}, {7, 5, 1, 100, 31},
                      {1, 12, 4, 513, 511}};
  int i = 0;
  for (const S& s : shapes)
    for (int64_t d : kHeadDims)
      for (bool causal : {false, true}) {
        AttnCase c;
        c.d = d;
        c.dtype = kDtypes[i % 2];
        c.layout = kLayouts[i % 3];
        c.causal = causal;
        c.batch = s.b;
        c.hq = s.hq;
        c.hkv = s.hkv;
        c.sq = s.sq;
        c.sk = s.sk;
        ++i;
        check("AttnEdge", "odd batch/heads", c);
      }
}

// Explicit softmax_scale: small (flat softmax), default-like, and large (peaked: the running
// maximum changes often, and P underflows for most keys).
TEST_F(AttnEdge, SoftmaxScale) {
  int i = 0;
  for (float scale : {0.01f, 0.125f, 0.5f, 2.0f})
    for (int64_t d : kHeadDims)
      for (bool causal : {false, true}) {
        AttnCase c;
        c.d = d;
        c.dtype = kDtypes[i % 2];
        c.layout = kLayouts[i % 3];
        c.causal = causal;
        c.sq = 300;
        c.sk = 700;
        c.scale = scale;
        ++i;
        check("AttnEdge", "softmax_scale", c);
      }
}

TEST_F(AttnEdge, NoLse) {
  int i = 0;
  for (int64_t d : kHeadDims)
    for (bool causal : {false, true}) {
      AttnCase c;
      c.d = d;
      c.dtype = kDtypes[i % 2];
      c.layout = kLayouts[i % 3];
      c.causal = causal;
      c.sq = 200;
      c.sk = 100;
      c.with_lse = false;
      ++i;
      check("AttnEdge", "lse = null", c);
    }
}

TEST_F(AttnEdge, KvBatchStrideZero) {
  int i = 0;
  for (int64_t d : kHeadDims)
    for (bool causal : {false, true}) {
      AttnCase c;
      c.d = d;
      c.dtype = kDtypes[i % 2];
      c.layout = kLayouts[i % 3];
      c.causal = causal;
      c.batch = 3;
      c.hq = 4;
      c.hkv = 2;
      c.sq = 150;
      c.sk = 250;
      c.kv_batch_broadcast = true;
      ++i;
      check("AttnEdge", "K/V batch stride 0", c);
    }
}

// ---- streams, graphs, the C ABI ---------------------------------------------------------------

class AttnStream : public AttnGpuTest {
 protected:
  static void SetUpTestSuite() { label("AttnStream"); }
  static void TearDownTestSuite() { tt::print_summary("AttnStream"); }
  void SetUp() override {
    AttnGpuTest::SetUp();
    if (IsSkipped()) return;
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    if (stream_) cudaStreamDestroy(stream_);
  }
  AttnCase base(DType dt, bool causal) const {
    AttnCase c;
    c.d = 128;
    c.dtype = dt;
    c.causal = causal;
    c.sq = 1000;
    c.sk = 1000;
    c.layout = AttnLayout::Strided;
    return c;
  }
  cudaStream_t stream_ = nullptr;
};

TEST_F(AttnStream, NonDefaultStream) {
  for (DType dt : kDtypes)
    for (bool causal : {false, true}) {
      AttnCase c = base(dt, causal);
      c.stream = stream_;
      check("AttnStream", "non-blocking stream", c);
    }
  // A longer one, so that a missing dependency on the stream would show as unwritten O.
  AttnCase c = base(DType::BF16, false);
  c.sq = c.sk = 4096;
  c.d = 64;
  c.stream = stream_;
  check("AttnStream", "non-blocking stream", c);
}

TEST_F(AttnStream, GraphCapture) {
  for (DType dt : kDtypes)
    for (bool causal : {false, true}) {
      AttnCase c = base(dt, causal);
      c.d = 64;
      c.stream = stream_;
      c.capture_graph = true;
      check("AttnStream", "captured in a CUDA graph", c);
    }
}

TEST_F(AttnStream, CAbi) {
  for (DType dt : kDtypes)
    for (bool causal : {false, true}) {
      AttnCase c = base(dt, causal);
      c.d = 96;
      c.layout = AttnLayout::BHSD;
      c.use_c_abi = true;
      check("AttnStream", "C ABI (tessera_attention)", c);
    }
}

// ---- invalid arguments on real memory: refused, O and LSE untouched -----------------------------

class AttnInvalid : public AttnGpuTest {
 protected:
  static void TearDownTestSuite() { tt::print_summary("AttnInvalid"); }
};

TEST_F(AttnInvalid, RefusedWithoutWriting) {
  struct Rule {
    const char* what;
    std::function<void(tessera::AttentionArgs&)> mutate;
    const char* message;
  };
  const std::vector<Rule> rules = {
      {"dtype f32", [](tessera::AttentionArgs& a) { a.dtype = DType::F32; }, "dtype"},
      {"head_dim 80", [](tessera::AttentionArgs& a) { a.head_dim = 80; }, "head_dim"},
      {"heads_kv not dividing heads_q", [](tessera::AttentionArgs& a) { a.heads_kv = 3; }, "heads_kv"},
      {"seqlen_k 0", [](tessera::AttentionArgs& a) { a.seqlen_k = 0; }, "seqlen_k"},
      {"negative scale", [](tessera::AttentionArgs& a) { a.softmax_scale = -1.0f; }, "softmax_scale"},
      {"NaN scale", [](tessera::AttentionArgs& a) { a.softmax_scale = std::nanf(""); }, "softmax_scale"},
      {"null v", [](tessera::AttentionArgs& a) { a.v = nullptr; }, "v: null"},
      {"misaligned q", [](tessera::AttentionArgs& a) { a.q = static_cast<const char*>(a.q) + 2; }, "q:"},
      {"k seq stride not a multiple of 8", [](tessera::AttentionArgs& a) { a.k_stride[1] += 4; }, "k_stride[1]"},
      {"negative v head stride", [](tessera::AttentionArgs& a) { a.v_stride[2] = -a.v_stride[2]; }, "v_stride[2]"},
      {"O heads overlap", [](tessera::AttentionArgs& a) { a.o_stride[2] = 8; }, "o_stride"},
      {"window_left -2", [](tessera::AttentionArgs& a) { a.window_left = -2; }, "window_left"},
      {"window_right -5", [](tessera::AttentionArgs& a) { a.window_right = -5; }, "window_right"},
      {"negative softcap", [](tessera::AttentionArgs& a) { a.softcap = -1.0f; }, "softcap"},
      {"NaN softcap", [](tessera::AttentionArgs& a) { a.softcap = std::nanf(""); }, "softcap"},
      {"misaligned lse",
       [](tessera::AttentionArgs& a) { a.lse = reinterpret_cast<float*>(reinterpret_cast<char*>(a.lse) + 2); }, "lse"},
  };
  for (bool c_abi : {false, true})
    for (const Rule& r : rules) {
      AttnCase c;
      c.d = 64;
      c.dtype = DType::F16;
      c.hq = 4;
      c.hkv = 2;
      c.sq = 100;
      c.sk = 70;
      c.mutate = r.mutate;
      c.use_c_abi = c_abi;
      c.expect = TESSERA_STATUS_INVALID_ARGUMENT;
      c.expect_message = r.message;
      const tt::AttnOutcome o = tt::run_attention_case(c);
      tt::record_result("AttnInvalid", c_abi ? "refused (C ABI)" : "refused (C++)", o.passed(), false, 0, 0);
      EXPECT_TRUE(o.passed()) << r.what << ": " << tt::describe(c) << "\n  " << o.problems;
    }
}

// Decode calls on a non-default stream, captured into a graph, through the C ABI and under an SM
// budget (launches of at most max_sms CTAs, the split combine included).
TEST_F(AttnEdge, DecodeStreamsGraphsAbiBudget) {
  for (int variant = 0; variant < 4; ++variant) {
    AttnCase c;
    c.batch = 1;
    c.sq = 2;
    c.sk = 5000;
    c.hq = 16;
    c.hkv = 2;
    c.d = 128;
    c.causal = true;
    cudaStream_t s = nullptr;
    if (variant <= 1) {
      ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    }
    c.stream = s;
    c.capture_graph = variant == 1;
    c.use_c_abi = variant == 2;
    if (variant == 3) c.mutate = [](tessera::AttentionArgs& a) { a.max_sms = 3; };
    check("AttnEdge", "decode variant " + std::to_string(variant), c);
    if (s) cudaStreamDestroy(s);
  }
}

}  // namespace
