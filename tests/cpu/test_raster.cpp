// The grouped raster order (gemm/raster.hpp): a bijection from CTA index to output tile.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "gemm/raster.hpp"

// The library's internal namespace (headers under src/).
namespace ti = tessera::gemm_impl;

namespace {

using ti::grouped_raster;
using ti::kRasterGroupM;

// Every tile exactly once, every coordinate in range. Returns a failure description or "".
std::string check_bijection(int tiles_m, int tiles_n) {
  std::vector<unsigned char> seen(size_t(tiles_m) * tiles_n, 0);
  const int total = tiles_m * tiles_n;
  for (int bid = 0; bid < total; ++bid) {
    int tm = -1, tn = -1;
    grouped_raster(bid, tiles_m, tiles_n, tm, tn);
    if (tm < 0 || tm >= tiles_m || tn < 0 || tn >= tiles_n)
      return "bid " + std::to_string(bid) + " -> (" + std::to_string(tm) + ", " + std::to_string(tn) +
             ") out of range";
    unsigned char& s = seen[size_t(tm) * tiles_n + tn];
    if (s) return "tile (" + std::to_string(tm) + ", " + std::to_string(tn) + ") visited twice (bid " +
                  std::to_string(bid) + ")";
    s = 1;
  }
  // total distinct in-range visits of total tiles: every tile once.
  return "";
}

TEST(Raster, EveryTileExactlyOnceSmallGrids) {
  for (int tm = 1; tm <= 40; ++tm)
    for (int tn = 1; tn <= 40; ++tn) {
      const std::string err = check_bijection(tm, tn);
      ASSERT_EQ(err, "") << tm << " x " << tn << " tiles";
    }
}

TEST(Raster, EveryTileExactlyOnceLargeGrids) {
  const std::vector<std::pair<int, int>> shapes = {
      {64, 32}, {1000, 3}, {3, 1000}, {1, 5000}, {5000, 1}, {257, 129}, {8, 8}, {9, 7}, {17, 17},
      {128, 128},  // 16384^2 with 128x128 tiles
      {32, 64},    // 4096 x 16384 with 128x256 tiles
      {777, 13}, {1024, 1024}};
  for (auto [tm, tn] : shapes) {
    const std::string err = check_bijection(tm, tn);
    ASSERT_EQ(err, "") << tm << " x " << tn << " tiles";
  }
}

TEST(Raster, GroupsWalkColumnsOfKRasterGroupMRows) {
  // Within a full group, consecutive CTAs walk down kRasterGroupM tile rows of one tile column,
  // then move to the next column: the property that makes concurrently running CTAs share
  // operand tiles in L2.
  const int tiles_m = 3 * kRasterGroupM + 5, tiles_n = 11;
  for (int bid = 0; bid < kRasterGroupM * tiles_n; ++bid) {
    int tm, tn;
    grouped_raster(bid, tiles_m, tiles_n, tm, tn);
    EXPECT_EQ(tm, bid % kRasterGroupM);
    EXPECT_EQ(tn, bid / kRasterGroupM);
  }
  // The last, partial group (5 rows) does the same with 5 rows.
  const int first = 3 * kRasterGroupM * tiles_n;
  for (int i = 0; i < 5 * tiles_n; ++i) {
    int tm, tn;
    grouped_raster(first + i, tiles_m, tiles_n, tm, tn);
    EXPECT_EQ(tm, 3 * kRasterGroupM + i % 5);
    EXPECT_EQ(tn, i / 5);
  }
}

TEST(Raster, SingleTile) {
  int tm = -1, tn = -1;
  grouped_raster(0, 1, 1, tm, tn);
  EXPECT_EQ(tm, 0);
  EXPECT_EQ(tn, 0);
}

// The raster by its host-made divisors (what the sm90 kernel walks) equals the plain one.
TEST(Raster, ByItsDivisorsEqualsThePlainRaster) {
  auto same = [](int tm, int tn) {
    const ti::Raster r = ti::make_raster(tm, tn);
    for (int bid = 0; bid < tm * tn; ++bid) {
      int m0 = -1, n0 = -1, m1 = -2, n1 = -2;
      grouped_raster(bid, tm, tn, m0, n0);
      grouped_raster(bid, r, m1, n1);
      if (m0 != m1 || n0 != n1) return false;
    }
    return true;
  };
  for (int tm = 1; tm <= 40; ++tm)
    for (int tn = 1; tn <= 40; ++tn) ASSERT_TRUE(same(tm, tn)) << tm << " x " << tn;
  for (auto [tm, tn] : std::vector<std::pair<int, int>>{{1000, 3}, {3, 1000}, {1, 5000}, {5000, 1}, {257, 129}, {777, 13}})
    ASSERT_TRUE(same(tm, tn)) << tm << " x " << tn;
}

}  // namespace
