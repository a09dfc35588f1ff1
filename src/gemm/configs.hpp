// The GEMM configuration table and the heuristic: one place for every tile choice.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "gemm/kernel_params.hpp"  // Decomposition

namespace tessera::gemm_impl {

// Sm80: mma.sync, multistage cp.async (sm_80 and newer); Sm90: TMA + WGMMA (cc 9.0); Skinny: the
// decode-step kernel for a side of at most skinny::kMaxRows (gemm/skinny, mma.sync, sm_80 and newer);
// Fallback: CUDA cores, any alignment.
enum class Kernel { Sm80, Sm90, Fallback, Skinny };

struct Config {
  int id;               // id in sm80/configs.def or sm90/configs.def; -1 for the fallback
  Kernel kernel;
  const char* name;
  int bm, bn, bk, stages, warps;
  int smem_bytes;       // dynamic shared memory per CTA
  int min_cc;           // compute capability x10
  int max_cc;           // inclusive; sm_90a code runs on exactly cc 9.0
  const char* reason;
  int throughput = 100;  // sm90: % of the best config's FLOP rate on large problems (the cost model's weight)
  int cluster_m = 1;     // sm90: CTAs per cluster along M (sharing B by TMA multicast)
  int cluster_n = 1;     // sm90: CTAs per cluster along N (sharing A by TMA multicast)
  bool pingpong = false; // sm90: two consumer warpgroups on alternating BM x BN tiles (else cooperative)
  bool stream_k = false;  // sm90: can walk stream-K shares (not the three-warpgroup tile: sm90/config_shape.hpp)
  bool flip = false;      // sm90: can write a column-major canonical D, the flipped orientation (sm90/config_shape.hpp)
  bool l2_warm = false;   // sm90: can prefetch its first k-tiles into L2 at entry (sm90/config_shape.hpp)
  bool tf32 = false;      // runs fp32 operands as tf32 (sm90/configs.def TESSERA_SM90_TF32; the fallback in fp32)
  bool tf32x3 = false;    // ... and 3xTF32, whose sums need the promoted accumulators (sm90 Traits::kPromote)
  bool s8 = false;        // runs s8 operands (sm90/configs.def TESSERA_SM90_S8; the fallback in int32)
  bool fp8 = false;       // runs fp8 operands (sm90/configs.def TESSERA_SM90_FP8; the fallback in fp32)
  bool fp8_promote = false;  // ... with promoted sums (sm90 Traits::kPromote), fp8's default precision
  bool fp8_block = false;    // ... with block scales (sm90/configs.def TESSERA_SM90_FP8_BLOCK; the fallback)
};

const std::vector<Config>& configs();
const Config* find_config(const std::string& name);
std::string config_names();  // comma-separated, for error messages
const Config& fallback_config();
const Config& skinny_config();

// A configuration as callers spell it (GemmArgs::config, TESSERA_GEMM_CONFIG, the tuning cache,
// gemm_select_config): its name, or its name + kFlipSuffix for the flipped orientation (gemm/plan.hpp:
// the problem computed as D^T = B A^T and D stored transposed), on a config that can take it
// (Config::flip). What `tessera tune` measures and caches, so a tuned choice keeps its orientation.
constexpr const char* kFlipSuffix = "+flip";
struct ConfigChoice {
  const Config* config = nullptr;
  bool flip = false;
};
// {config, flip} for a valid spelling; {null} for an unknown name or "<name>+flip" on a config that
// cannot flip, whose error message (after "<where>: ") spelling_error gives.
ConfigChoice find_config_choice(const std::string& spelling);
std::string spelling_error(const std::string& spelling);
// The spelling of a choice, in static storage (the C API hands it out).
const char* config_spelling(const Config& c, bool flip);

// Problem facts the heuristic looks at (host-only, so the CPU tests can drive it).
struct HeuristicInput {
  long long m, n, k, batch;
  int sm_count;
  int cc;          // e.g. 90
  int smem_optin;  // bytes
  // Both operands meet TMA's rules (after padding, if the caller gives the workspace) and K > 0:
  // then an sm_90 device takes the TMA/WGMMA kernels.
  bool tma_ok = false;
  // The canonical problem's orientation may be flipped (gemm/plan.hpp): 0 = no (the caller's D or
  // epilogue rules out the transposed store), 1 = where it costs less, 2 = always, among the configs
  // that can (Config::flip; TESSERA_GEMM_FLIP=1).
  int flip = 0;
  // Both operands K-major and readable in 16-byte vectors (aligned, or padded into the workspace),
  // K > 0: the skinny kernel can run a problem with a side of at most skinny::kMaxRows.
  bool skinny_ok = false;
  // fp32 operands: only the configs with Config::tf32 run them, and `k` counts K in 16-bit steps
  // (twice the elements), as the configs' BK does, so k-tiles and bytes come out right.
  bool f32 = false;
  bool f32x3 = false;  // 3xTF32: only the configs with Config::tf32x3
  // s8 operands: only the configs with Config::s8, data-parallel (their int32 sums have no split-K
  // or stream-K fix-up), with `k` in 16-bit steps (half the elements) as for fp32.
  bool s8 = false;
  // fp8 operands: only the configs with Config::fp8 (Config::fp8_promote for promoted sums), `k` as for s8.
  bool fp8 = false;
  bool fp8_promote = false;
  // fp8 block scales (promoted sums): only the configs with Config::fp8_block.
  bool fp8_block = false;
};

// Decode shapes (a side of at most this many rows, both operands K-major) go to the skinny kernel
// when the heuristic chooses: there the weights are read once at the memory's pace and a launch has
// no prologue to amortize.
constexpr int kSkinnyAutoRows = 16;
// Whether the skinny kernel can run the canonical problem (an explicit request checks this).
inline bool skinny_runs(const HeuristicInput& in, int max_rows) {
  return in.skinny_ok && in.k > 0 && (in.m <= max_rows || in.n <= max_rows);
}

// The heuristic's answer: the configuration and whether to run it on the flipped orientation.
struct Selection {
  const Config* config = nullptr;
  bool flip = false;
};

// The configuration for a problem: on an sm_90 device with TMA-ready operands the sm90 config of
// least estimated time (waves x k-tiles per unit x tile area / throughput, with split-K), else the
// largest sm80 tile that still gives every SM at least one CTA; only configs the device can run.
const Config& select_config(const HeuristicInput& in);
// The same with the orientation: where in.flip allows, an M = 128 decode shape's sm90 configs are also
// costed on the flipped problem (N x M, data-parallel only), which wins where it leaves fewer SMs
// idle (see select_sm90).
Selection select(const HeuristicInput& in);

// ---- split-K (sm90 family) ----------------------------------------------------------------------
// When a problem's output tiles cannot give every SM work (M = 128 LLM decode shapes, 1024^2),
// K is cut into `splits` ranges of whole k-tiles and the persistent grid walks (tile, range)
// units. Each unit leaves its fp32 partial tile in the workspace; when every unit has its own
// worker, each range of a tile then folds 1/splits of the tile's rows, else the last range to
// finish folds them all (sm90/fixup.cuh); either way in an order fixed by the shape and config,
// so the result is bitwise reproducible whichever unit finishes last.
constexpr int kMaxSplits = 128;  // one wave of a 132-SM GPU over a single tile
constexpr int kMinKTilesPerSplit = 4;   // a range shorter than the pipeline cannot hide the TMA latency
constexpr int kSplitKBoundSms = 264;    // gemm_workspace_size covers GPUs with up to this many SMs

// Ranges for one problem: splits * tiles <= sm_count (one wave), each range >= kMinKTilesPerSplit
// k-tiles; 1 when the tiles already fill the SMs or the config is not an sm90 one.
int select_splits(const Config& c, long long m, long long n, long long k, long long batch, int sm_count);
// Workspace for `splits` ranges: the fp32 partial tiles, then an arrival counter per tile or (one
// round, sm90/launch.cuh) a 64-bit flag per tile and range.
size_t splitk_bytes(const Config& c, long long m, long long n, long long batch, int splits);

// ---- stream-K (sm90 family; gemm/schedule.hpp) ---------------------------------------------------
// When the tiles leave a partial last wave (or fewer tiles than SMs), the partial wave's tiles are
// streamed after the whole waves: their k-tiles laid end to end and cut into one equal share per
// worker, crossing tile boundaries; a tile cut between workers is finished by the worker that
// holds its first k-tile, which adds the others' partials in worker order (deterministic).
constexpr int kStreamKBoundSms[] = {78, 114, 132};  // gemm_workspace_size covers stream-K on these
// The Decomposition of least estimated time for config `c` (data-parallel, split-K or stream-K).
Decomposition select_decomposition(const Config& c, long long m, long long n, long long k, long long batch,
                                   int sm_count);
// K-tiles of the larger operand that an sm90 kernel prefetches into L2 at entry, before its barriers
// and cluster are set up and before it waits for the previous kernel (0 = none): on a decode launch
// (a side of at most 128, one tile per CTA) DRAM starts on the first ring at once, under the
// previous kernel's tail when launched as its dependent. `m`, `n` of the problem as it runs.
constexpr int kL2WarmKTiles = 4;
int l2_warm_ktiles(const Config& c, const Decomposition& d, long long m, long long n, long long batch, int sm_count);
// Workspace for stream-K on a GPU of `sm_count` SMs: one BM x BN fp32 partial and one flag per CTA
// of the persistent grid.
size_t streamk_bytes(const Config& c, int sm_count);

// Device-free upper bound (split-K: any sm90 config, any GPU up to kSplitKBoundSms SMs; stream-K:
// the heuristic's choice on kStreamKBoundSms), for gemm_workspace_size; forced_splits > 0
// (TESSERA_GEMM_SPLITS) bounds that many ranges on every config instead.
size_t splitk_workspace_bound(long long m, long long n, long long k, long long batch, int forced_splits = 0);

}  // namespace tessera::gemm_impl
