// Bank-conflict freedom of the sm_80 shared-memory layouts (gemm/sm80/smem_layouts.hpp), computed
// from the real CuTe layouts on the host.
//
// Bank model (as in smem_layouts.hpp): 32 banks x 4 bytes; a 16-byte access covers 4 banks, so a
// 128-byte line holds 8 "16-byte slots" and a phase of 8 threads with 16-byte accesses is
// conflict-free iff their slots (byte_offset / 16) % 8 are all distinct.
//  - ldmatrix: per 8x8 matrix, 8 threads each give the address of one 16-byte row. K-major
//    (ldmatrix): the 8 consecutive rows r..r+7 at one 8-element k-chunk; MN-major (ldmatrix.trans):
//    the 8 consecutive k at one 8-element mn-chunk.
//  - cp.async 16-byte stores: 8 consecutive threads of the gmem copy's thread layout (that of
//    Traits::make_gmem_copy in gemm/sm80/kernel.cuh, restated here; test_swizzle_kernel.cu checks
//    the real TiledCopy partitions as well).
// Negative control: the same checks on the unswizzled layouts must find conflicts, so this test
// can fail.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "gemm/sm80/config_shape.hpp"
#include "gemm/sm80/smem_layouts.hpp"

// The library's internal namespace (headers under src/).
namespace ti = tessera::gemm_impl;

namespace {

using namespace cute;
namespace sm80 = ti::sm80;

constexpr int kElemBytes = 2;  // f16 / bf16

int slot_of(int64_t elem_offset) { return int((elem_offset * kElemBytes / 16) % 8); }

// Largest number of the 8 accesses that share a slot (1 = conflict-free).
int ways(const std::array<int64_t, 8>& offs) {
  int count[8] = {};
  int worst = 0;
  for (int64_t o : offs) worst = std::max(worst, ++count[slot_of(o)]);
  return worst;
}

struct Report {
  int phases = 0;
  int conflicted = 0;
  int worst = 0;
  std::string first;  // description of the first conflicted phase
  void add(const std::array<int64_t, 8>& offs, const std::string& what) {
    ++phases;
    const int w = ways(offs);
    worst = std::max(worst, w);
    if (w > 1) {
      if (!conflicted) {
        first = what + ": slots";
        for (int64_t o : offs) first += " " + std::to_string(slot_of(o));
        first += " (" + std::to_string(w) + "-way)";
      }
      ++conflicted;
    }
  }
};

// A (rows, k, stage) -> element offset function over a layout (2-D atoms get stage 0 only).
struct View {
  int rows, bk, stages;
  std::function<int64_t(int, int, int)> at;
};

template <class L>
View view3(const L& layout) {
  return View{int(size<0>(layout)), int(size<1>(layout)), int(size<2>(layout)),
              [layout](int r, int k, int s) { return int64_t(layout(r, k, s)); }};
}
template <class L>
View view2(const L& layout) {
  return View{int(size<0>(layout)), int(size<1>(layout)), 1,
              [layout](int r, int k, int) { return int64_t(layout(r, k)); }};
}

// Every (row, k, stage) has its own element, inside [0, rows * bk * stages); 16-byte vectors along
// the contiguous mode stay contiguous and 16-byte aligned (so that cp.async / ldmatrix may use them).
std::string check_layout_shape(const View& v, bool k_major) {
  const int64_t n = int64_t(v.rows) * v.bk * v.stages;
  std::vector<unsigned char> seen(size_t(n), 0);
  for (int s = 0; s < v.stages; ++s)
    for (int r = 0; r < v.rows; ++r)
      for (int k = 0; k < v.bk; ++k) {
        const int64_t o = v.at(r, k, s);
        if (o < 0 || o >= n) return "offset out of range at (" + std::to_string(r) + "," + std::to_string(k) + ")";
        if (seen[size_t(o)]++) return "offset used twice at (" + std::to_string(r) + "," + std::to_string(k) + ")";
      }
  for (int s = 0; s < v.stages; ++s)
    for (int r = 0; r < v.rows; r += (k_major ? 1 : 8))
      for (int k = 0; k < v.bk; k += (k_major ? 8 : 1)) {
        const int64_t base = v.at(r, k, s);
        if (base % 8) return "16-byte vector not aligned at (" + std::to_string(r) + "," + std::to_string(k) + ")";
        for (int e = 1; e < 8; ++e)
          if (v.at(k_major ? r : r + e, k_major ? k + e : k, s) != base + e)
            return "16-byte vector not contiguous at (" + std::to_string(r) + "," + std::to_string(k) + ")";
      }
  return "";
}

Report ldmatrix_phases(const View& v, bool k_major) {
  Report rep;
  std::array<int64_t, 8> offs;
  for (int s = 0; s < v.stages; ++s) {
    if (k_major) {
      for (int r0 = 0; r0 + 8 <= v.rows; r0 += 8)
        for (int k = 0; k < v.bk; k += 8) {
          for (int t = 0; t < 8; ++t) offs[t] = v.at(r0 + t, k, s);
          rep.add(offs, "rows " + std::to_string(r0) + ".." + std::to_string(r0 + 7) + " k " + std::to_string(k));
        }
    } else {
      for (int k0 = 0; k0 + 8 <= v.bk; k0 += 8)
        for (int m = 0; m < v.rows; m += 8) {
          for (int t = 0; t < 8; ++t) offs[t] = v.at(m, k0 + t, s);
          rep.add(offs, "k " + std::to_string(k0) + ".." + std::to_string(k0 + 7) + " mn " + std::to_string(m));
        }
    }
  }
  return rep;
}

// The gmem->smem thread layout of Traits::make_gmem_copy: K-major: (threads / (BK/8), BK/8) threads,
// K fastest, 8 k per thread; MN-major: (min(rows/8, threads), threads / that) threads, MN fastest,
// 8 mn per thread. The copy repeats over the tile; a store phase is 8 consecutive threads.
Report cp_async_phases(const View& v, bool k_major, int threads) {
  Report rep;
  std::array<int64_t, 8> offs;
  if (k_major) {
    const int thr_k = v.bk / 8;
    const int thr_rows = threads / thr_k;
    for (int s = 0; s < v.stages; ++s)
      for (int it = 0; it * thr_rows < v.rows; ++it)
        for (int q = 0; q < threads / 8; ++q) {
          bool inside = true;
          for (int i = 0; i < 8; ++i) {
            const int t = 8 * q + i;
            const int r = it * thr_rows + t / thr_k, kc = t % thr_k;
            inside = inside && r < v.rows;
            if (inside) offs[i] = v.at(r, 8 * kc, s);
          }
          if (inside) rep.add(offs, "threads " + std::to_string(8 * q) + "..+7 iteration " + std::to_string(it));
        }
  } else {
    const int thr_mn = std::min(v.rows / 8, threads);
    const int thr_k = threads / thr_mn;
    for (int s = 0; s < v.stages; ++s)
      for (int im = 0; im * thr_mn * 8 < v.rows; ++im)
        for (int ik = 0; ik * thr_k < v.bk; ++ik)
          for (int q = 0; q < threads / 8; ++q) {
            bool inside = true;
            for (int i = 0; i < 8; ++i) {
              const int t = 8 * q + i;
              const int mc = im * thr_mn + t % thr_mn, k = ik * thr_k + t / thr_mn;
              inside = inside && 8 * mc < v.rows && k < v.bk;
              if (inside) offs[i] = v.at(8 * mc, k, s);
            }
            if (inside) rep.add(offs, "threads " + std::to_string(8 * q) + "..+7");
          }
  }
  return rep;
}

// ---- the checker itself ------------------------------------------------------------------------

TEST(SwizzleChecker, CountsWays) {
  EXPECT_EQ(ways({0, 8, 16, 24, 32, 40, 48, 56}), 1);      // 8 consecutive 16-byte slots
  EXPECT_EQ(ways({0, 64, 128, 192, 256, 320, 384, 448}), 8);  // one slot, 8 lines
  EXPECT_EQ(ways({0, 8, 16, 24, 64, 72, 80, 88}), 2);
  EXPECT_EQ(ways({0, 72, 144, 216, 288, 360, 432, 504}), 1);  // the diagonal
}

TEST(SwizzleChecker, CatchesAWrongSwizzle) {
  // Mutants: a 2-bit swizzle where 3 bits are needed leaves 2-way conflicts.
  const auto k64 = composition(Swizzle<2, 3, 3>{}, Layout<Shape<_8, _64>, Stride<_64, _1>>{});
  const Report a = ldmatrix_phases(view2(k64), true);
  EXPECT_GT(a.conflicted, 0);
  EXPECT_EQ(a.worst, 2);
  const auto mn = composition(Swizzle<2, 3, 3>{}, Layout<Shape<_64, _8>, Stride<_1, _64>>{});
  const Report b = ldmatrix_phases(view2(mn), false);
  EXPECT_GT(b.conflicted, 0);
  EXPECT_EQ(b.worst, 2);
  // Swizzling the wrong bits (shift 4: rows 2..) also fails for BK = 32.
  const auto k32 = composition(Swizzle<2, 3, 4>{}, Layout<Shape<_8, _32>, Stride<_32, _1>>{});
  EXPECT_GT(ldmatrix_phases(view2(k32), true).conflicted, 0);
}

// ---- the atoms ---------------------------------------------------------------------------------

template <class Atom>
void check_atom(bool k_major, int threads, const char* what) {
  SCOPED_TRACE(what);
  const auto atom = Atom{};
  const View v = view2(atom);
  EXPECT_EQ(check_layout_shape(v, k_major), "");
  const Report ld = ldmatrix_phases(v, k_major);
  EXPECT_GT(ld.phases, 0);
  EXPECT_EQ(ld.conflicted, 0) << ld.first;
  const Report cp = cp_async_phases(v, k_major, threads);
  EXPECT_GT(cp.phases, 0);
  EXPECT_EQ(cp.conflicted, 0) << cp.first;

  // Negative control: the atom's layout without its swizzle.
  const View plain = view2(atom.layout_b());
  EXPECT_EQ(check_layout_shape(plain, k_major), "");
  const Report bad = ldmatrix_phases(plain, k_major);
  EXPECT_GT(bad.conflicted, 0) << "the unswizzled layout should conflict; the check cannot fail otherwise";
  EXPECT_GE(bad.worst, 4);
}

TEST(Swizzle, AtomKMajorBK32) {
  check_atom<sm80::SmemAtom<true, 32>>(true, 128, "SmemAtom<K-major, 32>: Swizzle<2,3,3> o (8,32):(32,1)");
  EXPECT_EQ(size<0>(sm80::SmemAtom<true, 32>{}), 8);
  EXPECT_EQ(size<1>(sm80::SmemAtom<true, 32>{}), 32);
}

TEST(Swizzle, AtomKMajorBK64) {
  check_atom<sm80::SmemAtom<true, 64>>(true, 128, "SmemAtom<K-major, 64>: Swizzle<3,3,3> o (8,64):(64,1)");
}

// The tf32 atoms put every element's 4 bytes where the 16-bit atom of the same row bytes puts the
// element pair they replace: byte(tf32 row r, k) == byte(16-bit row r, 2k), so the 16-bit atoms'
// conflict-free proofs above carry over (ldmatrix and cp.async move 16-byte slots either way).
template <int BK>
void check_tf32_atom_bytes() {
  SCOPED_TRACE(BK);
  const auto t = sm80::SmemAtom<true, BK, 4>{};
  const auto h = sm80::SmemAtom<true, BK>{};
  EXPECT_EQ(int(size<0>(t)), 8);
  EXPECT_EQ(int(size<1>(t)), BK / 2);
  for (int r = 0; r < 8; ++r)
    for (int k = 0; k < BK / 2; ++k) EXPECT_EQ(4 * int(t(r, k)), 2 * int(h(r, 2 * k))) << r << "," << k;
}

TEST(Swizzle, AtomKMajorTf32HasThe16BitBytes) {
  check_tf32_atom_bytes<32>();
  check_tf32_atom_bytes<64>();
}

// The s8 atom likewise: element (r, k) sits at the byte where the 16-bit atom keeps the byte k of
// row r (byte k of 16-bit element k / 2), so the 16-bit bank proofs hold for s8 too.
template <int BK>
void check_s8_atom_bytes() {
  SCOPED_TRACE(BK);
  const auto b = sm80::SmemAtom<true, BK, 1>{};
  const auto h = sm80::SmemAtom<true, BK>{};
  EXPECT_EQ(int(size<0>(b)), 8);
  EXPECT_EQ(int(size<1>(b)), 2 * BK);
  for (int r = 0; r < 8; ++r)
    for (int k = 0; k < 2 * BK; ++k) EXPECT_EQ(int(b(r, k)), 2 * int(h(r, k / 2)) + k % 2) << r << "," << k;
}

TEST(Swizzle, AtomKMajorS8HasThe16BitBytes) {
  check_s8_atom_bytes<32>();
  check_s8_atom_bytes<64>();
}

TEST(Swizzle, AtomMNMajor) {
  check_atom<sm80::SmemAtom<false, 32>>(false, 128, "SmemAtom<MN-major, 32>: Swizzle<3,3,3> o (64,8):(1,64)");
  check_atom<sm80::SmemAtom<false, 64>>(false, 128, "SmemAtom<MN-major, 64>");
}

// ---- the full (rows, BK, Stages) layouts of every config in configs.def --------------------------

constexpr int kConfigIds[] = {
#define TESSERA_SM80_CONFIG(id, ...) id,
#include "gemm/sm80/configs.def"
#undef TESSERA_SM80_CONFIG
};
constexpr int kNumConfigs = int(sizeof(kConfigIds) / sizeof(kConfigIds[0]));

template <int Id, int Rows, bool KMajor>
void check_full_layout(const char* operand) {
  using S = sm80::ConfigShape<Id>;
  const int threads = 32 * S::WarpsM * S::WarpsN;
  const std::string what = "config " + std::to_string(Id) + " " + operand + " (" + std::to_string(Rows) + ", " +
                           std::to_string(S::BK) + ", " + std::to_string(S::Stages) + ") " +
                           (KMajor ? "K-major" : "MN-major");
  SCOPED_TRACE(what);
  // The same expression as Traits::SmemLayoutA/B in kernel.cuh.
  const auto layout = tile_to_shape(sm80::SmemAtom<KMajor, S::BK>{}, Shape<Int<Rows>, Int<S::BK>, Int<S::Stages>>{});
  const View v = view3(layout);
  ASSERT_EQ(v.rows, Rows);
  ASSERT_EQ(v.bk, S::BK);
  ASSERT_EQ(v.stages, S::Stages);
  EXPECT_EQ(int(cosize(layout)), Rows * S::BK * S::Stages);
  EXPECT_EQ(check_layout_shape(v, KMajor), "");
  const Report ld = ldmatrix_phases(v, KMajor);
  EXPECT_EQ(ld.phases, Rows * S::BK * S::Stages / 64);
  EXPECT_EQ(ld.conflicted, 0) << ld.first;
  const Report cp = cp_async_phases(v, KMajor, threads);
  EXPECT_EQ(cp.phases, Rows * S::BK * S::Stages / 64);
  EXPECT_EQ(cp.conflicted, 0) << cp.first;

  // Negative control.
  const auto plain = tile_to_shape(sm80::SmemAtom<KMajor, S::BK>{}.layout_b(),
                                   Shape<Int<Rows>, Int<S::BK>, Int<S::Stages>>{});
  const Report bad = ldmatrix_phases(view3(plain), KMajor);
  EXPECT_GT(bad.conflicted, 0);
}

template <int I>
void check_config() {
  constexpr int Id = kConfigIds[I];
  using S = sm80::ConfigShape<Id>;
  check_full_layout<Id, S::BM, true>("A");
  check_full_layout<Id, S::BM, false>("A");
  check_full_layout<Id, S::BN, true>("B");
  check_full_layout<Id, S::BN, false>("B");
}

template <int... I>
void check_all_configs(std::integer_sequence<int, I...>) {
  (check_config<I>(), ...);
}

TEST(Swizzle, FullLayoutsOfEveryConfig) {
  ASSERT_GT(kNumConfigs, 0);
  check_all_configs(std::make_integer_sequence<int, kNumConfigs>{});
}

}  // namespace
