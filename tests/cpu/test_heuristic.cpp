// The configuration table (gemm/configs.cpp, sm80/configs.def) and the heuristic select_config.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <iterator>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "gemm/configs.hpp"
#include "gemm/memo.hpp"
#include "gemm/sm80/launch.hpp"
#include "gemm/sm90/config_shape.hpp"
#include "gemm/sm90/launch.hpp"
#include "gemm/skinny/skinny.hpp"

// The library's internal namespace (headers under src/).
namespace ti = tessera::gemm_impl;

namespace {

using ti::Config;
using ti::configs;
using ti::HeuristicInput;
using ti::Kernel;
using ti::select_config;

struct Device {
  const char* name;
  int sm_count, cc, smem_optin;
};
constexpr Device kH100{"H100", 132, 90, 232448};
constexpr Device kA100{"A100", 108, 80, 166912};
constexpr Device kSm86{"sm_86", 84, 86, 101376};

constexpr const char* kLarge = "sm80_128x256x64_s3_w8";  // the first (preferred) large config
constexpr const char* kMedium = "sm80_128x128x32_s4_w4";
constexpr const char* kSmall = "sm80_64x64x32_s3_w4";

const Config& pick(const Device& d, long long m, long long n, long long k, long long batch = 1) {
  return select_config(HeuristicInput{m, n, k, batch, d.sm_count, d.cc, d.smem_optin});
}
// The same with TMA-ready operands (aligned or padded, K > 0): Hopper takes the sm90 family.
const Config& pick_tma(const Device& d, long long m, long long n, long long k, long long batch = 1) {
  return select_config(HeuristicInput{m, n, k, batch, d.sm_count, d.cc, d.smem_optin, true});
}

constexpr const char* kSm90Large = "sm90_128x256x64_s4_c2_coop";  // the preferred large config
constexpr const char* kSm90Medium = "sm90_128x128x64_s6_coop";
constexpr const char* kSm90MediumPairs = "sm90_128x128x64_s6_c2_coop";  // the same, B multicast along M
constexpr const char* kSm90Pair192 = "sm90_128x192x64_s5_c2_coop";  // partial last waves of 128x256
constexpr const char* kSm90Small = "sm90_128x64x64_s8_c1x2_coop";
constexpr const char* kSm90Pingpong = "sm90_64x256x64_s5_c2_pingpong";
constexpr const char* kSm90Decode = "sm90_64x64x64_s13_c2_coop";  // M = 128 with few N tiles
constexpr const char* kSm90DecodeT = "sm90_64x64x64_s13_c1x2_coop";  // the same, N = 128 (pairs share A)
constexpr const char* kSm90Square192 = "sm90_192x192x64_s4_c2_coop";  // three consumer warpgroups
constexpr const char* kSm90Tall = "sm90_192x128x64_s4_c1x2_coop";  // three consumer warpgroups

long long tiles(const Config& c, long long m, long long n, long long batch) {
  return ((m + c.bm - 1) / c.bm) * ((n + c.bn - 1) / c.bn) * batch;
}

int smem_formula(const Config& c) {
  const int pipe = c.stages * (c.bm + c.bn) * c.bk * 2;
  const int epi = c.bm * (c.bn + 8) * 4;
  return std::max(pipe, epi);
}

// ---- the table -------------------------------------------------------------------------------------

TEST(ConfigTable, Consistent) {
  const auto& t = configs();
  ASSERT_GE(t.size(), 2u);
  std::set<std::string> names;
  std::set<int> ids;
  for (const Config& c : t) {
    SCOPED_TRACE(c.name);
    EXPECT_TRUE(names.insert(c.name).second) << "duplicate name";
    EXPECT_EQ(ti::find_config(c.name), &c);
    EXPECT_NE(ti::config_names().find(c.name), std::string::npos);
    EXPECT_GE(c.min_cc, 80);
    EXPECT_GE(c.max_cc, c.min_cc);
    EXPECT_GT(std::string(c.reason).size(), 20u);
    if (c.kernel == Kernel::Sm80) {
      // Ids name the generated translation units; the order of the rows is the heuristic's preference.
      EXPECT_TRUE(ids.insert(c.id).second) << "duplicate sm80 id";
      EXPECT_EQ(c.smem_bytes, smem_formula(c));
      EXPECT_EQ(c.smem_bytes, ti::sm80::smem_bytes(c.id)) << "dispatch.cpp disagrees";
      EXPECT_EQ(std::string(c.name),
                "sm80_" + std::to_string(c.bm) + "x" + std::to_string(c.bn) + "x" + std::to_string(c.bk) + "_s" +
                    std::to_string(c.stages) + "_w" + std::to_string(c.warps))
          << "the name states the tile";
      EXPECT_EQ(c.bm % 16, 0);
      EXPECT_EQ(c.bn % 16, 0);
      EXPECT_EQ(c.bk % 16, 0);
    }
    if (c.kernel == Kernel::Sm90) {
      EXPECT_TRUE(ids.insert(c.id).second) << "duplicate id (sm80 and sm90 ids share one namespace)";
      EXPECT_EQ(c.smem_bytes, ti::sm90::smem_bytes(c.id)) << "dispatch.cpp disagrees";
      EXPECT_LE(c.smem_bytes, ti::sm90::kSmemOptinBytes) << "more than an H100's 227 KB per block";
      EXPECT_EQ(c.min_cc, 90);
      EXPECT_EQ(c.max_cc, 90) << "sm_90a SASS runs on cc 9.0 only";
      EXPECT_EQ(c.bm % 64, 0) << "64 rows per consumer warpgroup";
      EXPECT_EQ(c.bk % 64, 0) << "one 128-byte swizzle atom deep";
      EXPECT_EQ(c.warps, 4 * (1 + (c.pingpong ? 2 : c.bm / 64))) << "producer + consumer warpgroups";
      if (c.pingpong) {
        EXPECT_EQ(c.bm, 64) << "a ping-pong warpgroup owns a 64-row tile";
      }
      const std::string schedule = c.pingpong ? "_pingpong" : "_coop";
      EXPECT_EQ(std::string(c.name).find(schedule), std::string(c.name).size() - schedule.size())
          << "the name states the schedule";
      const std::string prefix = "sm90_" + std::to_string(c.bm) + "x" + std::to_string(c.bn) + "x" +
                                 std::to_string(c.bk) + "_s" + std::to_string(c.stages) + "_";
      EXPECT_EQ(std::string(c.name).rfind(prefix, 0), 0u) << "the name states the tile";
    }
  }
  EXPECT_EQ(t.back().kernel, Kernel::Fallback);
  EXPECT_EQ(&t.back(), &ti::fallback_config());
  EXPECT_EQ(std::string(t.back().name), "simt_fallback");
  EXPECT_EQ(ti::find_config("nope"), nullptr);
  EXPECT_EQ(ti::find_config(""), nullptr);
  EXPECT_EQ(ti::sm80::smem_bytes(999), 0);
  EXPECT_EQ(ti::sm90::smem_bytes(999), 0);
  EXPECT_NE(ti::find_config(kSm90Large), nullptr);
  EXPECT_NE(ti::find_config(kSm90Medium), nullptr);
  EXPECT_NE(ti::find_config(kLarge), nullptr);
  EXPECT_NE(ti::find_config(kMedium), nullptr);
  EXPECT_NE(ti::find_config(kSmall), nullptr);
}

// `tessera info` prints every reason: one line on why the configuration exists. Measurements (and
// the GPU, commit and date they came from) belong in docs/PERF.md, not in src/ (issue 27).
::testing::AssertionResult one_line_of_design(const std::string& reason) {
  if (reason.find('\n') != std::string::npos) return ::testing::AssertionFailure() << "more than one line";
  if (reason.size() > 160) return ::testing::AssertionFailure() << reason.size() << " characters, more than 160";
  for (const char* note : {"TFLOP", "GB/s", "TB/s", "H100", "H200", "geomean", "bench/results"})
    if (reason.find(note) != std::string::npos)
      return ::testing::AssertionFailure() << "'" << note << "': a measurement, for docs/PERF.md";
  static const std::regex timing("[0-9] ?(us|ms|ns)\\b");
  if (std::regex_search(reason, timing)) return ::testing::AssertionFailure() << "a timing, for docs/PERF.md";
  return ::testing::AssertionSuccess();
}

// The attention rows' reasons (attention/api.cpp's table keeps only the shapes).
struct AttnReason {
  const char* name;
  const char* reason;
};
constexpr AttnReason kAttnReasons[] = {
#define TESSERA_ATTN_CONFIG(id, name, d, bm, bn, warps, reason) {name, reason},
#define TESSERA_ATTN_SM90_CONFIG(id, name, d, bm, bn, overlap, reason) {name, reason},
#define TESSERA_ATTN_SM90WS_CONFIG(id, name, d, bm, bn, stages, reason) {name, reason},
#include "attention/configs.def"
#undef TESSERA_ATTN_CONFIG
#undef TESSERA_ATTN_SM90_CONFIG
#undef TESSERA_ATTN_SM90WS_CONFIG
};

TEST(ConfigTable, ReasonsAreOneLineOfDesign) {
  for (const Config& c : configs()) EXPECT_TRUE(one_line_of_design(c.reason)) << c.name << ": " << c.reason;
  EXPECT_GE(std::size(kAttnReasons), 11u);  // the three families' rows
  for (const AttnReason& a : kAttnReasons) {
    EXPECT_GT(std::string(a.reason).size(), 20u) << a.name;
    EXPECT_TRUE(one_line_of_design(a.reason)) << a.name << ": " << a.reason;
  }
}

TEST(ConfigTable, OrderedFromLargestTileToSmallest) {
  // select_config walks each family in table order and keeps the last fitting config as "smallest".
  for (Kernel family : {Kernel::Sm80, Kernel::Sm90}) {
    long long prev = -1;
    for (const Config& c : configs()) {
      if (c.kernel != family) continue;
      const long long area = (long long)c.bm * c.bn;
      if (prev >= 0) {
        EXPECT_LE(area, prev) << c.name;
      }
      prev = area;
    }
  }
}

TEST(ConfigTable, Sm90SmemFormulaMatchesTheLayout) {
  // The ring, the epilogue buffers and the barriers, rounded to 1024 bytes. 128x256 in 4 stages has
  // room for two 8 KB TMA-store sub-tiles per consumer warpgroup; 128x192 in 5 stages does not and
  // keeps one buffer (the 10 KB fp32 staging, which the sub-tile shares).
  EXPECT_EQ(ti::sm90::epilogue_buffers(128, 256, 64, 4, false), 2);
  EXPECT_EQ(ti::sm90::smem_bytes_for(128, 256, 64, 4, false), 4 * 384 * 64 * 2 + 2 * 2 * 64 * 64 * 2 + 1024);
  EXPECT_EQ(ti::sm90::epilogue_buffers(128, 192, 64, 5, false), 1);
  EXPECT_EQ(ti::sm90::smem_bytes_for(128, 192, 64, 5, false), 5 * 320 * 64 * 2 + 2 * 64 * 40 * 4 + 1024);
  EXPECT_EQ(ti::sm90::smem_bytes_for(128, 128, 64, 6, false) % 1024, 0);
  EXPECT_GE(ti::sm90::smem_bytes_for(128, 128, 64, 6, false), 6 * 256 * 64 * 2 + 2 * 64 * 40 * 4 + 6 * 16);
  // Ping-pong: two consumer warpgroups on 64-row tiles (two epilogue buffers' worth of staging).
  EXPECT_EQ(ti::sm90::consumer_warpgroups(64, true), 2);
  EXPECT_GE(ti::sm90::smem_bytes_for(64, 256, 64, 5, true), 5 * 320 * 64 * 2 + 2 * 64 * 40 * 4 + 5 * 16 + 16);
}

// ---- the Hopper family ------------------------------------------------------------------------------

TEST(Heuristic, HopperWithTmaReadyOperandsTakesWgmma) {
  EXPECT_STREQ(pick_tma(kH100, 8192, 8192, 8192).name, kSm90Large);
  EXPECT_STREQ(pick_tma(kH100, 4096, 4096, 4096).name, kSm90Large);
  // 3000^3: 576 tiles of 128x128 pull 887 MB out of L2 (L2-bound: ncu 81% of L2 throughput on the
  // H100, 164 us); 288 tiles of 128x256 in 2x1 clusters pull 443 MB (114 us, measured) but fill
  // 2.2 waves of cluster pairs, 384 tiles of 128x192 fill 2.9 (95 us), 256 of 192x192 1.94 (85 us).
  EXPECT_STREQ(pick_tma(kH100, 3000, 3000, 3000).name, kSm90Square192);
  EXPECT_STREQ(pick_tma(kH100, 1536, 1536, 1536).name, kSm90Pair192);  // 72 vs 96 SMs busy, one wave
  // M = 128: DRAM sets the pace (B is read once); a 2x1 cluster would be half empty and 256-wide
  // tiles streamed B at ~70% of the rate of 128-wide ones (measured), so 128x128.
  EXPECT_STREQ(pick_tma(kH100, 128, 16384, 4096).name, kSm90Medium);
  EXPECT_STREQ(pick_tma(kH100, 128, 65536, 4096).name, kSm90Medium);
  // N = 128: a 256-wide tile would be half padding; 224 tiles of 128x128 instead.
  EXPECT_STREQ(pick_tma(kH100, 28672, 128, 4096).name, kSm90Medium);
  // The DRAM term rates 448 tiles of 128x128 (3.4 waves) and 448 pairs of 128x64 (6.8 waves of
  // pairs) alike; the fuller last wave wins the tie (H100, same run: 336 vs 347 us). At 28672 both
  // leave a third of a wave and the larger tile stays (93 vs 95 us).
  EXPECT_STREQ(pick_tma(kH100, 57344, 128, 8192).name, kSm90Small);
}

TEST(Heuristic, SmallProblemsStayOnWgmma) {
  // Unsplit, the sm90 kernel beat sm80_64x64 at 1024^3 on the H100 (11.1 vs 15.2 us); 128 tiles of
  // 128x64 in 1x2 pairs keep 128 SMs streaming where 64 tiles of 128x128 keep 64.
  EXPECT_STREQ(pick_tma(kH100, 1024, 1024, 1024).name, kSm90Small);
  // One tile: the smallest (least padding, the same single k-tile), in either pair orientation.
  const Config& one = pick_tma(kH100, 1, 1, 1);
  EXPECT_TRUE(one.bm == 64 && one.bn == 64 && !one.pingpong) << one.name;
}

TEST(Heuristic, FewTileProblemsTakeTheNarrowTile) {
  // 128 x 4096 x 4096: 32 tiles of 128x128 leave 100 SMs idle and each of the 32 runs 64 k-tiles of
  // MMA (~24 us); 64 tiles of 128x64 halve that but each SM can take in only ~55 B/clk (16 us for
  // its 64 k-tiles of 24 KB); 128 tiles of 64x64 in 2x1 pairs spread the intake over 128 SMs and
  // L2 (~15 us) becomes the bound.
  EXPECT_STREQ(pick_tma(kH100, 128, 4096, 4096).name, kSm90Decode);
  // The same problem the other way round (a column-major D): the pairs that multicast the weights,
  // now A (H100, same run: 17.4 us vs 18.5 for pairs along M).
  EXPECT_STREQ(pick_tma(kH100, 4096, 128, 4096).name, kSm90DecodeT);
  // Long K: the 64x64 pairs stream the weights at 7.5 TB/s of L2 traffic, the activations served
  // to every pair at about the same k-tile (H100, same run: 47.0 us vs 54.3 for 128x64 pairs
  // streamed, cuBLASLt 54.2), in either orientation.
  EXPECT_STREQ(pick_tma(kH100, 4096, 128, 14336).name, kSm90DecodeT);
  EXPECT_STREQ(pick_tma(kH100, 128, 4096, 14336).name, kSm90Decode);
  // 128 x 6144: 192 tiles of 64x64 would run two waves; 96 of 128x64 leave 36 SMs idle; 128 of
  // 64x96 in pairs sharing the weights fill the GPU (the DRAM term ties them; the fuller wave wins).
  EXPECT_STREQ(pick_tma(kH100, 128, 6144, 4096).name, "sm90_64x96x64_s10_c2_coop");
  EXPECT_STREQ(pick_tma(kH100, 6144, 128, 4096).name, kSm90Small);  // 128 columns are 1.33 tiles of 96
  // Enough 128x128 tiles (128 x 16384: 128 tiles): the wider tile reads A half as often.
  EXPECT_STREQ(pick_tma(kH100, 128, 16384, 4096).name, kSm90Medium);
}

TEST(Heuristic, Sm90OnlyOnCc90) {
  // sm_90a code does not run on Ampere, Ada or Blackwell: they keep the mma.sync family.
  const Device later{"sm_100", 264, 100, 232448}, ada{"sm_89", 128, 89, 101376};
  for (const Device& d : {kA100, kSm86, later, ada})
    EXPECT_EQ(pick_tma(d, 8192, 8192, 8192).kernel, Kernel::Sm80) << d.name;
  // Without TMA-ready operands (unaligned and no workspace, or K = 0) Hopper keeps mma.sync too.
  EXPECT_STREQ(pick(kH100, 8192, 8192, 8192).name, kLarge);
  // Not enough shared memory for any sm90 config (a cut-down part with 99 KB): the sm80 family, not
  // the fallback.
  const Device small_smem{"h-small", 132, 90, 101376};
  for (const Config& c : configs()) {
    if (c.kernel == Kernel::Sm90) {
      ASSERT_GT(c.smem_bytes, small_smem.smem_optin) << c.name;
    }
  }
  EXPECT_EQ(pick_tma(small_smem, 8192, 8192, 8192).kernel, Kernel::Sm80);
}

// ---- explicit choices ---------------------------------------------------------------------------------

TEST(Heuristic, LargeSquaresPickTheLargestTile) {
  for (const Device& d : {kH100, kA100})
    for (long long s : {4096LL, 8192LL, 16384LL}) EXPECT_STREQ(pick(d, s, s, s).name, kLarge) << d.name << " " << s;
  EXPECT_STREQ(pick(kA100, 3072, 3072, 3072).name, kLarge);  // 24 * 12 = 288 tiles
}

TEST(Heuristic, Sm86SkipsTheLargestTile) {
  ASSERT_GT(ti::find_config(kLarge)->smem_bytes, kSm86.smem_optin);
  for (long long s : {1024LL, 4096LL, 8192LL}) {
    const Config& c = pick(kSm86, s, s, s);
    EXPECT_STRNE(c.name, kLarge) << s;
    EXPECT_LE(c.smem_bytes, kSm86.smem_optin);
  }
  EXPECT_STREQ(pick(kSm86, 4096, 4096, 4096).name, kMedium);
}

TEST(Heuristic, SkinnyMPicksASmallerTileThatFillsTheSMs) {
  // M = 128: 128x256 tiles give N / 256 CTAs.
  // H100 (132 SMs), N = 16384: 64 (128x256), 128 (128x128) < 132 -> 64x64 gives 512.
  EXPECT_STREQ(pick(kH100, 128, 16384, 4096).name, kSmall);
  // A100 (108 SMs): 128x128 already gives 128 >= 108.
  EXPECT_STREQ(pick(kA100, 128, 16384, 4096).name, kMedium);
  // N = 65536: 128x256 gives 256 tiles, enough everywhere.
  EXPECT_STREQ(pick(kH100, 128, 65536, 4096).name, kLarge);
  // N = 128 instead: 128x256 tiles still give M / 128 CTAs (the tile is tall enough).
  EXPECT_STREQ(pick(kA100, 16384, 128, 4096).name, kLarge) << "128 tiles fill 108 SMs";
  EXPECT_STREQ(pick(kH100, 16384, 128, 4096).name, kSmall) << "128 tiles of 128x256 or 128x128 < 132 SMs";
  EXPECT_STREQ(pick(kH100, 128, 8192, 4096).name, kSmall);
  EXPECT_STREQ(pick(kA100, 256, 8192, 4096).name, kMedium);  // 64 (128x256) < 108 <= 128 (128x128)
}

TEST(Heuristic, TinyProblemsPickTheSmallestTile) {
  for (const Device& d : {kH100, kA100, kSm86}) {
    EXPECT_STREQ(pick(d, 1, 1, 1).name, kSmall) << d.name;
    EXPECT_STREQ(pick(d, 17, 33, 7).name, kSmall) << d.name;
    EXPECT_STREQ(pick(d, 128, 128, 32).name, kSmall) << d.name;
    EXPECT_STREQ(pick(d, 64, 80, 1).name, kSmall) << d.name;
  }
}

TEST(Heuristic, BatchMultipliesTiles) {
  // 1024^2: 32 tiles of 128x256, 64 of 128x128, 256 of 64x64.
  EXPECT_STREQ(pick(kH100, 1024, 1024, 1024, 1).name, kSmall);
  EXPECT_STREQ(pick(kH100, 1024, 1024, 1024, 4).name, kMedium);  // 128 < 132, 256 >= 132
  EXPECT_STREQ(pick(kH100, 1024, 1024, 1024, 5).name, kLarge);   // 160 >= 132
  EXPECT_STREQ(pick(kA100, 1024, 1024, 1024, 4).name, kLarge);   // 128 >= 108
  EXPECT_STREQ(pick(kH100, 64, 64, 64, 200).name, kLarge);       // 200 tiles even of 128x256
}

TEST(Heuristic, KDoesNotChangeTheChoice) {
  for (long long k : {1LL, 64LL, 4096LL, 1LL << 20})
    EXPECT_STREQ(pick(kH100, 4096, 4096, k).name, kLarge) << k;
}

TEST(Heuristic, NoSm80ConfigFitsFallsBack) {
  EXPECT_EQ(pick(Device{"tiny smem", 108, 80, 16 * 1024}, 4096, 4096, 4096).kernel, Kernel::Fallback);
  EXPECT_EQ(pick(Device{"sm_75", 40, 75, 65536}, 4096, 4096, 4096).kernel, Kernel::Fallback);
  // 48 KiB without opt-in still fits the 64x64 tile.
  EXPECT_STREQ(pick(Device{"48K", 108, 80, 49152}, 4096, 4096, 4096).name, kSmall);
}

// ---- split-K ------------------------------------------------------------------------------------------

TEST(SplitK, OnlyWhenTheTilesLeaveSMsIdle) {
  const Config& large = *ti::find_config(kSm90Large);
  const Config& medium = *ti::find_config(kSm90Medium);
  // 128x128 tiles fold in parallel (every range folds its share of the tile: ~4 us + 4 us for the
  // 64 KB partial), so a few-tile problem with enough K splits: 128 x 4096 (32 tiles of 64 or 224
  // k-tiles) in 3 ranges, 96 CTAs.
  EXPECT_EQ(ti::select_splits(medium, 128, 4096, 4096, 1, 132), 3);
  EXPECT_EQ(ti::select_splits(medium, 128, 4096, 14336, 1, 132), 3);
  // 64 tiles of 16 k-tiles: the fix-up costs more than the mainloop it halves (H100, same run:
  // 1024^3 on 128x128 tiles 9.2 us unsplit, 17.9 at 2 ranges).
  EXPECT_EQ(ti::select_splits(medium, 1024, 1024, 1024, 1, 132), 1);
  // Enough tiles: no split.
  EXPECT_EQ(ti::select_splits(large, 8192, 8192, 8192, 1, 132), 1);
  EXPECT_EQ(ti::select_splits(medium, 2048, 2048, 8192, 1, 132), 1);
  // Short K: every range keeps >= kMinKTilesPerSplit k-tiles ...
  EXPECT_EQ(ti::select_splits(medium, 128, 128, 64 * 7, 1, 132), 1);
  // ... and a split must pay for its fix-up: 8 or 16 k-tiles on one tile do not.
  EXPECT_EQ(ti::select_splits(medium, 128, 128, 64 * 8, 1, 132), 1);
  EXPECT_EQ(ti::select_splits(medium, 128, 128, 64 * 16, 1, 132), 1);
  // One tile of 64 k-tiles (~23 us of mainloop): 16 ranges of 4.
  EXPECT_EQ(ti::select_splits(medium, 128, 128, 64 * 64, 1, 132), 16);
  // One tile of 1024 k-tiles: 40 ranges, where the DRAM term (32 MB) binds, not all 132 SMs: more
  // ranges only add fix-up (H100, same run, 128x128x65536 on 128x128 tiles: 25.1 / 24.2 / 25.0 us
  // at 33 / 66 / 128 ranges). The 128x256 pairs fold serially (~10 us + 5 us a range): 12.
  EXPECT_EQ(ti::select_splits(medium, 128, 128, 64 * 1024, 1, 132), 40);
  EXPECT_EQ(ti::select_splits(large, 128, 128, 64 * 1024, 1, 132), 12);
  // One tile, huge K: DRAM-bound long before kMaxSplits.
  const int huge = ti::select_splits(medium, 64, 64, 1 << 20, 1, 132);
  EXPECT_GT(huge, 16);
  EXPECT_LT(huge, ti::kMaxSplits);
  // Not for the mma.sync family.
  EXPECT_EQ(ti::select_splits(*ti::find_config(kSmall), 128, 4096, 4096, 1, 132), 1);
}

TEST(SplitK, DecodeShapesOfModerateKRunUnsplit) {
  // A decode step's GEMMs (x @ W^T at 32..128 tokens, K 2048..5632 over N 1024..2048): split, the
  // ranges' fold cost more than the shorter mainloop saved (64 x 2048 x 5632: 16.0 -> 13.2 us unsplit).
  for (long long m : {32LL, 64LL, 128LL})
    for (const auto& nk : {std::array<long long, 2>{2048, 5632}, {2048, 2048}, {1024, 4096}}) {
      const Config& c = pick_tma(kH100, m, nk[0], nk[1]);
      EXPECT_EQ(ti::select_decomposition(c, m, nk[0], nk[1], 1, 132).splits, 1) << m << " " << nk[0] << " " << nk[1];
    }
  // Long K over few tiles still splits (64 x 1024 x 14336: 27.9 us unsplit, 19.4 in four ranges).
  const Config& c = pick_tma(kH100, 64, 1024, 14336);
  EXPECT_GT(ti::select_decomposition(c, 64, 1024, 14336, 1, 132).splits, 1);
}

TEST(Heuristic, DecodeTilesDoNotPadTheirCluster) {
  // At most 64 tokens fill one 64-row tile: of the two mirror-image 64x64 pairs, the one along N
  // (both CTAs work), not the one along M (one CTA of each pair all padding).
  for (long long m : {17LL, 32LL, 64LL})
    for (long long n : {512LL, 2048LL}) EXPECT_STREQ(pick_tma(kH100, m, n, 2048).name, kSm90DecodeT) << m << " " << n;
  // From 65 tokens the pairs along M both work and share the weights again.
  EXPECT_STREQ(pick_tma(kH100, 128, 2048, 2048).name, kSm90Decode);
}

TEST(StreamK, NotOnAPingpongCtaWithOneShare) {
  // Fewer ping-pong tiles than SMs: each CTA would hold one share of one tile, one consumer
  // warpgroup idle (256 x 1024 x 14336: 32.6 us streamed, 23.1 for 128x64 pairs in four ranges).
  const Config& pp = *ti::find_config(kSm90Pingpong);
  EXPECT_FALSE(ti::select_decomposition(pp, 256, 1024, 14336, 1, 132).stream_k);
  EXPECT_FALSE(ti::select_decomposition(pp, 256, 2048, 8192, 1, 132).stream_k);
  EXPECT_STRNE(pick_tma(kH100, 256, 1024, 14336).name, kSm90Pingpong);
}

TEST(SplitK, WorkspaceBoundCoversEveryDeviceUpToTheBound) {
  for (long long m : {1LL, 128LL, 1000LL, 4096LL})
    for (long long n : {64LL, 4096LL, 28672LL})
      for (long long k : {64LL, 1000LL, 4096LL, 28672LL})
        for (long long batch : {1LL, 3LL}) {
          const size_t bound = ti::splitk_workspace_bound(m, n, k, batch);
          for (int sms : {16, 108, 132, 170, 200, ti::kSplitKBoundSms})
            for (const Config& c : configs()) {
              const int s = ti::select_splits(c, m, n, k, batch, sms);
              EXPECT_LE(ti::splitk_bytes(c, m, n, batch, s), bound) << c.name << " " << m << "x" << n << "x" << k;
              EXPECT_LE(s, ti::kMaxSplits);
              if (s > 1) {
                EXPECT_GE((k + c.bk - 1) / c.bk / s, ti::kMinKTilesPerSplit);
                EXPECT_LE(tiles(c, m, n, batch) * s, sms) << "one wave of units";
              }
            }
        }
  // The bound is 0 when no config would split or stream (aligned operands then need no workspace).
  EXPECT_EQ(ti::splitk_workspace_bound(2048, 2048, 2048, 1), 0u);
  EXPECT_EQ(ti::splitk_workspace_bound(64, 64, 64, 1), 0u);
  // 128 x 4096 x 4096 splits: the bound is positive and at most 16 ranges of every tile of the
  // largest config (16 tiles of 128x256 fp32) plus the counters.
  const size_t b = ti::splitk_workspace_bound(128, 4096, 4096, 1);
  EXPECT_GT(b, 0u);
  EXPECT_LE(b, size_t(16) * 16 * 128 * 256 * 4 + 256);
}

// ---- properties over many shapes and devices -------------------------------------------------------------

TEST(Heuristic, Properties) {
  const std::vector<Device> devices = {kH100, kA100, kSm86, {"small", 16, 80, 101376}, {"48K", 46, 87, 49152},
                                       {"big", 264, 100, 232448}};
  const std::vector<long long> dims = {1, 7, 63, 64, 65, 127, 128, 129, 255, 256, 300, 777, 1000, 1025,
                                       2048, 4096, 5000, 16384, 100000};
  int checked = 0;
  for (const Device& d : devices)
    for (long long m : dims)
      for (long long n : dims)
        for (long long batch : {1LL, 2LL, 3LL, 16LL, 1000LL}) {
          const Config& c = pick(d, m, n, 64, batch);
          SCOPED_TRACE(std::string(d.name) + " " + std::to_string(m) + "x" + std::to_string(n) + " batch " +
                       std::to_string(batch) + " -> " + c.name);
          ASSERT_EQ(c.kernel, Kernel::Sm80);
          EXPECT_LE(c.smem_bytes, d.smem_optin) << "never more shared memory than the device has";
          EXPECT_LE(c.min_cc, d.cc);
          // The first fitting config (largest tile) with tiles >= SMs, else the last fitting one.
          const Config* want = nullptr;
          const Config* last = nullptr;
          for (const Config& x : configs()) {
            if (x.kernel != Kernel::Sm80 || x.smem_bytes > d.smem_optin || x.min_cc > d.cc) continue;
            last = &x;
            if (!want && tiles(x, m, n, batch) >= d.sm_count) want = &x;
          }
          if (!want) want = last;
          EXPECT_EQ(&c, want);
          if (tiles(c, m, n, batch) < d.sm_count) {
            // Nothing fills the SMs: then it is the tile with the most CTAs.
            for (const Config& x : configs())
              if (x.kernel == Kernel::Sm80 && x.smem_bytes <= d.smem_optin) {
                EXPECT_LE(tiles(x, m, n, batch), tiles(c, m, n, batch)) << x.name;
              }
          }
          ++checked;
        }
  EXPECT_GT(checked, 10000);
}

}  // namespace

// ---- ping-pong ---------------------------------------------------------------------------------------

TEST(Heuristic, PingpongOnlyWhereTheEpilogueDominates) {
  // H100, same run, 8192 x 8192 x K bf16: ping-pong on 64x256 tiles 508 vs 487 TFLOP/s for 128x256
  // pairs at K = 512 (the cooperative tile's ~3.6 us epilogue and restart per tile is a third of
  // it), 616 vs 632 at K = 1024, and 644 vs 795 at K = 8192 (twice the L2 -> SM bytes per FLOP).
  EXPECT_STREQ(pick_tma(kH100, 8192, 8192, 512).name, kSm90Pingpong);
  for (long long k : {1024LL, 2048LL, 4096LL, 8192LL}) EXPECT_STREQ(pick_tma(kH100, 8192, 8192, k).name, kSm90Large) << k;
  // Decode shapes: a lone 64x256 tile per CTA streamed B at half the rate of 128x128 tiles
  // (128x16384x4096: 117 vs 56 us); ties go to the earlier row, 128x128.
  EXPECT_STREQ(pick_tma(kH100, 128, 16384, 4096).name, kSm90Medium);
  EXPECT_STREQ(pick_tma(kH100, 16384, 128, 4096).name, kSm90Medium);
}

TEST(Heuristic, WithinOneWaveNoPingpong) {
  // One tile per CTA: a ping-pong CTA's second consumer idles. H200, same run, 64x256 pairs against
  // 128x128 pairs: 4096x512x2048 (a Llama K/V projection over 4096 tokens) 17.5 vs 14.5 us, 1024x2048x2048
  // 17.0 vs 13.6, 512x4096x4096 28.8 vs 24.8, 256x5632x2048 16.2 vs 13.7; the model rates them alike, and
  // within one wave of 128x128 tiles the pairs are no longer ruled out.
  for (auto [m, n, k] : {std::array<long long, 3>{4096, 512, 2048}, {1024, 2048, 2048}, {512, 4096, 4096},
                         {256, 5632, 2048}, {2048, 1024, 8192}})
    EXPECT_STREQ(pick_tma(kH100, m, n, k).name, kSm90MediumPairs) << m << "x" << n << "x" << k;
  // The ping-pong tile keeps the shapes of several waves whose epilogue it hides (8192 x 8192 x 512 above).
  EXPECT_STREQ(pick_tma(kH100, 8192, 8192, 512).name, kSm90Pingpong);
}

// ---- the flipped orientation (gemm/plan.hpp) ------------------------------------------------------

ti::Selection select_flip(long long m, long long n, long long k, int flip) {
  return ti::select(HeuristicInput{m, n, k, 1, kH100.sm_count, kH100.cc, kH100.smem_optin, true, flip});
}

TEST(Flip, OnlyTheDecodeTilesCanFlip) {
  // The transposed store is compiled into tiles at most 128 wide with one or two consumer
  // warpgroups (sm90/config_shape.hpp): the 128x256 and three-warpgroup consumers spilled with it.
  for (const Config& c : configs()) {
    if (c.kernel != Kernel::Sm90) {
      EXPECT_FALSE(c.flip) << c.name;
      continue;
    }
    EXPECT_EQ(c.flip, c.bn <= 128 && c.warps / 4 - 1 < 3) << c.name;
  }
  EXPECT_TRUE(ti::find_config("sm90_64x96x64_s10_c2_coop")->flip);
  EXPECT_FALSE(ti::find_config(kSm90Large)->flip);
}

TEST(Flip, SixThousandWideWeightsFlipOntoTheNinetySixWideTile) {
  // 128 x 6144 x 4096 with a column-major D is 6144 x 128 here: 128x64 pairs give 96 CTAs (the
  // weights along M in 64-row consumers); flipped, 64x96 pairs give 128 (cuBLASLt's choice).
  const ti::Selection natural = select_flip(6144, 128, 4096, 0);
  EXPECT_STREQ(natural.config->name, kSm90Small);
  EXPECT_FALSE(natural.flip);
  const ti::Selection flipped = select_flip(6144, 128, 4096, 1);
  EXPECT_STREQ(flipped.config->name, "sm90_64x96x64_s10_c2_coop");
  EXPECT_TRUE(flipped.flip);
  // A row-major D is that orientation already: no flip needed.
  const ti::Selection row = select_flip(128, 6144, 4096, 1);
  EXPECT_STREQ(row.config->name, "sm90_64x96x64_s10_c2_coop");
  EXPECT_FALSE(row.flip);
  // select_config is the natural orientation's answer.
  EXPECT_EQ(&select_config(HeuristicInput{6144, 128, 4096, 1, kH100.sm_count, kH100.cc, kH100.smem_optin, true, 1}),
            natural.config);
}

TEST(Flip, NotWhereTheSmallTileTakesManyMoreRounds) {
  // 128 x 28672 x 4096 (28672 x 128 here): 64x96 pairs fill their last round better (0.91 vs 0.85)
  // but take 5 rounds against 128x128's 2, and ran 96.6-97.4 us against 91.0-91.2 (H100, same run).
  const ti::Selection s = select_flip(28672, 128, 4096, 1);
  EXPECT_STREQ(s.config->name, kSm90Medium);
  EXPECT_FALSE(s.flip);
  EXPECT_STREQ(select_flip(128, 28672, 4096, 1).config->name, kSm90Medium);  // a row-major D likewise
  // 128 x 12288 x 4096: 96 tiles of 128x128 in one partial round, or 2 rounds of 64x96 pairs
  // flipped: 42.4 vs 43.2 us.
  const ti::Selection t = select_flip(12288, 128, 4096, 1);
  EXPECT_STREQ(t.config->name, "sm90_64x96x64_s10_c2_coop");
  EXPECT_TRUE(t.flip);
}

TEST(Flip, TheNinetySixWideTileOnlyWhereItsPairsSpanM) {
  // 256 x 2048 x 4096: 64x96 pairs ran 23.1 / 16.5 us against 14.2 / 14.1 for 64x64 pairs (H100,
  // column- / row-major D), which the cost model rated the other way round.
  for (int flip : {0, 1}) {
    EXPECT_STRNE(select_flip(2048, 256, 4096, flip).config->name, "sm90_64x96x64_s10_c2_coop");
    EXPECT_STRNE(select_flip(256, 2048, 4096, flip).config->name, "sm90_64x96x64_s10_c2_coop");
  }
  EXPECT_STREQ(select_flip(2048, 256, 4096, 1).config->name, kSm90DecodeT);
  EXPECT_STREQ(select_flip(256, 2048, 4096, 1).config->name, kSm90Decode);
}

TEST(Flip, TheNinetySixWideTileWhereItsColumnsDivideTheRows) {
  // 192 rows of activations: flipped 64x96 pairs hold them in two whole tiles and ran 1.26x faster
  // than the 128x64 pairs chosen before (H100, same run: 192 x 4096 x 4096 23.3 -> 18.6 us).
  for (long long k : {4096LL, 14336LL}) {
    const ti::Selection s = select_flip(192, 4096, k, 1);
    EXPECT_TRUE(s.flip) << k;
    EXPECT_STREQ(s.config->name, "sm90_64x96x64_s10_c2_coop") << k;
  }
}

TEST(Flip, OnlyWithASideOfAtMost512) {
  // Only a problem with a side of at most 512 is costed flipped (mode 1); elsewhere the answer is
  // the natural one whatever the mode allows.
  for (long long m : {1000LL, 1024LL, 3000LL, 4096LL, 8192LL})
    for (long long n : {1024LL, 4096LL, 6144LL, 28672LL})
      for (long long k : {512LL, 4096LL}) {
        const ti::Selection a = select_flip(m, n, k, 0), b = select_flip(m, n, k, 1);
        EXPECT_EQ(a.config, b.config) << m << "x" << n << "x" << k;
        EXPECT_FALSE(b.flip) << m << "x" << n << "x" << k;
      }
}

TEST(Flip, TheSameTileFlippedWhereItsPairsThenShareTheWeights) {
  // 256 x 4096 x 4096: 128x64 pairs along N share the 256 rows of A; flipped, the weights (H200, same
  // run: 16.9 against 20.9 us). The cost model rates both alike; the tie goes to the larger operand.
  const ti::Selection s = select_flip(256, 4096, 4096, 1);
  EXPECT_TRUE(s.flip);
  EXPECT_STREQ(s.config->name, "sm90_128x64x64_s8_c1x2_coop");
  EXPECT_FALSE(select_flip(256, 4096, 4096, 0).flip);
}

TEST(Heuristic, AtMost32RowsThePingpongPairsStreamTheWeights) {
  // 17-32 rows of activations against large weights: 64x256 ping-pong pairs along M (the second CTA
  // holds no rows but loads half of each weight tile) ran 1.06-1.22x faster than 64x64 pairs (H100,
  // same run: 32 x 14336 x 4096 54.3 -> 46.7 us); from 48 rows on they did not, and at 96 rows the
  // rule that lets them in chose worse tiles.
  for (long long m : {17LL, 24LL, 32LL})
    for (auto [n, k] : {std::array<long long, 2>{14336, 4096}, {28672, 4096}, {32000, 2048}})
      EXPECT_STREQ(select_flip(m, n, k, 1).config->name, kSm90Pingpong) << m << "x" << n << "x" << k;
  for (long long m : {48LL, 64LL, 96LL}) EXPECT_STRNE(select_flip(m, 14336, 4096, 1).config->name, kSm90Pingpong) << m;
}

TEST(Heuristic, OneWaveLaunchesReadL2Faster) {
  // At most one wave of tiles, the L2 -> SM term runs at the one-wave rate: 256 x 4096 x 11008 ran 38-44
  // us on 128x64 pairs (flipped) or 128x128 pairs, 50.7 on the stream-K 128x256 pairs that the
  // several-wave rate chose (H200, same run).
  const ti::Selection s = select_flip(512, 4096, 14336, 1);
  EXPECT_STREQ(s.config->name, kSm90MediumPairs);
  EXPECT_STRNE(select_flip(256, 4096, 11008, 1).config->name, kSm90Large);
}

TEST(Flip, ForcedFlipsWithAConfigThatCan) {
  for (long long m : {128LL, 1000LL, 4096LL})
    for (long long n : {128LL, 6144LL}) {
      const ti::Selection s = select_flip(m, n, 4096, 2);
      EXPECT_TRUE(s.flip) << m << "x" << n;
      EXPECT_TRUE(s.config->flip) << s.config->name;
    }
}

// ---- L2 warm-up at entry (configs.cpp l2_warm_ktiles) ---------------------------------------------------

TEST(L2Warm, OnlyTheDecodeTilesCarryIt) {
  // Compiled into the cooperative tiles with a side of 64 (sm90/config_shape.hpp): it cost the 64x256
  // ping-pong tile a stack slot.
  for (const Config& c : configs()) {
    if (c.kernel != Kernel::Sm90) {
      EXPECT_FALSE(c.l2_warm) << c.name;
      continue;
    }
    EXPECT_EQ(c.l2_warm, !c.pingpong && (c.bm == 64 || c.bn == 64)) << c.name;
  }
  EXPECT_FALSE(ti::find_config(kSm90Medium)->l2_warm);
}

TEST(L2Warm, OnOneWaveDecodeLaunchesOnly) {
  const ti::Decomposition dp{};
  const Config& small = *ti::find_config(kSm90Small);    // 128x64 pairs
  const Config& decode = *ti::find_config(kSm90Decode);  // 64x64 pairs
  // The suite's decode shapes as they run (a column-major D: 8192 x 128, 4096 x 128): one tile per CTA.
  EXPECT_EQ(ti::l2_warm_ktiles(small, dp, 8192, 128, 1, 132), ti::kL2WarmKTiles);
  EXPECT_EQ(ti::l2_warm_ktiles(decode, dp, 128, 4096, 1, 132), ti::kL2WarmKTiles);
  EXPECT_GT(ti::kL2WarmKTiles, 0);
  // Not beyond one wave (two tiles on a CTA), not with a side above 128, not split or streamed, and
  // not on a tile without it.
  EXPECT_EQ(ti::l2_warm_ktiles(small, dp, 16384, 128, 1, 132), 0);
  EXPECT_EQ(ti::l2_warm_ktiles(small, dp, 4096, 128, 2, 132), ti::kL2WarmKTiles);  // 128 tiles
  EXPECT_EQ(ti::l2_warm_ktiles(small, dp, 4096, 128, 3, 132), 0);                   // 192
  EXPECT_EQ(ti::l2_warm_ktiles(small, dp, 1024, 256, 1, 132), 0);
  EXPECT_EQ(ti::l2_warm_ktiles(small, ti::Decomposition{2, false}, 4096, 128, 1, 132), 0);
  EXPECT_EQ(ti::l2_warm_ktiles(small, ti::Decomposition{1, true}, 4096, 128, 1, 132), 0);
  EXPECT_EQ(ti::l2_warm_ktiles(*ti::find_config(kSm90Medium), dp, 8192, 128, 1, 132), 0);
  EXPECT_EQ(ti::l2_warm_ktiles(ti::fallback_config(), dp, 4096, 128, 1, 132), 0);
}

// ---- stream-K -----------------------------------------------------------------------------------------

TEST(StreamK, OnlyWhereThePartialWaveCostsClearly) {
  const Config& large = *ti::find_config(kSm90Large);
  // 1024x6144x4096 with a column-major D (canonical 6144 x 1024): 96 pairs of 128x256 tiles for 66
  // workers, 2 waves data-parallel vs 1.45 streamed (H100: 93.5 -> 87.1 us) ...
  EXPECT_TRUE(ti::select_decomposition(large, 6144, 1024, 4096, 1, 132).stream_k);
  // ... but 192x128 pairs cut it into 1.94 waves with no fix-up: H100, same run, 71.3-71.9 us
  // against 80.7-81.4 for 128x256 pairs streamed (cuBLASLt 70.2-70.6).
  EXPECT_STREQ(pick_tma(kH100, 6144, 1024, 4096).name, kSm90Tall);
  // The three-warpgroup tile has no registers for stream-K's fix-up: never streamed, even forced.
  const Config& tall = *ti::find_config(kSm90Tall);
  EXPECT_FALSE(tall.stream_k);
  EXPECT_TRUE(large.stream_k);
  for (long long s : {3000LL, 6144LL, 8192LL, 16384LL})
    EXPECT_FALSE(ti::select_decomposition(tall, s, 1024, 4096, 1, 132).stream_k) << s;
  // The partial wave streamed after the whole waves: 8192^3 1388 -> 1369 us, 16384^3 12.02 ->
  // 11.76 ms on the H100 (model: 1.5% to gain); 4096^3 lost (179.6 -> 187.8), 6144^3 was even.
  for (long long s : {8192LL, 16384LL}) EXPECT_TRUE(ti::select_decomposition(large, s, s, s, 1, 132).stream_k) << s;
  for (long long s : {2048LL, 4096LL, 6144LL})
    EXPECT_FALSE(ti::select_decomposition(large, s, s, s, 1, 132).stream_k) << s;
  // 3000^3: 128x256 streamed (99.1 us) loses to 128x192 pairs data-parallel (97.0 us), and that to
  // 192x192 pairs (1.94 waves, 85 us), which never stream.
  EXPECT_STREQ(pick_tma(kH100, 3000, 3000, 3000).name, kSm90Square192);
  EXPECT_FALSE(ti::find_config(kSm90Square192)->stream_k);
  // Decode shapes: the small tile's partial tiles are all the work; streaming lost 5-15%.
  EXPECT_FALSE(ti::select_decomposition(*ti::find_config(kSm90Small), 4096, 128, 4096, 1, 132).stream_k);
  // Never on the mma.sync family.
  EXPECT_FALSE(ti::select_decomposition(*ti::find_config(kSmall), 6144, 1024, 4096, 1, 132).stream_k);
}

TEST(StreamK, WorkspaceBoundCoversTheHeuristicsChoice) {
  // Where the heuristic streams on an H100, gemm_workspace_size's bound has room for it ...
  const Config& large = *ti::find_config(kSm90Large);
  EXPECT_GE(ti::splitk_workspace_bound(57344, 1024, 8192, 1), ti::streamk_bytes(large, 132));
  EXPECT_GE(ti::splitk_workspace_bound(8192, 8192, 8192, 1), ti::streamk_bytes(large, 132));
  // ... and where it does not, none is asked for (aligned operands then need no workspace).
  EXPECT_EQ(ti::splitk_workspace_bound(2048, 2048, 2048, 1), 0u);
  EXPECT_EQ(ti::splitk_workspace_bound(3000, 3000, 3000, 1), 0u);
  // One fp32 tile + one flag per CTA of the persistent grid.
  EXPECT_EQ(ti::streamk_bytes(large, 132), size_t(132) * 128 * 256 * 4 + 768);
}

// gemm() asks the heuristic on every call, so its answers are remembered per thread
// (gemm/memo.hpp): a hit must return what was computed, an evicted key is computed again.
TEST(Memo, ComputesOnlyOnAMissAndEvictsTheOldest) {
  ti::Memo<int, int, 3> memo;
  int computed = 0;
  auto square = [&](int x) { return memo.get(x, [&] { ++computed; return x * x; }); };
  EXPECT_EQ(square(2), 4);
  EXPECT_EQ(square(3), 9);
  EXPECT_EQ(square(2), 4);
  EXPECT_EQ(computed, 2);
  EXPECT_EQ(square(4), 16);
  EXPECT_EQ(square(5), 25);  // evicts 2, the oldest entry
  EXPECT_EQ(computed, 4);
  EXPECT_EQ(square(3), 9);
  EXPECT_EQ(computed, 4);
  EXPECT_EQ(square(2), 4);
  EXPECT_EQ(computed, 5);
}

// Interleaving more shapes than the caches hold (hits, misses, evictions) never changes an answer.
TEST(Memo, HeuristicAnswersDoNotDependOnWhatWasAskedBefore) {
  std::vector<HeuristicInput> shapes;
  for (long long m : {128LL, 1000LL, 1024LL, 3000LL, 8192LL})
    for (long long n : {128LL, 4096LL, 6144LL})
      for (long long k : {512LL, 4096LL}) shapes.push_back({m, n, k, 1, kH100.sm_count, kH100.cc, kH100.smem_optin, true});
  std::vector<const Config*> first;
  std::vector<ti::Decomposition> first_d;
  std::vector<size_t> first_ws;
  for (const HeuristicInput& in : shapes) {
    first.push_back(&select_config(in));
    first_d.push_back(ti::select_decomposition(*first.back(), in.m, in.n, in.k, in.batch, in.sm_count));
    first_ws.push_back(ti::splitk_workspace_bound(in.m, in.n, in.k, in.batch));
  }
  for (int round = 0; round < 3; ++round)
    for (size_t j = 0; j < shapes.size(); ++j) {
      const size_t i = round == 1 ? shapes.size() - 1 - j : (j * 7 + round) % shapes.size();
      const HeuristicInput& in = shapes[i];
      EXPECT_EQ(&select_config(in), first[i]) << in.m << "x" << in.n << "x" << in.k;
      const ti::Decomposition d = ti::select_decomposition(*first[i], in.m, in.n, in.k, in.batch, in.sm_count);
      EXPECT_EQ(d.splits, first_d[i].splits);
      EXPECT_EQ(d.stream_k, first_d[i].stream_k);
      EXPECT_EQ(ti::splitk_workspace_bound(in.m, in.n, in.k, in.batch), first_ws[i]);
    }
}


// ---- fp32 operands (tf32) ---------------------------------------------------------------------------

// fp32 operands go only to the rows compiled for tf32 (configs.def TESSERA_SM90_TF32 / _SM80_TF32),
// with K counted in 16-bit steps; never to the skinny kernel; without TMA-ready operands or on Ampere
// to the mma.sync tf32 rows.
// s8 operands run on the s8 rows only (WGMMA on Hopper, mma.sync m16n8k32 elsewhere).
TEST(Heuristic, S8OperandsTakeTheS8Rows) {
  int s8_rows = 0;
  for (const Config& c : configs()) s8_rows += c.s8 && c.kernel == Kernel::Sm90;
  EXPECT_GE(s8_rows, 1);
  EXPECT_TRUE(ti::fallback_config().s8);
  EXPECT_FALSE(ti::skinny_config().s8);
  for (auto [m, n, k] : std::vector<std::array<long long, 3>>{
           {8192, 8192, 8192}, {4096, 4096, 4096}, {1024, 1024, 1024}, {128, 4096, 4096}, {16, 4096, 4096}, {1, 1, 1}}) {
    HeuristicInput in{m, n, (k + 1) / 2, 1, kH100.sm_count, kH100.cc, kH100.smem_optin, true};
    in.s8 = true;
    in.skinny_ok = false;
    const Config& c = select_config(in);
    EXPECT_EQ(c.kernel, Kernel::Sm90) << m << "x" << n << "x" << k << ": " << c.name;
    EXPECT_TRUE(c.s8) << c.name;
    in.tma_ok = false;  // the mma.sync s8 rows (the plan falls back where the operands need a copy it cannot make)
    EXPECT_EQ(select_config(in).kernel, Kernel::Sm80);
    EXPECT_TRUE(select_config(in).s8);
    HeuristicInput a100{m, n, (k + 1) / 2, 1, kA100.sm_count, kA100.cc, kA100.smem_optin, true};
    a100.s8 = true;
    EXPECT_EQ(select_config(a100).kernel, Kernel::Sm80);
    EXPECT_TRUE(select_config(a100).s8) << select_config(a100).name;
  }
  HeuristicInput big{8192, 8192, 4096, 1, kH100.sm_count, kH100.cc, kH100.smem_optin, true};
  big.s8 = true;
  EXPECT_STREQ(select_config(big).name, kSm90Large);
}

// fp8 operands: the fp8 rows, on Hopper only; promoted sums (the default) only where they fit.
TEST(Heuristic, Fp8OperandsTakeTheFp8Rows) {
  int fp8_rows = 0, promoting = 0;
  for (const Config& c : configs()) {
    fp8_rows += c.fp8 && c.kernel == Kernel::Sm90;
    promoting += c.fp8_promote && c.kernel == Kernel::Sm90;
    EXPECT_TRUE(!c.fp8_promote || c.fp8) << c.name;
    EXPECT_TRUE(!c.fp8_block || c.fp8_promote) << c.name << ": block scales are applied as sums are promoted";
    EXPECT_TRUE(!c.fp8_block || c.kernel != Kernel::Sm90 || 128 % c.bn == 0) << c.name << ": one scale block per tile";
  }
  EXPECT_GE(fp8_rows, 2);
  EXPECT_GE(promoting, 1);
  EXPECT_TRUE(ti::fallback_config().fp8);
  EXPECT_FALSE(ti::skinny_config().fp8);
  EXPECT_FALSE(ti::find_config(kSm90Large)->fp8_promote);  // 128x256: no registers for a second set
  for (auto [m, n, k] : std::vector<std::array<long long, 3>>{
           {8192, 8192, 8192}, {4096, 4096, 4096}, {1024, 1024, 1024}, {128, 4096, 4096}, {16, 4096, 4096}, {1, 1, 1}}) {
    HeuristicInput in{m, n, (k + 1) / 2, 1, kH100.sm_count, kH100.cc, kH100.smem_optin, true};
    in.fp8 = true;
    in.skinny_ok = false;
    const Config& fast = select_config(in);
    EXPECT_EQ(fast.kernel, Kernel::Sm90) << m << "x" << n << "x" << k << ": " << fast.name;
    EXPECT_TRUE(fast.fp8) << fast.name;
    in.fp8_promote = true;
    const Config& promoted = select_config(in);
    EXPECT_TRUE(promoted.fp8_promote) << promoted.name;
    in.fp8_block = true;
    const Config& block = select_config(in);
    EXPECT_TRUE(block.fp8_block) << block.name;
    in.fp8_block = false;
    in.tma_ok = false;  // no copies: the CUDA cores
    EXPECT_EQ(select_config(in).kernel, Kernel::Fallback);
  }
  HeuristicInput big{8192, 8192, 4096, 1, kH100.sm_count, kH100.cc, kH100.smem_optin, true};
  big.fp8 = true;
  EXPECT_STREQ(select_config(big).name, kSm90Large);
  big.fp8_promote = true;  // the widest tile that promotes: 128x192 pairs
  EXPECT_STREQ(select_config(big).name, kSm90Pair192);
  big.fp8_block = true;  // block scales: a tile within one 128-column scale block, in pairs
  EXPECT_STREQ(select_config(big).name, kSm90MediumPairs);
  HeuristicInput decode{128, 4096, 2048, 1, kH100.sm_count, kH100.cc, kH100.smem_optin, true};
  decode.fp8 = decode.fp8_promote = true;
  EXPECT_STREQ(select_config(decode).name, kSm90Small);
}

// Block scales reach only the rows with block kernels (a tile within one 128-column scale block: not
// the 128x192 pairs, which promote), on every shape and orientation the heuristic sees; promoted sums
// only the rows that promote.
TEST(Heuristic, Fp8BlockScalesTakeOnlyTheBlockRows) {
  for (const Config& c : configs())
    if (c.kernel == Kernel::Sm90) {
      EXPECT_EQ(c.fp8_block, ti::sm90::has_fp8_block(c.id)) << c.name;
    }
  EXPECT_TRUE(ti::find_config(kSm90Pair192)->fp8_promote);
  EXPECT_FALSE(ti::find_config(kSm90Pair192)->fp8_block);
  for (long long m : {1LL, 128LL, 1000LL, 4096LL, 16384LL})
    for (long long n : {1LL, 192LL, 2048LL, 7168LL, 57344LL})
      for (long long k : {64LL, 4096LL, 16384LL})
        for (int flip = 0; flip < 3; ++flip) {
          HeuristicInput in{m, n, k / 2, 1, kH100.sm_count, kH100.cc, kH100.smem_optin, true, flip};
          in.fp8 = in.fp8_promote = true;
          in.skinny_ok = false;
          EXPECT_TRUE(select_config(in).fp8_promote) << m << "x" << n << "x" << k;
          in.fp8_block = true;
          const ti::Selection s = ti::select(in);
          ASSERT_NE(s.config, nullptr);
          EXPECT_TRUE(s.config->fp8_block) << m << "x" << n << "x" << k << " flip " << flip << ": " << s.config->name;
        }
}

TEST(Heuristic, F32OperandsTakeTheTf32Rows) {
  int tf32_rows = 0;
  for (const Config& c : configs()) tf32_rows += c.tf32 && c.kernel == Kernel::Sm90;
  EXPECT_GE(tf32_rows, 1);
  EXPECT_TRUE(ti::fallback_config().tf32);
  EXPECT_FALSE(ti::skinny_config().tf32);
  for (auto [m, n, k] : std::vector<std::array<long long, 3>>{
           {8192, 8192, 8192}, {4096, 4096, 4096}, {1024, 1024, 1024}, {128, 4096, 4096}, {16, 4096, 4096}, {1, 1, 1}}) {
    HeuristicInput in{m, n, 2 * k, 1, kH100.sm_count, kH100.cc, kH100.smem_optin, true};
    in.f32 = true;
    in.skinny_ok = false;
    const Config& c = select_config(in);
    EXPECT_EQ(c.kernel, Kernel::Sm90) << m << "x" << n << "x" << k << ": " << c.name;
    EXPECT_TRUE(c.tf32) << c.name;
    in.tma_ok = false;  // the mma.sync tf32 rows (the plan falls back where the operands need a copy it cannot make)
    EXPECT_EQ(select_config(in).kernel, Kernel::Sm80);
    EXPECT_TRUE(select_config(in).tf32);
    HeuristicInput a100{m, n, 2 * k, 1, kA100.sm_count, kA100.cc, kA100.smem_optin, true};
    a100.f32 = true;
    EXPECT_TRUE(select_config(a100).tf32) << select_config(a100).name;
    EXPECT_EQ(select_config(a100).kernel, Kernel::Sm80);  // the mma.sync tf32 rows
  }
  HeuristicInput big{8192, 8192, 2 * 8192, 1, kH100.sm_count, kH100.cc, kH100.smem_optin, true};
  big.f32 = true;
  EXPECT_STREQ(select_config(big).name, kSm90Large);
  // 3xTF32 needs promoted accumulators: the 128x256 tile has no registers for them.
  big.f32x3 = true;
  const Config& x3 = select_config(big);
  EXPECT_TRUE(x3.tf32x3) << x3.name;
  EXPECT_STREQ(x3.name, kSm90Small);  // the 128x64 pairs cover the promotions' drains best
  EXPECT_FALSE(ti::find_config(kSm90Large)->tf32x3);
}

// The skinny kernel's W rows per CTA: one n8 tile where the grid fits one wave (two CTAs per SM)
// or never will, else the fewest of two or three that make it fit; three again from 30 waves of
// one-tile CTAs; batches and an SM budget count; past 16 rows of X always one (their kernel has no
// other).
TEST(SkinnyGemm, WeightTilesFitOneWave) {
  namespace sk = ti::skinny;
  for (int x : {1, 8, 16}) {
    EXPECT_EQ(sk::w_tiles(x, 2048, 1, 132), 1);   // 256 CTAs of 8 rows: one wave already
    EXPECT_EQ(sk::w_tiles(x, 512, 1, 132), 1);
    EXPECT_EQ(sk::w_tiles(x, 4096, 1, 132), 2);   // 512 groups: 256 CTAs of 16 rows
    EXPECT_EQ(sk::w_tiles(x, 5632, 1, 132), 3);   // 704 groups: 235 CTAs of 24 rows
    EXPECT_EQ(sk::w_tiles(x, 6336, 1, 132), 3);   // 792 groups: the most three tiles fit
    EXPECT_EQ(sk::w_tiles(x, 6344, 1, 132), 1);   // 793: several waves anyway
    EXPECT_EQ(sk::w_tiles(x, 32000, 1, 132), 1);   // 4000 CTAs of 8 rows: 15 waves
    EXPECT_EQ(sk::w_tiles(x, 63352, 1, 132), 1);   // 7919 CTAs: just under 30 waves
    EXPECT_EQ(sk::w_tiles(x, 63360, 1, 132), 3);   // 7920: 30 waves, 24-row CTAs
    EXPECT_EQ(sk::w_tiles(x, 128256, 1, 132), 3);  // Llama 3's vocabulary
    EXPECT_EQ(sk::w_tiles(x, 31000, 2, 132), 1);   // batches count: 7750 CTAs
    EXPECT_EQ(sk::w_tiles(x, 32000, 2, 132), 3);   // 8000
    EXPECT_EQ(sk::w_tiles(x, 16000, 1, 66), 1);    // an SM budget counts: 2000 CTAs on 132 slots
    EXPECT_EQ(sk::w_tiles(x, 32000, 1, 66), 3);    // 4000 on 132 slots: 30 waves
    EXPECT_EQ(sk::w_tiles(x, 2048, 2, 132), 2);   // two batches of 256 groups
    EXPECT_EQ(sk::w_tiles(x, 5632, 1, 66), 1);    // an SM budget of 66: 235 CTAs do not fit 132 slots
  }
  EXPECT_EQ(sk::w_tiles(1, 1, 1, 1), 1);
  EXPECT_EQ(sk::w_tiles(17, 5632, 1, 132), 1);    // past 16 rows of X: the one-tile kernel
  EXPECT_EQ(sk::w_tiles(64, 4096, 1, 132), 1);
}

// Decode shapes go to the skinny kernel, except 9-16 rows of X on Hopper against more weight rows
// than its grid covers in one wave (~6300 on 132 SMs): the sm90 tiles there, in either orientation.
TEST(Heuristic, NineToSixteenRowsLeaveTheSkinnyKernelPastOneWave) {
  auto skinny_input = [](const Device& d, long long m, long long n, long long k, long long batch = 1) {
    HeuristicInput in{m, n, k, batch, d.sm_count, d.cc, d.smem_optin, true};
    in.skinny_ok = true;
    return in;
  };
  const std::string skinny = ti::skinny_config().name;
  for (long long x : {1LL, 2LL, 8LL, 9LL, 16LL})
    for (long long w : {512LL, 2048LL, 5632LL, 6336LL}) {  // one wave at 3 n8 tiles a CTA
      EXPECT_EQ(skinny, select_config(skinny_input(kH100, x, w, 2048)).name) << x << " x " << w;
      EXPECT_EQ(skinny, select_config(skinny_input(kH100, w, x, 2048)).name) << w << " x " << x;
    }
  for (long long x : {9LL, 12LL, 16LL})
    for (long long w : {6344LL, 11008LL, 14336LL, 32000LL, 128256LL}) {
      EXPECT_EQ(select_config(skinny_input(kH100, x, w, 4096)).kernel, Kernel::Sm90) << x << " x " << w;
      EXPECT_EQ(select_config(skinny_input(kH100, w, x, 4096)).kernel, Kernel::Sm90) << w << " x " << x;
    }
  for (long long x : {1LL, 8LL})  // up to 8 rows the skinny kernel stays ahead at any width
    EXPECT_EQ(skinny, select_config(skinny_input(kH100, x, 32000, 2048)).name) << x;
  EXPECT_EQ(skinny, select_config(skinny_input(kH100, 16, 32000, 2048, 2)).name);  // batches: not measured
  EXPECT_EQ(skinny, select_config(skinny_input(kA100, 16, 32000, 2048)).name);     // no sm90 tiles there
  HeuristicInput no_tma = skinny_input(kH100, 16, 32000, 2048);
  no_tma.tma_ok = false;
  EXPECT_EQ(skinny, select_config(no_tma).name);
  namespace sk = ti::skinny;
  EXPECT_TRUE(sk::fits_one_wave(6336, 1, 132));
  EXPECT_FALSE(sk::fits_one_wave(6344, 1, 132));
  EXPECT_FALSE(sk::fits_one_wave(5632, 1, 66));  // an SM budget counts
  EXPECT_FALSE(sk::fits_one_wave(2048, 4, 132));
}

TEST(Sm90Epilogue, WhichDLeavesInSubTiles) {
  namespace s9 = ti::sm90;
  ti::EpilogueParams e;
  e.d_dtype = ti::kBF16;
  e.d_tma = true;
  // 16-bit operands' own D: TMA store; fp8 operands' bf16 D too (tensor, row-wise or block scales:
  // the scales are not in the problem's signature here), but not an f16 or f32 D.
  EXPECT_EQ(s9::epilogue_mode(false, ti::kBF16, e, 1, s9::kEpiAuto), s9::kEpiTma);
  EXPECT_EQ(s9::epilogue_mode(false, ti::kE4M3, e, 1, s9::kEpiAuto), s9::kEpiTma);
  EXPECT_EQ(s9::epilogue_mode(false, ti::kE5M2, e, 1, s9::kEpiAuto), s9::kEpiTma);
  EXPECT_EQ(s9::epilogue_mode(false, ti::kE4M3, e, 4, s9::kEpiAuto), s9::kEpiStaged);  // split-K
  EXPECT_EQ(s9::epilogue_mode(false, ti::kE4M3, e, 1, s9::kEpiStaged), s9::kEpiStaged);
  EXPECT_EQ(s9::epilogue_mode(false, ti::kS8, e, 1, s9::kEpiAuto), s9::kEpiStaged);
  e.d_tma = false;  // D's rows not TMA-storable: the same sub-tiles, stored by the threads
  EXPECT_EQ(s9::epilogue_mode(false, ti::kE4M3, e, 1, s9::kEpiAuto), s9::kEpiSmem16);
  e.d_tma = true;
  e.d_dtype = ti::kF16;
  EXPECT_EQ(s9::epilogue_mode(false, ti::kE4M3, e, 1, s9::kEpiAuto), s9::kEpiStaged);
  EXPECT_EQ(s9::epilogue_mode(false, ti::kF16, e, 1, s9::kEpiAuto), s9::kEpiTma);
  e.d_dtype = ti::kF32;
  EXPECT_EQ(s9::epilogue_mode(false, ti::kE4M3, e, 1, s9::kEpiAuto), s9::kEpiStaged);
  // beta * C by TMA where C can be read so; else the staging.
  e.d_dtype = ti::kBF16;
  e.beta = 0.5f;
  EXPECT_EQ(s9::epilogue_mode(false, ti::kE4M3, e, 1, s9::kEpiAuto), s9::kEpiStaged);
  e.c_tma = true;
  EXPECT_EQ(s9::epilogue_mode(false, ti::kE4M3, e, 1, s9::kEpiAuto), s9::kEpiTma);
  // A column-major D: only the flipped TMA path, which fp8 kernels do not take.
  e.d_col_major = true;
  EXPECT_EQ(s9::epilogue_mode(true, ti::kE4M3, e, 1, s9::kEpiAuto), -1);
  EXPECT_EQ(s9::sub_tile_d_dtype(ti::kF32), -1);
}
