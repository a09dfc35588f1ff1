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
  // The same, given the block-table entry `entry` of key j's page (paged; ignored when contiguous).
  TESSERA_HD int64_t at(int entry, int64_t j) const {
    if (!table) return j * row;
    return at_page(page_of(entry), int(j % page_size));
  }
  // A block-table entry as the page read: an out-of-range entry reads a real page, never outside.
  TESSERA_HD int page_of(int entry) const { return entry < 0 ? 0 : entry > last_page ? last_page : entry; }
  // Row `row_in_page` of page `pg` (contiguous: page 0, the key's row). The decode kernel resolves a
  // block's page and row once per 32 steps across a warp's lanes, so that a step only multiplies.
  TESSERA_HD int64_t at_page(int pg, int row_in_page) const { return int64_t(pg) * page + int64_t(row_in_page) * row; }
};

}  // namespace tessera::attn::decode
