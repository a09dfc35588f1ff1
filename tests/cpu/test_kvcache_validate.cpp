// CPU tests of attention_with_kvcache's argument rules (no device: made-up aligned addresses; every
// case is refused before anything launches) and of the C ABI round trip.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "tessera/tessera.h"
#include "tessera/tessera.hpp"

namespace {

using tessera::KvCacheArgs;
using tessera::Status;

const void* at(uintptr_t tb) { return reinterpret_cast<const void*>(tb << 40); }

// A valid paged call: q [2, 1, 8, 128], pages [10, 64, 2, 128], block table [2, 4].
KvCacheArgs valid_paged() {
  KvCacheArgs a;
  a.q = at(1);
  a.k_cache = const_cast<void*>(at(2));
  a.v_cache = const_cast<void*>(at(3));
  a.o = const_cast<void*>(at(4));
  a.batch = 2;
  a.seqlen_q = 1;
  a.heads_q = 8;
  a.heads_kv = 2;
  a.head_dim = 128;
  tessera::bshd_strides(1, 8, 128, a.q_stride);
  tessera::bshd_strides(1, 8, 128, a.o_stride);
  tessera::bshd_strides(64, 2, 128, a.k_cache_stride);
  tessera::bshd_strides(64, 2, 128, a.v_cache_stride);
  a.cache_seqlens = static_cast<const int32_t*>(at(5));
  a.block_table = static_cast<const int32_t*>(at(6));
  a.block_table_stride = 4;
  a.max_pages = 4;
  a.num_pages = 10;
  a.page_size = 64;
  return a;
}

void expect_invalid(const KvCacheArgs& a, const std::string& needle) {
  const Status s = tessera::attention_with_kvcache(a, nullptr);
  EXPECT_EQ(s.code, TESSERA_STATUS_INVALID_ARGUMENT) << s.message;
  EXPECT_NE(s.message.find(needle), std::string::npos) << "\"" << s.message << "\" lacks \"" << needle << "\"";
  size_t bytes = 0;
  EXPECT_EQ(tessera::attention_with_kvcache_workspace_size(a, &bytes).code, TESSERA_STATUS_INVALID_ARGUMENT);
  const tessera_kvcache_args_t c = tessera::to_c(a);
  EXPECT_EQ(tessera_attention_with_kvcache(&c, nullptr, 0, nullptr), TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tessera_last_error()).find(needle), std::string::npos);
}

TEST(KvCacheValidate, ValidArgsReachTheDevice) {
  size_t bytes = 0;
  EXPECT_TRUE(tessera::attention_with_kvcache_workspace_size(valid_paged(), &bytes).ok());
  KvCacheArgs c = valid_paged();  // contiguous: [2, 256, 2, 128]
  c.block_table = nullptr;
  c.capacity = 256;
  tessera::bshd_strides(256, 2, 128, c.k_cache_stride);
  tessera::bshd_strides(256, 2, 128, c.v_cache_stride);
  EXPECT_TRUE(tessera::attention_with_kvcache_workspace_size(c, &bytes).ok());
}

TEST(KvCacheValidate, Rules) {
  KvCacheArgs a = valid_paged();
  a.cache_seqlens = nullptr;
  expect_invalid(a, "cache_seqlens");
  a = valid_paged();
  a.page_size = 24;
  expect_invalid(a, "page_size: must be a multiple of 16");
  a = valid_paged();
  a.page_size = 1;
  expect_invalid(a, "page_size");
  a = valid_paged();
  a.block_table_stride = 3;
  expect_invalid(a, "block_table_stride");
  a = valid_paged();
  a.num_pages = 0;
  expect_invalid(a, "num_pages");
  a = valid_paged();
  a.block_table = nullptr;  // contiguous without a capacity
  expect_invalid(a, "capacity");
  a = valid_paged();
  a.k_new = at(7);  // k_new without v_new / seqlen_new
  expect_invalid(a, "k_new, v_new");
  a = valid_paged();
  a.k_new = at(7);
  a.v_new = at(8);
  a.seqlen_new = 300;  // more than 4 pages of 64
  expect_invalid(a, "seqlen_new");
  a = valid_paged();
  a.head_dim = 80;
  expect_invalid(a, "head_dim");
  a = valid_paged();
  a.heads_kv = 3;
  expect_invalid(a, "heads_kv");
  a = valid_paged();
  a.k_cache_stride[1] = 12;
  expect_invalid(a, "k_cache_stride[1]");
  a = valid_paged();
  a.window_left = -2;
  expect_invalid(a, "window_left");
  a = valid_paged();
  a.softcap = -1.0f;
  expect_invalid(a, "softcap");
  a = valid_paged();
  a.o = a.k_cache;  // O over the cache
  expect_invalid(a, "o: overlaps k_cache");
  a = valid_paged();
  a.k_new = at(2);  // the new keys inside the cache they go to
  a.v_new = at(8);
  a.seqlen_new = 1;
  tessera::bshd_strides(1, 2, 128, a.k_new_stride);
  tessera::bshd_strides(1, 2, 128, a.v_new_stride);
  expect_invalid(a, "k_new: overlaps k_cache");
  EXPECT_EQ(tessera_attention_with_kvcache(nullptr, nullptr, 0, nullptr), TESSERA_STATUS_INVALID_ARGUMENT);
  size_t bytes = 0;
  EXPECT_EQ(tessera_attention_with_kvcache_workspace_size(nullptr, &bytes), TESSERA_STATUS_INVALID_ARGUMENT);
}

TEST(KvCacheValidate, CAbiRoundTrip) {
  KvCacheArgs a = valid_paged();
  a.k_new = at(7);
  a.v_new = at(8);
  a.seqlen_new = 2;
  a.k_new_stride[0] = 4096;
  a.causal = true;
  a.window_left = 5;
  a.softcap = 30.0f;
  a.max_sms = 7;
  const KvCacheArgs b = tessera::from_c(tessera::to_c(a));
  EXPECT_EQ(b.q, a.q);
  EXPECT_EQ(b.k_cache, a.k_cache);
  EXPECT_EQ(b.block_table, a.block_table);
  EXPECT_EQ(b.cache_seqlens, a.cache_seqlens);
  EXPECT_EQ(b.page_size, a.page_size);
  EXPECT_EQ(b.num_pages, a.num_pages);
  EXPECT_EQ(b.max_pages, a.max_pages);
  EXPECT_EQ(b.block_table_stride, a.block_table_stride);
  EXPECT_EQ(b.seqlen_new, a.seqlen_new);
  EXPECT_EQ(b.k_new_stride[0], a.k_new_stride[0]);
  EXPECT_EQ(b.causal, a.causal);
  EXPECT_EQ(b.window_left, a.window_left);
  EXPECT_EQ(b.softcap, a.softcap);
  EXPECT_EQ(b.max_sms, a.max_sms);
  EXPECT_EQ(b.dtype, a.dtype);
}

}  // namespace
