// CPU tests of attention_varlen's argument rules, through the C++ entry, its workspace query and the
// C ABI: each bad argument is INVALID_ARGUMENT with a message naming it, before any device is touched
// (made-up aligned device addresses, never dereferenced); host buffers standing in for O and LSE stay
// byte-for-byte unwritten; the C struct round trip; the dispatch overrides.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "tessera/tessera.h"
#include "tessera/tessera.hpp"

namespace {

using tessera::DType;
using tessera::Status;
using tessera::VarlenArgs;

const void* at(uintptr_t tb) { return reinterpret_cast<const void*>(tb << 40); }

constexpr int64_t kB = 3, kTotalQ = 300, kTotalK = 500, kHq = 8, kHkv = 2, kD = 128;

// A valid call: 3 sequences packed in q [300, 8, 128], k/v [500, 2, 128], with LSE.
VarlenArgs valid_args() {
  VarlenArgs a;
  a.q = at(1);
  a.k = at(2);
  a.v = at(3);
  a.o = const_cast<void*>(at(4));
  a.lse = static_cast<float*>(const_cast<void*>(at(5)));
  a.cu_seqlens_q = static_cast<const int32_t*>(at(6));
  a.cu_seqlens_k = static_cast<const int32_t*>(at(7));
  a.dtype = DType::F16;
  a.batch = kB;
  a.total_q = kTotalQ;
  a.total_k = kTotalK;
  a.max_seqlen_q = 200;
  a.max_seqlen_k = 300;
  a.heads_q = kHq;
  a.heads_kv = kHkv;
  a.head_dim = kD;
  tessera::packed_strides(kHq, kD, a.q_stride);
  tessera::packed_strides(kHkv, kD, a.k_stride);
  tessera::packed_strides(kHkv, kD, a.v_stride);
  tessera::packed_strides(kHq, kD, a.o_stride);
  a.causal = true;
  return a;
}

template <class T>
T* misalign(T* p, uintptr_t bytes) {
  return reinterpret_cast<T*>(reinterpret_cast<uintptr_t>(p) + bytes);
}

const int32_t* as_cu(const void* p) { return static_cast<const int32_t*>(p); }

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

// Every entry refuses `a` with INVALID_ARGUMENT and a message containing `needle`.
void expect_invalid(const VarlenArgs& a, const std::string& needle) {
  const Status s = tessera::attention_varlen(a, nullptr);
  EXPECT_EQ(s.code, TESSERA_STATUS_INVALID_ARGUMENT) << s.message;
  EXPECT_TRUE(contains(s.message, needle));
  size_t bytes = 12345;
  const Status w = tessera::attention_varlen_workspace_size(a, &bytes);
  EXPECT_EQ(w.code, TESSERA_STATUS_INVALID_ARGUMENT) << w.message;
  EXPECT_EQ(w.message, s.message);
  EXPECT_EQ(bytes, 12345u) << "a refused query wrote *bytes";
  const tessera_varlen_args_t c = tessera::to_c(a);
  EXPECT_EQ(tessera_attention_varlen(&c, nullptr, 0, nullptr), TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(tessera_last_error(), needle));
  EXPECT_EQ(tessera_attention_varlen_workspace_size(&c, &bytes), TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(tessera_last_error(), needle));
}

TEST(VarlenValidate, ValidArgsPass) {
  size_t bytes = 12345;
  Status s = tessera::attention_varlen_workspace_size(valid_args(), &bytes);
  EXPECT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(bytes, 0u);  // the prefill kernels need none
  // Without LSE, one cu_seqlens array for both, bf16, MQA, max_seqlen 0 (nothing to compute), a
  // window and a softcap, strided views of a packed QKV buffer.
  VarlenArgs a = valid_args();
  a.lse = nullptr;
  a.cu_seqlens_k = a.cu_seqlens_q;
  a.dtype = DType::BF16;
  a.heads_kv = 1;
  tessera::packed_strides(1, kD, a.k_stride);
  tessera::packed_strides(1, kD, a.v_stride);
  a.max_seqlen_q = a.max_seqlen_k = 0;
  a.window_left = 100;
  a.window_right = 0;
  a.softcap = 30.0f;
  s = tessera::attention_varlen_workspace_size(a, &bytes);
  EXPECT_TRUE(s.ok()) << s.message;
  VarlenArgs p = valid_args();
  p.total_k = p.total_q;
  const int64_t row = (kHq + 2 * kHkv) * kD;  // [total, Hq + 2 Hkv, D]
  p.k = static_cast<const char*>(p.q) + kHq * kD * 2;
  p.v = static_cast<const char*>(p.q) + (kHq + kHkv) * kD * 2;
  p.q_stride[0] = p.k_stride[0] = p.v_stride[0] = row;
  s = tessera::attention_varlen_workspace_size(p, &bytes);
  EXPECT_TRUE(s.ok()) << s.message;
  // A max_seqlen_q beyond total_q bounds nothing more (no sequence is longer than total_q).
  a = valid_args();
  a.max_seqlen_q = int64_t(1) << 40;
  s = tessera::attention_varlen_workspace_size(a, &bytes);
  EXPECT_TRUE(s.ok()) << s.message;
}

TEST(VarlenValidate, Sizes) {
  struct Field {
    const char* name;
    int64_t VarlenArgs::*field;
  };
  const Field sizes[] = {{"batch", &VarlenArgs::batch},       {"total_q", &VarlenArgs::total_q},
                         {"total_k", &VarlenArgs::total_k},   {"heads_q", &VarlenArgs::heads_q},
                         {"heads_kv", &VarlenArgs::heads_kv}, {"head_dim", &VarlenArgs::head_dim}};
  for (const Field& f : sizes) {
    for (int64_t v : {int64_t(0), int64_t(-1), std::numeric_limits<int64_t>::min()}) {
      SCOPED_TRACE(std::string(f.name) + " = " + std::to_string(v));
      VarlenArgs a = valid_args();
      a.*f.field = v;
      expect_invalid(a, std::string(f.name) + ": must be >= 1");
    }
    VarlenArgs a = valid_args();
    a.*f.field = int64_t(1) << 31;
    expect_invalid(a, std::string(f.name) + ": must be <= 2^31");
  }
  for (int64_t VarlenArgs::*f : {&VarlenArgs::max_seqlen_q, &VarlenArgs::max_seqlen_k}) {
    VarlenArgs a = valid_args();
    a.*f = -1;
    expect_invalid(a, f == &VarlenArgs::max_seqlen_q ? "max_seqlen_q: must be >= 0" : "max_seqlen_k: must be >= 0");
  }
}

TEST(VarlenValidate, GridLimit) {
  // One CTA per (query block of 64 rows of the longest sequence, head, sequence): 2^31 - 1 at most.
  VarlenArgs a = valid_args();
  a.batch = int64_t(1) << 20;
  a.heads_kv = 1;
  a.heads_q = 1 << 10;
  tessera::packed_strides(a.heads_q, kD, a.q_stride);
  tessera::packed_strides(a.heads_q, kD, a.o_stride);
  tessera::packed_strides(1, kD, a.k_stride);
  tessera::packed_strides(1, kD, a.v_stride);
  a.max_seqlen_q = 64;  // 2^30 blocks
  a.lse = nullptr;
  size_t bytes = 0;
  const Status s = tessera::attention_varlen_workspace_size(a, &bytes);
  EXPECT_TRUE(s.ok()) << s.message;
  a.max_seqlen_q = 129;  // 3 * 2^30
  expect_invalid(a, "query blocks");
  a.max_seqlen_q = 0;  // no CTA at all
  EXPECT_TRUE(tessera::attention_varlen_workspace_size(a, &bytes).ok());
}

TEST(VarlenValidate, Rules) {
  struct Rule {
    const char* what;
    void (*mutate)(VarlenArgs&);
    const char* message;
  };
  const Rule rules[] = {
      {"dtype f32", [](VarlenArgs& a) { a.dtype = DType::F32; }, "dtype"},
      {"dtype out of range", [](VarlenArgs& a) { a.dtype = static_cast<DType>(7); }, "dtype"},
      {"head_dim 80", [](VarlenArgs& a) { a.head_dim = 80; }, "head_dim: 80 is not supported"},
      {"heads_kv not dividing heads_q", [](VarlenArgs& a) { a.heads_kv = 3; }, "heads_kv: must divide heads_q"},
      {"negative scale", [](VarlenArgs& a) { a.softmax_scale = -1.0f; }, "softmax_scale"},
      {"NaN scale", [](VarlenArgs& a) { a.softmax_scale = std::nanf(""); }, "softmax_scale"},
      {"window_left -2", [](VarlenArgs& a) { a.window_left = -2; }, "window_left"},
      {"window_right -3", [](VarlenArgs& a) { a.window_right = -3; }, "window_right"},
      {"negative softcap", [](VarlenArgs& a) { a.softcap = -1.0f; }, "softcap"},
      {"infinite softcap", [](VarlenArgs& a) { a.softcap = INFINITY; }, "softcap"},
      {"negative max_sms", [](VarlenArgs& a) { a.max_sms = -1; }, "max_sms"},
      {"null cu_seqlens_q", [](VarlenArgs& a) { a.cu_seqlens_q = nullptr; }, "cu_seqlens_q: null pointer"},
      {"null cu_seqlens_k", [](VarlenArgs& a) { a.cu_seqlens_k = nullptr; }, "cu_seqlens_k: null pointer"},
      {"misaligned cu_seqlens_q", [](VarlenArgs& a) { a.cu_seqlens_q = misalign(a.cu_seqlens_q, 2); },
       "cu_seqlens_q: must be 4-byte aligned"},
      {"misaligned cu_seqlens_k", [](VarlenArgs& a) { a.cu_seqlens_k = misalign(a.cu_seqlens_k, 1); },
       "cu_seqlens_k: must be 4-byte aligned"},
      {"null q", [](VarlenArgs& a) { a.q = nullptr; }, "q: null pointer"},
      {"null k", [](VarlenArgs& a) { a.k = nullptr; }, "k: null pointer"},
      {"null v", [](VarlenArgs& a) { a.v = nullptr; }, "v: null pointer"},
      {"null o", [](VarlenArgs& a) { a.o = nullptr; }, "o: null pointer"},
      {"misaligned k", [](VarlenArgs& a) { a.k = static_cast<const char*>(a.k) + 8; }, "k: must be 16-byte aligned"},
      {"q token stride not a multiple of 8", [](VarlenArgs& a) { a.q_stride[0] += 4; }, "q_stride[0] (token)"},
      {"v head stride not a multiple of 8", [](VarlenArgs& a) { a.v_stride[1] = 12; }, "v_stride[1] (head)"},
      {"negative k token stride", [](VarlenArgs& a) { a.k_stride[0] = -a.k_stride[0]; }, "k_stride[0] (token)"},
      {"o heads overlap", [](VarlenArgs& a) { a.o_stride[1] = 8; }, "o_stride"},
      {"o rows overlap", [](VarlenArgs& a) { a.o_stride[0] = 0; }, "o_stride"},
      {"misaligned lse", [](VarlenArgs& a) { a.lse = misalign(a.lse, 2); }, "lse: must be 4-byte aligned"},
      {"o over k", [](VarlenArgs& a) { a.o = const_cast<void*>(a.k); }, "o: overlaps k"},
      {"lse inside o", [](VarlenArgs& a) { a.lse = static_cast<float*>(a.o) + 64; }, "lse: overlaps o"},
      {"o over cu_seqlens_q", [](VarlenArgs& a) { a.cu_seqlens_q = static_cast<const int32_t*>(a.o) + 1000; },
       "o: overlaps cu_seqlens_q"},
      {"lse over cu_seqlens_k", [](VarlenArgs& a) { a.cu_seqlens_k = as_cu(a.lse + kTotalQ * kHq - 2); },
       "lse: overlaps cu_seqlens_k"},
  };
  for (const Rule& r : rules) {
    SCOPED_TRACE(r.what);
    VarlenArgs a = valid_args();
    r.mutate(a);
    expect_invalid(a, r.message);
  }
  // The last entry of cu_seqlens (batch + 1 of them) next to LSE's last element: no overlap.
  VarlenArgs a = valid_args();
  a.cu_seqlens_k = as_cu(a.lse + kTotalQ * kHq);
  size_t bytes = 0;
  EXPECT_TRUE(tessera::attention_varlen_workspace_size(a, &bytes).ok());
  a.cu_seqlens_k = as_cu(a.lse - (kB + 1));
  EXPECT_TRUE(tessera::attention_varlen_workspace_size(a, &bytes).ok());
  a.cu_seqlens_k = as_cu(a.lse - kB);  // its last entry is LSE's first
  expect_invalid(a, "lse: overlaps cu_seqlens_k");
}

TEST(VarlenValidate, NullArgsAndBytes) {
  EXPECT_EQ(tessera_attention_varlen(nullptr, nullptr, 0, nullptr), TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(tessera_last_error(), "args: null pointer"));
  size_t bytes = 0;
  EXPECT_EQ(tessera_attention_varlen_workspace_size(nullptr, &bytes), TESSERA_STATUS_INVALID_ARGUMENT);
  const tessera_varlen_args_t c = tessera::to_c(valid_args());
  EXPECT_EQ(tessera_attention_varlen_workspace_size(&c, nullptr), TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(tessera_last_error(), "bytes: null pointer"));
}

TEST(VarlenValidate, Workspace) {
  const VarlenArgs a = valid_args();
  Status s = tessera::attention_varlen(a, nullptr, nullptr, 256);
  EXPECT_EQ(s.code, TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(s.message, "workspace: null pointer"));
  if (!has_cuda_device()) {  // an aligned workspace passes, up to the missing device
    s = tessera::attention_varlen(a, nullptr, const_cast<void*>(at(9)), 0);
    EXPECT_EQ(s.code, TESSERA_STATUS_CUDA_ERROR) << s.message;
  }
  s = tessera::attention_varlen(a, nullptr, static_cast<char*>(const_cast<void*>(at(9))) + 64, 256);
  EXPECT_EQ(s.code, TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(s.message, "workspace: must be 256-byte aligned"));
}

// A refused call writes nothing: host memory standing in for O and LSE (validation refuses before
// anything could be launched or copied) keeps every byte.
TEST(VarlenValidate, RefusedCallWritesNothing) {
  std::vector<uint16_t> o(size_t(kTotalQ * kHq * kD) + 64, 0xABCD);
  std::vector<float> lse(size_t(kTotalQ * kHq) + 16, 1.25f);
  const std::vector<uint16_t> o_before = o;
  const std::vector<float> lse_before = lse;
  auto aligned = [](void* p, size_t align) {
    return reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(p) + align - 1) / align * align);
  };
  VarlenArgs a = valid_args();
  a.o = aligned(o.data(), 16);
  a.lse = static_cast<float*>(aligned(lse.data(), 16));
  for (void (*bad)(VarlenArgs&) : {+[](VarlenArgs& x) { x.head_dim = 72; }, +[](VarlenArgs& x) { x.heads_kv = 3; },
                                   +[](VarlenArgs& x) { x.cu_seqlens_k = nullptr; },
                                   +[](VarlenArgs& x) { x.max_seqlen_q = -5; }}) {
    VarlenArgs b = a;
    bad(b);
    EXPECT_EQ(tessera::attention_varlen(b, nullptr).code, TESSERA_STATUS_INVALID_ARGUMENT);
    const tessera_varlen_args_t c = tessera::to_c(b);
    EXPECT_EQ(tessera_attention_varlen(&c, nullptr, 0, nullptr), TESSERA_STATUS_INVALID_ARGUMENT);
  }
  EXPECT_TRUE(o == o_before) << "a refused call wrote O";
  EXPECT_TRUE(lse == lse_before) << "a refused call wrote LSE";
}

TEST(VarlenValidate, ValidCallWithoutDeviceIsACudaError) {
  if (has_cuda_device()) GTEST_SKIP() << "a device is present: the GPU tests run valid calls";
  const Status s = tessera::attention_varlen(valid_args(), nullptr);
  EXPECT_EQ(s.code, TESSERA_STATUS_CUDA_ERROR) << s.message;
  const tessera_varlen_args_t c = tessera::to_c(valid_args());
  EXPECT_EQ(tessera_attention_varlen(&c, nullptr, 0, nullptr), TESSERA_STATUS_CUDA_ERROR);
}

// The overrides are arguments too, checked before the device: a malformed one, a row of another
// head dim, and a valid one getting as far as the missing device.
TEST(VarlenValidate, Overrides) {
  struct Env {
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
  const VarlenArgs a = valid_args();  // head_dim 128
  {
    Env e("TESSERA_ATTN_ARCH", "86");
    const Status s = tessera::attention_varlen(a, nullptr);
    EXPECT_EQ(s.code, TESSERA_STATUS_INVALID_ARGUMENT) << s.message;
    EXPECT_TRUE(contains(s.message, "TESSERA_ATTN_ARCH"));
  }
  {
    Env e("TESSERA_ATTN_CONFIG", "fa2_sm80_d64_128x64_w4");
    const Status s = tessera::attention_varlen(a, nullptr);
    EXPECT_EQ(s.code, TESSERA_STATUS_INVALID_ARGUMENT) << s.message;
    EXPECT_TRUE(contains(s.message, "head_dim 64"));
  }
  if (!has_cuda_device()) {
    for (const char* ok : {"fa2_sm80_d128_128x32_w4", "fa_sm90_d128_128x128"}) {
      Env e("TESSERA_ATTN_CONFIG", ok);
      EXPECT_EQ(tessera::attention_varlen(a, nullptr).code, TESSERA_STATUS_CUDA_ERROR) << ok;
    }
  }
}

TEST(VarlenValidate, CAbiRoundTrip) {
  VarlenArgs a = valid_args();
  a.softmax_scale = 0.25f;
  a.window_left = 7;
  a.window_right = 3;
  a.softcap = 20.0f;
  a.max_sms = 11;
  a.q_stride[0] = 4096;
  a.o_stride[1] = 256;
  const VarlenArgs b = tessera::from_c(tessera::to_c(a));
  EXPECT_EQ(b.q, a.q);
  EXPECT_EQ(b.k, a.k);
  EXPECT_EQ(b.v, a.v);
  EXPECT_EQ(b.o, a.o);
  EXPECT_EQ(b.lse, a.lse);
  EXPECT_EQ(b.dtype, a.dtype);
  EXPECT_EQ(b.cu_seqlens_q, a.cu_seqlens_q);
  EXPECT_EQ(b.cu_seqlens_k, a.cu_seqlens_k);
  EXPECT_EQ(b.batch, a.batch);
  EXPECT_EQ(b.total_q, a.total_q);
  EXPECT_EQ(b.total_k, a.total_k);
  EXPECT_EQ(b.max_seqlen_q, a.max_seqlen_q);
  EXPECT_EQ(b.max_seqlen_k, a.max_seqlen_k);
  EXPECT_EQ(b.heads_q, a.heads_q);
  EXPECT_EQ(b.heads_kv, a.heads_kv);
  EXPECT_EQ(b.head_dim, a.head_dim);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(b.q_stride[i], a.q_stride[i]);
    EXPECT_EQ(b.k_stride[i], a.k_stride[i]);
    EXPECT_EQ(b.v_stride[i], a.v_stride[i]);
    EXPECT_EQ(b.o_stride[i], a.o_stride[i]);
  }
  EXPECT_EQ(b.softmax_scale, a.softmax_scale);
  EXPECT_EQ(b.causal, a.causal);
  EXPECT_EQ(b.window_left, a.window_left);
  EXPECT_EQ(b.window_right, a.window_right);
  EXPECT_EQ(b.softcap, a.softcap);
  EXPECT_EQ(b.max_sms, a.max_sms);
  a.causal = false;
  EXPECT_EQ(tessera::to_c(a).causal, 0);
  EXPECT_EQ(tessera::from_c(tessera::to_c(a)).causal, false);
}

}  // namespace
