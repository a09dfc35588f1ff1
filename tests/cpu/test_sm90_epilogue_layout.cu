// The sm90 epilogue writes its 16-bit TMA-store sub-tiles through 32-bit shared addresses computed
// by Traits::store_offset (gemm/sm90/kernel.cuh), not through CuTe's swizzled tensor (whose pointer
// arithmetic made the compiler emit generic stores). The TMA store reads the same buffer through
// SmemLayoutD, so the two must agree on every element: checked here on the host against CuTe's
// own swizzled addressing. Host code only (nvcc because kernel.cuh is CUDA); no GPU needed.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>

#include "gemm/sm90/kernel.cuh"

namespace {

namespace sm90 = tessera::gemm_impl::sm90;
using namespace cute;

template <int DT>
void check_store_offsets() {
  using T = sm90::Traits<128, 256, 64, 4, 2, 1, false, DT, true, true>;
  using Element = typename T::Element;
  // A 1024-byte-aligned stand-in for the buffer's shared address: only addresses are computed.
  Element* const base = reinterpret_cast<Element*>(uintptr_t(1) << 20);
  Tensor sD = make_tensor(make_smem_ptr(base), typename T::SmemLayoutD{});  // (64,64)
  std::set<int> seen;
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < T::kStoreN; ++c) {
      const int cute_offset = int(reinterpret_cast<const char*>(&sD(r, c)) - reinterpret_cast<const char*>(base));
      ASSERT_EQ(T::store_offset(r, c), cute_offset) << "row " << r << " col " << c;
      seen.insert(cute_offset);
    }
  // A bijection onto the 8 KB buffer (a formula that ignored the swizzle would still be one, but
  // would fail above: the negative control below shows the swizzle is real).
  EXPECT_EQ(seen.size(), size_t(64 * T::kStoreN));
  EXPECT_EQ(*seen.rbegin(), 64 * T::kStoreN * int(sizeof(Element)) - int(sizeof(Element)));
  int unswizzled_matches = 0;
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < T::kStoreN; ++c)
      unswizzled_matches += T::store_offset(r, c) == (r * T::kStoreN + c) * int(sizeof(Element));
  EXPECT_LT(unswizzled_matches, 64 * T::kStoreN / 4);  // only row % 8 == 0 keeps its chunks in place
}

// The fill loop's addressing: from a thread's first pair (row, c < 8) its pair jj * 8 columns on is
// a XOR of jj << 4 on the offset, and 8 rows down is + 8 rows of 128 bytes (the same swizzle).
template <int DT>
void check_fill_addressing() {
  using T = sm90::Traits<128, 128, 64, 6, 1, 1, false, DT, true, true>;
  for (int row = 0; row < 56; ++row)
    for (int c = 0; c < 8; c += 2) {
      const int first = T::store_offset(row, c);
      for (int jj = 0; jj < T::kStoreN / 8; ++jj) {
        EXPECT_EQ(T::store_offset(row, 8 * jj + c), first ^ (jj << 4)) << row << " " << c << " " << jj;
        EXPECT_EQ(T::store_offset(row + 8, 8 * jj + c), (first ^ (jj << 4)) + 8 * T::kStoreRowBytes);
      }
    }
}

TEST(Sm90EpilogueLayout, FillAddressingBf16) { check_fill_addressing<tessera::gemm_impl::kBF16>(); }
TEST(Sm90EpilogueLayout, FillAddressingF16) { check_fill_addressing<tessera::gemm_impl::kF16>(); }

TEST(Sm90EpilogueLayout, StoreOffsetsMatchCuteBf16) { check_store_offsets<tessera::gemm_impl::kBF16>(); }
TEST(Sm90EpilogueLayout, StoreOffsetsMatchCuteF16) { check_store_offsets<tessera::gemm_impl::kF16>(); }

}  // namespace
