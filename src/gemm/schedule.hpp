// The persistent tile scheduler of the sm90 GEMM: which (tile, K range) work items each worker (a
// cluster of CTAs; one CTA without clusters) walks. Host- and device-callable, so the CPU tests
// check that every k-tile of every tile is computed exactly once and every partial is folded.
//
// Three decompositions share the walk:
//   data-parallel   every unit is a whole tile; worker w takes units w, w + workers, ...
//   split-K         every tile is cut into `splits` K ranges (units tile * splits + range); each range
//                   leaves its partial in the workspace; with one unit per worker every range then
//                   folds its share of the tile, else the tile's last range sums them all.
//   stream-K        the tiles of the partial last wave (the last `sk_units` tiles) are laid end to
//                   end as one run of sk_units * k_tiles iterations (k-tiles), cut into `workers`
//                   equal shares; each worker walks its whole waves of data-parallel tiles first,
//                   then its share (crossing tile boundaries). Partial wave quantization
//                   disappears: 1024x6144x4096 in 128x256 pair tiles is 96 tiles for 66 workers,
//                   2 waves data-parallel vs 1.45 waves of iterations.
//                   Streaming only the partial wave, last: while the data-parallel waves run,
//                   concurrent CTAs share A and B k-slices in L2; streamed shares start at
//                   different k offsets and do not, so streaming more than the partial wave
//                   moves traffic from L2 to DRAM.
// Stream-K fix-up (deterministic): a tile's iterations may be split among consecutive workers. The
// worker that computes its first k-tile (the "owner") does so at the end of its share, the later
// workers compute the rest of the tile at the start of theirs and leave their partials in the
// workspace (one slot per worker and CTA: only the first item of a share can start inside a
// tile). The owner waits for them, adds them to its accumulators in worker order and runs the
// normal epilogue: the result does not depend on timing.
#pragma once

#include "core/fast_div.hpp"
#include "core/host_device.hpp"

namespace tessera::gemm_impl {

// Launch-time constants of the walk (32-bit: a 64-bit division is a subroutine call on the GPU).
struct Schedule {
  int units = 0;     // data-parallel / split-K units: cluster tiles x batches x splits
  int splits = 1;    // K ranges per tile (split-K); 1 with stream-K
  int k_tiles = 0;   // k-tiles per tile
  int sk_units = 0;   // stream-K: the last sk_units cluster tiles are streamed (0: none)
  int sk_iters = 0;   // stream-K: each worker's share is sk_iters k-tiles, one more for the first sk_extra
  int sk_extra = 0;
  int dp_rounds = 0;  // stream-K: whole data-parallel tiles per worker before its share
  FastDiv by_splits, by_k_tiles;  // splits and k_tiles as divisors (make_schedule)
};

// First stream-K iteration of `worker`'s share (the share ends where worker + 1's begins).
TESSERA_HD int sk_share_begin(const Schedule& s, int worker) {
  return worker * s.sk_iters + (worker < s.sk_extra ? worker : s.sk_extra);
}

struct WorkItem {
  int tile;      // cluster tile (batch-major, grouped raster within a batch)
  int split;     // split-K range (0 otherwise)
  int kt_begin;  // k-tiles [kt_begin, kt_end) of the tile
  int kt_end;
};

// Split-K range r of `splits` covers k-tiles [r * k_tiles / splits, (r + 1) * k_tiles / splits).
TESSERA_HD void k_range(int split, const FastDiv& by_splits, int k_tiles, int& begin, int& end) {
  begin = by_splits.div(split * k_tiles);
  end = by_splits.div((split + 1) * k_tiles);
}

// The first streamed tile (the tiles before it are walked data-parallel or split-K).
TESSERA_HD int sk_first_tile(const Schedule& s) { return s.units - s.sk_units; }

// One worker's walk: Walk walk(s, worker); for (WorkItem w; walk.next(s, worker, workers, w);) ...
// One int of state, as the sm90 consumers keep it across their mainloop next to 128 accumulators
// (a second one spilled); the schedule and the worker's index are re-read where used.
class Walk {
 public:
  TESSERA_HD Walk(const Schedule&, int) : pos_(0) {}

  // Data-parallel / split-K units while pos_ counts them (all of them without stream-K, else
  // dp_rounds); then pos_ - dp_rounds is the offset of the next stream-K iteration in the share.
  TESSERA_HD bool next(const Schedule& s, int worker, int workers, WorkItem& w) {
    if (s.sk_units == 0 || pos_ < s.dp_rounds) {
      const long long unit = worker + (long long)pos_ * workers;
      if (unit >= sk_first_tile(s)) return false;  // with stream-K, dp_rounds * workers units exactly
      w.tile = s.by_splits.div(int(unit));
      w.split = int(unit) - w.tile * s.splits;
      k_range(w.split, s.by_splits, s.k_tiles, w.kt_begin, w.kt_end);
      ++pos_;
      return true;
    }
    const int it = sk_share_begin(s, worker) + (pos_ - s.dp_rounds), it_end = sk_share_begin(s, worker + 1);
    if (it >= it_end) return false;
    const int t = s.by_k_tiles.div(it);  // the share, cut at tile boundaries
    w.tile = sk_first_tile(s) + t;
    w.split = 0;
    w.kt_begin = it - t * s.k_tiles;
    const int left = it_end - it;
    w.kt_end = s.k_tiles - w.kt_begin < left ? s.k_tiles : w.kt_begin + left;
    pos_ += w.kt_end - w.kt_begin;
    return true;
  }

 private:
  int pos_;
};

// Stream-K roles of a work item: a streamed tile whose first k-tile is elsewhere publishes its
// partial; the owner of a streamed tile that it does not finish folds the later partials in.
TESSERA_HD bool sk_publishes(const Schedule& s, const WorkItem& w) {
  return s.sk_units > 0 && w.tile >= sk_first_tile(s) && w.kt_begin > 0;
}
TESSERA_HD bool sk_folds(const Schedule& s, const WorkItem& w) {
  return s.sk_units > 0 && w.tile >= sk_first_tile(s) && w.kt_begin == 0 && w.kt_end < s.k_tiles;
}
// The owner (`worker`) of tile w.tile folds the partials of workers worker + 1, ... while their
// shares begin inside the tile: for (int v = worker + 1; sk_folds_from(s, w, v, workers); ++v)
TESSERA_HD bool sk_folds_from(const Schedule& s, const WorkItem& w, int v, int workers) {
  return v < workers && sk_share_begin(s, v) < (w.tile - sk_first_tile(s) + 1) * s.k_tiles;
}

// Host: the schedule for `tiles` cluster tiles (x batches) of `k_tiles` over `workers`. With
// stream_k, the tiles that do not fill whole waves are streamed: all of them when there are fewer
// tiles than workers, else the partial wave. Returns false when the 32-bit walk cannot describe
// the problem.
inline bool make_schedule(long long tiles, int splits, long long k_tiles, int workers, bool stream_k, Schedule* out) {
  Schedule s;
  if (tiles * splits > 0x7fffffffLL || k_tiles > 0x7fffffffLL || workers < 1) return false;
  s.units = int(tiles * splits);
  s.splits = splits;
  s.k_tiles = int(k_tiles);
  s.by_splits = FastDiv(splits);
  s.by_k_tiles = FastDiv(int(k_tiles));
  if (stream_k && splits == 1 && tiles % workers != 0) {
    const long long sk = tiles < workers ? tiles : tiles % workers;
    if (sk * k_tiles <= 0x7fffffffLL && sk * k_tiles >= workers) {
      s.sk_units = int(sk);
      s.sk_iters = int(sk * k_tiles / workers);
      s.sk_extra = int(sk * k_tiles % workers);
      s.dp_rounds = int((tiles - sk) / workers);
    }
  }
  *out = s;
  return true;
}

}  // namespace tessera::gemm_impl
