// GPU tests of tessera::attention_varlen: packed batches of ragged sequences against the fp32 GPU
// reference (tools/attention_gpu_reference.hpp) run on each sequence alone, on every configuration
// row of both prefill families that the device runs (TESSERA_ATTN_CONFIG, re-read in-process). Every
// case:
//   - fresh random Q, K, V on the rows that belong to a sequence, NaN on every other row and on the
//     padding between rows and heads (a read of them shows in O);
//   - O and LSE poisoned with NaN inside guard bands;
//   - each sequence's rows against the reference on that sequence's rows alone (criterion of
//     attention_check: max|O - O32| <= 2 max|Olow - O32| + atol, |LSE - LSE32| <= 1e-3, -inf rows
//     matching); a sequence without keys: O = 0 and LSE = -inf exactly;
//   - rows of O and LSE outside every sequence, O's padding and the guard bands byte-for-byte
//     untouched (with lse = null, the whole LSE allocation).
// cu_seqlens breaking the documented rules (negative, decreasing, past the totals) are read as the
// kernels clamp them (attention/common.cuh: sequence_rows); rows two such sequences share are only
// checked to be finite.
//
// Replay a failure: TESSERA_TEST_SEED=<seed> tessera_gpu_tests --gtest_filter='AttnVarlen*'
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "attention_gpu_reference.hpp"
#include "gpu_helpers.hpp"
#include "harness.hpp"
#include "tessera/tessera.h"
#include "tessera/tessera.hpp"

namespace {

namespace tt = tessera_test;
using tessera::DType;

// ---- the configuration rows, both families (attention/configs.def) ------------------------------

struct ConfigRow {
  const char* name;
  int arch;  // 80, 90 (cp.async sm90) or 91 (sm90ws)
  int64_t d;
};
const ConfigRow kRows[] = {
#define TESSERA_ATTN_CONFIG(id, name, d, bm, bn, warps, reason) {name, 80, d},
#define TESSERA_ATTN_SM90_CONFIG(id, name, d, bm, bn, overlap, reason) {name, 90, d},
#define TESSERA_ATTN_SM90WS_CONFIG(id, name, d, bm, bn, stages, reason) {name, 91, d},
#include "attention/configs.def"
#undef TESSERA_ATTN_CONFIG
#undef TESSERA_ATTN_SM90_CONFIG
#undef TESSERA_ATTN_SM90WS_CONFIG
};

int device_cc() {
  int dev = 0, major = 0, minor = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  return major * 10 + minor;
}

// The rows of head dim d the device runs (the sm90 families only on cc 9.0), then "" (the default
// dispatch, whatever TESSERA_ATTN_ARCH the process was started with).
std::vector<std::string> configs_for(int64_t d) {
  std::vector<std::string> v;
  for (const ConfigRow& r : kRows)
    if (r.d == d && (r.arch == 80 || device_cc() == 90)) v.push_back(r.name);
  v.push_back("");
  return v;
}

// TESSERA_ATTN_CONFIG for one scope (the library reads the environment once: re-read it).
class ConfigOverride {
 public:
  explicit ConfigOverride(const std::string& name) {
    if (const char* old = std::getenv("TESSERA_ATTN_CONFIG")) old_ = old;
    if (name.empty())
      ::unsetenv("TESSERA_ATTN_CONFIG");
    else
      ::setenv("TESSERA_ATTN_CONFIG", name.c_str(), 1);
    tessera::reread_environment();
  }
  ~ConfigOverride() {
    if (old_)
      ::setenv("TESSERA_ATTN_CONFIG", old_->c_str(), 1);
    else
      ::unsetenv("TESSERA_ATTN_CONFIG");
    tessera::reread_environment();
  }
  ConfigOverride(const ConfigOverride&) = delete;
  ConfigOverride& operator=(const ConfigOverride&) = delete;

 private:
  std::optional<std::string> old_;
};

// ---- one case -------------------------------------------------------------------------------

struct VarlenCase {
  DType dtype = DType::BF16;
  int64_t hq = 4, hkv = 2, d = 128;
  std::vector<int32_t> cu_q, cu_k;  // as passed; may break the rules (clamped on the device)
  int64_t total_q = -1, total_k = -1;  // -1: the last cu entry
  int64_t max_seqlen_q = -1;           // -1: the longest (clamped) query sequence
  bool causal = false;
  int64_t window_left = -1, window_right = -1;
  float softcap = 0.0f, scale = 0.0f;
  bool with_lse = true;
  bool padded = false;  // token and head strides with padding in Q, K, V and O
  std::string config;   // TESSERA_ATTN_CONFIG ("" = the default dispatch)
  bool graph = false, c_abi = false;
  int max_sms = 0;
};

// Cumulative offsets of `lens`, starting at `first` (0 as documented; > 0 leaves rows before it).
std::vector<int32_t> cumulative(const std::vector<int32_t>& lens, int32_t first = 0) {
  std::vector<int32_t> cu{first};
  for (int32_t n : lens) cu.push_back(cu.back() + n);
  return cu;
}

std::string describe(const VarlenCase& c) {
  auto list = [](const std::vector<int32_t>& v) {
    std::string s;
    for (int32_t x : v) s += (s.empty() ? "" : ",") + std::to_string(x);
    return "[" + s + "]";
  };
  std::string s = std::string(tt::dtype_name(c.dtype)) + " H" + std::to_string(c.hq) + "/" + std::to_string(c.hkv) +
                  " d" + std::to_string(c.d) + " cu_q " + list(c.cu_q) + " cu_k " + list(c.cu_k);
  if (c.total_q >= 0) s += " total_q " + std::to_string(c.total_q);
  if (c.total_k >= 0) s += " total_k " + std::to_string(c.total_k);
  if (c.max_seqlen_q >= 0) s += " max_seqlen_q " + std::to_string(c.max_seqlen_q);
  if (c.causal) s += " causal";
  if (c.window_left >= 0 || c.window_right >= 0)
    s += " window (" + std::to_string(c.window_left) + "," + std::to_string(c.window_right) + ")";
  if (c.softcap > 0.0f) s += " softcap " + std::to_string(c.softcap);
  if (c.scale > 0.0f) s += " scale " + std::to_string(c.scale);
  if (!c.with_lse) s += " lse=null";
  if (c.padded) s += " padded";
  s += " config " + (c.config.empty() ? std::string("default") : c.config);
  if (c.graph) s += " graph";
  if (c.c_abi) s += " C-ABI";
  if (c.max_sms) s += " max_sms " + std::to_string(c.max_sms);
  return s;
}

// Sequence b's rows as the kernels read them: [clamp(cu[b], 0, total), clamp(cu[b + 1], start, total)).
struct Span {
  int64_t start, len;
};
Span span_of(const std::vector<int32_t>& cu, size_t b, int64_t total) {
  const int64_t s = std::min<int64_t>(std::max<int64_t>(cu[b], 0), total);
  const int64_t e = std::min<int64_t>(std::max<int64_t>(cu[b + 1], s), total);
  return {s, e - s};
}

#define VL_CUDA(x)                                                     \
  do {                                                                 \
    cudaError_t e_ = (x);                                              \
    ASSERT_EQ(e_, cudaSuccess) << #x << ": " << cudaGetErrorString(e_); \
  } while (0)

// One packed [total, heads, D] operand: element (t, h, i) at t * tok + h * head + i.
struct Packed {
  int64_t total, heads, tok, head;
};

void run_case(const VarlenCase& c, uint64_t seed) {
  SCOPED_TRACE(describe(c) + " seed " + std::to_string(seed));
  ASSERT_EQ(c.cu_q.size(), c.cu_k.size());
  ASSERT_GE(c.cu_q.size(), 2u);
  const size_t B = c.cu_q.size() - 1;
  const int64_t D = c.d, Hq = c.hq, Hkv = c.hkv;
  const int64_t total_q = c.total_q >= 0 ? c.total_q : c.cu_q.back();
  const int64_t total_k = c.total_k >= 0 ? c.total_k : c.cu_k.back();
  const size_t es = tt::dtype_bytes(c.dtype);
  std::vector<Span> sq(B), sk(B);
  int64_t longest = 0;
  for (size_t b = 0; b < B; ++b) {
    sq[b] = span_of(c.cu_q, b, total_q);
    sk[b] = span_of(c.cu_k, b, total_k);
    longest = std::max(longest, sq[b].len);
  }
  const int64_t max_q = c.max_seqlen_q >= 0 ? c.max_seqlen_q : longest;
  int64_t max_k = 0;
  for (const Span& s : sk) max_k = std::max(max_k, s.len);

  // Layouts: contiguous [total, H, D], or padded rows and heads.
  const int64_t pad_head = c.padded ? 8 : 0, pad_tok = c.padded ? 24 : 0;
  const Packed q{total_q, Hq, Hq * (D + pad_head) + pad_tok, D + pad_head};
  const Packed k{total_k, Hkv, Hkv * (D + pad_head) + pad_tok, D + pad_head};
  const Packed o = q;
  const size_t q_elems = size_t(total_q * q.tok), k_elems = size_t(total_k * k.tok);

  // Inputs: NaN everywhere, then random values on the elements of the rows some sequence covers.
  tt::DeviceBuffer qb, kb, vb, cuq_d, cuk_d;
  VL_CUDA(qb.alloc(q_elems * es));
  VL_CUDA(kb.alloc(k_elems * es));
  VL_CUDA(vb.alloc(k_elems * es));
  for (tt::DeviceBuffer* x : {&qb, &kb, &vb}) VL_CUDA(cudaMemset(x->p, tt::kPoisonByte, x->bytes));
  auto covered = [&](const std::vector<Span>& spans, int64_t total) {
    std::vector<int> n(size_t(std::max<int64_t>(total, 1)), 0);  // sequences covering each row
    for (const Span& s : spans)
      for (int64_t r = s.start; r < s.start + s.len; ++r) ++n[size_t(r)];
    return n;
  };
  const std::vector<int> q_cover = covered(sq, total_q), k_cover = covered(sk, total_k);
  auto fill_rows = [&](tt::DeviceBuffer& buf, const Packed& t, const std::vector<int>& cover, uint64_t s) {
    for (int64_t r = 0; r < t.total;) {  // each maximal run of covered rows
      if (!cover[size_t(r)]) {
        ++r;
        continue;
      }
      int64_t e = r;
      while (e < t.total && cover[size_t(e)]) ++e;
      const int64_t dims[4] = {1, e - r, t.heads, D}, strides[4] = {0, t.tok, t.head, 1};
      if (tt::fill_uniform_4d(buf.c() + size_t(r * t.tok) * es, c.dtype, dims, strides, tt::mix_seed(s + uint64_t(r)),
                              nullptr) != cudaSuccess)
        return false;
      r = e;
    }
    return true;
  };
  ASSERT_TRUE(fill_rows(qb, q, q_cover, seed * 3 + 1));
  ASSERT_TRUE(fill_rows(kb, k, k_cover, seed * 3 + 2));
  ASSERT_TRUE(fill_rows(vb, k, k_cover, seed * 3 + 3));
  VL_CUDA(cuq_d.alloc(c.cu_q.size() * 4));
  VL_CUDA(cuk_d.alloc(c.cu_k.size() * 4));
  VL_CUDA(cudaMemcpy(cuq_d.p, c.cu_q.data(), c.cu_q.size() * 4, cudaMemcpyHostToDevice));
  VL_CUDA(cudaMemcpy(cuk_d.p, c.cu_k.data(), c.cu_k.size() * 4, cudaMemcpyHostToDevice));

  // O and LSE: NaN inside guard bands.
  const size_t o_bytes = q_elems * es, l_bytes = size_t(Hq * total_q) * 4, G = tt::kGuardBytes;
  tt::DeviceBuffer ob, lb;
  VL_CUDA(ob.alloc(o_bytes + 2 * G));
  VL_CUDA(lb.alloc(l_bytes + 2 * G));
  for (tt::DeviceBuffer* x : {&ob, &lb}) {
    VL_CUDA(cudaMemset(x->p, tt::kPoisonByte, x->bytes));
    VL_CUDA(tt::fill_guard(x->p, G, uint32_t(seed), nullptr));
    VL_CUDA(tt::fill_guard(x->c() + x->bytes - G, G, uint32_t(seed >> 32), nullptr));
  }
  VL_CUDA(cudaDeviceSynchronize());
  std::string problems;
  const std::vector<uint8_t> o_before = tt::to_host(ob, nullptr, &problems);
  const std::vector<uint8_t> l_before = tt::to_host(lb, nullptr, &problems);
  ASSERT_TRUE(problems.empty()) << problems;

  tessera::VarlenArgs a;
  a.q = qb.p;
  a.k = kb.p;
  a.v = vb.p;
  a.o = ob.c() + G;
  a.lse = c.with_lse ? reinterpret_cast<float*>(lb.c() + G) : nullptr;
  a.dtype = c.dtype;
  a.cu_seqlens_q = static_cast<const int32_t*>(cuq_d.p);
  a.cu_seqlens_k = static_cast<const int32_t*>(cuk_d.p);
  a.batch = int64_t(B);
  a.total_q = total_q;
  a.total_k = total_k;
  a.max_seqlen_q = max_q;
  a.max_seqlen_k = max_k;
  a.heads_q = Hq;
  a.heads_kv = Hkv;
  a.head_dim = D;
  a.q_stride[0] = a.o_stride[0] = q.tok;
  a.q_stride[1] = a.o_stride[1] = q.head;
  a.k_stride[0] = a.v_stride[0] = k.tok;
  a.k_stride[1] = a.v_stride[1] = k.head;
  a.softmax_scale = c.scale;
  a.causal = c.causal;
  a.window_left = c.window_left;
  a.window_right = c.window_right;
  a.softcap = c.softcap;
  a.max_sms = c.max_sms;

  size_t ws_bytes = 1;
  ASSERT_TRUE(tessera::attention_varlen_workspace_size(a, &ws_bytes).ok());
  EXPECT_EQ(ws_bytes, 0u);
  cudaStream_t s = nullptr;
  VL_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  tessera::Status st;
  {
    const ConfigOverride cfg(c.config);
    st = tt::call_on_stream(s, c.graph, [&]() -> tessera::Status {
      if (!c.c_abi) return tessera::attention_varlen(a, s);
      const tessera_varlen_args_t ca = tessera::to_c(a);
      tessera::Status r;
      r.code = tessera_attention_varlen(&ca, nullptr, 0, s);
      r.message = tessera_last_error();
      return r;
    }, &problems);
    VL_CUDA(cudaStreamSynchronize(s));
  }
  cudaStreamDestroy(s);
  VL_CUDA(cudaGetLastError());
  ASSERT_TRUE(problems.empty()) << problems;
  ASSERT_TRUE(st.ok()) << st.message;

  const std::vector<uint8_t> o_after = tt::to_host(ob, nullptr, &problems);
  const std::vector<uint8_t> l_after = tt::to_host(lb, nullptr, &problems);
  ASSERT_TRUE(problems.empty()) << problems;
  auto o_elem = [&](int64_t t, int64_t h, int64_t i) {
    return tt::host_value(&o_after[G + size_t(t * o.tok + h * o.head + i) * es], c.dtype);
  };
  auto lse_at = [&](int64_t h, int64_t t) {
    float x;
    std::memcpy(&x, &l_after[G + size_t(h * total_q + t) * 4], 4);
    return x;
  };

  // Bytes that are not elements of a covered row, and guard bands: untouched.
  {
    std::vector<char> may_write(o_after.size(), 0);
    for (int64_t t = 0; t < total_q; ++t)
      if (q_cover[size_t(t)])
        for (int64_t h = 0; h < Hq; ++h)
          std::memset(&may_write[G + size_t(t * o.tok + h * o.head) * es], 1, size_t(D) * es);
    size_t hits = 0, first = SIZE_MAX;
    for (size_t i = 0; i < o_after.size(); ++i)
      if (!may_write[i] && o_after[i] != o_before[i]) {
        ++hits;
        first = std::min(first, i);
      }
    EXPECT_EQ(hits, 0u) << hits << " bytes of O outside every sequence's rows (guards, padding, uncovered rows) "
                        << "written; the first at byte " << long(first) - long(G) << " relative to O";
    std::vector<char> lse_may(l_after.size(), 0);
    if (c.with_lse)
      for (int64_t h = 0; h < Hq; ++h)
        for (int64_t t = 0; t < total_q; ++t)
          if (q_cover[size_t(t)]) std::memset(&lse_may[G + size_t(h * total_q + t) * 4], 1, 4);
    hits = 0;
    for (size_t i = 0; i < l_after.size(); ++i) hits += !lse_may[i] && l_after[i] != l_before[i];
    EXPECT_EQ(hits, 0u) << hits << " bytes of LSE outside every sequence's rows written"
                        << (c.with_lse ? "" : " (lse = null)");
  }

  // Each sequence against the reference on its rows alone.
  for (size_t b = 0; b < B; ++b) {
    const Span qs = sq[b], ks = sk[b];
    if (qs.len == 0) continue;
    SCOPED_TRACE("sequence " + std::to_string(b) + ": rows " + std::to_string(qs.start) + " + " +
                 std::to_string(qs.len) + ", keys " + std::to_string(ks.start) + " + " + std::to_string(ks.len));
    auto owned = [&](int64_t r) { return q_cover[size_t(qs.start + r)] == 1; };
    if (ks.len == 0) {  // no keys: O = 0, LSE = -inf
      for (int64_t r = 0; r < qs.len; ++r) {
        if (!owned(r)) continue;
        for (int64_t h = 0; h < Hq; ++h) {
          for (int64_t i = 0; i < D; ++i)
            ASSERT_EQ(o_elem(qs.start + r, h, i), 0.0) << "row " << r << " head " << h << ": no keys, O must be 0";
          if (c.with_lse) {
            const float l = lse_at(h, qs.start + r);
            ASSERT_TRUE(std::isinf(l) && l < 0) << "row " << r << " head " << h << ": no keys, LSE " << l;
          }
        }
      }
      continue;
    }
    tessera::AttentionArgs r;
    r.q = qb.c() + size_t(qs.start * q.tok) * es;
    r.k = kb.c() + size_t(ks.start * k.tok) * es;
    r.v = vb.c() + size_t(ks.start * k.tok) * es;
    r.dtype = c.dtype;
    r.batch = 1;
    r.seqlen_q = qs.len;
    r.seqlen_k = ks.len;
    r.heads_q = Hq;
    r.heads_kv = Hkv;
    r.head_dim = D;
    r.q_stride[1] = q.tok;
    r.q_stride[2] = q.head;
    r.k_stride[1] = r.v_stride[1] = k.tok;
    r.k_stride[2] = r.v_stride[2] = k.head;
    r.softmax_scale = c.scale;
    r.causal = c.causal;
    r.window_left = c.window_left;
    r.window_right = c.window_right;
    r.softcap = c.softcap;
    const size_t n_out = size_t(qs.len * Hq * D), n_lse = size_t(Hq * qs.len);
    tt::DeviceBuffer o32, olow, l32;
    VL_CUDA(o32.alloc(n_out * 4));
    VL_CUDA(olow.alloc(n_out * 4));
    VL_CUDA(l32.alloc(n_lse * 4));
    VL_CUDA(tessera_ref::attention_reference(r, static_cast<float*>(o32.p), static_cast<float*>(olow.p),
                                             static_cast<float*>(l32.p), nullptr));
    VL_CUDA(cudaDeviceSynchronize());
    std::vector<float> h32(n_out), hlow(n_out), hl(n_lse);
    VL_CUDA(cudaMemcpy(h32.data(), o32.p, n_out * 4, cudaMemcpyDeviceToHost));
    VL_CUDA(cudaMemcpy(hlow.data(), olow.p, n_out * 4, cudaMemcpyDeviceToHost));
    VL_CUDA(cudaMemcpy(hl.data(), l32.p, n_lse * 4, cudaMemcpyDeviceToHost));
    tessera_ref::AttentionErrors err;
    err.lse_checked = c.with_lse;
    int64_t shared_nonfinite = 0;
    for (int64_t row = 0; row < qs.len; ++row)
      for (int64_t h = 0; h < Hq; ++h) {
        for (int64_t i = 0; i < D; ++i) {
          const double x = o_elem(qs.start + row, h, i), ref = h32[size_t((row * Hq + h) * D + i)];
          if (!owned(row)) {  // another sequence writes this row too: either result may stand
            shared_nonfinite += !std::isfinite(x);
            continue;
          }
          if (!std::isfinite(x)) {
            ++err.nonfinite;
            continue;
          }
          if (std::fabs(x - ref) > err.max_err) {
            err.max_err = std::fabs(x - ref);
            err.worst_index = uint64_t((row * Hq + h) * D + i);
          }
          err.max_err_lowp = std::max(err.max_err_lowp, std::fabs(double(hlow[size_t((row * Hq + h) * D + i)]) - ref));
          err.max_ref = std::max(err.max_ref, std::fabs(ref));
        }
        if (!c.with_lse || !owned(row)) continue;
        const double got = lse_at(h, qs.start + row), want = hl[size_t(h * qs.len + row)];
        if (std::isnan(got) || std::isinf(got) != std::isinf(want) || (std::isinf(got) && got != want)) {
          ++err.lse_bad;
        } else if (!std::isinf(got) && std::fabs(got - want) > err.max_lse_err) {
          err.max_lse_err = std::fabs(got - want);
          err.lse_worst_row = uint64_t(h * qs.len + row);
        }
      }
    EXPECT_EQ(shared_nonfinite, 0) << "rows shared with another sequence hold NaN/Inf";
    std::string why;
    EXPECT_TRUE(tessera_ref::attention_check(err, c.dtype, &why))
        << why << "\n  max|O-ref32| " << err.max_err << " at (row, head, i) index " << err.worst_index
        << ", max|O_lowp-ref32| " << err.max_err_lowp << ", max|dLSE| " << err.max_lse_err;
  }
}

class AttnVarlen : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!tt::device_ok(&why)) GTEST_SKIP() << why;
  }
  static uint64_t seed() { return tt::fresh_seed(); }
};

const int64_t kHeadDims[] = {64, 96, 128, 256};

// Ragged lengths: 0 (with and without keys), 1, around and off the 64/128-row and 32/64/128-key
// blocks, Sq > Sk and Sq < Sk; rows before the first sequence (cu_q[0] > 0) and after the last.
TEST_F(AttnVarlen, RaggedEveryConfiguration) {
  const std::vector<int32_t> lq = {0, 1, 77, 128, 300, 5, 129, 64, 0, 33};
  const std::vector<int32_t> lk = {10, 0, 200, 128, 257, 5, 64, 1000, 0, 1};
  int i = 0;
  for (int64_t d : kHeadDims)
    for (const std::string& cfg : configs_for(d))
      for (bool causal : {false, true}) {
        VarlenCase c;
        c.d = d;
        c.config = cfg;
        c.causal = causal;
        c.dtype = i % 2 ? DType::F16 : DType::BF16;
        c.hq = i % 3 == 0 ? 8 : 4;
        c.hkv = i % 3 == 0 ? 2 : (i % 3 == 1 ? 4 : 1);
        c.padded = i % 2 == 1;
        c.cu_q = cumulative(lq, i % 2 ? 3 : 0);
        c.cu_k = cumulative(lk, i % 2 ? 0 : 7);
        c.total_q = c.cu_q.back() + (i % 3) * 9;  // rows after the last sequence
        c.total_k = c.cu_k.back() + (i % 2) * 40;
        ++i;
        run_case(c, seed());
      }
}

// Windows and softcaps per sequence (bottom-right aligned to each sequence's own lengths).
TEST_F(AttnVarlen, WindowsAndSoftcap) {
  struct W {
    int64_t left, right;
    float softcap;
  };
  const W windows[] = {{64, -1, 0.0f}, {-1, 20, 30.0f}, {37, 21, 0.0f}, {0, 0, 2.0f}, {300, 0, 0.0f}, {-1, -1, 30.0f},
                       {5000, 5000, 0.0f}};
  const std::vector<int32_t> lq = {200, 1, 0, 150, 31, 500};
  const std::vector<int32_t> lk = {200, 300, 9, 20, 31, 700};
  int i = 0;
  for (int64_t d : kHeadDims)
    for (const std::string& cfg : configs_for(d)) {
      if (cfg.empty()) continue;  // the default dispatch is one of the rows
      for (const W& w : windows) {
        VarlenCase c;
        c.d = d;
        c.config = cfg;
        c.window_left = w.left;
        c.window_right = w.right;
        c.softcap = w.softcap;
        c.scale = w.softcap == 2.0f ? 0.5f : 0.0f;
        c.causal = i % 2 == 1;
        c.dtype = i % 3 == 0 ? DType::F16 : DType::BF16;
        c.hq = 6;
        c.hkv = i % 2 ? 3 : 1;
        c.cu_q = cumulative(lq);
        c.cu_k = cumulative(lk);
        ++i;
        run_case(c, seed());
      }
    }
}

// Many sequences of random lengths (0 .. 600), GQA 16/2; one long causal sequence among short ones.
TEST_F(AttnVarlen, ManyAndLongSequences) {
  const uint64_t s = seed();  // the lengths too: TESSERA_TEST_SEED replays them
  std::mt19937 rng{uint32_t(s)};
  std::vector<int32_t> lq(40), lk(40);
  for (size_t b = 0; b < lq.size(); ++b) {
    lq[b] = int32_t(rng() % 601);
    lk[b] = b % 4 == 0 ? lq[b] : int32_t(rng() % 601);
  }
  for (const std::string& cfg : configs_for(128)) {
    VarlenCase c;
    c.hq = 16;
    c.hkv = 2;
    c.causal = true;
    c.config = cfg;
    c.cu_q = cumulative(lq);
    c.cu_k = cumulative(lk);
    run_case(c, s);
  }
  VarlenCase c;
  c.d = 64;
  c.hq = c.hkv = 2;
  c.causal = true;
  c.dtype = DType::F16;
  c.cu_q = cumulative({3, 4100, 17});
  c.cu_k = cumulative({3, 4100, 1000});
  run_case(c, seed());
}

// Equal lengths give exactly what the fixed-length entry gives on the same memory seen as [B, S, H, D]:
// the same kernel visits the same blocks in the same order.
TEST_F(AttnVarlen, EqualLengthsMatchFixedLengthBitwise) {
  const int64_t B = 3, S = 300, Hq = 8, Hkv = 2;
  for (int64_t d : {64, 128})
    for (const std::string& cfg : configs_for(d))
      for (bool causal : {false, true}) {
        SCOPED_TRACE("d" + std::to_string(d) + " " + (cfg.empty() ? "default" : cfg) + (causal ? " causal" : ""));
        const uint64_t s = seed();
        tt::DeviceBuffer q, k, v, o1, o2, l1, l2, cu;
        const size_t nq = size_t(B * S * Hq * d), nk = size_t(B * S * Hkv * d);
        VL_CUDA(q.alloc(nq * 2));
        VL_CUDA(k.alloc(nk * 2));
        VL_CUDA(v.alloc(nk * 2));
        VL_CUDA(o1.alloc(nq * 2));
        VL_CUDA(o2.alloc(nq * 2));
        VL_CUDA(l1.alloc(size_t(B * Hq * S) * 4));
        VL_CUDA(l2.alloc(size_t(B * Hq * S) * 4));
        VL_CUDA(cu.alloc(size_t(B + 1) * 4));
        const int64_t qd[4] = {1, B * S, Hq, d}, qs[4] = {0, Hq * d, d, 1};
        const int64_t kd[4] = {1, B * S, Hkv, d}, ks[4] = {0, Hkv * d, d, 1};
        VL_CUDA(tt::fill_uniform_4d(q.p, DType::BF16, qd, qs, tt::mix_seed(s + 1), nullptr));
        VL_CUDA(tt::fill_uniform_4d(k.p, DType::BF16, kd, ks, tt::mix_seed(s + 2), nullptr));
        VL_CUDA(tt::fill_uniform_4d(v.p, DType::BF16, kd, ks, tt::mix_seed(s + 3), nullptr));
        for (tt::DeviceBuffer* x : {&o1, &o2, &l1, &l2}) VL_CUDA(cudaMemset(x->p, 0xFF, x->bytes));
        const std::vector<int32_t> cu_h = cumulative(std::vector<int32_t>(B, int32_t(S)));
        VL_CUDA(cudaMemcpy(cu.p, cu_h.data(), cu_h.size() * 4, cudaMemcpyHostToDevice));

        tessera::AttentionArgs f;
        f.q = q.p;
        f.k = k.p;
        f.v = v.p;
        f.o = o1.p;
        f.lse = static_cast<float*>(l1.p);
        f.dtype = DType::BF16;
        f.batch = B;
        f.seqlen_q = f.seqlen_k = S;
        f.heads_q = Hq;
        f.heads_kv = Hkv;
        f.head_dim = d;
        tessera::bshd_strides(S, Hq, d, f.q_stride);
        tessera::bshd_strides(S, Hkv, d, f.k_stride);
        tessera::bshd_strides(S, Hkv, d, f.v_stride);
        tessera::bshd_strides(S, Hq, d, f.o_stride);
        f.causal = causal;
        tessera::VarlenArgs a;
        a.q = q.p;
        a.k = k.p;
        a.v = v.p;
        a.o = o2.p;
        a.lse = static_cast<float*>(l2.p);
        a.dtype = DType::BF16;
        a.cu_seqlens_q = a.cu_seqlens_k = static_cast<const int32_t*>(cu.p);
        a.batch = B;
        a.total_q = a.total_k = B * S;
        a.max_seqlen_q = a.max_seqlen_k = S;
        a.heads_q = Hq;
        a.heads_kv = Hkv;
        a.head_dim = d;
        tessera::packed_strides(Hq, d, a.q_stride);
        tessera::packed_strides(Hkv, d, a.k_stride);
        tessera::packed_strides(Hkv, d, a.v_stride);
        tessera::packed_strides(Hq, d, a.o_stride);
        a.causal = causal;
        {
          const ConfigOverride override_(cfg);
          const tessera::Status fs = tessera::attention(f, nullptr);
          ASSERT_TRUE(fs.ok()) << fs.message;
          const tessera::Status vs = tessera::attention_varlen(a, nullptr);
          ASSERT_TRUE(vs.ok()) << vs.message;
          VL_CUDA(cudaDeviceSynchronize());
        }
        // LSE: [B, Hq, S] against [Hq, B * S].
        std::vector<uint16_t> h1(nq), h2(nq);
        std::vector<float> lf(size_t(B * Hq * S)), lv(lf.size());
        VL_CUDA(cudaMemcpy(h1.data(), o1.p, nq * 2, cudaMemcpyDeviceToHost));
        VL_CUDA(cudaMemcpy(h2.data(), o2.p, nq * 2, cudaMemcpyDeviceToHost));
        VL_CUDA(cudaMemcpy(lf.data(), l1.p, lf.size() * 4, cudaMemcpyDeviceToHost));
        VL_CUDA(cudaMemcpy(lv.data(), l2.p, lv.size() * 4, cudaMemcpyDeviceToHost));
        EXPECT_TRUE(h1 == h2) << "O differs from the fixed-length entry's";
        size_t lse_diff = 0;
        for (int64_t b = 0; b < B; ++b)
          for (int64_t h = 0; h < Hq; ++h)
            for (int64_t t = 0; t < S; ++t)
              lse_diff += std::memcmp(&lf[size_t((b * Hq + h) * S + t)], &lv[size_t(h * B * S + b * S + t)], 4) != 0;
        EXPECT_EQ(lse_diff, 0u) << "LSE entries differ from the fixed-length entry's";
      }
}

// cu_seqlens that break the rules, read as the kernels clamp them: a negative first offset, a
// decreasing step (an empty sequence, then one overlapping an earlier one), offsets past the totals.
// Nothing outside the tensors is touched, and every row one sequence owns is that sequence's result.
TEST_F(AttnVarlen, BadCuSeqlensAreClamped) {
  for (const std::string& cfg : configs_for(128)) {
    VarlenCase c;
    c.config = cfg;
    c.hq = 4;
    c.hkv = 2;
    c.causal = true;
    c.total_q = 300;
    c.total_k = 400;
    c.cu_q = {-7, 40, 30, 250, 100000};  // [0,40) [40,40) [30,250) [250,300)
    c.cu_k = {0, 60, 5, 900, -3};        // [0,60) [60,60) [5,400) [400,400)
    c.max_seqlen_q = 300;
    run_case(c, seed());
  }
}

// A CUDA graph, the C ABI, an SM budget, no LSE, an explicit scale and max_seqlen_q above the longest
// sequence, and everything in one sequence.
TEST_F(AttnVarlen, GraphCAbiBudgetNoLse) {
  const std::vector<int32_t> lq = {100, 0, 257, 1}, lk = {100, 40, 257, 300};
  for (int variant = 0; variant < 6; ++variant) {
    VarlenCase c;
    c.d = variant % 2 ? 96 : 256;
    c.causal = variant % 2 == 0;
    c.cu_q = cumulative(lq);
    c.cu_k = cumulative(lk);
    c.graph = variant == 0;
    c.c_abi = variant == 1;
    c.max_sms = variant == 2 ? 3 : 0;
    c.with_lse = variant != 3;
    if (variant == 4) {
      c.scale = 0.3f;
      c.max_seqlen_q = 1000;
    }
    if (variant == 5) {
      c.cu_q = {0, 513};
      c.cu_k = {0, 700};
    }
    run_case(c, seed());
  }
}

// Invalid arguments on real memory: refused, O and LSE untouched.
TEST_F(AttnVarlen, RefusedWithoutWriting) {
  const int64_t T = 64, H = 2, D = 64;
  tt::DeviceBuffer q, o, l, cu;
  VL_CUDA(q.alloc(size_t(T * H * D) * 2));
  VL_CUDA(o.alloc(size_t(T * H * D) * 2));
  VL_CUDA(l.alloc(size_t(T * H) * 4));
  VL_CUDA(cu.alloc(8));
  const int32_t cu_h[2] = {0, int32_t(T)};
  VL_CUDA(cudaMemcpy(cu.p, cu_h, 8, cudaMemcpyHostToDevice));
  VL_CUDA(cudaMemset(q.p, 0x3C, q.bytes));
  VL_CUDA(cudaMemset(o.p, 0xFF, o.bytes));
  VL_CUDA(cudaMemset(l.p, 0xFF, l.bytes));
  tessera::VarlenArgs a;
  a.q = a.k = a.v = q.p;
  a.o = o.p;
  a.lse = static_cast<float*>(l.p);
  a.cu_seqlens_q = a.cu_seqlens_k = static_cast<const int32_t*>(cu.p);
  a.batch = 1;
  a.total_q = a.total_k = a.max_seqlen_q = a.max_seqlen_k = T;
  a.heads_q = a.heads_kv = H;
  a.head_dim = D;
  tessera::packed_strides(H, D, a.q_stride);
  tessera::packed_strides(H, D, a.k_stride);
  tessera::packed_strides(H, D, a.v_stride);
  tessera::packed_strides(H, D, a.o_stride);
  ASSERT_TRUE(tessera::attention_varlen(a, nullptr).ok());  // the valid call runs
  VL_CUDA(cudaDeviceSynchronize());
  std::vector<uint8_t> o_ref(o.bytes), l_ref(l.bytes);
  VL_CUDA(cudaMemset(o.p, 0xFF, o.bytes));
  VL_CUDA(cudaMemset(l.p, 0xFF, l.bytes));
  VL_CUDA(cudaMemcpy(o_ref.data(), o.p, o.bytes, cudaMemcpyDeviceToHost));
  VL_CUDA(cudaMemcpy(l_ref.data(), l.p, l.bytes, cudaMemcpyDeviceToHost));
  struct Rule {
    void (*mutate)(tessera::VarlenArgs&);
    const char* message;
  };
  const Rule rules[] = {
      {[](tessera::VarlenArgs& x) { x.head_dim = 80; }, "head_dim"},
      {[](tessera::VarlenArgs& x) { x.heads_kv = 3; }, "heads_kv"},
      {[](tessera::VarlenArgs& x) { x.cu_seqlens_k = nullptr; }, "cu_seqlens_k"},
      {[](tessera::VarlenArgs& x) { x.max_seqlen_q = -1; }, "max_seqlen_q"},
      {[](tessera::VarlenArgs& x) { x.o = const_cast<void*>(x.q); }, "o: overlaps q"},
      {[](tessera::VarlenArgs& x) { x.k_stride[0] = 12; }, "k_stride[0]"},
      {[](tessera::VarlenArgs& x) { x.window_right = -4; }, "window_right"},
      {[](tessera::VarlenArgs& x) { x.softcap = -2.0f; }, "softcap"},
      {[](tessera::VarlenArgs& x) { x.total_q = 0; }, "total_q"},
  };
  for (bool c_abi : {false, true})
    for (const Rule& r : rules) {
      tessera::VarlenArgs b = a;
      r.mutate(b);
      tessera::Status st;
      if (c_abi) {
        const tessera_varlen_args_t ca = tessera::to_c(b);
        st.code = tessera_attention_varlen(&ca, nullptr, 0, nullptr);
        st.message = tessera_last_error();
      } else {
        st = tessera::attention_varlen(b, nullptr);
      }
      EXPECT_EQ(st.code, TESSERA_STATUS_INVALID_ARGUMENT) << r.message << ": " << st.message;
      EXPECT_NE(st.message.find(r.message), std::string::npos) << st.message;
    }
  VL_CUDA(cudaDeviceSynchronize());
  std::vector<uint8_t> o_after(o.bytes), l_after(l.bytes);
  VL_CUDA(cudaMemcpy(o_after.data(), o.p, o.bytes, cudaMemcpyDeviceToHost));
  VL_CUDA(cudaMemcpy(l_after.data(), l.p, l.bytes, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(o_after == o_ref) << "a refused call wrote O";
  EXPECT_TRUE(l_after == l_ref) << "a refused call wrote LSE";
}

// An sm90 row off Hopper is refused as not supported, before anything is written.
TEST_F(AttnVarlen, Sm90RowOffHopperIsNotSupported) {
  if (device_cc() == 90) GTEST_SKIP() << "cc 9.0 runs the sm90 rows";
  const ConfigOverride cfg("fa_sm90_d128_128x128");
  tessera::VarlenArgs a;
  tt::DeviceBuffer q, o, cu;
  VL_CUDA(q.alloc(64 * 128 * 2));
  VL_CUDA(o.alloc(64 * 128 * 2));
  VL_CUDA(cu.alloc(8));
  VL_CUDA(cudaMemset(cu.p, 0, 8));
  a.q = a.k = a.v = q.p;
  a.o = o.p;
  a.cu_seqlens_q = a.cu_seqlens_k = static_cast<const int32_t*>(cu.p);
  a.batch = a.heads_q = a.heads_kv = 1;
  a.total_q = a.total_k = a.max_seqlen_q = 64;
  a.head_dim = 128;
  tessera::packed_strides(1, 128, a.q_stride);
  tessera::packed_strides(1, 128, a.k_stride);
  tessera::packed_strides(1, 128, a.v_stride);
  tessera::packed_strides(1, 128, a.o_stride);
  const tessera::Status s = tessera::attention_varlen(a, nullptr);
  EXPECT_EQ(s.code, TESSERA_STATUS_NOT_SUPPORTED) << s.message;
  EXPECT_NE(s.message.find("sm_90a"), std::string::npos) << s.message;
}

}  // namespace
