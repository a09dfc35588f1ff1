// The sm90 epilogue writes its 16-bit TMA-store sub-tiles through 32-bit shared addresses computed
// by Traits::store_offset (gemm/sm90/traits.cuh), not through CuTe's swizzled tensor (whose pointer
// arithmetic made the compiler emit generic stores). The TMA store reads the same buffer through
// SmemLayoutD, so the two must agree on every element: checked here on the host against CuTe's
// own swizzled addressing. Host code only (nvcc because traits.cuh is CUDA); no GPU needed.
// Three sub-tile shapes: 64 x 64 with 128-byte rows (BN a multiple of 64), 64 x 32 with 64-byte
// rows (BN = 96), and the transposed kStoreNT x 64 sub-tile of a column-major D, which stmatrix.trans
// fills (its lane addressing is modelled below).
#include <gtest/gtest.h>

#include <cstdint>
#include <set>

#include "gemm/sm90/traits.cuh"

namespace {

namespace sm90 = tessera::gemm_impl::sm90;
using namespace cute;

// `offset(r, c)` agrees with CuTe's layout `L` (rows x cols 16-bit elements) at every element and
// maps the sub-tile one-to-one onto its bytes; returns how many elements sit at their unswizzled
// place (a formula that ignored the swizzle would still be a bijection, so the callers bound that).
template <class Element, class L, class Offset>
int check_against_cute(int rows, int cols, Offset offset) {
  // A 1024-byte-aligned stand-in for the buffer's shared address: only addresses are computed.
  Element* const base = reinterpret_cast<Element*>(uintptr_t(1) << 20);
  Tensor s = make_tensor(make_smem_ptr(base), L{});
  std::set<int> seen;
  int unswizzled = 0;
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const int cute_offset = int(reinterpret_cast<const char*>(&s(r, c)) - reinterpret_cast<const char*>(base));
      EXPECT_EQ(offset(r, c), cute_offset) << "row " << r << " col " << c;
      seen.insert(cute_offset);
      unswizzled += cute_offset == (r * cols + c) * int(sizeof(Element));
    }
  EXPECT_EQ(seen.size(), size_t(rows * cols));
  EXPECT_EQ(*seen.rbegin(), rows * cols * int(sizeof(Element)) - int(sizeof(Element)));
  return unswizzled;
}

template <class T>
void check_store_offsets() {
  using Element = typename T::Element;
  // The row-major sub-tile (64, kStoreN); only some rows keep their chunks in place.
  const int unswizzled = check_against_cute<Element, typename T::SmemLayoutD>(
      64, T::kStoreN, [](int r, int c) { return T::store_offset(r, c); });
  EXPECT_LT(unswizzled, 64 * T::kStoreN / 3);
  // The transposed sub-tile (kStoreNT of a warpgroup's columns, 64): D's (m, n) at row n, column m.
  const int unswizzled_t = check_against_cute<Element, typename T::SmemLayoutDT>(
      T::kStoreNT, 64, [](int n, int m) { return T::store_offset_t(m, n); });
  EXPECT_LT(unswizzled_t, 64 * T::kStoreNT / 3);
}

// The kernel's stmatrix / ldmatrix .x4.trans addressing for a column-major D (epilogue_store.cuh, `Store16::fill`):
// lane l of warp w gives sT + jj * 1024 for chunk pair jj; the instruction takes 8 x 8 matrix i
// (= 2q + h: chunk jj + q, rows + 8h) from the threads' fragments (thread t holds its row t / 4,
// columns 2 (t % 4) and + 1) and stores row b of its transpose (D's column b of the block, its 8
// rows) at the address of lane 8i + b. Every element must land where SmemLayoutDT (the TMA store's
// view) has it, and every byte of the sub-tile must be written once.
template <class T>
void check_transposed_fill() {
  std::set<int> written;
  for (int w = 0; w < 4; ++w)
    for (int jj = 0; jj < T::kStoreNT / 8; jj += 2) {
      int lane_addr[32];
      for (int l = 0; l < 32; ++l)  // the kernel's sT for lane l, plus the pair's step
        lane_addr[l] = T::store_offset_t(16 * w + 8 * ((l / 8) % 2), 8 * (l / 16) + l % 8) + jj * 1024;
      for (int i = 0; i < 4; ++i) {
        const int q = i / 2, h = i % 2;
        for (int t = 0; t < 32; ++t)
          for (int c = 0; c < 2; ++c) {
            const int a = t / 4, b = 2 * (t % 4) + c;  // the fragment element (row a, column b) of matrix i
            const int m = 16 * w + 8 * h + a, n = 8 * (jj + q) + b;
            const int at = lane_addr[8 * i + b] + 2 * a;  // row b of the transpose, element a
            ASSERT_EQ(at, T::store_offset_t(m, n)) << "w " << w << " jj " << jj << " i " << i << " t " << t;
            EXPECT_TRUE(written.insert(at).second);
          }
      }
    }
  EXPECT_EQ(written.size(), size_t(64 * T::kStoreNT));
  // A lane's 16 bytes never straddle a row: the addresses are 16-byte aligned.
  for (int l = 0; l < 32; ++l) EXPECT_EQ(T::store_offset_t(8 * ((l / 8) % 2), 8 * (l / 16) + l % 8) % 16, 0);
}

// The fill loop's addressing: from a thread's first pair (row, c < 8) its pair jj * 8 columns on is
// a XOR of jj << 4 on the offset, and 8 rows down is + 8 rows of kStoreRowBytes (the same swizzle).
template <class T>
void check_fill_addressing() {
  for (int row = 0; row < 56; ++row)
    for (int c = 0; c < 8; c += 2) {
      const int first = T::store_offset(row, c);
      for (int jj = 0; jj < T::kStoreN / 8; ++jj) {
        EXPECT_EQ(T::store_offset(row, 8 * jj + c), first ^ (jj << 4)) << row << " " << c << " " << jj;
        EXPECT_EQ(T::store_offset(row + 8, 8 * jj + c), (first ^ (jj << 4)) + 8 * T::kStoreRowBytes);
      }
    }
}

template <int DT>
using Wide = sm90::Traits<128, 256, 64, 4, 2, 1, false, DT, true, true>;   // 64 x 64 sub-tiles
template <int DT>
using Narrow = sm90::Traits<64, 96, 64, 10, 2, 1, false, DT, true, true>;  // 64 x 32 sub-tiles, 96 x 64 transposed
template <int DT>
using Medium = sm90::Traits<128, 128, 64, 6, 1, 1, false, DT, true, true>;  // 64 x 64 transposed

TEST(Sm90EpilogueLayout, SubTileWidths) {
  EXPECT_EQ(Wide<tessera::gemm_impl::kBF16>::kStoreN, 64);
  EXPECT_EQ(Narrow<tessera::gemm_impl::kBF16>::kStoreN, 32);
  EXPECT_EQ(Narrow<tessera::gemm_impl::kBF16>::kStoreRowBytes, 64);
  EXPECT_EQ(Narrow<tessera::gemm_impl::kBF16>::kStoreNT, 96);  // one transposed sub-tile per warpgroup
  EXPECT_EQ(Medium<tessera::gemm_impl::kBF16>::kStoreNT, 64);
}

TEST(Sm90EpilogueLayout, FillAddressingBf16) {
  check_fill_addressing<sm90::Traits<128, 128, 64, 6, 1, 1, false, tessera::gemm_impl::kBF16, true, true>>();
  check_fill_addressing<Narrow<tessera::gemm_impl::kBF16>>();
}
TEST(Sm90EpilogueLayout, FillAddressingF16) {
  check_fill_addressing<sm90::Traits<128, 128, 64, 6, 1, 1, false, tessera::gemm_impl::kF16, true, true>>();
  check_fill_addressing<Narrow<tessera::gemm_impl::kF16>>();
}

TEST(Sm90EpilogueLayout, StoreOffsetsMatchCuteBf16) {
  check_store_offsets<Wide<tessera::gemm_impl::kBF16>>();
  check_store_offsets<Narrow<tessera::gemm_impl::kBF16>>();
}
TEST(Sm90EpilogueLayout, StoreOffsetsMatchCuteF16) {
  check_store_offsets<Wide<tessera::gemm_impl::kF16>>();
  check_store_offsets<Narrow<tessera::gemm_impl::kF16>>();
}

TEST(Sm90EpilogueLayout, TransposedFillLandsWhereTheTmaStoreReads) {
  check_transposed_fill<Narrow<tessera::gemm_impl::kBF16>>();
  check_transposed_fill<Medium<tessera::gemm_impl::kBF16>>();
  check_transposed_fill<Medium<tessera::gemm_impl::kF16>>();
  check_transposed_fill<sm90::Traits<64, 64, 64, 13, 2, 1, false, tessera::gemm_impl::kBF16, true, true>>();
}

}  // namespace
