#include "gemm/configs.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>

#include "gemm/memo.hpp"
#include "gemm/sm80/config_shape.hpp"
#include "gemm/sm90/config_shape.hpp"
#include "gemm/skinny/skinny.hpp"

namespace tessera::gemm_impl {
namespace {

constexpr int smem_of(int bm, int bn, int bk, int stages) {
  const int pipe = stages * (bm + bn) * bk * 2;
  const int epi = bm * (bn + 8) * 4;
  return pipe > epi ? pipe : epi;
}

std::vector<Config> build() {
  std::vector<Config> v = {
#define TESSERA_SM80_CONFIG(id, name, bm, bn, bk, stages, wm, wn, reason) \
  Config{id, Kernel::Sm80, name, bm, bn, bk, stages, (wm) * (wn), smem_of(bm, bn, bk, stages), 80, 999, reason},
#include "gemm/sm80/configs.def"
#undef TESSERA_SM80_CONFIG
#define TESSERA_SM90_CONFIG(id, name, bm, bn, bk, stages, cluster_m, cluster_n, schedule, throughput, reason)   \
  Config{id, Kernel::Sm90, name, bm, bn, bk, stages,                                                         \
         4 * (1 + sm90::consumer_warpgroups(bm, sm90::schedule == sm90::kPingpong)),                             \
         sm90::smem_bytes_for(bm, bn, bk, stages, sm90::schedule == sm90::kPingpong), 90, 90, reason, throughput, \
         cluster_m, cluster_n, sm90::schedule == sm90::kPingpong,                                                 \
         sm90::supports_stream_k(bm, sm90::schedule == sm90::kPingpong),                                       \
         sm90::supports_flip(bm, bn, sm90::schedule == sm90::kPingpong),                                        \
         sm90::supports_l2_warm(bm, bn, sm90::schedule == sm90::kPingpong)},
#include "gemm/sm90/configs.def"
#undef TESSERA_SM90_CONFIG
  };
  // Decode steps: a side of at most 64 rows (the tokens) against many weight rows, both K-major.
  // Memory-bound on the weights, which each CTA (16 of their rows, 8 warps splitting K) reads once
  // straight into mma.sync fragments: no shared-memory ring to fill, no workspace, nothing to set up
  // before the first load.
  v.push_back(Config{0, Kernel::Skinny, "skinny_x64_w16", skinny::kMaxRows, 16, 32, 1, skinny::kWarps, 0, 80, 999,
                     "Decode steps (at most 64 token rows): reads the weights once straight into mma.sync "
                     "fragments, no smem ring."});
  // Used when an operand is not 16-byte aligned (or its contiguous extent is not a multiple of 8) and
  // the caller gave too little workspace for the padded copy: CUDA-core fp32 FMA with element-wise
  // loads, slow but always correct.
  v.push_back(Config{-1, Kernel::Fallback, "simt_fallback", 64, 64, 16, 1, 8, 64 * 17 * 4 * 2, 80, 999,
                     "Any alignment, no workspace: CUDA-core fp32 FMA with element-wise loads, slow but always "
                     "correct."});
  // fp32 operands in plain fp32, s8 in int32, fp8 in fp32
  v.back().tf32 = v.back().tf32x3 = v.back().s8 = v.back().fp8 = v.back().fp8_promote = v.back().fp8_block = true;
  for (Config& c : v) {
    if (c.kernel == Kernel::Sm80) c.tf32 = sm80::has_tf32(c.id), c.s8 = sm80::has_s8(c.id);
    // 3xTF32 needs the promoted accumulators (sm90 Traits::kPromote): the rows with registers for them.
    if (c.kernel == Kernel::Sm90)
      c.tf32 = sm90::has_tf32(c.id), c.tf32x3 = c.tf32 && sm90::consumers_have_room(c.bm, c.bn, c.pingpong),
      c.s8 = sm90::has_s8(c.id), c.fp8 = sm90::has_fp8(c.id),
      c.fp8_promote = c.fp8 && sm90::promotes_fp8(c.bm, c.bn, c.pingpong), c.fp8_block = sm90::has_fp8_block(c.id);
  }
  return v;
}

}  // namespace

const std::vector<Config>& configs() {
  static const std::vector<Config> table = build();
  return table;
}

const Config* find_config(const std::string& name) {
  for (const Config& c : configs())
    if (name == c.name) return &c;
  return nullptr;
}

std::string config_names() {
  std::string s, flippable;
  for (const Config& c : configs()) {
    s += (s.empty() ? "" : ", ") + std::string(c.name);
    if (c.flip) flippable += (flippable.empty() ? "" : ", ") + std::string(c.name);
  }
  return s + "; " + kFlipSuffix + " after " + flippable + " for the flipped orientation";
}

namespace {
// The table entry a spelling names (its name without kFlipSuffix, if it ends so) and whether it is flipped.
ConfigChoice parse_spelling(const std::string& spelling) {
  const size_t n = std::char_traits<char>::length(kFlipSuffix);
  const bool flip = spelling.size() > n && spelling.compare(spelling.size() - n, n, kFlipSuffix) == 0;
  return ConfigChoice{find_config(flip ? spelling.substr(0, spelling.size() - n) : spelling), flip};
}
}  // namespace

ConfigChoice find_config_choice(const std::string& spelling) {
  const ConfigChoice c = parse_spelling(spelling);
  return c.config && (!c.flip || c.config->flip) ? c : ConfigChoice{};
}

std::string spelling_error(const std::string& spelling) {
  const ConfigChoice c = parse_spelling(spelling);
  if (!c.config) return "unknown configuration '" + spelling + "' (known: " + config_names() + ")";
  return "'" + spelling + "': " + c.config->name + " cannot run on the flipped orientation (known: " +
         config_names() + ")";
}

const char* config_spelling(const Config& c, bool flip) {
  if (!flip) return c.name;
  static const std::vector<std::string> flipped = [] {
    std::vector<std::string> v;
    for (const Config& x : configs()) v.push_back(std::string(x.name) + kFlipSuffix);
    return v;
  }();
  const size_t i = size_t(&c - configs().data());  // callers pass table entries
  return i < flipped.size() ? flipped[i].c_str() : c.name;
}

const Config& fallback_config() { return configs().back(); }
const Config& skinny_config() { return configs()[configs().size() - 2]; }

namespace {

// BM x BN tiles of an M x N problem, over every batch.
long long tile_count(const Config& c, long long m, long long n, long long batch) {
  return ((m + c.bm - 1) / c.bm) * ((n + c.bn - 1) / c.bn) * batch;
}

// Within one family, tiles are tried from the largest (most reuse per byte loaded, fewest CTAs) to
// the smallest; the first whose tile count fills every SM once wins. If none does, the smallest
// tile gives the most parallelism. Configs the device cannot run (shared memory, arch) are skipped.
const Config* select_in(Kernel family, const HeuristicInput& in) {
  const Config* smallest = nullptr;
  for (const Config& c : configs()) {
    if (c.kernel != family || c.smem_bytes > in.smem_optin || in.cc < c.min_cc || in.cc > c.max_cc) continue;
    if ((in.f32 && !c.tf32) || (in.f32x3 && !c.tf32x3) || (in.s8 && !c.s8) || (in.fp8 && !c.fp8)) continue;
    const long long tiles = tile_count(c, in.m, in.n, in.batch);
    if (tiles >= in.sm_count) return &c;
    smallest = &c;  // each configs.def lists tiles from large to small
  }
  return smallest;
}

// Hopper's cost model, in estimated microseconds on the device. The grid's units (tile x K range)
// stream their k-tiles through the tensor cores while pulling their A and B tiles out of L2, and
// the whole problem's A and B come from DRAM once; the slowest of the four sets the pace:
//   mma  = waves x k-tiles per unit x 2 BM BN BK / (kSmFlopsPerUs x throughput / 100)
//   l2   = units x k-tiles per unit x (BM / cluster_n + BN / cluster_m) x BK x 2 bytes / kL2BytesPerUs
//          (a cluster multicasts the shared tile, so each CTA pulls half of it; a decode shape's
//          small operand at a discount, kBroadcastL2)
//   dram = (M K + N K) x 2 bytes x batch / kDramBytesPerUs
//   feed = one SM's k-tiles x (BM + BN) x BK x 2 bytes / kSmFeedBytesPerUs (its own intake)
// The l2 term is why a smaller tile can lose to a larger one in clusters: 128x128 tiles run
// L2-bound where 128x256 pairs do not, which a model of waves x tile area / throughput alone gets
// the wrong way round.
// Split-K adds a fix-up: the counter memset, every range staging its fp32 partial out, fences and
// atomics, and the fold of the partials. Serial fold (the last range sums them all alone): a fixed
// cost and a cost per range, fitted to a forced-split sweep (kSplitKFixedUs, kSplitKPerRangeUs):
// the fix-up outweighs the shorter mainloop except on long K. Parallel fold
// (sm90::supports_parallel_fold tiles, every unit its own worker: each range folds 1/splits of the
// tile): each CTA writes one partial and reads one partial's worth back: a fixed cost (its L2 round
// trips), the partial's bytes, and a little per range (the waiting warp's loads), fitted to
// timeline probes (bench/microbench/sm90_timeline.cu --splits) from a range's mainloop end to its
// exit, then raised where decode shapes (32..256 rows) ran split 1.06-1.29x slower than unsplit
// though the model had rated the split 0.65-0.99 of it: the fold costs more than the probes saw.
constexpr double kSmFlopsPerUs = 6.45e6;  // per SM in the mainloop at throughput 100 (~850 TFLOP/s on 132 SMs)
constexpr double kL2BytesPerUs = 6.5e6;   // L2 -> SM, whole GPU (H100: ~90% of the ~7 TB/s ncu peak)
// A launch of at most one wave moves its tiles out of L2 faster (128x128 tiles and 128x64 pairs over
// 128 CTAs, docs/PERF.md): every CTA is resident from the start and their loads of the same k-tiles
// overlap, which the steady state of several waves does not.
constexpr double kL2OneWaveBytesPerUs = 9.5e6;
// A decode shape's small operand (the activations, <= kBroadcastRows of them) is read by every
// cluster at about the same k-tile, and L2 serves it faster than its bytes say: decode shapes run
// faster than the l2 term at full weight wherever it binds, so that operand's bytes count at
// kBroadcastL2. (At 256 rows it moved M = 256 shapes to tiles never measured there: the discount
// stops at 128.)
constexpr double kBroadcastL2 = 0.75;
constexpr long long kBroadcastRows = 128;
constexpr double kDramBytesPerUs = 3.0e6; // HBM3, ~90% of 3.35 TB/s
// One SM takes in at most ~55 bytes per clock of TMA loads (multicast copies included), whether
// the operands come from L2 or DRAM (timeline probes). A problem with few tiles is bound by it, so
//   feed = k-tiles per SM x (BM + BN) x BK x 2 bytes / kSmFeedBytesPerUs.
constexpr double kSmFeedBytesPerUs = 9.7e4;
// Where DRAM sets the pace (a side of 128: LLM decode shapes), a tile wider than the problem
// streams its operand slower, and the more of the tile is padding the slower. The dram term is
// divided by 0.4 + 0.6 x the useful fraction of the tile grid (N = 128: 0.7 for 256 wide, 0.8 for
// 192).
constexpr double kDramPaddedBase = 0.4;
// At most this many rows of activations (more than the skinny kernel's): 64-row tiles stream the
// weights slower the fewer rows they hold (17-32 rows against 48-64 on the same grid), and 64x256
// ping-pong pairs along M, whose second CTA holds no rows but loads half of each weight tile, ran
// faster than the 64x64 tiles the model chose; from 48 rows on not (docs/PERF.md).
constexpr long long kFewRows = 32;
constexpr double kSplitKFixedUs = 10.0;
constexpr double kSplitKPerRangeUs = 5.0;
constexpr double kParallelFoldFixedUs = 8.0;
constexpr double kParallelFoldBytesPerUs = 1.6e4;  // one CTA's fp32 partial: out, and its share folded
constexpr double kParallelFoldPerRangeUs = 0.02;
// Stream-K: the partial wave's k-tiles are shared out evenly after the whole waves (the partial
// wave disappears); the fix-up is every publisher's fp32 partial written to and read back from L2
// by the owners, all at about the same time (the shares end together): ~2 x CTAs x BM x BN x 4
// bytes, plus a fixed cost fitted to stream-K forced off / on: the flag memset, the shares' cold
// starts in the middle of tiles, publishing and waiting. Streaming only the partial wave, last
// (gemm/schedule.hpp), keeps the waves' L2 sharing. Stream-K loses on many shapes (small and decode
// shapes among them); the model tracks its ratio to data-parallel to a few percent, so it streams
// only where the model promises a 1% gain (kStreamKMinGain).
constexpr double kStreamKFixedUs = 12.0;
constexpr double kStreamKMinGain = 0.99;
// Per tile, a cooperative CTA's tensor cores idle while its consumers drain the last WGMMAs, store
// the tile and restart on the next one: the constant term of a fit of time against K at a fixed
// tile count (128x256 pairs, 8192 x 8192 x K), scaled by tile area. A ping-pong CTA's epilogue runs
// under the other warpgroup's mainloop: it pays it once, at the end.
constexpr double kTileOverheadUs = 3.6;   // per 128 x 256 tile
// fp8 with promoted sums: the tensor cores idle while each k-tile's sums are added into the totals,
// and the tiles that promote ran at ~70% of the mainloop rate the model gives them (128x128 and 128x192
// pairs, 1.06-1.19 PFLOP/s). At the full rate the L2 term bound 128x128 pairs instead, and 128x192
// pairs won where their partial last wave made them lose.
constexpr double kPromotedFp8Rate = 0.75;

// Clusters walk cluster_m x cluster_n tiles together (a rank past the last tile idles): the tile
// grid along M and N, padded to whole clusters.
long long padded_tiles_m(const Config& c, long long m) {
  return ((m + c.bm - 1) / c.bm + c.cluster_m - 1) / c.cluster_m * c.cluster_m;
}
long long padded_tiles_n(const Config& c, long long n) {
  return ((n + c.bn - 1) / c.bn + c.cluster_n - 1) / c.cluster_n * c.cluster_n;
}

double sm90_cost(const Config& c, long long m, long long n, long long k, long long batch, int sm_count, int splits,
                 bool stream_k = false, double rate = 1.0) {
  const long long tiles_m = padded_tiles_m(c, m), tiles_n = padded_tiles_n(c, n);
  const long long units = tiles_m * tiles_n * batch * splits;
  const long long waves = (units + sm_count - 1) / sm_count;
  const long long k_tiles = ((k + c.bk - 1) / c.bk + splits - 1) / splits;
  const double tile_us = 2.0 * c.bm * c.bn * c.bk / (kSmFlopsPerUs * rate * c.throughput / 100.0);  // one k-tile
  const double overhead = kTileOverheadUs * c.bm * c.bn / (128.0 * 256.0);
  double iters = double(waves) * k_tiles;  // k-tiles through one SM
  double mma = iters * tile_us + (c.pingpong ? 1.0 : double(waves)) * overhead;
  const int cluster = c.cluster_m * c.cluster_n;
  double fixup = 0.0;
  if (splits > 1) {
    if (sm90::supports_parallel_fold(c.bm, c.bn, c.pingpong) && units <= sm_count / cluster * cluster)
      fixup = kParallelFoldFixedUs + kParallelFoldPerRangeUs * splits + c.bm * c.bn * 4.0 / kParallelFoldBytesPerUs;
    else
      fixup = kSplitKFixedUs + kSplitKPerRangeUs * splits;
  }
  if (stream_k && splits == 1) {  // the walk of gemm/schedule.hpp: per worker (cluster), in k-tiles
    const long long workers = sm_count / cluster, ctiles = units / cluster;
    if (workers > 0 && ctiles % workers != 0) {
      const long long sk = ctiles < workers ? ctiles : ctiles % workers;  // the partial wave
      iters = double((ctiles - sk) / workers * k_tiles + (sk * k_tiles + workers - 1) / workers);
      mma = iters * tile_us + (c.pingpong ? 1.0 : iters / k_tiles + 1.0) * overhead;
      fixup = kStreamKFixedUs + 2.0 * double(workers * cluster) * c.bm * c.bn * 4.0 / kL2BytesPerUs;
    }
  }
  const double wa = m <= kBroadcastRows && n > kBroadcastRows ? kBroadcastL2 : 1.0;  // see kBroadcastL2
  const double wb = n <= kBroadcastRows && m > kBroadcastRows ? kBroadcastL2 : 1.0;
  const double l2 = double(units) * k_tiles * (wa * c.bm / c.cluster_n + wb * c.bn / c.cluster_m) * c.bk * 2.0 /
                    (units <= sm_count ? kL2OneWaveBytesPerUs : kL2BytesPerUs);
  const double feed = iters * double(c.bm + c.bn) * c.bk * 2.0 / kSmFeedBytesPerUs;
  // The useful fraction of the tile grid. Along a side of at most kFewRows rows a cluster rank past
  // the last tile still loads its share of the multicast weights: only the tiles' own padding counts.
  const long long grid = std::min(m, n) <= kFewRows ? tile_count(c, m, n, 1) : tiles_m * tiles_n;
  const double useful = double(m) * n / (double(grid) * c.bm * c.bn);
  const double dram = double(m + n) * k * 2.0 * batch / (kDramBytesPerUs * (kDramPaddedBase + (1 - kDramPaddedBase) * useful));
  return std::max(std::max(mma, feed), std::max(l2, dram)) + fixup;
}

Decomposition select_decomposition_uncached(const Config& c, long long m, long long n, long long k, long long batch,
                                            int sm_count);

// Does the config's cluster multicast the larger operand (A when M >= N)? A decode shape streams
// its weights once; pairs that share them take each weight k-tile out of L2 once for both CTAs,
// pairs that share the activations leave the weights to two pairs. The cost model's terms do not
// tell the two apart (the same L2 -> SM bytes), the GPU does: the pairs that share the weights are
// faster.
bool shares_larger_operand(const Config& c, long long m, long long n) {
  return m >= n ? c.cluster_n > 1 : c.cluster_m > 1;
}

// Does the cluster span more tiles along a mode than the problem has (M = 64 under 64x64 pairs along
// M)? Its spare CTAs only load and idle, which the DRAM term, binding on decode shapes, does not see.
bool cluster_pads(const Config& c, long long m, long long n) {
  return (m + c.bm - 1) / c.bm < c.cluster_m || (n + c.bn - 1) / c.bn < c.cluster_n;
}

// The grid's rounds (units per worker, rounded up) and the part of them that does work: units /
// (rounds x workers), 1 when stream-K shares out the partial wave.
struct Waves {
  long long rounds;
  double fill;
};
Waves waves_of(const Config& c, const Decomposition& d, long long m, long long n, long long batch, int sm_count) {
  const int cluster = c.cluster_m * c.cluster_n;
  const long long units = padded_tiles_m(c, m) * padded_tiles_n(c, n) / cluster * batch * d.splits;  // cluster tiles
  const long long workers = std::max(1, sm_count / cluster);
  const long long rounds = (units + workers - 1) / workers;
  return Waves{rounds, d.stream_k ? 1.0 : double(units) / double(rounds * workers)};
}

// The config of least cost. Of two within 0.1% (DRAM-bound decode shapes often tie exactly):
// between mirror images (the same tile in pairs along M or along N) or one tile in both
// orientations, the one that multicasts the larger operand; else the one whose last wave is fuller,
// unless it takes more than twice the rounds; else the earlier, larger tile. The DRAM term rates
// such candidates alike; a fuller last wave is worth a few more rounds, but past twice the rounds
// the small tile's extra rounds cost what its fuller wave saves. Each candidate's decomposition is
// computed, not memoised: select_config's memo covers this loop, and a pass over every config would
// only evict the recent shapes' entries from select_decomposition's.
// With in.flip, a shape with a side of at most kFlipRows is also costed flipped (M and N swapped: the
// transposed-store epilogue, data-parallel only), after the natural candidates, so a tie keeps the
// natural orientation unless the flipped one fills its last wave better, or is the same tile whose
// cluster then shares the larger operand: 128x6144x4096 with a column-major D is 6144 x 128 here,
// 96 CTAs of 128x64 pairs, or flipped 128 CTAs of 64x96 pairs (the DRAM term ties); 256x4096x4096's
// 128x64 pairs share the 256 rows of A, flipped the weights, which ran faster. With larger sides the
// flipped tile ran slower as often as faster.
constexpr long long kFlipRows = 512;
Selection select_sm90(const HeuristicInput& in) {
  constexpr double kTie = 1e-3;
  Selection best;
  long long best_m = 0, best_n = 0;
  double best_cost = 0;
  Waves best_waves{0, 0.0};
  const bool flippable = std::min(in.m, in.n) <= kFlipRows;
  const int first = in.flip == 2 ? 1 : 0, last = in.flip == 2 || (in.flip == 1 && flippable) ? 1 : 0;
  for (int flip = first; flip <= last; ++flip) {
    const long long m = flip ? in.n : in.m, n = flip ? in.m : in.n;
    const long long tiles_128 = ((m + 127) / 128) * ((n + 127) / 128) * in.batch;  // of 128x128, for the rules below
    for (const Config& c : configs()) {
      if (c.kernel != Kernel::Sm90 || c.smem_bytes > in.smem_optin || in.cc < c.min_cc || in.cc > c.max_cc) continue;
      if ((flip && !c.flip) || (in.f32 && !c.tf32) || (in.f32x3 && !c.tf32x3) || (in.s8 && !c.s8)) continue;
      if ((in.fp8 && !c.fp8) || (in.fp8_promote && !c.fp8_promote) || (in.fp8_block && !c.fp8_block)) continue;
      // 3xTF32 drains the WGMMA pipeline at each promotion, which the cost model does not see: the
      // 128x64 pairs, with twice the CTAs of 128x128 to cover it, ran faster on most shapes (docs/PERF.md).
      if (in.f32x3 && c.bn > 64) continue;
      // fp8 with promoted sums: 128x64 pairs read a third more shared memory per FLOP than 128x128,
      // which binds at fp8's rate (docs/PERF.md): they only where 128x128 tiles leave SMs idle.
      if (in.fp8_promote && c.bn <= 64 && tiles_128 >= in.sm_count) continue;
      // 128x128 pairs relieve L2, which binds only once the tiles take more than two waves; in the second
      // wave the unpaired tile ran faster (fp8 and 16 bits), which the cost model's L2 term rates the other
      // way round. Within one wave the pairs stay: the unpaired tile and the pairs ran within 5% of each
      // other there, and the model, whose L2 term rates the unpaired tile too slow, picks between the pairs
      // and the rest right.
      if (c.bm == 128 && c.bn == 128 && c.cluster_m * c.cluster_n > 1 && tiles_128 > in.sm_count &&
          tiles_128 <= 2LL * in.sm_count)
        continue;
      // The 64x96 decode tile only where its pairs span M (the activations, at most 128 rows) or its
      // 96 columns divide N (flipped: 96 or 192 rows of activations): at M = 256, a third of its last
      // column of tiles empty, it lost to 64x64 pairs, which the cost model rated the other way round.
      if (c.bn % 64 != 0 && m > c.bm * c.cluster_m && n % c.bn != 0) continue;
      // Ping-pong with fewer tiles than SMs: each CTA holds at most one tile, so one of its two consumer
      // warpgroups idles and the other runs alone, slower than the model's mainloop rate.
      // (At most kFewRows rows the weights' stream, not the tensor cores, sets the pace.)
      if (c.pingpong && tile_count(c, m, n, in.batch) < in.sm_count && std::min(m, n) > kFewRows) continue;
      const Decomposition d =
          flip || in.s8 ? Decomposition{} : select_decomposition_uncached(c, m, n, in.k, in.batch, in.sm_count);
      const double cost = sm90_cost(c, m, n, in.k, in.batch, in.sm_count, d.splits, d.stream_k,
                                    in.fp8_promote ? kPromotedFp8Rate : 1.0);
      const Waves waves = waves_of(c, d, m, n, in.batch, in.sm_count);
      bool take = !best.config || cost < best_cost * (1 - kTie);
      if (best.config && !take && cost <= best_cost * (1 + kTie)) {  // a tie
        const Config& b = *best.config;
        const bool mirror = c.bm == b.bm && c.bn == b.bn && c.bk == b.bk && c.stages == b.stages;  // or c is b flipped
        const bool pads = cluster_pads(c, m, n), best_pads = cluster_pads(b, best_m, best_n);
        take = mirror ? (best_pads && !pads) || (pads == best_pads && shares_larger_operand(c, m, n) &&
                                                 !shares_larger_operand(b, best_m, best_n))
                      : waves.fill > best_waves.fill + 1e-9 && waves.rounds <= 2 * best_waves.rounds;
      }
      if (take) best = Selection{&c, flip == 1}, best_m = m, best_n = n, best_cost = cost, best_waves = waves;
    }
  }
  return best;
}

// The skinny kernel for decode shapes, except at 9-16 rows on Hopper where its grid takes more than
// one wave: those rows fill its m16 tile of X (twice the fragments of up to 8), and there the sm90
// tiles stream the weights faster; up to 8 rows, or within one wave, the skinny kernel stays ahead
// (docs/PERF.md, "9-16 rows past one skinny wave"). Batches keep the skinny kernel (not measured).
bool takes_skinny(const HeuristicInput& in) {
  if (!skinny_runs(in, kSkinnyAutoRows) || in.cc < 80 || in.f32 || in.s8 || in.fp8) return false;
  const long long rows_x = std::min(in.m, in.n), rows_w = std::max(in.m, in.n);
  return rows_x <= 8 || in.cc != 90 || !in.tma_ok || in.batch > 1 || skinny::fits_one_wave(rows_w, 1, in.sm_count);
}

Selection select_uncached(const HeuristicInput& in) {
  if (takes_skinny(in)) return Selection{&skinny_config(), false};
  // TMA/WGMMA on Hopper when the operands allow it (mma.sync reaches ~65% of Hopper's tensor-core
  // peak, WGMMA all of it); else, or when no sm90 config fits, the mma.sync kernels.
  if (in.cc == 90 && in.tma_ok)
    if (const Selection s = select_sm90(in); s.config) return s;
  const Config* c = select_in(Kernel::Sm80, in);
  return Selection{c ? c : &fallback_config(), false};
}
const Config& select_config_uncached(const HeuristicInput& in) { return *select_uncached(in).config; }

}  // namespace

// The heuristic's answers are pure functions of their arguments (the config table is constant):
// each thread remembers its last few (gemm/memo.hpp), since gemm() asks them on every call.
Selection select(const HeuristicInput& in) {
  thread_local Memo<std::array<long long, 8>, Selection> memo;
  return memo.get({in.m, in.n, in.k, in.batch, in.sm_count, in.cc, in.smem_optin,
                   (in.tma_ok ? 1 : 0) + 2 * in.flip + 8 * (in.skinny_ok ? 1 : 0) + 16 * (in.f32 ? 1 : 0) + 32 * (in.f32x3 ? 1 : 0) +
                       64 * (in.s8 ? 1 : 0) + 128 * (in.fp8 ? 1 : 0) + 256 * (in.fp8_promote ? 1 : 0) +
                       512 * (in.fp8_block ? 1 : 0)},
                  [&] { return select_uncached(in); });
}

const Config& select_config(const HeuristicInput& in) {
  HeuristicInput natural = in;
  natural.flip = 0;
  return *select(natural).config;
}

int select_splits(const Config& c, long long m, long long n, long long k, long long batch, int sm_count) {
  if (c.kernel != Kernel::Sm90 || sm_count <= 0) return 1;
  // Candidates: up to one wave of units, ranges of >= kMinKTilesPerSplit k-tiles, <= kMaxSplits.
  const long long tiles = tile_count(c, m, n, batch);
  const long long k_tiles = (k + c.bk - 1) / c.bk;
  long long most = tiles > 0 ? sm_count / tiles : 1;
  if (k_tiles / kMinKTilesPerSplit < most) most = k_tiles / kMinKTilesPerSplit;
  if (most > kMaxSplits) most = kMaxSplits;
  int best = 1;
  double best_cost = sm90_cost(c, m, n, k, batch, sm_count, 1);
  for (int s = 2; s <= most; ++s) {
    const double cost = sm90_cost(c, m, n, k, batch, sm_count, s);
    if (cost < best_cost) best = s, best_cost = cost;
  }
  return best;
}

namespace {

Decomposition select_decomposition_uncached(const Config& c, long long m, long long n, long long k, long long batch,
                                            int sm_count) {
  Decomposition d;
  d.splits = select_splits(c, m, n, k, batch, sm_count);
  if (c.kernel != Kernel::Sm90 || sm_count <= 0) return d;
  const double best = sm90_cost(c, m, n, k, batch, sm_count, d.splits);
  // Ping-pong stream-K with fewer tiles than SMs: every CTA holds one share of one tile, so one of its
  // two consumer warpgroups works; at 256 rows it ran 1.2-1.4x slower than split-K of 128x64 pairs,
  // which the model rated alike.
  const bool one_share = c.pingpong && tile_count(c, m, n, batch) < sm_count;
  if (c.stream_k && !one_share && sm90_cost(c, m, n, k, batch, sm_count, 1, true) < kStreamKMinGain * best)
    d = Decomposition{1, true};
  return d;
}

}  // namespace

Decomposition select_decomposition(const Config& c, long long m, long long n, long long k, long long batch,
                                   int sm_count) {
  thread_local Memo<std::array<long long, 6>, Decomposition> memo;
  return memo.get({static_cast<long long>(&c - configs().data()), m, n, k, batch, sm_count},
                  [&] { return select_decomposition_uncached(c, m, n, k, batch, sm_count); });
}

// Warm-up of kL2WarmKTiles k-tiles for one-wave decode launches only: more k-tiles help back-to-back
// launches but cost lone ones (the prefetches queue ahead of the first ring's loads), and where
// CTAs have two tiles (128x128 on 128x28672x4096) any warm-up loses.
int l2_warm_ktiles(const Config& c, const Decomposition& d, long long m, long long n, long long batch, int sm_count) {
  if (c.kernel != Kernel::Sm90 || !c.l2_warm || d.splits > 1 || d.stream_k || std::min(m, n) > 128) return 0;
  const long long tiles = tile_count(c, m, n, batch);
  return tiles <= sm_count ? kL2WarmKTiles : 0;
}

size_t streamk_bytes(const Config& c, int sm_count) {
  const size_t slots = size_t(sm_count > 0 ? sm_count : 0);  // the grid has at most one CTA per SM
  return slots * c.bm * c.bn * sizeof(float) + (slots * sizeof(int) + 255) / 256 * 256;
}

size_t splitk_bytes(const Config& c, long long m, long long n, long long batch, int splits) {
  if (splits <= 1) return 0;
  const long long tiles = tile_count(c, m, n, batch);
  const size_t partials = size_t(tiles) * splits * c.bm * c.bn * sizeof(float);
  // Then the ranges' sign-in: a counter per tile, or in one round a 64-bit flag per tile and range.
  const size_t sync = (size_t(tiles) * splits * sizeof(unsigned long long) + 255) / 256 * 256;
  return partials + sync;
}

namespace {

size_t splitk_workspace_bound_uncached(long long m, long long n, long long k, long long batch, int forced_splits) {
  size_t most = 0;
  for (const Config& c : configs()) {
    const int splits = forced_splits > 0 ? forced_splits : select_splits(c, m, n, k, batch, kSplitKBoundSms);
    most = std::max(most, splitk_bytes(c, m, n, batch, splits));
  }
  // Stream-K: room for it where the heuristic would stream on an sm_90 GPU (H20, H100 PCIe, H100
  // SXM / H200). On another SM count, or with a config forced, the caller's workspace may be too
  // small: the GEMM then runs data-parallel (correct, maybe slower).
  if (forced_splits <= 0) {
    for (int sms : kStreamKBoundSms) {
      // Uncached: hypothetical GPUs would only evict the real one's entries from the memos (this
      // function's own memo covers the loop).
      const Config& c = select_config_uncached(HeuristicInput{m, n, k, batch, sms, 90, sm90::kSmemOptinBytes, true});
      if (c.kernel == Kernel::Sm90 && select_decomposition_uncached(c, m, n, k, batch, sms).stream_k)
        most = std::max(most, streamk_bytes(c, sms));
    }
  }
  return most;
}

}  // namespace

size_t splitk_workspace_bound(long long m, long long n, long long k, long long batch, int forced_splits) {
  thread_local Memo<std::array<long long, 5>, size_t> memo;  // make_plan asks on every gemm() call
  return memo.get({m, n, k, batch, forced_splits},
                  [&] { return splitk_workspace_bound_uncached(m, n, k, batch, forced_splits); });
}

}  // namespace tessera::gemm_impl
