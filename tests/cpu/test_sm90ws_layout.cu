// The warp-specialised attention kernel zeroes the V rows past a packed sequence's end through
// Traits::kv_chunk (sm90ws/traits.cuh), not through CuTe's swizzled tensor; TMA fills and WGMMA reads
// the same stage through that tensor, so for every row the chunks kv_chunk names must be exactly the
// row's bytes there. Checked on the host against CuTe's own (pointer-swizzled) addressing for every
// sm90ws configuration row's tile; no GPU needed.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>

#include "attention/sm90ws/traits.cuh"

namespace {

using namespace cute;

template <int D, int BN, int Stages>
void check_rows() {
  using T = tessera::attn::sm90ws::Traits<D, 128, BN, Stages, true, false>;
  using Element = typename T::Element;
  // A 1024-byte-aligned stand-in for the stage's shared address: only addresses are computed.
  Element* const base = reinterpret_cast<Element*>(uintptr_t(1) << 20);
  Tensor sKV = make_tensor(make_smem_ptr(base), typename T::SmemLayoutKV{});  // (BN,D,PIPE)
  int moved = 0;
  for (int stage = 0; stage < Stages; ++stage)
    for (int r = 0; r < BN; ++r) {
      std::set<long> tensor_chunks, rule_chunks;
      for (int c = 0; c < D; c += 8) tensor_chunks.insert(long(&sKV(r, c, stage) - base));
      for (int c = 0; c < D / 8; ++c) {
        rule_chunks.insert(T::kv_chunk(r, c, stage));
        moved += T::kv_chunk(r, c, stage) != long(&sKV(r, c * 8, stage) - base);
      }
      EXPECT_EQ(rule_chunks, tensor_chunks) << "D " << D << " BN " << BN << " stage " << stage << " row " << r;
    }
  // The swizzle does move chunks: a rule that matched the tensor chunk for chunk would need none of
  // the segment argument, and one that ignored rows would fail above.
  EXPECT_GT(moved, 0);
}

TEST(Sm90WsLayout, KvChunkCoversEachRowsBytes) {
  check_rows<64, 128, 2>();   // 128-byte segments
  check_rows<96, 128, 2>();   // 64-byte segments
  check_rows<128, 128, 2>();
  check_rows<256, 64, 2>();
}

}  // namespace
