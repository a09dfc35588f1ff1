// Where key j of a (batch, KV head) lives in K or V: a contiguous sequence (rows `row` apart), or a
// paged KV cache, where the batch's row of the block table names the page of each page_size keys.
// Host- and device-callable; a page size is a multiple of kBlockN, so a key block never straddles
// two pages.
#pragma once
#include <cstdint>

#include "core/host_device.hpp"

namespace tessera::attn::decode {

struct KvRows {
  int64_t row = 0;             // elements between consecutive keys (in a page)
  int64_t page = 0;            // elements between pages (paged)
  const int* table = nullptr;  // the batch's block-table row (paged); null: contiguous
  int page_size = 1, last_page = 0;

  // Element offset of key j from the (batch, head) base (contiguous) or the head's base in page 0.
  TESSERA_HD int64_t offset(int64_t j) const { return at(table ? table[j / page_size] : 0, j); }
  // The same, given the block-table entry `entry` of key j's page (paged; ignored when contiguous):
  // the decode kernel reads the entries ahead of the keys.
  TESSERA_HD int64_t at(int entry, int64_t j) const {
    if (!table) return j * row;
    const int pg = entry < 0 ? 0 : entry > last_page ? last_page : entry;  // an out-of-range entry reads a real page, never outside
    return int64_t(pg) * page + (j % page_size) * row;
  }
};

}  // namespace tessera::attn::decode
