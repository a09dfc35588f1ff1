// GPU tests of tessera::attention_with_kvcache: contiguous and paged caches (pages scattered by a
// random block table), per-sequence lengths (0, partial pages, full), new keys appended in place,
// causal, GQA, both dtypes, a CUDA graph and the C ABI. Every case:
//   - random cache contents at the valid positions and NaN everywhere else (a read past a sequence's
//     keys, or of a page it does not own, shows in O);
//   - after the call, the whole cache byte-for-byte equal to the expected one (the new keys at
//     cache_seqlens[b] .., nothing else written);
//   - O and LSE of each sequence against the fp32 GPU reference (tools/attention_gpu_reference.hpp)
//     on that sequence's keys gathered densely; a sequence with no keys: O = 0, LSE = -inf.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
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

struct KvCase {
  DType dtype = DType::BF16;
  int64_t batch = 3, sq = 1, hq = 8, hkv = 2, d = 128;
  int64_t page_size = 0;  // 0: contiguous
  int64_t capacity = 300;  // contiguous: positions per sequence; paged: max_pages * page_size >= this
  int64_t seqlen_new = 0;
  bool causal = false;
  bool graph = false, c_abi = false;
  int max_sms = 0;
};

std::string describe(const KvCase& c) {
  return std::string(c.dtype == DType::BF16 ? "bf16" : "f16") + " B" + std::to_string(c.batch) + " Sq" +
         std::to_string(c.sq) + " H" + std::to_string(c.hq) + "/" + std::to_string(c.hkv) + " d" + std::to_string(c.d) +
         (c.page_size ? " paged " + std::to_string(c.page_size) : " contiguous") + " cap" + std::to_string(c.capacity) +
         " new" + std::to_string(c.seqlen_new) + (c.causal ? " causal" : "") + (c.graph ? " graph" : "") +
         (c.c_abi ? " C-ABI" : "") + (c.max_sms ? " max_sms " + std::to_string(c.max_sms) : "");
}

#define KV_CUDA(x)                                                     \
  do {                                                                 \
    cudaError_t e_ = (x);                                              \
    ASSERT_EQ(e_, cudaSuccess) << #x << ": " << cudaGetErrorString(e_); \
  } while (0)

void run_case(const KvCase& c, uint64_t seed) {
  SCOPED_TRACE(describe(c) + " seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int64_t B = c.batch, Hkv = c.hkv, D = c.d, row = Hkv * D;  // elements per cache position
  const bool paged = c.page_size > 0;
  const int64_t max_pages = paged ? (c.capacity + c.page_size - 1) / c.page_size : 0;
  const int64_t cap = paged ? max_pages * c.page_size : c.capacity;
  const int64_t num_pages = paged ? B * max_pages + 3 : 0;  // spare pages nobody owns
  const int64_t outer = paged ? num_pages : B, seq = paged ? c.page_size : cap;
  const size_t cache_elems = size_t(outer * seq * row);

  // Lengths: 0, full, and random in between.
  std::vector<int32_t> lens(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t most = cap - c.seqlen_new;
    lens[size_t(b)] = int32_t(b == 0 ? 0 : b == 1 ? most : int64_t(rng() % uint64_t(most + 1)));
  }
  // Pages: a random permutation of all pages, sequence b's i-th page at table[b][i].
  std::vector<int32_t> table(size_t(std::max<int64_t>(1, B * max_pages)));
  std::vector<int32_t> perm(static_cast<size_t>(num_pages));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  for (size_t i = 0; i < size_t(B * max_pages); ++i) table[i] = perm[i];
  auto pos_offset = [&](int64_t b, int64_t j) -> int64_t {  // element offset of (b, position j, head 0)
    if (!paged) return (b * cap + j) * row;
    return (int64_t(table[size_t(b * max_pages + j / c.page_size)]) * c.page_size + j % c.page_size) * row;
  };

  // Device buffers, filled with random values (fill_uniform_4d), then the invalid positions poisoned.
  tt::DeviceBuffer kc, vc, q, kn, vn, o, lse, lens_d, table_d;
  const int64_t snew = std::max<int64_t>(c.seqlen_new, 1);
  KV_CUDA(kc.alloc(cache_elems * 2));
  KV_CUDA(vc.alloc(cache_elems * 2));
  KV_CUDA(q.alloc(size_t(B * c.sq * c.hq * D * 2)));
  KV_CUDA(kn.alloc(size_t(B * snew * row * 2)));
  KV_CUDA(vn.alloc(size_t(B * snew * row * 2)));
  KV_CUDA(o.alloc(size_t(B * c.sq * c.hq * D * 2)));
  KV_CUDA(lse.alloc(size_t(B * c.hq * c.sq * 4)));
  KV_CUDA(lens_d.alloc(lens.size() * 4));
  KV_CUDA(table_d.alloc(table.size() * 4));
  const int64_t cdims[4] = {outer, seq, Hkv, D}, cstr[4] = {seq * row, row, D, 1};
  const int64_t qdims[4] = {B, c.sq, c.hq, D}, qstr[4] = {c.sq * c.hq * D, c.hq * D, D, 1};
  const int64_t ndims[4] = {B, snew, Hkv, D}, nstr[4] = {snew * row, row, D, 1};
  KV_CUDA(tt::fill_uniform_4d(kc.p, c.dtype, cdims, cstr, tt::mix_seed(seed + 1), nullptr));
  KV_CUDA(tt::fill_uniform_4d(vc.p, c.dtype, cdims, cstr, tt::mix_seed(seed + 2), nullptr));
  KV_CUDA(tt::fill_uniform_4d(q.p, c.dtype, qdims, qstr, tt::mix_seed(seed + 3), nullptr));
  KV_CUDA(tt::fill_uniform_4d(kn.p, c.dtype, ndims, nstr, tt::mix_seed(seed + 4), nullptr));
  KV_CUDA(tt::fill_uniform_4d(vn.p, c.dtype, ndims, nstr, tt::mix_seed(seed + 5), nullptr));
  KV_CUDA(cudaDeviceSynchronize());
  std::vector<uint16_t> k_host(cache_elems), v_host(cache_elems), kn_host(size_t(B * snew * row)),
      vn_host(size_t(B * snew * row));
  KV_CUDA(cudaMemcpy(k_host.data(), kc.p, cache_elems * 2, cudaMemcpyDeviceToHost));
  KV_CUDA(cudaMemcpy(v_host.data(), vc.p, cache_elems * 2, cudaMemcpyDeviceToHost));
  KV_CUDA(cudaMemcpy(kn_host.data(), kn.p, kn_host.size() * 2, cudaMemcpyDeviceToHost));
  KV_CUDA(cudaMemcpy(vn_host.data(), vn.p, vn_host.size() * 2, cudaMemcpyDeviceToHost));
  // Valid: positions < lens[b] of each sequence. Everything else NaN (0xFFFF).
  std::vector<char> valid(static_cast<size_t>(outer * seq), 0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < lens[size_t(b)]; ++j) valid[size_t(pos_offset(b, j) / row)] = 1;
  for (size_t pidx = 0; pidx < valid.size(); ++pidx)
    if (!valid[pidx])
      for (int64_t e = 0; e < row; ++e) k_host[pidx * size_t(row) + size_t(e)] = v_host[pidx * size_t(row) + size_t(e)] = 0xFFFF;
  KV_CUDA(cudaMemcpy(kc.p, k_host.data(), cache_elems * 2, cudaMemcpyHostToDevice));
  KV_CUDA(cudaMemcpy(vc.p, v_host.data(), cache_elems * 2, cudaMemcpyHostToDevice));
  KV_CUDA(cudaMemcpy(lens_d.p, lens.data(), lens.size() * 4, cudaMemcpyHostToDevice));
  KV_CUDA(cudaMemcpy(table_d.p, table.data(), table.size() * 4, cudaMemcpyHostToDevice));
  KV_CUDA(cudaMemset(o.p, 0xFF, size_t(B * c.sq * c.hq * D * 2)));
  KV_CUDA(cudaMemset(lse.p, 0xFF, size_t(B * c.hq * c.sq * 4)));

  // The expected cache after the call: the new keys at lens[b] ...
  std::vector<uint16_t> k_expect = k_host, v_expect = v_host;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < c.seqlen_new; ++t) {
      const int64_t dst = pos_offset(b, lens[size_t(b)] + t), src = (b * snew + t) * row;
      std::copy_n(kn_host.begin() + src, row, k_expect.begin() + dst);
      std::copy_n(vn_host.begin() + src, row, v_expect.begin() + dst);
    }

  tessera::KvCacheArgs a;
  a.q = q.p;
  a.k_cache = kc.p;
  a.v_cache = vc.p;
  a.o = o.p;
  a.lse = static_cast<float*>(lse.p);
  a.dtype = c.dtype;
  a.batch = B;
  a.seqlen_q = c.sq;
  a.heads_q = c.hq;
  a.heads_kv = Hkv;
  a.head_dim = D;
  tessera::bshd_strides(c.sq, c.hq, D, a.q_stride);
  tessera::bshd_strides(c.sq, c.hq, D, a.o_stride);
  for (int64_t* s : {a.k_cache_stride, a.v_cache_stride}) {
    s[0] = seq * row;
    s[1] = row;
    s[2] = D;
  }
  a.capacity = paged ? 0 : cap;
  a.cache_seqlens = static_cast<const int32_t*>(lens_d.p);
  if (paged) {
    a.block_table = static_cast<const int32_t*>(table_d.p);
    a.block_table_stride = max_pages;
    a.max_pages = max_pages;
    a.num_pages = num_pages;
    a.page_size = c.page_size;
  }
  if (c.seqlen_new > 0) {
    a.k_new = kn.p;
    a.v_new = vn.p;
    a.seqlen_new = c.seqlen_new;
    tessera::bshd_strides(snew, Hkv, D, a.k_new_stride);
    tessera::bshd_strides(snew, Hkv, D, a.v_new_stride);
  }
  a.causal = c.causal;
  a.max_sms = c.max_sms;

  size_t ws_bytes = 0;
  ASSERT_TRUE(tessera::attention_with_kvcache_workspace_size(a, &ws_bytes).ok());
  tt::DeviceBuffer ws;
  if (ws_bytes) {
    KV_CUDA(ws.alloc(ws_bytes));
    KV_CUDA(cudaMemset(ws.p, 0xFF, ws_bytes));
  }
  cudaStream_t s = nullptr;
  KV_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  std::string problems;
  const tessera::Status st = tt::call_on_stream(s, c.graph, [&]() -> tessera::Status {
    if (!c.c_abi) return tessera::attention_with_kvcache(a, s, ws.p, ws_bytes);
    const tessera_kvcache_args_t ca = tessera::to_c(a);
    tessera::Status r;
    r.code = tessera_attention_with_kvcache(&ca, ws.p, ws_bytes, s);
    r.message = tessera_last_error();
    return r;
  }, &problems);
  KV_CUDA(cudaStreamSynchronize(s));
  cudaStreamDestroy(s);
  ASSERT_TRUE(problems.empty()) << problems;
  ASSERT_TRUE(st.ok()) << st.message;

  // The cache, byte for byte.
  std::vector<uint16_t> k_after(cache_elems), v_after(cache_elems);
  KV_CUDA(cudaMemcpy(k_after.data(), kc.p, cache_elems * 2, cudaMemcpyDeviceToHost));
  KV_CUDA(cudaMemcpy(v_after.data(), vc.p, cache_elems * 2, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(k_after == k_expect) << "k_cache differs from the expected cache after the append";
  EXPECT_TRUE(v_after == v_expect) << "v_cache differs from the expected cache after the append";

  // Each sequence against the reference on its keys, gathered densely.
  const int64_t o_seq = c.sq * c.hq * D;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = lens[size_t(b)] + c.seqlen_new;
    SCOPED_TRACE("sequence " + std::to_string(b) + " with " + std::to_string(n) + " keys");
    if (n == 0) {
      std::vector<uint16_t> ob(static_cast<size_t>(o_seq));
      std::vector<float> lb(size_t(c.hq * c.sq));
      KV_CUDA(cudaMemcpy(ob.data(), o.c() + b * o_seq * 2, ob.size() * 2, cudaMemcpyDeviceToHost));
      KV_CUDA(cudaMemcpy(lb.data(), lse.c() + b * c.hq * c.sq * 4, lb.size() * 4, cudaMemcpyDeviceToHost));
      EXPECT_TRUE(std::all_of(ob.begin(), ob.end(), [](uint16_t x) { return x == 0 || x == 0x8000; }))
          << "a sequence without keys must give O = 0";
      EXPECT_TRUE(std::all_of(lb.begin(), lb.end(), [](float x) { return std::isinf(x) && x < 0; }))
          << "a sequence without keys must give LSE = -inf";
      continue;
    }
    std::vector<uint16_t> kd(size_t(n * row)), vd(size_t(n * row));
    for (int64_t j = 0; j < n; ++j) {
      std::copy_n(k_expect.begin() + pos_offset(b, j), row, kd.begin() + j * row);
      std::copy_n(v_expect.begin() + pos_offset(b, j), row, vd.begin() + j * row);
    }
    tt::DeviceBuffer kd_d, vd_d, o32, olow, l32;
    KV_CUDA(kd_d.alloc(kd.size() * 2));
    KV_CUDA(vd_d.alloc(vd.size() * 2));
    KV_CUDA(cudaMemcpy(kd_d.p, kd.data(), kd.size() * 2, cudaMemcpyHostToDevice));
    KV_CUDA(cudaMemcpy(vd_d.p, vd.data(), vd.size() * 2, cudaMemcpyHostToDevice));
    KV_CUDA(o32.alloc(size_t(o_seq * 4)));
    KV_CUDA(olow.alloc(size_t(o_seq * 4)));
    KV_CUDA(l32.alloc(size_t(c.hq * c.sq * 4)));
    tessera::AttentionArgs r;
    r.q = q.c() + b * o_seq * 2;
    r.k = kd_d.p;
    r.v = vd_d.p;
    r.o = o.c() + b * o_seq * 2;
    r.lse = reinterpret_cast<float*>(lse.c() + b * c.hq * c.sq * 4);
    r.dtype = c.dtype;
    r.batch = 1;
    r.seqlen_q = c.sq;
    r.seqlen_k = n;
    r.heads_q = c.hq;
    r.heads_kv = Hkv;
    r.head_dim = D;
    tessera::bshd_strides(c.sq, c.hq, D, r.q_stride);
    tessera::bshd_strides(n, Hkv, D, r.k_stride);
    tessera::bshd_strides(n, Hkv, D, r.v_stride);
    tessera::bshd_strides(c.sq, c.hq, D, r.o_stride);
    r.causal = c.causal;
    KV_CUDA(tessera_ref::attention_reference(r, static_cast<float*>(o32.p), static_cast<float*>(olow.p),
                                             static_cast<float*>(l32.p), nullptr));
    tessera_ref::AttentionErrors err;
    KV_CUDA(tessera_ref::attention_compare(r, static_cast<float*>(o32.p), static_cast<float*>(olow.p),
                                           static_cast<float*>(l32.p), &err, nullptr));
    std::string why;
    EXPECT_TRUE(tessera_ref::attention_check(err, c.dtype, &why)) << why;
  }
}

class KvCache : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!tt::device_ok(&why)) GTEST_SKIP() << why;
  }
  static uint64_t seed() {
    const char* s = std::getenv("TESSERA_TEST_SEED");
    return s ? std::strtoull(s, nullptr, 10) : std::random_device{}();
  }
};

TEST_F(KvCache, ContiguousAndPaged) {
  // Page sizes 16 (the smallest), 64 and 256; lengths off and on page boundaries; decode (1 token)
  // and a speculative draft (5 tokens), with and without appended keys.
  int i = 0;
  for (int64_t page : {0, 16, 64, 256})
    for (int64_t d : {64, 128})
      for (int64_t sq : {1, 5})
        for (int64_t snew : {0, 1, 3}) {
          KvCase c;
          c.page_size = page;
          c.d = d;
          c.sq = sq;
          c.seqlen_new = snew;
          c.causal = (i % 2) == 1;
          c.dtype = (i % 3) == 0 ? DType::F16 : DType::BF16;
          c.capacity = (i % 2) ? 300 : 2048 + 7;
          c.hq = (i % 4) == 0 ? 4 : 8;
          c.hkv = (i % 4) == 0 ? 4 : 2;
          ++i;
          run_case(c, seed());
        }
}

TEST_F(KvCache, HeadDimsAndLongCaches) {
  for (int64_t d : {96, 256}) {
    KvCase c;
    c.d = d;
    c.page_size = 32;
    c.capacity = 5000;
    c.seqlen_new = 1;
    run_case(c, seed());
  }
  KvCase big;  // a long cache and one sequence: many key splits
  big.batch = 2;
  big.hq = 32;
  big.hkv = 8;
  big.capacity = 40000;
  big.page_size = 128;
  run_case(big, seed());
}

TEST_F(KvCache, GraphCAbiAndBudget) {
  KvCase c;
  c.page_size = 64;
  c.capacity = 3000;
  c.seqlen_new = 2;
  c.causal = true;
  c.graph = true;
  run_case(c, seed());
  c.graph = false;
  c.c_abi = true;
  run_case(c, seed());
  c.c_abi = false;
  c.max_sms = 5;
  run_case(c, seed());
}

TEST_F(KvCache, BadArgumentsAreRefusedWithoutWriting) {
  tessera::KvCacheArgs a;
  a.batch = 1;
  a.seqlen_q = 1;
  a.heads_q = a.heads_kv = 1;
  a.head_dim = 64;
  const tessera::Status s = tessera::attention_with_kvcache(a, nullptr);
  EXPECT_EQ(s.code, TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(s.message.find("cache_seqlens"), std::string::npos) << s.message;
}

}  // namespace
