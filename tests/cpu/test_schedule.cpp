// The persistent walk of the sm90 GEMM (gemm/schedule.hpp), simulated on the host: every k-tile of
// every tile computed exactly once, and the stream-K fix-up well formed (each partial published
// once, folded by exactly one owner, which waits only on shares that start with that partial).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gemm/schedule.hpp"

namespace ti = tessera::gemm_impl;

namespace {

struct Item {
  int worker, index;  // index: position in the worker's walk
  ti::WorkItem w;
};

std::vector<Item> walk_all(const ti::Schedule& s, int workers) {
  std::vector<Item> items;
  for (int v = 0; v < workers; ++v) {
    ti::Walk walk(s, v);
    int index = 0;
    for (ti::WorkItem w; walk.next(s, v, workers, w);) items.push_back({v, index++, w});
  }
  return items;
}

// "" when the walk of `tiles` tiles x `k_tiles` over `workers` is well formed, else what is wrong.
std::string check(long long tiles, int splits, int k_tiles, int workers, bool stream_k) {
  ti::Schedule s;
  if (!ti::make_schedule(tiles, splits, k_tiles, workers, stream_k, &s)) return "make_schedule refused";
  const std::string at = " (tiles " + std::to_string(tiles) + ", splits " + std::to_string(splits) + ", k_tiles " +
                         std::to_string(k_tiles) + ", workers " + std::to_string(workers) + ")";
  if (s.sk_units > 0 && s.splits != 1) return "stream-K with split-K" + at;
  const std::vector<Item> items = walk_all(s, workers);
  std::vector<int> covered(size_t(tiles) * k_tiles, 0);
  std::vector<int> publisher_of_worker(workers, -1);  // tile whose partial the worker publishes
  for (const Item& it : items) {
    const ti::WorkItem& w = it.w;
    if (w.tile < 0 || w.tile >= tiles || w.kt_begin < 0 || w.kt_end > k_tiles || w.kt_begin > w.kt_end)
      return "item out of range" + at;
    if (s.splits > 1) {
      // The layout the split-K fold expects: range r covers [r * k_tiles / splits, (r + 1) * k_tiles / splits).
      const int b = w.split * k_tiles / splits, e = (w.split + 1) * k_tiles / splits;
      if (b != w.kt_begin || e != w.kt_end) return "split-K range mismatch" + at;
    }
    for (int k = w.kt_begin; k < w.kt_end; ++k) ++covered[size_t(w.tile) * k_tiles + k];
    const bool streamed = s.sk_units > 0 && w.tile >= ti::sk_first_tile(s);
    if (s.sk_units > 0 && (it.index < s.dp_rounds) == streamed)
      return "data-parallel tiles not first, or not dp_rounds of them" + at;
    if (ti::sk_publishes(s, w)) {
      if (it.index != s.dp_rounds) return "a partial not at the start of a share" + at;
      publisher_of_worker[it.worker] = w.tile;
    }
    if (!streamed && (w.kt_begin != 0 || w.kt_end != k_tiles) && s.splits == 1)
      return "a data-parallel item that is not a whole tile" + at;
  }
  for (size_t i = 0; i < covered.size(); ++i)
    if (covered[i] != 1)
      return "tile " + std::to_string(i / k_tiles) + " k-tile " + std::to_string(i % k_tiles) + " computed " +
             std::to_string(covered[i]) + " times" + at;
  // Owners fold exactly the later workers whose shares start inside their tile, and those
  // partials plus the owner's range cover the tile.
  std::vector<int> folded(workers, 0);
  for (const Item& it : items) {
    if (!ti::sk_folds(s, it.w)) continue;
    int end = it.w.kt_end;
    for (int v = it.worker + 1; ti::sk_folds_from(s, it.w, v, workers); ++v) {
      if (publisher_of_worker[v] != it.w.tile) return "owner waits on a worker that does not publish its tile" + at;
      ++folded[v];
      // v's first item of its share continues the tile where the previous share stopped.
      const ti::WorkItem& first = [&]() -> const ti::WorkItem& {
        for (const Item& x : items)
          if (x.worker == v && x.index == s.dp_rounds) return x.w;
        return it.w;
      }();
      if (first.kt_begin != end) return "partials do not continue the owner's range" + at;
      end = first.kt_end;
    }
    if (end != k_tiles) return "owner + partials do not cover the tile" + at;
    if (it.index != [&] { int n = 0; for (const Item& x : items) n += x.worker == it.worker; return n - 1; }())
      return "an owner item that is not the last of its walk" + at;
  }
  for (int v = 0; v < workers; ++v)
    if ((publisher_of_worker[v] >= 0) != (folded[v] == 1)) return "a partial folded " + std::to_string(folded[v]) + " times" + at;
  return "";
}

TEST(Schedule, DataParallelAndSplitKCoverEveryKTileOnce) {
  for (int workers : {1, 7, 66, 132})
    for (long long tiles : {1LL, 5LL, 66LL, 132LL, 289LL})
      for (int k_tiles : {1, 3, 16, 65})
        for (int splits : {1, 2, 3, 16}) EXPECT_EQ(check(tiles, splits, k_tiles, workers, false), "");
}

TEST(Schedule, StreamKCoversEveryKTileOnceAndFoldsEveryPartial) {
  for (int workers : {1, 2, 7, 64, 66, 132})
    for (long long tiles : {1LL, 2LL, 4LL, 30LL, 64LL, 65LL, 96LL, 131LL, 133LL, 200LL, 289LL, 1024LL})
      for (int k_tiles : {1, 2, 3, 16, 47, 65, 128}) EXPECT_EQ(check(tiles, 1, k_tiles, workers, true), "");
}

TEST(Schedule, StreamKOnlyWhereTheTilesLeaveAPartialWave) {
  ti::Schedule s;
  // Whole waves: data-parallel.
  ASSERT_TRUE(ti::make_schedule(264, 1, 64, 132, true, &s));
  EXPECT_EQ(s.sk_units, 0);
  // 96 tiles on 66 workers (1024x6144 in 128x256 pairs): one data-parallel wave, then the partial
  // wave's 30 tiles streamed, each worker 29 of their 1920 k-tiles (the first 6 one more) instead
  // of a second wave of 64.
  ASSERT_TRUE(ti::make_schedule(96, 1, 64, 66, true, &s));
  EXPECT_EQ(s.sk_units, 30);
  EXPECT_EQ(s.dp_rounds, 1);
  EXPECT_EQ(s.sk_iters, 29);
  EXPECT_EQ(s.sk_extra, 6);
  // 289 tiles on 132: 2 data-parallel waves, then 25 tiles streamed.
  ASSERT_TRUE(ti::make_schedule(289, 1, 16, 132, true, &s));
  EXPECT_EQ(s.sk_units, 25);
  EXPECT_EQ(s.dp_rounds, 2);
  // Fewer tiles than workers: all streamed.
  ASSERT_TRUE(ti::make_schedule(30, 1, 16, 132, true, &s));
  EXPECT_EQ(s.sk_units, 30);
  EXPECT_EQ(s.dp_rounds, 0);
  // A partial wave with fewer k-tiles than workers: nothing to share out.
  ASSERT_TRUE(ti::make_schedule(289, 1, 3, 132, true, &s));
  EXPECT_EQ(s.sk_units, 0);
  // Fewer k-tiles in all than workers: nothing to share out.
  ASSERT_TRUE(ti::make_schedule(2, 1, 4, 132, true, &s));
  EXPECT_EQ(s.sk_units, 0);
  // Never together with split-K.
  ASSERT_TRUE(ti::make_schedule(30, 2, 16, 132, true, &s));
  EXPECT_EQ(s.sk_units, 0);
  // Beyond 32 bits: refused (the launcher then reports an invalid value).
  EXPECT_FALSE(ti::make_schedule(1LL << 31, 1, 4, 132, false, &s));
}

}  // namespace
