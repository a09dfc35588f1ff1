// Every argument rule of the attention API (tessera::attn::validate in attention/api.cpp), each
// checked for its status code and for a message naming the argument; the C ABI's handling of
// null / invalid args; a valid call without a GPU. Pointers are fake but aligned device addresses:
// validation never dereferences them.
//
// Also the CPU fp64 reference (tests/common/attention_reference.hpp) on hand-checkable cases (windows
// and softcap included), and the closed-form count of unmasked (query, key) pairs behind the CLI's
// FLOP count.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "attention/decode/decode.hpp"
#include "attention/decode/kv_rows.hpp"
#include "attention/sm90ws/launch.hpp"
#include "attention/validate.hpp"
#include "attention_gpu_reference.hpp"
#include "common/attention_reference.hpp"
#include "tessera/tessera.h"
#include "tessera/tessera.hpp"

namespace {

using tessera::AttentionArgs;
using tessera::DType;
using tessera::Status;

// Far apart (1 TiB) and 256-byte aligned.
constexpr uintptr_t kQ = uintptr_t(1) << 40, kK = uintptr_t(2) << 40, kV = uintptr_t(3) << 40,
                    kO = uintptr_t(4) << 40, kL = uintptr_t(5) << 40;
constexpr int64_t kB = 2, kSq = 100, kSk = 70, kHq = 4, kHkv = 2, kD = 64;

// A valid problem: BSHD contiguous, f16, GQA 2:1, causal, with LSE.
AttentionArgs valid_args() {
  AttentionArgs a;
  a.q = reinterpret_cast<const void*>(kQ);
  a.k = reinterpret_cast<const void*>(kK);
  a.v = reinterpret_cast<const void*>(kV);
  a.o = reinterpret_cast<void*>(kO);
  a.lse = reinterpret_cast<float*>(kL);
  a.dtype = DType::F16;
  a.batch = kB;
  a.seqlen_q = kSq;
  a.seqlen_k = kSk;
  a.heads_q = kHq;
  a.heads_kv = kHkv;
  a.head_dim = kD;
  tessera::bshd_strides(kSq, kHq, kD, a.q_stride);
  tessera::bshd_strides(kSk, kHkv, kD, a.k_stride);
  tessera::bshd_strides(kSk, kHkv, kD, a.v_stride);
  tessera::bshd_strides(kSq, kHq, kD, a.o_stride);
  a.causal = true;
  return a;
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

// validate() refuses `a` with INVALID_ARGUMENT and a message containing `needle`; so do the public
// C++ entry and the C ABI (which also leaves the message in tessera_last_error()).
void expect_invalid(const AttentionArgs& a, const std::string& needle) {
  const Status s = tessera::attn::validate(a);
  EXPECT_EQ(s.code, TESSERA_STATUS_INVALID_ARGUMENT) << s.message;
  EXPECT_TRUE(contains(s.message, needle));

  const Status api = tessera::attention(a, nullptr);
  EXPECT_EQ(api.code, TESSERA_STATUS_INVALID_ARGUMENT) << api.message;
  EXPECT_EQ(api.message, s.message);

  const tessera_attention_args_t c = tessera::to_c(a);
  EXPECT_EQ(tessera_attention(&c, nullptr), TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(tessera_last_error(), needle));
}

void expect_valid(const AttentionArgs& a) {
  const Status s = tessera::attn::validate(a);
  EXPECT_TRUE(s.ok()) << s.message;
}

template <class T>
T* offset_bytes(T* p, intptr_t bytes) {
  return reinterpret_cast<T*>(reinterpret_cast<uintptr_t>(p) + bytes);
}

// ---- rules ---------------------------------------------------------------------------------------

TEST(AttentionValidate, ValidArgsPass) {
  expect_valid(valid_args());
  AttentionArgs a = valid_args();
  a.lse = nullptr;  // LSE is optional
  a.causal = false;
  a.dtype = DType::BF16;
  expect_valid(a);
  // BHSD, MQA, Sq != Sk both ways.
  AttentionArgs b = valid_args();
  b.heads_kv = 1;
  tessera::bhsd_strides(kSq, kHq, kD, b.q_stride);
  tessera::bhsd_strides(kSk, 1, kD, b.k_stride);
  tessera::bhsd_strides(kSk, 1, kD, b.v_stride);
  tessera::bhsd_strides(kSq, kHq, kD, b.o_stride);
  expect_valid(b);
}

TEST(AttentionValidate, Dtype) {
  AttentionArgs a = valid_args();
  a.dtype = DType::F32;
  expect_invalid(a, "dtype");
  a.dtype = static_cast<DType>(7);
  expect_invalid(a, "dtype");
}

struct SizeField {
  const char* name;
  int64_t AttentionArgs::*field;
};
const SizeField kSizes[] = {{"batch", &AttentionArgs::batch},       {"seqlen_q", &AttentionArgs::seqlen_q},
                            {"seqlen_k", &AttentionArgs::seqlen_k}, {"heads_q", &AttentionArgs::heads_q},
                            {"heads_kv", &AttentionArgs::heads_kv}, {"head_dim", &AttentionArgs::head_dim}};

TEST(AttentionValidate, SizesAtLeastOne) {
  for (const SizeField& f : kSizes)
    for (int64_t v : {int64_t(0), int64_t(-1), std::numeric_limits<int64_t>::min()}) {
      SCOPED_TRACE(std::string(f.name) + " = " + std::to_string(v));
      AttentionArgs a = valid_args();
      a.*f.field = v;
      expect_invalid(a, std::string(f.name) + ": must be >= 1");
    }
}

TEST(AttentionValidate, SizesBelow2To31) {
  // (The exact limit sits a little below 2^31: tile coordinates are 32-bit and may run past the
  // last row; the message states it.)
  for (const SizeField& f : kSizes)
    for (int64_t v : {int64_t(1) << 31, (int64_t(1) << 32) + 64, std::numeric_limits<int64_t>::max()}) {
      SCOPED_TRACE(std::string(f.name) + " = " + std::to_string(v));
      AttentionArgs a = valid_args();
      a.*f.field = v;
      expect_invalid(a, std::string(f.name) + ": must be ");
      EXPECT_TRUE(contains(tessera::attn::validate(a).message, "2^31"));
    }
  // Long sequences well inside the limit are fine (validation only; nothing is allocated).
  AttentionArgs a = valid_args();
  a.batch = 1;
  a.seqlen_q = a.seqlen_k = int64_t(1) << 30;
  tessera::bshd_strides(a.seqlen_q, kHq, kD, a.q_stride);
  tessera::bshd_strides(a.seqlen_k, kHkv, kD, a.k_stride);
  tessera::bshd_strides(a.seqlen_k, kHkv, kD, a.v_stride);
  tessera::bshd_strides(a.seqlen_q, kHq, kD, a.o_stride);
  expect_valid(a);
}

// One CTA per (query block, head, batch) in a one-dimensional grid: at most 2^31 - 1 query blocks
// (of 64 rows, the smallest a configuration may have), whatever the split between the three.
TEST(AttentionValidate, GridLimit) {
  auto huge = [](int64_t batch, int64_t heads_q) {
    AttentionArgs a = valid_args();
    a.heads_q = heads_q;
    a.heads_kv = 1;
    a.batch = batch;
    tessera::bshd_strides(kSq, a.heads_q, kD, a.q_stride);
    tessera::bshd_strides(kSk, 1, kD, a.k_stride);
    tessera::bshd_strides(kSk, 1, kD, a.v_stride);
    tessera::bshd_strides(kSq, a.heads_q, kD, a.o_stride);
    // Tensors this large need addresses far apart (O must not overlap Q, K, V or LSE).
    a.q = reinterpret_cast<const void*>(uintptr_t(1) << 56);
    a.k = reinterpret_cast<const void*>(uintptr_t(2) << 56);
    a.v = reinterpret_cast<const void*>(uintptr_t(3) << 56);
    a.o = reinterpret_cast<void*>(uintptr_t(4) << 56);
    a.lse = reinterpret_cast<float*>(uintptr_t(5) << 56);
    return a;
  };
  const int64_t blocks_per_head = (kSq + 63) / 64;
  // The old per-mode grid limits (65535 heads, 65535 batches) are gone: only the product counts.
  expect_valid(huge(65536, 2));
  expect_valid(huge(2, 65536));
  expect_invalid(huge(65536, 65536 / blocks_per_head + 1), "query blocks");
}

TEST(AttentionValidate, OutputMustNotOverlapInputs) {
  AttentionArgs a = valid_args();
  a.o = const_cast<void*>(a.k);
  expect_invalid(a, "o: overlaps k");
  a = valid_args();
  a.lse = static_cast<float*>(a.o);
  expect_invalid(a, "lse: overlaps o");
}

TEST(AttentionValidate, SupportedHeadDims) {
  for (int64_t d : {64, 96, 128, 256}) {
    AttentionArgs a = valid_args();
    a.head_dim = d;
    tessera::bshd_strides(kSq, kHq, d, a.q_stride);
    tessera::bshd_strides(kSk, kHkv, d, a.k_stride);
    tessera::bshd_strides(kSk, kHkv, d, a.v_stride);
    tessera::bshd_strides(kSq, kHq, d, a.o_stride);
    SCOPED_TRACE("head_dim " + std::to_string(d));
    expect_valid(a);
  }
  for (int64_t d : {8, 16, 32, 48, 80, 112, 160, 192, 512}) {
    AttentionArgs a = valid_args();
    a.head_dim = d;
    tessera::bshd_strides(kSq, kHq, d, a.q_stride);
    tessera::bshd_strides(kSk, kHkv, d, a.k_stride);
    tessera::bshd_strides(kSk, kHkv, d, a.v_stride);
    tessera::bshd_strides(kSq, kHq, d, a.o_stride);
    SCOPED_TRACE("head_dim " + std::to_string(d));
    expect_invalid(a, "head_dim: " + std::to_string(d) + " is not supported");
    // The message lists what is supported.
    EXPECT_TRUE(contains(tessera::attn::validate(a).message, "supported: 64, 96, 128, 256"));
  }
}

TEST(AttentionValidate, HeadsKvDividesHeadsQ) {
  for (auto [hq, hkv] : {std::pair<int64_t, int64_t>{4, 3}, {2, 4}, {6, 4}, {5, 2}}) {
    AttentionArgs a = valid_args();
    a.heads_q = hq;
    a.heads_kv = hkv;
    tessera::bshd_strides(kSq, hq, kD, a.q_stride);
    tessera::bshd_strides(kSk, hkv, kD, a.k_stride);
    tessera::bshd_strides(kSk, hkv, kD, a.v_stride);
    tessera::bshd_strides(kSq, hq, kD, a.o_stride);
    SCOPED_TRACE(std::to_string(hq) + ":" + std::to_string(hkv));
    expect_invalid(a, "heads_kv: must divide heads_q");
  }
  for (auto [hq, hkv] : {std::pair<int64_t, int64_t>{8, 8}, {8, 1}, {16, 2}, {6, 3}}) {
    AttentionArgs a = valid_args();
    a.heads_q = hq;
    a.heads_kv = hkv;
    tessera::bshd_strides(kSq, hq, kD, a.q_stride);
    tessera::bshd_strides(kSk, hkv, kD, a.k_stride);
    tessera::bshd_strides(kSk, hkv, kD, a.v_stride);
    tessera::bshd_strides(kSq, hq, kD, a.o_stride);
    expect_valid(a);
  }
}

TEST(AttentionValidate, SoftmaxScale) {
  for (float s : {-1.0f, -1e-30f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN()}) {
    AttentionArgs a = valid_args();
    a.softmax_scale = s;
    SCOPED_TRACE(std::to_string(s));
    expect_invalid(a, "softmax_scale");
  }
  for (float s : {0.0f, -0.0f, 1e-30f, 0.125f, 1e30f}) {
    AttentionArgs a = valid_args();
    a.softmax_scale = s;
    expect_valid(a);
  }
}

TEST(AttentionValidate, Window) {
  for (auto [wl, wr] : {std::pair<int64_t, int64_t>{-2, -1}, {-1, -2}, {-100, 5}, {5, -100},
                        {std::numeric_limits<int64_t>::min(), -1}, {-1, std::numeric_limits<int64_t>::min()}}) {
    SCOPED_TRACE(std::to_string(wl) + ", " + std::to_string(wr));
    AttentionArgs a = valid_args();
    a.window_left = wl;
    a.window_right = wr;
    expect_invalid(a, "window_left, window_right");
    expect_invalid(a, wl < -1 ? "window_left" : "window_right");
  }
  // -1 (unlimited), 0, and windows wider than the sequences (no limit) are valid, with or without
  // causal.
  for (auto [wl, wr] : {std::pair<int64_t, int64_t>{-1, -1}, {0, 0}, {0, -1}, {-1, 0}, {5, 3}, {1000, 1000},
                        {std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::max()}})
    for (bool causal : {false, true}) {
      AttentionArgs a = valid_args();
      a.window_left = wl;
      a.window_right = wr;
      a.causal = causal;
      expect_valid(a);
    }
}

TEST(AttentionValidate, Softcap) {
  for (float c : {-1.0f, -1e-30f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::quiet_NaN()}) {
    AttentionArgs a = valid_args();
    a.softcap = c;
    SCOPED_TRACE(std::to_string(c));
    expect_invalid(a, "softcap");
  }
  for (float c : {0.0f, -0.0f, 1e-30f, 2.0f, 30.0f, 1e30f}) {
    AttentionArgs a = valid_args();
    a.softcap = c;
    expect_valid(a);
  }
}

TEST(AttentionValidate, NullPointers) {
  {
    AttentionArgs a = valid_args();
    a.q = nullptr;
    expect_invalid(a, "q: null pointer");
  }
  {
    AttentionArgs a = valid_args();
    a.k = nullptr;
    expect_invalid(a, "k: null pointer");
  }
  {
    AttentionArgs a = valid_args();
    a.v = nullptr;
    expect_invalid(a, "v: null pointer");
  }
  {
    AttentionArgs a = valid_args();
    a.o = nullptr;
    expect_invalid(a, "o: null pointer");
  }
}

TEST(AttentionValidate, Alignment16Bytes) {
  for (intptr_t off : {2, 4, 8, 14}) {
    SCOPED_TRACE("offset " + std::to_string(off) + " bytes");
    {
      AttentionArgs a = valid_args();
      a.q = offset_bytes(a.q, off);
      expect_invalid(a, "q: must be 16-byte aligned");
    }
    {
      AttentionArgs a = valid_args();
      a.k = offset_bytes(a.k, off);
      expect_invalid(a, "k: must be 16-byte aligned");
    }
    {
      AttentionArgs a = valid_args();
      a.v = offset_bytes(a.v, off);
      expect_invalid(a, "v: must be 16-byte aligned");
    }
    {
      AttentionArgs a = valid_args();
      a.o = offset_bytes(a.o, off);
      expect_invalid(a, "o: must be 16-byte aligned");
    }
  }
  AttentionArgs a = valid_args();
  a.q = offset_bytes(a.q, 16);
  a.k = offset_bytes(a.k, 48);
  a.v = offset_bytes(a.v, 4096 + 16);
  a.o = offset_bytes(a.o, 32);
  expect_valid(a);
}

TEST(AttentionValidate, Strides) {
  const char* tensors[] = {"q", "k", "v", "o"};
  const char* modes[] = {"batch", "sequence", "head"};
  for (int t = 0; t < 4; ++t)
    for (int i = 0; i < 3; ++i) {
      auto stride = [&](AttentionArgs& a) -> int64_t& {
        int64_t* s[] = {a.q_stride, a.k_stride, a.v_stride, a.o_stride};
        return s[t][i];
      };
      const std::string name = std::string(tensors[t]) + "_stride[" + std::to_string(i) + "] (" + modes[i] + ")";
      SCOPED_TRACE(name);
      for (int64_t v : {int64_t(-8), int64_t(-64), std::numeric_limits<int64_t>::min()}) {
        AttentionArgs a = valid_args();
        stride(a) = v;
        expect_invalid(a, name + ": must be >= 0");
      }
      for (int64_t delta : {1, 2, 4, 7}) {
        AttentionArgs a = valid_args();
        stride(a) += delta;
        expect_invalid(a, name + ": must be a multiple of 8");
      }
      // Larger multiples of 8 (padding) are fine.
      AttentionArgs a = valid_args();
      stride(a) += 8 * 1024 * 1024;
      expect_valid(a);
    }
}

TEST(AttentionValidate, StrideZeroBroadcastsInputsOnly) {
  // Q, K and V may repeat (stride 0): one K/V for every batch, one Q row for every query...
  for (int t = 0; t < 3; ++t)
    for (int i = 0; i < 3; ++i) {
      AttentionArgs a = valid_args();
      int64_t* s[] = {a.q_stride, a.k_stride, a.v_stride};
      s[t][i] = 0;
      expect_valid(a);
    }
  // ...but every element of O must have its own address.
  for (int i = 0; i < 3; ++i) {
    AttentionArgs a = valid_args();
    a.o_stride[i] = 0;
    expect_invalid(a, "o_stride");
  }
}

TEST(AttentionValidate, OutputOverlap) {
  {  // heads closer than head_dim
    AttentionArgs a = valid_args();
    a.o_stride[2] = kD - 8;
    expect_invalid(a, "o_stride: batches, rows or heads of O overlap");
  }
  {  // rows on top of each other's heads
    AttentionArgs a = valid_args();
    a.o_stride[1] = kD;
    expect_invalid(a, "o_stride");
  }
  {  // batches overlapping the last rows
    AttentionArgs a = valid_args();
    a.o_stride[0] = (kSq - 1) * kHq * kD;
    expect_invalid(a, "o_stride");
  }
  {  // BHSD strides in BSHD memory order swapped: still injective
    AttentionArgs a = valid_args();
    tessera::bhsd_strides(kSq, kHq, kD, a.o_stride);
    expect_valid(a);
  }
  {  // padded heads and batches
    AttentionArgs a = valid_args();
    a.o_stride[2] = kD + 16;
    a.o_stride[1] = kHq * (kD + 16);
    a.o_stride[0] = kSq * kHq * (kD + 16) + 8;
    expect_valid(a);
  }
  {  // a size-1 mode may have any stride (it is never stepped)
    AttentionArgs a = valid_args();
    a.batch = 1;
    a.o_stride[0] = 0;
    expect_valid(a);
    a.seqlen_q = 1;
    a.o_stride[1] = 0;
    expect_valid(a);
  }
}

TEST(AttentionValidate, AddressRange) {
  AttentionArgs a = valid_args();
  a.k_stride[0] = int64_t(1) << 62;
  expect_invalid(a, "k: strides address more than 2^62 elements");
}

TEST(AttentionValidate, LseAlignment) {
  for (intptr_t off : {1, 2, 3}) {
    AttentionArgs a = valid_args();
    a.lse = offset_bytes(a.lse, off);
    expect_invalid(a, "lse: must be 4-byte aligned");
  }
  AttentionArgs a = valid_args();
  a.lse = offset_bytes(a.lse, 4);
  expect_valid(a);
}

// ---- the C ABI and the call itself -----------------------------------------------------------------

TEST(AttentionApi, CAbiNullArgs) {
  EXPECT_EQ(tessera_attention(nullptr, nullptr), TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(tessera_last_error(), "args"));
}

TEST(AttentionApi, CAbiRoundTrip) {
  AttentionArgs a = valid_args();
  a.softmax_scale = 0.3f;
  a.q_stride[0] = 123456;
  const AttentionArgs b = tessera::from_c(tessera::to_c(a));
  EXPECT_EQ(b.q, a.q);
  EXPECT_EQ(b.k, a.k);
  EXPECT_EQ(b.v, a.v);
  EXPECT_EQ(b.o, a.o);
  EXPECT_EQ(b.lse, a.lse);
  EXPECT_EQ(b.dtype, a.dtype);
  EXPECT_EQ(b.batch, a.batch);
  EXPECT_EQ(b.seqlen_q, a.seqlen_q);
  EXPECT_EQ(b.seqlen_k, a.seqlen_k);
  EXPECT_EQ(b.heads_q, a.heads_q);
  EXPECT_EQ(b.heads_kv, a.heads_kv);
  EXPECT_EQ(b.head_dim, a.head_dim);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(b.q_stride[i], a.q_stride[i]);
    EXPECT_EQ(b.k_stride[i], a.k_stride[i]);
    EXPECT_EQ(b.v_stride[i], a.v_stride[i]);
    EXPECT_EQ(b.o_stride[i], a.o_stride[i]);
  }
  EXPECT_EQ(b.softmax_scale, a.softmax_scale);
  EXPECT_EQ(b.causal, a.causal);
}

TEST(AttentionApi, ValidCallWithoutADeviceIsACudaError) {
  if (has_cuda_device()) GTEST_SKIP() << "a CUDA device is present (this test needs a machine without one)";
  for (bool causal : {false, true}) {
    AttentionArgs a = valid_args();
    a.causal = causal;
    const Status s = tessera::attention(a, nullptr);
    EXPECT_EQ(s.code, TESSERA_STATUS_CUDA_ERROR) << s.message;
    EXPECT_FALSE(s.message.empty());
    EXPECT_STRNE(tessera_last_error(), "");
    const tessera_attention_args_t c = tessera::to_c(a);
    EXPECT_EQ(tessera_attention(&c, nullptr), TESSERA_STATUS_CUDA_ERROR);
  }
}

TEST(AttentionApi, FailedCallSetsLastError) {
  // A failed call sets the message; it names the argument.
  AttentionArgs a = valid_args();
  a.head_dim = 80;
  EXPECT_EQ(tessera::attention(a, nullptr).code, TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(tessera_last_error(), "head_dim"));
}

// The environment overrides are arguments too: a bad value is INVALID_ARGUMENT naming the
// variable, before any device is touched (so this holds on a machine without a GPU).
TEST(AttentionApi, OverridesAreValidatedFirst) {
  struct Env {  // the library reads the environment once: re-read it
    const char* name;
    explicit Env(const char* n, const char* v) : name(n) {
      ::setenv(n, v, 1);
      tessera::reread_environment();
    }
    ~Env() {
      ::unsetenv(name);
      tessera::reread_environment();
    }
  };
  const AttentionArgs a = valid_args();  // head_dim 64
  {
    Env e("TESSERA_ATTN_ARCH", "75");
    const Status s = tessera::attention(a, nullptr);
    EXPECT_EQ(s.code, TESSERA_STATUS_INVALID_ARGUMENT) << s.message;
    EXPECT_TRUE(contains(s.message, "TESSERA_ATTN_ARCH")) << s.message;
  }
  {
    Env e("TESSERA_ATTN_CONFIG", "no_such_config");
    const Status s = tessera::attention(a, nullptr);
    EXPECT_EQ(s.code, TESSERA_STATUS_INVALID_ARGUMENT) << s.message;
    EXPECT_TRUE(contains(s.message, "TESSERA_ATTN_CONFIG")) << s.message;
  }
  for (const char* other_dim : {"fa2_sm80_d128_128x32_w4", "fa_sm90_d128_128x128"}) {
    Env e("TESSERA_ATTN_CONFIG", other_dim);
    const Status s = tessera::attention(a, nullptr);
    EXPECT_EQ(s.code, TESSERA_STATUS_INVALID_ARGUMENT) << s.message;
    EXPECT_TRUE(contains(s.message, "head_dim 128")) << s.message;
  }
  if (!has_cuda_device()) {  // valid overrides get as far as the missing device
    for (const char* ok : {"fa2_sm80_d64_128x64_w4", "fa_sm90_d64_128x128"}) {
      Env e("TESSERA_ATTN_CONFIG", ok);
      EXPECT_EQ(tessera::attention(a, nullptr).code, TESSERA_STATUS_CUDA_ERROR) << ok;
    }
  }
}

// ---- the CPU fp64 reference on hand-checkable cases -----------------------------------------------

using tessera_test::HostAttention;

HostAttention problem(int64_t b, int64_t sq, int64_t sk, int64_t hq, int64_t hkv, int64_t d, bool causal,
                      double scale = 0.0) {
  HostAttention p;
  p.batch = b;
  p.seqlen_q = sq;
  p.seqlen_k = sk;
  p.heads_q = hq;
  p.heads_kv = hkv;
  p.head_dim = d;
  p.causal = causal;
  p.scale = scale;
  return p;
}

// Deterministic, non-trivial values.
std::vector<double> values(size_t n, double salt) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = std::sin(0.7 * double(i) + salt);
  return v;
}

struct RefRun {
  std::vector<double> o, lse;
};
RefRun run(const HostAttention& p, const std::vector<double>& q, const std::vector<double>& k,
        const std::vector<double>& v) {
  RefRun r{std::vector<double>(p.q_elements(), -1234.0), std::vector<double>(p.lse_elements(), -1234.0)};
  tessera_test::attention_reference_f64(p, q.data(), k.data(), v.data(), r.o.data(), r.lse.data());
  return r;
}

TEST(AttentionReference, OneKeyGivesItsValueRow) {
  const HostAttention p = problem(2, 5, 1, 2, 2, 8, false, 0.5);
  const auto q = values(p.q_elements(), 0.1), k = values(p.kv_elements(), 0.2), v = values(p.kv_elements(), 0.3);
  const RefRun r = run(p, q, k, v);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t h = 0; h < 2; ++h) {
        double dot = 0;
        for (int64_t d = 0; d < 8; ++d) {
          EXPECT_DOUBLE_EQ(r.o[size_t(((b * 5 + i) * 2 + h) * 8 + d)], v[size_t((b * 2 + h) * 8 + d)]);
          dot += q[size_t(((b * 5 + i) * 2 + h) * 8 + d)] * k[size_t((b * 2 + h) * 8 + d)];
        }
        // One key: LSE = its (scaled) score.
        EXPECT_NEAR(r.lse[size_t((b * 2 + h) * 5 + i)], 0.5 * dot, 1e-14);
      }
}

TEST(AttentionReference, EqualScoresAverageV) {
  // All keys equal: every score is the same, P is uniform, O is the mean of the V rows and
  // LSE = score + log(Sk).
  const int64_t sk = 7, d = 4;
  const HostAttention p = problem(1, 3, sk, 1, 1, d, false);  // default scale 1/sqrt(4) = 0.5
  const auto q = values(p.q_elements(), 0.4), v = values(p.kv_elements(), 0.9);
  std::vector<double> k(p.kv_elements());
  for (int64_t j = 0; j < sk; ++j)
    for (int64_t x = 0; x < d; ++x) k[size_t(j * d + x)] = 0.25 * double(x + 1);
  const RefRun r = run(p, q, k, v);
  for (int64_t i = 0; i < 3; ++i) {
    double dot = 0;
    for (int64_t x = 0; x < d; ++x) {
      double mean = 0;
      for (int64_t j = 0; j < sk; ++j) mean += v[size_t(j * d + x)] / double(sk);
      EXPECT_NEAR(r.o[size_t(i * d + x)], mean, 1e-14);
      dot += q[size_t(i * d + x)] * k[size_t(x)];
    }
    EXPECT_NEAR(r.lse[size_t(i)], 0.5 * dot + std::log(double(sk)), 1e-13);
  }
}

TEST(AttentionReference, TwoKeysByHand) {
  // q = (1, 0), k0 = (1, 0), k1 = (0, 0), scale 1: scores (1, 0), P = (e, 1) / (e + 1).
  const HostAttention p = problem(1, 1, 2, 1, 1, 2, false, 1.0);
  const std::vector<double> q = {1, 0}, k = {1, 0, 0, 0}, v = {2, -1, 4, 3};
  const RefRun r = run(p, q, k, v);
  const double e = std::exp(1.0), p0 = e / (e + 1), p1 = 1 / (e + 1);
  EXPECT_NEAR(r.o[0], p0 * 2 + p1 * 4, 1e-15);
  EXPECT_NEAR(r.o[1], p0 * -1 + p1 * 3, 1e-15);
  EXPECT_NEAR(r.lse[0], std::log(e + 1), 1e-15);
}

TEST(AttentionReference, CausalMoreQueriesThanKeys) {
  // Sq = 5, Sk = 2: row i sees keys j <= i - 3, so rows 0..2 see none (O = 0, LSE = -inf), row 3
  // sees key 0 only (O = V0) and row 4 both.
  const HostAttention p = problem(1, 5, 2, 1, 1, 2, true, 1.0);
  EXPECT_EQ(p.visible_keys(0), 0);
  EXPECT_EQ(p.visible_keys(2), 0);
  EXPECT_EQ(p.visible_keys(3), 1);
  EXPECT_EQ(p.visible_keys(4), 2);
  const auto q = values(p.q_elements(), 1.0);
  const std::vector<double> k = {0.5, -0.25, 1.0, 0.75}, v = {3, -2, 5, 7};
  const RefRun r = run(p, q, k, v);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(r.o[size_t(2 * i)], 0.0);
    EXPECT_EQ(r.o[size_t(2 * i + 1)], 0.0);
    EXPECT_TRUE(std::isinf(r.lse[size_t(i)]) && r.lse[size_t(i)] < 0) << r.lse[size_t(i)];
  }
  EXPECT_DOUBLE_EQ(r.o[6], 3.0);
  EXPECT_DOUBLE_EQ(r.o[7], -2.0);
  EXPECT_NEAR(r.lse[3], q[6] * 0.5 + q[7] * -0.25, 1e-15);
  const double s0 = q[8] * 0.5 + q[9] * -0.25, s1 = q[8] * 1.0 + q[9] * 0.75;
  const double w0 = std::exp(s0) / (std::exp(s0) + std::exp(s1)), w1 = 1 - w0;
  EXPECT_NEAR(r.o[8], w0 * 3 + w1 * 5, 1e-14);
  EXPECT_NEAR(r.o[9], w0 * -2 + w1 * 7, 1e-14);
  EXPECT_NEAR(r.lse[4], std::log(std::exp(s0) + std::exp(s1)), 1e-14);
}

TEST(AttentionReference, CausalFewerQueriesThanKeysIsBottomRightAligned) {
  // Sq = 2, Sk = 4: row 0 sees keys 0..2, row 1 (the last) all four.
  HostAttention p = problem(1, 2, 4, 1, 1, 1, true, 1.0);
  EXPECT_EQ(p.visible_keys(0), 3);
  EXPECT_EQ(p.visible_keys(1), 4);
  // q = 0: equal scores, so O is the mean over the visible keys.
  const std::vector<double> q = {0, 0}, k = {1, 2, 3, 4}, v = {1, 2, 3, 10};
  const RefRun r = run(p, q, k, v);
  EXPECT_NEAR(r.o[0], 2.0, 1e-15);
  EXPECT_NEAR(r.o[1], 4.0, 1e-15);
  EXPECT_NEAR(r.lse[0], std::log(3.0), 1e-15);
  EXPECT_NEAR(r.lse[1], std::log(4.0), 1e-15);
  // Without causal both rows see everything.
  p.causal = false;
  const RefRun full = run(p, q, k, v);
  EXPECT_NEAR(full.o[0], 4.0, 1e-15);
}

TEST(AttentionReference, GqaHeadMapping) {
  // Hq = 4, Hkv = 2, one key: query heads 0, 1 get V head 0; heads 2, 3 get V head 1.
  const HostAttention p = problem(1, 1, 1, 4, 2, 2, false);
  const auto q = values(p.q_elements(), 0.0), k = values(p.kv_elements(), 0.5);
  const std::vector<double> v = {10, 11, 20, 21};
  const RefRun r = run(p, q, k, v);
  const std::vector<double> want = {10, 11, 10, 11, 20, 21, 20, 21};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_DOUBLE_EQ(r.o[i], want[i]) << i;
}

TEST(AttentionReference, ShiftInvariantAndRowsSumToOne) {
  // V = 1 everywhere: O = 1 for every row that sees a key, whatever the scores.
  const HostAttention p = problem(2, 9, 6, 2, 1, 4, true, 3.0);
  const auto q = values(p.q_elements(), 0.3), k = values(p.kv_elements(), 0.6);
  const std::vector<double> v(p.kv_elements(), 1.0);
  const RefRun r = run(p, q, k, v);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 9; ++i)
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t d = 0; d < 4; ++d)
          EXPECT_NEAR(r.o[size_t(((b * 9 + i) * 2 + h) * 4 + d)], p.visible_keys(i) > 0 ? 1.0 : 0.0, 1e-14);
}

TEST(AttentionReference, DiagonalWindowGivesTheDiagonalValueRow) {
  // Sq = Sk = 3, window (0, 0): row i sees key i alone, so O = V_i and LSE = its scaled score.
  HostAttention p = problem(1, 3, 3, 1, 1, 2, false, 0.5);
  p.window_left = 0;
  p.window_right = 0;
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(p.visible_keys(i), 1);
  const auto q = values(p.q_elements(), 0.2), k = values(p.kv_elements(), 0.7);
  const std::vector<double> v = {1, -1, 2, -2, 3, -3};
  const RefRun r = run(p, q, k, v);
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_DOUBLE_EQ(r.o[size_t(2 * i)], v[size_t(2 * i)]);
    EXPECT_DOUBLE_EQ(r.o[size_t(2 * i + 1)], v[size_t(2 * i + 1)]);
    EXPECT_NEAR(r.lse[size_t(i)], 0.5 * (q[size_t(2 * i)] * k[size_t(2 * i)] + q[size_t(2 * i + 1)] * k[size_t(2 * i + 1)]),
                1e-15);
  }
  // The same with causal and a left window of 0.
  p.window_right = -1;
  p.causal = true;
  const RefRun rc = run(p, q, k, v);
  EXPECT_EQ(rc.o, r.o);
  EXPECT_EQ(rc.lse, r.lse);
}

TEST(AttentionReference, WindowsAreBottomRightAligned) {
  // Sq = 2, Sk = 6: i' = i + 4. Window (1, 0): row 0 sees keys 3, 4; row 1 keys 4, 5. Window
  // (-1, 1) (right only): row 0 sees 0..5 (i' + 1 = 5), row 1 all. Window (2, -1): row 0 sees 2..5.
  HostAttention p = problem(1, 2, 6, 1, 1, 1, false, 1.0);
  p.window_left = 1;
  p.window_right = 0;
  EXPECT_FALSE(p.sees(0, 2));
  EXPECT_TRUE(p.sees(0, 3));
  EXPECT_TRUE(p.sees(0, 4));
  EXPECT_FALSE(p.sees(0, 5));
  EXPECT_FALSE(p.sees(1, 3));
  EXPECT_TRUE(p.sees(1, 5));
  // q = 0: equal scores, O is the mean of the visible V rows.
  const std::vector<double> q = {0, 0}, k = {1, 2, 3, 4, 5, 6}, v = {1, 2, 4, 8, 16, 32};
  RefRun r = run(p, q, k, v);
  EXPECT_NEAR(r.o[0], (8 + 16) / 2.0, 1e-15);
  EXPECT_NEAR(r.o[1], (16 + 32) / 2.0, 1e-15);
  EXPECT_NEAR(r.lse[0], std::log(2.0), 1e-15);
  p.window_left = -1;
  p.window_right = 1;
  EXPECT_EQ(p.visible_keys(0), 6);
  p.window_left = 2;
  p.window_right = -1;
  EXPECT_EQ(p.visible_keys(0), 4);
  EXPECT_EQ(p.visible_keys(1), 3);
  // More queries than keys: Sq = 5, Sk = 2, window (0, 1): i' = i - 3, so rows 0 and 1 see no key
  // (i' + 1 < 0), row 2 sees key 0, row 3 keys 0 and 1, row 4 key 1.
  HostAttention m = problem(1, 5, 2, 1, 1, 1, false, 1.0);
  m.window_left = 0;
  m.window_right = 1;
  const int64_t want[] = {0, 0, 1, 2, 1};
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(m.visible_keys(i), want[i]) << i;
  const RefRun e = run(m, std::vector<double>(5, 1.0), {1, 1}, {3, 7});
  EXPECT_EQ(e.o[0], 0.0);
  EXPECT_TRUE(std::isinf(e.lse[1]) && e.lse[1] < 0);
  EXPECT_DOUBLE_EQ(e.o[2], 3.0);
  EXPECT_NEAR(e.o[3], 5.0, 1e-15);
  EXPECT_DOUBLE_EQ(e.o[4], 7.0);
}

TEST(AttentionReference, SoftcapByHand) {
  // q = (1, 0), k0 = (6, 0), k1 = (0, 0), scale 1, softcap 2: scores (6, 0) become
  // (2 tanh(3), 0), so P = (e^c, 1) / (e^c + 1) with c = 2 tanh(3).
  HostAttention p = problem(1, 1, 2, 1, 1, 2, false, 1.0);
  p.softcap = 2.0;
  const std::vector<double> q = {1, 0}, k = {6, 0, 0, 0}, v = {2, -1, 4, 3};
  const RefRun r = run(p, q, k, v);
  const double c = 2.0 * std::tanh(3.0), e = std::exp(c), p0 = e / (e + 1), p1 = 1 / (e + 1);
  EXPECT_NEAR(r.o[0], p0 * 2 + p1 * 4, 1e-15);
  EXPECT_NEAR(r.o[1], p0 * -1 + p1 * 3, 1e-15);
  EXPECT_NEAR(r.lse[0], std::log(e + 1), 1e-15);
  // A softcap far above the scores changes (almost) nothing.
  p.softcap = 1e6;
  const RefRun wide = run(p, q, k, v);
  const double e6 = std::exp(6.0);
  EXPECT_NEAR(wide.o[0], (e6 * 2 + 4) / (e6 + 1), 1e-9);
}

// ---- the FLOP count of `tessera attention` --------------------------------------------------------

TEST(AttentionFlops, UnmaskedPairsClosedFormMatchesRowCounts) {
  for (int64_t sq : {1, 2, 3, 17, 64, 100, 128, 1000})
    for (int64_t sk : {1, 2, 5, 17, 64, 99, 128, 1000, 4096})
      for (bool causal : {false, true}) {
        HostAttention p = problem(1, sq, sk, 1, 1, 64, causal);
        int64_t sum = 0;
        for (int64_t i = 0; i < sq; ++i) {
          sum += p.visible_keys(i);
          EXPECT_EQ(tessera_ref::attention_visible_keys(i, sq, sk, causal), p.visible_keys(i));
        }
        EXPECT_EQ(tessera_ref::attention_unmasked_pairs(sq, sk, causal), sum)
            << "sq " << sq << " sk " << sk << (causal ? " causal" : "");
      }
  // With windows (left, right, both, 0, wider than the sequences), causal or not.
  for (int64_t sq : {1, 2, 17, 64, 100, 1000})
    for (int64_t sk : {1, 3, 64, 99, 1000})
      for (bool causal : {false, true})
        for (auto [wl, wr] : {std::pair<int64_t, int64_t>{0, 0}, {0, -1}, {-1, 0}, {5, -1}, {-1, 7}, {3, 2},
                              {64, 0}, {200, 130}, {5000, 5000}, {std::numeric_limits<int64_t>::max(), 1}}) {
          HostAttention p = problem(1, sq, sk, 1, 1, 64, causal);
          p.window_left = wl;
          p.window_right = wr;
          int64_t sum = 0;
          for (int64_t i = 0; i < sq; ++i) {
            sum += p.visible_keys(i);
            EXPECT_EQ(tessera_ref::attention_visible_keys(i, sq, sk, causal, wl, wr), p.visible_keys(i));
          }
          EXPECT_EQ(tessera_ref::attention_unmasked_pairs(sq, sk, causal, wl, wr), sum)
              << "sq " << sq << " sk " << sk << (causal ? " causal" : "") << " window " << wl << ", " << wr;
        }
  // A sliding window over a long square sequence: 1 + 2 + ... + (w + 1) for the first rows, w + 1
  // after them.
  const int64_t w = 1000;
  EXPECT_EQ(tessera_ref::attention_unmasked_pairs(INT_MAX, INT_MAX, true, w, -1),
            (w + 1) * (w + 2) / 2 + (int64_t(INT_MAX) - (w + 1)) * (w + 1));
  // Square causal: S (S + 1) / 2, a little over half.
  EXPECT_EQ(tessera_ref::attention_unmasked_pairs(16384, 16384, true), int64_t(16384) * 16385 / 2);
  // Large sizes do not overflow.
  EXPECT_EQ(tessera_ref::attention_unmasked_pairs(INT_MAX, INT_MAX, true), int64_t(INT_MAX) * (int64_t(INT_MAX) + 1) / 2);
}

TEST(AttentionFlops, FourBHSqSkD) {
  AttentionArgs a = valid_args();
  a.causal = false;
  EXPECT_DOUBLE_EQ(tessera_ref::attention_flops(a), 4.0 * kB * kHq * kSq * kSk * kD);
  a.causal = true;
  // Sq = 100 > Sk = 70: rows 30..99 see 1..70 keys.
  EXPECT_DOUBLE_EQ(tessera_ref::attention_flops(a), 4.0 * kB * kHq * kD * (70.0 * 71.0 / 2));
  // The diagonal alone: rows 30..99 see one key each.
  a.window_left = 0;
  EXPECT_DOUBLE_EQ(tessera_ref::attention_flops(a), 4.0 * kB * kHq * kD * 70.0);
}

}  // namespace

// ---- the workspace, and the decode family's plan ---------------------------------------------------

TEST(AttentionApi, WorkspaceArguments) {
  const AttentionArgs a = valid_args();
  const Status null_ws = tessera::attention(a, nullptr, nullptr, 4096);
  EXPECT_EQ(null_ws.code, TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(null_ws.message, "workspace"));
  const Status misaligned = tessera::attention(a, nullptr, reinterpret_cast<void*>(uintptr_t(1) << 41 | 16), 4096);
  EXPECT_EQ(misaligned.code, TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(misaligned.message, "256-byte"));
  const tessera_attention_args_t c = tessera::to_c(a);
  EXPECT_EQ(tessera_attention_with_workspace(&c, nullptr, 4096, nullptr), TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(tessera_last_error(), "workspace"));
  EXPECT_EQ(tessera_attention_with_workspace(nullptr, nullptr, 0, nullptr), TESSERA_STATUS_INVALID_ARGUMENT);
  size_t bytes = 1;
  EXPECT_EQ(tessera_attention_workspace_size(nullptr, &bytes), TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(tessera_attention_workspace_size(&c, nullptr), TESSERA_STATUS_INVALID_ARGUMENT);
  // Bad args are refused by the size query too.
  AttentionArgs bad = a;
  bad.head_dim = 80;
  EXPECT_EQ(tessera::attention_workspace_size(bad, &bytes).code, TESSERA_STATUS_INVALID_ARGUMENT);
}

TEST(AttentionApi, WorkspaceSizeOnlyForDecodeShapes) {
  AttentionArgs a = valid_args();  // seqlen_q 100: a prefill family, no workspace
  size_t bytes = 1;
  ASSERT_TRUE(tessera::attention_workspace_size(a, &bytes).ok());
  EXPECT_EQ(bytes, 0u);
  // One token against a long cache: the keys split (with or without a device).
  a.seqlen_q = 1;
  a.seqlen_k = 1 << 16;
  a.batch = 1;
  tessera::bshd_strides(1, kHq, kD, a.q_stride);
  tessera::bshd_strides(1, kHq, kD, a.o_stride);
  ASSERT_TRUE(tessera::attention_workspace_size(a, &bytes).ok());
  EXPECT_GT(bytes, 0u);
  const tessera_attention_args_t c = tessera::to_c(a);
  size_t c_bytes = 0;
  EXPECT_EQ(tessera_attention_workspace_size(&c, &c_bytes), TESSERA_STATUS_SUCCESS);
  EXPECT_EQ(c_bytes, bytes);
}

namespace dec = tessera::attn::decode;

// The sm90ws launcher's walk: persistent only where it was measured to pay (launch.hpp).
TEST(Sm90WsWalk, PersistentOnlyForShortBlocks) {
  namespace ws = tessera::attn::sm90ws;
  tessera::attn::AttnParams p;
  auto walk = [&](int sq, int sk, int d, int bm, bool causal, bool separate_o) {
    p.seqlen_q = sq;
    p.seqlen_k = sk;
    return ws::block_walk(p, d, bm, causal, separate_o);
  };
  EXPECT_EQ(walk(4096, 4096, 128, 128, false, true), ws::kStrided);    // 2^19 key elements
  EXPECT_EQ(walk(8192, 8192, 128, 128, false, true), ws::kStrided);    // exactly 2^20
  EXPECT_EQ(walk(8192, 8193, 128, 128, false, true), ws::kOwnBlock);   // past it
  EXPECT_EQ(walk(16384, 16384, 64, 192, false, true), ws::kStrided);
  EXPECT_EQ(walk(16384, 16384, 256, 128, false, false), ws::kOwnBlock);
  EXPECT_EQ(walk(512, 512, 128, 128, true, true), ws::kChunk);         // 4 query blocks
  EXPECT_EQ(walk(1152, 1152, 64, 192, true, true), ws::kChunk);        // 6 blocks of 192
  EXPECT_EQ(walk(1024, 1024, 128, 128, true, true), ws::kOwnBlock);    // 8 blocks
  EXPECT_EQ(walk(512, 512, 256, 128, true, false), ws::kOwnBlock);     // O through Q's buffer
  EXPECT_EQ(walk(16384, 16384, 128, 128, true, true), ws::kOwnBlock);
  // Variable-length batches: by the longest sequences, not the packed totals.
  const int cu[2] = {0, 65536};
  p.cu_seqlens_q = p.cu_seqlens_k = cu;
  p.max_seqlen_q = p.max_seqlen_k = 512;
  EXPECT_EQ(walk(65536, 65536, 128, 128, false, true), ws::kStrided);
  EXPECT_EQ(walk(65536, 65536, 128, 128, true, true), ws::kChunk);
  p.max_seqlen_q = p.max_seqlen_k = 16384;
  EXPECT_EQ(walk(65536, 65536, 128, 128, false, true), ws::kOwnBlock);
  EXPECT_EQ(walk(65536, 65536, 128, 128, true, true), ws::kOwnBlock);
}

TEST(DecodePlan, PacksQueryHeadsOfAKvHead) {
  // GQA 32/8, one token: 4 packed rows per KV head, one tile.
  const dec::Plan p = dec::make_plan(1, 1, 8192, 32, 8, 128, 132, 2, SIZE_MAX);
  EXPECT_EQ(p.group, 4);
  EXPECT_EQ(p.rows, 4);
  EXPECT_EQ(p.row_tiles, 1);
  // 16 tokens x 8 heads per KV head: 128 rows, 8 tiles.
  const dec::Plan q = dec::make_plan(1, 16, 8192, 64, 8, 128, 132, 2, SIZE_MAX);
  EXPECT_EQ(q.rows, 128);
  EXPECT_EQ(q.row_tiles, 8);
}

TEST(DecodePlan, SplitsFillTheGpuAndCoverEveryKeyOnce) {
  for (int64_t sk : {1, 15, 16, 17, 1000, 8192, 8193, 1 << 20})
    for (int64_t batch : {1, 4, 64, 1024})
      for (int sms : {1, 16, 132}) {
        const dec::Plan p = dec::make_plan(batch, 1, sk, 32, 8, 128, sms, 2, SIZE_MAX);
        const int64_t blocks = (sk + dec::kBlockN - 1) / dec::kBlockN;
        SCOPED_TRACE("sk " + std::to_string(sk) + " batch " + std::to_string(batch) + " sms " + std::to_string(sms));
        ASSERT_GE(p.splits, 1);
        ASSERT_LE(p.splits, dec::kMaxSplits);
        // Every key block in exactly one split, none empty.
        EXPECT_GE(int64_t(p.splits) * p.blocks_per_split, blocks);
        EXPECT_LT(int64_t(p.splits - 1) * p.blocks_per_split, blocks);
        EXPECT_EQ(p.ctas, batch * 8 * p.row_tiles * p.splits);
        // A split is never shorter than kMinBlocksPerWarp blocks per warp, unless there is one.
        if (p.splits > 1) {
          EXPECT_GE(p.blocks_per_split, dec::kWarps * dec::kMinBlocksPerWarp);
        }
        // Enough work items for the GPU where the keys allow it, and no splits once the batch does.
        const int64_t units = batch * 8;
        if (units >= int64_t(sms)) {
          EXPECT_EQ(p.splits, 1);  // one contiguous row tile: a wave is a CTA per SM
        }
        if (p.splits > 1) {
          EXPECT_LE(p.ctas, int64_t(sms) * 2);  // one wave
        }
        EXPECT_EQ(p.workspace_bytes, dec::workspace_bytes(batch, 8, p.row_tiles, p.splits, 128));
        EXPECT_EQ(p.workspace_bytes == 0, p.splits == 1);
      }
}

TEST(DecodePlan, AWaveIsOneCtaPerSmForOneRowTileAtD128) {
  // One row tile at d = 128: at most one CTA per SM (paged or not: the plan does not ask); several
  // row tiles: every CTA slot (2 per SM at d = 128).
  const dec::Plan one = dec::make_plan(1, 1, 8192, 32, 8, 128, 132, 2, SIZE_MAX);
  EXPECT_EQ(one.splits, 16);  // 8 KV heads x 16 splits = 128 CTAs <= 132
  EXPECT_LE(one.ctas, 132);
  EXPECT_LE(dec::make_plan(1, 1, 8192, 32, 8, 64, 132, 4, SIZE_MAX).ctas, 132);  // short splits: see below
  const dec::Plan tiles = dec::make_plan(1, 16, 8192, 32, 8, 128, 132, 2, SIZE_MAX);  // 64 rows: 4 tiles
  EXPECT_EQ(tiles.row_tiles, 4);
  EXPECT_EQ(tiles.splits, 8);
}

TEST(DecodePlan, SeveralRowTilesShareACtaUpToD128) {
  // Sq 4 x 8 query heads per KV head: 32 packed rows, two tiles, both in one CTA (each K/V block
  // read once for both), the one-tile wave: one CTA per SM at d = 128, 132 / 64 units = 2 splits.
  const dec::Plan p = dec::make_plan(8, 4, 32768, 64, 8, 128, 132, 4, SIZE_MAX);
  EXPECT_EQ(p.row_tiles, 2);
  EXPECT_EQ(p.tiles_per_cta, 2);
  EXPECT_EQ(p.splits, 2);
  EXPECT_EQ(p.ctas, 8 * 8 * p.splits);
  EXPECT_EQ(p.workspace_bytes, dec::workspace_bytes(8, 8, 2, p.splits, 128));  // still per row tile
  // d = 256 keeps a tile per CTA (and the every-slot wave of several one-tile CTAs).
  const dec::Plan q = dec::make_plan(8, 4, 32768, 64, 8, 256, 132, 1, SIZE_MAX);
  EXPECT_EQ(q.tiles_per_cta, 1);
  EXPECT_EQ(q.ctas, 8 * 8 * 2 * q.splits);
  // Three tiles (Sq 3 x 16 query heads per KV head: 48 rows): a CTA each, every CTA slot in the wave;
  // one row tile: one CTA of it.
  const dec::Plan r = dec::make_plan(1, 3, 4096, 16, 1, 64, 132, 4, SIZE_MAX);
  EXPECT_EQ(r.row_tiles, 3);
  EXPECT_EQ(r.tiles_per_cta, 1);
  EXPECT_EQ(r.ctas, 3 * r.splits);
  EXPECT_EQ(dec::make_plan(1, 1, 4096, 16, 1, 64, 132, 4, SIZE_MAX).tiles_per_cta, 1);
  EXPECT_EQ(dec::tiles_per_cta(64, 1), 1);
  EXPECT_EQ(dec::tiles_per_cta(96, 2), dec::kMaxTilesPerCta);
  EXPECT_EQ(dec::tiles_per_cta(128, 3), 1);
  EXPECT_EQ(dec::tiles_per_cta(256, 2), 1);
  // The wave: a d = 64 CTA of two tiles fits twice an SM, as the ring rule asks of one-tile CTAs
  // (B8 8k: 64 units x 4 splits); the SM holds half as many of them (4 -> 2 here).
  const dec::Plan w = dec::make_plan(8, 4, 8192, 64, 8, 64, 132, 4, SIZE_MAX);
  EXPECT_EQ(w.splits, 4);
  EXPECT_EQ(dec::make_plan(8, 4, 8192, 64, 8, 64, 132, 2, SIZE_MAX).splits, 2);
  EXPECT_EQ(dec::smem_bytes(128, 2), dec::smem_bytes(128) + dec::kRows * 128 * 2);  // Q per tile
}

TEST(DecodePlan, WideCtasAtD64WhereTheKeysSplit) {
  // B8, 8k keys, d64: 64 (batch, KV head) units. Narrow CTAs would take two per SM, 264 / 64 = 4
  // splits; the keys split, so the CTAs are wide and keep kWaveBytesInFlight alone: one per SM in the
  // wave, 132 / 64 = 2 splits of 256 blocks.
  const dec::Plan b8 = dec::make_plan(8, 1, 8192, 32, 8, 64, 132, 4, SIZE_MAX);
  EXPECT_EQ(b8.warps, dec::kWideWarps);
  EXPECT_EQ(b8.splits, 2);
  EXPECT_EQ(b8.blocks_per_split, 256);
  // B1, 32k and 8k: 132 / 8 KV heads = 16 splits (narrow: 33, two per SM, and 16).
  for (int64_t sk : {32768, 8192}) {
    const dec::Plan b1 = dec::make_plan(1, 1, sk, 32, 8, 64, 132, 4, SIZE_MAX);
    EXPECT_EQ(b1.warps, dec::kWideWarps);
    EXPECT_EQ(b1.splits, 16);
  }
  // Units enough to fill the GPU without splits: narrow CTAs (B32 GQA, B8 MHA).
  for (int64_t hkv : {8, 32}) {
    const dec::Plan full = dec::make_plan(hkv == 8 ? 32 : 8, 1, 1024, 32, hkv, 64, 132, 4, SIZE_MAX);
    EXPECT_EQ(full.splits, 1);
    EXPECT_EQ(full.warps, dec::kWarps);
  }
  // Several one-tile CTAs on a KV head (Sq 8 x 8 query heads: 4 row tiles) are wide, two per SM
  // (B1: 264 / 32 units = 8 splits); two row tiles in a CTA stay narrow.
  const dec::Plan shared = dec::make_plan(1, 8, 8192, 64, 8, 64, 132, 4, SIZE_MAX);
  EXPECT_EQ(shared.warps, dec::kWideWarps);
  EXPECT_EQ(shared.splits, 8);
  EXPECT_EQ(dec::make_plan(8, 4, 8192, 64, 8, 64, 132, 4, SIZE_MAX).warps, dec::kWarps);
  // d = 128 has no wide CTAs and holds kWaveBytesInFlight alone: one per SM (B8 8k: 2 splits).
  const dec::Plan d128 = dec::make_plan(8, 1, 8192, 32, 8, 128, 132, 2, SIZE_MAX);
  EXPECT_EQ(d128.warps, dec::kWarps);
  EXPECT_EQ(d128.splits, 2);
  // One narrow CTA fits an SM (a small shared memory): no wide one does.
  const dec::Plan small = dec::make_plan(8, 1, 8192, 32, 8, 64, 132, 1, SIZE_MAX);
  EXPECT_EQ(small.warps, dec::kWarps);
  EXPECT_EQ(small.splits, 2);
  // Short walks stay narrow: B1 1k, 64 blocks in 8 splits, 2 steps a warp (< kMinStepsForWide).
  const dec::Plan short_keys = dec::make_plan(1, 1, 1024, 32, 8, 64, 132, 4, SIZE_MAX);
  EXPECT_EQ(short_keys.warps, dec::kWarps);
  EXPECT_EQ(short_keys.splits, 8);
  // A wide split is never shorter than kMinBlocksPerWarp blocks per warp.
  for (int64_t sk : {4096, 8192, 100000})
    for (int64_t batch : {1, 2, 4}) {
      const dec::Plan p = dec::make_plan(batch, 1, sk, 32, 8, 64, 132, 4, SIZE_MAX);
      if (p.warps == dec::kWideWarps && p.splits > 1) {
        EXPECT_GE(p.blocks_per_split, dec::kWideWarps * dec::kMinBlocksPerWarp);
      }
    }
}

TEST(DecodePlan, WaveRule) {
  // (d, paged, row tiles, CTAs that fit an SM) -> CTAs per SM in the wave.
  EXPECT_EQ(dec::wave_ctas_per_sm(128, 1, 2), 1);
  EXPECT_EQ(dec::wave_ctas_per_sm(64, 1, 4), 2);  // a d = 64 CTA keeps half of kWaveBytesInFlight
  EXPECT_EQ(dec::wave_ctas_per_sm(64, 1, 2, dec::kWideWarps), 1);  // a wide one all of it
  EXPECT_EQ(dec::wave_ctas_per_sm(64, 4, 2, dec::kWideWarps), 2);
  EXPECT_EQ(dec::wave_ctas_per_sm(64, 1, 1), 1);
  EXPECT_EQ(dec::wave_ctas_per_sm(96, 1, 3), 1);
  EXPECT_EQ(dec::wave_ctas_per_sm(256, 1, 1), 1);
  EXPECT_EQ(dec::wave_ctas_per_sm(128, 2, 2), 2);
  EXPECT_EQ(dec::wave_ctas_per_sm(64, 8, 4), 3);  // several CTAs on one (batch, KV head): at most 3
  EXPECT_EQ(dec::wave_ctas_per_sm(64, 2, 2), 2);
}

TEST(DecodePlan, WorkspaceLimitsTheSplits) {
  const dec::Plan full = dec::make_plan(1, 1, 1 << 16, 32, 8, 128, 132, 2, SIZE_MAX);
  ASSERT_GT(full.splits, 2);
  const dec::Plan none = dec::make_plan(1, 1, 1 << 16, 32, 8, 128, 132, 2, 0);
  EXPECT_EQ(none.splits, 1);
  EXPECT_EQ(none.workspace_bytes, 0u);
  const dec::Plan half = dec::make_plan(1, 1, 1 << 16, 32, 8, 128, 132, 2, full.workspace_bytes / 2);
  EXPECT_GT(half.splits, 1);
  EXPECT_LE(half.workspace_bytes, full.workspace_bytes / 2);
}

TEST(DecodePlan, FewSplitsCombineInACluster) {
  const int hopper = dec::cluster_limit_for(9, 0, false);
  EXPECT_EQ(hopper, dec::kMaxClusterSplits);
  EXPECT_EQ(dec::cluster_limit_for(8, 0, false), 0);   // Ampere: no clusters
  EXPECT_EQ(dec::cluster_limit_for(10, 0, false), 0);  // a newer GPU runs the compute_80 PTX
  EXPECT_EQ(dec::cluster_limit_for(9, 66, false), 0);  // an SM budget launches in chunks
  EXPECT_EQ(dec::cluster_limit_for(9, 0, true), 0);    // TESSERA_ATTN_ARCH=80
  // B1 1k, GQA 32/8, d128: 8 splits of one tile -> one cluster each, no workspace; the same split
  // count as without clusters.
  const dec::Plan c = dec::make_plan(1, 1, 1024, 32, 8, 128, 132, 2, SIZE_MAX, -1, hopper);
  const dec::Plan g = dec::make_plan(1, 1, 1024, 32, 8, 128, 132, 2, SIZE_MAX);
  EXPECT_EQ(c.splits, 8);
  EXPECT_EQ(c.splits, g.splits);
  EXPECT_EQ(c.ctas, g.ctas);
  EXPECT_TRUE(c.cluster_combine);
  EXPECT_EQ(c.workspace_bytes, 0u);
  EXPECT_FALSE(g.cluster_combine);
  EXPECT_GT(g.workspace_bytes, 0u);
  // No workspace given: the clusters keep their splits (without clusters, one split).
  EXPECT_EQ(dec::make_plan(1, 1, 1024, 32, 8, 128, 132, 2, 0, -1, hopper).splits, 8);
  EXPECT_EQ(dec::make_plan(1, 1, 1024, 32, 8, 128, 132, 2, 0).splits, 1);
  // (batch, Sq, Sk, Hq, Hkv, d, CTAs an SM fits) -> splits, and whether they combine in a cluster.
  struct Case {
    int64_t batch, sq, sk, hq, hkv;
    int d, per_sm, splits;
    bool cluster;
    const char* why;
  };
  const Case cases[] = {
      {1, 1, 8192, 32, 8, 128, 2, 16, false, "more splits than a cluster holds: the workspace combine"},
      {32, 1, 1024, 32, 8, 128, 2, 1, false, "one split: nothing to combine"},
      {8, 4, 32768, 64, 8, 128, 4, 2, true, "two row tiles in a CTA: both tiles' rows in the cluster"},
      {1, 4, 32768, 64, 8, 64, 4, 33, false, "two row tiles, 33 splits: the workspace combine"},
      {8, 1, 1024, 32, 8, 128, 2, 2, true, "pairs of splits: clusters of two"},
      {1, 1, 1024, 32, 32, 128, 2, 4, false, "4 splits x 32 units = 128 CTAs, a CTA a SM: over half the wave"},
      {8, 1, 32768, 64, 8, 64, 4, 2, true, "wide CTAs at d = 64, one a SM: pairs of splits"},
      {1, 1, 8192, 32, 8, 64, 4, 16, false, "wide CTAs, 16 splits: the workspace combine"},
      {8, 3, 1024, 16, 1, 64, 4, 8, true, "three one-tile CTAs per (batch, KV head), each tile its cluster"},
      {8, 3, 8192, 16, 1, 64, 4, 11, false, "the same with 8k keys: wide CTAs, two a SM, 11 splits"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.why);
    const dec::Plan p = dec::make_plan(c.batch, c.sq, c.sk, c.hq, c.hkv, c.d, 132, c.per_sm, SIZE_MAX, -1, hopper);
    EXPECT_EQ(p.splits, c.splits);
    EXPECT_EQ(p.cluster_combine, c.cluster);
    EXPECT_EQ(p.workspace_bytes, c.cluster ? 0 : dec::workspace_bytes(c.batch, c.hkv, p.row_tiles, p.splits, c.d));
  }
  // Every cluster plan: 2..kMaxClusterSplits splits, a whole number of clusters, no workspace; every
  // plan of 2 splits, or of few enough CTAs, is one. One row tile (Sq 1, 32/8), two in a CTA (Sq 4, 64/8: 32 packed rows), four one-tile CTAs (Sq 8, 64/8).
  for (int64_t sq : {1, 4, 8})
    for (int64_t sk : {1, 16, 100, 1024, 4096, 8192, 1 << 17})
      for (int64_t batch : {1, 2, 8, 64})
        for (int d : {64, 96, 128, 256}) {
          const int64_t hq = sq == 1 ? 32 : 64;
          const dec::Plan p =
              dec::make_plan(batch, sq, sk, hq, 8, d, 132, dec::ctas_per_sm(d, 228 * 1024), SIZE_MAX, -1, hopper);
          SCOPED_TRACE("sq " + std::to_string(sq) + " sk " + std::to_string(sk) + " batch " + std::to_string(batch) +
                       " d " + std::to_string(d));
          if (p.cluster_combine) {
            EXPECT_GE(p.splits, 2);
            EXPECT_LE(p.splits, dec::kMaxClusterSplits);
            EXPECT_EQ(p.ctas % p.splits, 0);
            EXPECT_EQ(p.workspace_bytes, 0u);
          }
          if (p.splits == 2 || (p.splits > 1 && p.splits <= dec::kMaxClusterSplits && p.ctas <= 66)) {
            EXPECT_TRUE(p.cluster_combine);
          }
          if (p.warps == dec::kWideWarps) {  // wide CTAs: d = 64, one tile each
            EXPECT_TRUE(dec::has_wide(d));
            EXPECT_EQ(p.tiles_per_cta, 1);
          }
        }
}

TEST(DecodePlan, SharedMemoryDecidesCtasPerSm) {
  EXPECT_EQ(dec::ctas_per_sm(128, 228 * 1024), 2);  // H100
  EXPECT_EQ(dec::ctas_per_sm(64, 228 * 1024), 4);
  EXPECT_EQ(dec::ctas_per_sm(256, 228 * 1024), 1);
  // A wide d = 64 CTA: two per SM, as its kernel's launch bounds assume (at most 128 registers).
  EXPECT_EQ(228 * 1024 / (dec::smem_bytes(64, 1, dec::kWideWarps) + 1024), 2);
  EXPECT_EQ(dec::ctas_per_sm(128, 100 * 1024), 0);  // sm_86/89: the prefill family runs instead
}

TEST(DecodePlan, EveryCtaShapeCountsItsCtasPerSmOneWay) {
  // The counts make_plan fills waves with are the ones the kernels are built for (Traits::kMinCtasPerSm
  // at kHopperSmemPerSm): narrow CTAs by shared memory, two-tile CTAs a tile's share, wide CTAs the
  // narrow ones' memory.
  const int hopper = dec::kHopperSmemPerSm;
  EXPECT_EQ(dec::shape_ctas_per_sm(64, 1, dec::kWarps, dec::ctas_per_sm(64, hopper)), 4);
  EXPECT_EQ(dec::shape_ctas_per_sm(64, 2, dec::kWarps, dec::ctas_per_sm(64, hopper)), 2);
  EXPECT_EQ(dec::shape_ctas_per_sm(64, 1, dec::kWideWarps, dec::ctas_per_sm(64, hopper)), 2);
  EXPECT_EQ(dec::shape_ctas_per_sm(96, 1, dec::kWarps, dec::ctas_per_sm(96, hopper)), 3);
  EXPECT_EQ(dec::shape_ctas_per_sm(128, 2, dec::kWarps, dec::ctas_per_sm(128, hopper)), 1);
  EXPECT_EQ(dec::shape_ctas_per_sm(256, 1, dec::kWarps, dec::ctas_per_sm(256, hopper)), 1);
  // A100 (164 KB): fewer narrow CTAs, and never fewer than one two-tile CTA.
  EXPECT_EQ(dec::shape_ctas_per_sm(64, 1, dec::kWarps, dec::ctas_per_sm(64, 164 * 1024)), 3);
  EXPECT_EQ(dec::shape_ctas_per_sm(128, 2, dec::kWarps, dec::ctas_per_sm(128, 164 * 1024)), 1);
  // The plan runs wide CTAs only where one fits: with room for a single narrow CTA, none does.
  EXPECT_EQ(dec::shape_ctas_per_sm(64, 1, dec::kWideWarps, 1), 0);
}

TEST(DecodeKvRows, PagedAddressesSplitIntoPageAndRow) {
  // A paged cache [pages, page_size, Hkv, D]: key j of a batch lives in page table[j / page_size],
  // row j % page_size. The decode kernel resolves (page, row) once per 32 steps and a step computes
  // at_page; both must land where `at` and `offset` do, out-of-range entries clamped to real pages.
  const int table[] = {3, 0, 7, 2, -1, 99};
  dec::KvRows paged;
  paged.row = 8 * 64;             // Hkv x D elements between keys in a page
  paged.page = 48 * paged.row;    // page_size x the row
  paged.table = table;
  paged.page_size = 48;
  paged.last_page = 7;
  EXPECT_EQ(paged.page_of(-1), 0);
  EXPECT_EQ(paged.page_of(99), 7);
  EXPECT_EQ(paged.page_of(5), 5);
  for (int64_t j = 0; j < 6 * 48; j += 16) {  // the kernel's 16-key blocks, never across a page
    const int entry = table[j / 48];
    const int64_t want = int64_t(paged.page_of(entry)) * paged.page + (j % 48) * paged.row;
    EXPECT_EQ(paged.at(entry, j), want) << "key " << j;
    EXPECT_EQ(paged.offset(j), want) << "key " << j;
    EXPECT_EQ(paged.at_page(paged.page_of(entry), int(j % 48)), want) << "key " << j;
  }
  // A contiguous cache: page 0 and the key itself as the row.
  dec::KvRows flat;
  flat.row = 8 * 128;
  for (int64_t j : {0, 16, 4096, 131072 - 16}) {
    EXPECT_EQ(flat.at(0, j), j * flat.row);
    EXPECT_EQ(flat.at_page(0, int(j)), j * flat.row);
  }
}
