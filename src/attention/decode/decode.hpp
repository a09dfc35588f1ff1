// The decode attention family (decode/kernel.cuh): a few query tokens (Sq <= kMaxSeqlenQ, e.g. one
// new token per sequence, or a speculative draft) against a long K/V. Host side: when it runs, how
// the work is split (plain C++, CPU-tested), and the launcher.
//
// The query heads that share a KV head and the Sq tokens are packed into the rows of one 16-row tile
// (packed row = token * group + head in group), so each K/V block is read once per KV head rather
// than once per query head. When (batch x KV heads x row tiles) cannot fill the GPU, the keys are split
// across CTAs ("split-KV"): each has its rows' normalised partial O and log-sum-exp, and they are
// combined with the weights exp(lse_split - lse), in split order (deterministic): across a cluster of
// the splits' CTAs (few splits, Hopper), by the last split to finish, or by a second kernel.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "attention/params.hpp"

namespace tessera::attn::decode {

constexpr int kMaxSeqlenQ = 16;  // longer query sequences go to the prefill families
constexpr int kRows = 16;        // packed query rows per CTA (one m16 MMA tile)
constexpr int kWarps = 4;        // per row tile; each warp walks its own key blocks
constexpr int kBlockN = 16;      // keys per warp step
constexpr int kMaxSplits = 128;
// Up to this many splits of a CTA's row tiles combine across a thread-block cluster (Hopper): the
// portable cluster size.
constexpr int kMaxClusterSplits = 8;
constexpr int kPrefetchBytes = 64 * 1024;  // K/V a CTA asks of L2 at entry beyond its ring (kernel.cuh)
// A split covers at least this many key blocks per warp: shorter ones would spend more on the
// combine's reads and writes than they save.
constexpr int kMinBlocksPerWarp = 2;
// K/V bytes per SM that one row tile's wave keeps in flight: a d = 64 CTA alone holds half of it
// and leaves HBM under-used (H200 the most), d >= 96 CTAs hold it alone.
constexpr int kWaveBytesInFlight = 64 * 1024;
// CTAs per SM where several one-tile CTAs read the same (batch, KV head)'s keys (more than 32 packed
// rows): d = 64 fits four, which ran slower than three (their K/V reads crowd one another's).
constexpr int kMaxSharedKvCtasPerSm = 3;
// A second CTA per SM for kWaveBytesInFlight only where each warp still walks this many key blocks:
// shorter splits cost more in their ramp-up and merge than the bytes in flight gain.
constexpr int kMinBlocksPerWarpExtraCtas = 8;

// Row tiles per CTA: one, or both where a (batch, KV head) has exactly two (Sq > 1 with GQA: 17-32
// packed rows) at d <= 128. The two tiles' warps walk the same keys through the same rings (warp w
// of each on ring w), so a K/V block leaves L2 once for both: as separate CTAs each tile read it
// again, and L2 -> SM traffic rather than HBM bounded such calls. More tiles stay one a CTA: CTAs of
// two tiles that still shared a (batch, KV head) ran slower there (the CTA meets once a block, and
// holds half the rings a pair of one-tile CTAs keeps in flight); four tiles a CTA gained nothing;
// d = 256 has no registers or merge area for a second tile.
constexpr int kMaxTilesPerCta = 2;
constexpr int tiles_per_cta(int d, int row_tiles) {
  return row_tiles == kMaxTilesPerCta && d <= 128 ? kMaxTilesPerCta : 1;
}

// Wide CTAs: one row tile walked by kWideWarps warps, at head dims where has_wide(d), for the calls
// whose keys the plan splits or whose row tiles share a KV head (make_plan). A warp's step is a chain
// of dependent instructions (S = Q K^T, the softmax, O += P V) about as long at d = 64 as at d = 128
// for half the bytes, so short splits wait on it; twice the warps walk half the steps each. Calls
// that fill the GPU without splits keep kWarps: wide CTAs ran them slower.
constexpr int kWideWarps = 8;
constexpr bool has_wide(int d) { return d <= 64; }
// Wide CTAs only where a narrow CTA's warps would walk this many steps each: shorter walks are mostly
// the CTA's fixed costs (Q, the merge, the combine), and wide CTAs halve the CTAs that share them.
constexpr int kMinStepsForWide = 8;

// Shared memory of a CTA at head dim d: Q per tile, then per walking warp a ring of `stages` K and V
// blocks (which the tiles' merge areas overlay after the walk, kernel.cuh).
constexpr int stages_for(int d) { return d > 128 ? 2 : 3; }
constexpr int smem_bytes(int d, int tiles = 1, int warps = kWarps) {
  return (warps * stages_for(d) * 2 * kBlockN + kRows * tiles) * d * 2;
}
// CTAs of the decode kernel one SM holds at head dim d (its shared memory; 0: it does not fit); the
// CTA's reserved 1 KB included in smem_per_sm and per CTA.
constexpr int ctas_per_sm(int d, int smem_per_sm) { return smem_per_sm / (smem_bytes(d) + 1024); }
// CTAs one SM holds of a CTA shape (row tiles, warps a tile) where `narrow` one-tile kWarps CTAs fit
// (ctas_per_sm): a two-tile CTA holds both tiles' warps and registers in one tile's rings, so an SM
// fits `tiles` times fewer (at least one); a wide CTA takes the shared memory of the narrow ones.
// make_plan fills waves by these counts; the kernel is built for Hopper's (Traits::kMinCtasPerSm), so
// that its registers never hold an SM to fewer CTAs than the plan counts on.
constexpr int shape_ctas_per_sm(int d, int tiles, int warps, int narrow) {
  return tiles > 1           ? (narrow / tiles > 1 ? narrow / tiles : 1)
         : warps != kWarps ? int(int64_t(narrow) * (smem_bytes(d) + 1024) / (smem_bytes(d, 1, warps) + 1024))
                           : narrow;
}
constexpr int kHopperSmemPerSm = 228 * 1024;  // 227 KB a CTA may opt into + its reserved 1 KB
// K/V bytes a CTA keeps in flight: every ring but the block its warps work on.
constexpr int bytes_in_flight(int d, int warps = kWarps) { return warps * (stages_for(d) - 1) * 2 * kBlockN * d * 2; }
// How a call is cut into CTAs.
struct Plan {
  int group = 1;             // query heads per KV head
  int rows = 1;              // packed query rows per (batch, KV head): seqlen_q * group
  int row_tiles = 1;         // ceil(rows / kRows)
  int tiles_per_cta = 1;     // row tiles a CTA takes (tiles_per_cta())
  int warps = kWarps;        // per row tile: kWarps, or kWideWarps (has_wide)
  int key_block0 = 0;        // the first key block any row sees (a left window skips the ones before)
  int splits = 1;            // key ranges per (batch, KV head, row tile), from key_block0 on
  int blocks_per_split = 1;  // key blocks (kBlockN keys) per split
  int64_t ctas = 0;          // batch * heads_kv * ceil(row_tiles / tiles_per_cta) * splits
  // The splits of a CTA's row tiles combine across a cluster of their CTAs (combine_in_cluster):
  // 2..cluster_limit splits, more than 2 only in grids of at most half a wave. No workspace then.
  bool cluster_combine = false;
  size_t workspace_bytes = 0;  // what `splits` needs (0 when 1 or cluster_combine)
};

// Bytes of workspace for `splits` key ranges: each packed row's fp32 O (d values) and LSE per split.
size_t workspace_bytes(int64_t batch, int64_t heads_kv, int row_tiles, int splits, int d);

// The plan for a problem on `sms` SMs (the SM budget where one is set) holding `ctas_per_sm` CTAs
// of kWarps warps a tile each (ctas_per_sm()), given `workspace_bytes` of workspace (SIZE_MAX: as
// much as the plan wants): when batch x KV
// heads x row tiles (tiles_per_cta to a CTA) cannot fill a wave, as many splits as keep every CTA in
// that first wave (a second, partial wave of memory-bound CTAs costs more than one split fewer), each
// split at least kMinBlocksPerWarp key blocks per warp, and no more splits than the workspace holds.
// A wave (wave_ctas_per_sm) is every CTA slot, at most kMaxSharedKvCtasPerSm, where several one-tile
// CTAs share a (batch, KV head);
// else as many CTAs per SM as keep kWaveBytesInFlight of K/V in flight (one from d = 96 up, two at
// d = 64), the extra ones only where each warp still walks kMinBlocksPerWarpExtraCtas blocks.
// Contiguous and paged caches alike: more CTAs than that did not hide the pages' scattered reads,
// fewer and longer splits did as well.
// Where has_wide(d), a plan of one-tile CTAs that splits the keys, or whose CTAs share a KV head, is
// made again for wide CTAs (kWideWarps; as many per SM as their shared memory allows) when its warps
// walk kMinStepsForWide steps or more.
// window_left: the call's left window (-1: none). cluster_limit: the most splits a cluster may combine
// (cluster_limit_for; 0: no clusters), which then need no workspace.
Plan make_plan(int64_t batch, int64_t seqlen_q, int64_t seqlen_k, int64_t heads_q, int64_t heads_kv, int d, int sms,
               int ctas_per_sm, size_t workspace_bytes, int64_t window_left = -1, int cluster_limit = 0);
// The cluster_limit of make_plan for a device of compute capability cc_major: kMaxClusterSplits on
// Hopper (the kernel's cluster combine is in its sm_90a code), unless an SM budget cuts the launch
// into chunks (max_sms > 0) or TESSERA_ATTN_ARCH=80 asks for the Ampere code paths (sm80_paths; on a
// Hopper GPU that is also how the compute_80 PTX is tested, which has no cluster combine).
int cluster_limit_for(int cc_major, int max_sms, bool sm80_paths);
// CTAs per SM in the wave that make_plan's splits fill (of the ctas_per_sm that fit), before the
// check on split length; cta_tiles: the CTAs that share a (batch, KV head) and split.
int wave_ctas_per_sm(int d, int cta_tiles, int ctas_per_sm, int warps = kWarps);


// The two kernels' parameters beyond AttnParams.
struct DecodeParams {
  AttnParams a;
  int group = 1, rows = 1, row_tiles = 1, tiles_per_cta = 1, key_block0 = 0, splits = 1, blocks_per_split = 1;
  int warps = kWarps;            // Plan::warps: which CTA shape the launcher runs
  bool cluster_combine = false;  // Plan::cluster_combine: a launch in clusters of `splits` CTAs
  int64_t block0 = 0;     // first CTA of this launch (SM budget: launches of at most max_sms CTAs)
  // A KV cache (attention_with_kvcache): batch b has min(cache_seqlens[b], a.seqlen_k - seqlen_new)
  // + seqlen_new keys (the new ones already appended); null: every batch has a.seqlen_k. Paged: K/V
  // are [pages, page_size, Hkv, D] (k_stride[0]: the page stride) and block_table row b (int32,
  // block_table_stride apart) names batch b's pages; a.seqlen_k is then pages per row x page_size.
  const int* cache_seqlens = nullptr;
  int seqlen_new = 0;
  const int* block_table = nullptr;
  int64_t block_table_stride = 0;
  int page_size = 0, num_pages = 0;
  float* part_o = nullptr;    // [splits][batch * heads_kv * row_tiles * kRows][d] fp32 (splits > 1)
  float* part_lse = nullptr;  // [splits][batch * heads_kv * row_tiles * kRows] fp32, base 2
  // splits > 1: the launch's arrival counts (arrival_counters), 8 bits per (batch, KV head, row tile);
  // null: the combine kernel merges the splits.
  unsigned* arrivals = nullptr;
  // The decode kernel's divisors, made by run() (with a.by_group, the GQA group): a CTA finds its
  // place, its rows' heads and its blocks' pages by dividing by them at entry, where a run-time
  // divisor costs a ~20-instruction chain (a 64-bit one a subroutine call) on the way to the first loads.
  FastDiv by_splits, by_cta_tiles, by_heads_kv, by_page_size;  // cta_tiles: row tiles / tiles_per_cta
};

// The fused combine's counters: in a launch slot (attention/launch_slots.hpp), an 8-bit count per
// (batch, KV head, row tile), at most kArrivalTiles of them; the kernel leaves them zeroed. Calls with
// more tiles, or more than kFusedCombineRows packed rows per (batch, KV head) (one CTA then merges
// too many rows: the combine kernel's warp per row across the GPU is faster), and
// TESSERA_ATTN_DYNAMIC=0 merge their splits in a second kernel.
constexpr int kArrivalTiles = 256;
constexpr int kFusedCombineRows = 8;
// This launch's counters on the current device, or nullptr (no slot left: the combine kernel).
unsigned* arrival_counters(cudaStream_t stream);

// The new keys and values of a KV-cache call, written into the cache before the attention reads it:
// k_new/v_new [batch, seqlen_new, heads_kv, d] (strides: batch, seq, head; d contiguous) go to
// positions keys_of(b) - seqlen_new ... of batch b (DecodeParams: the same clamp of cache_seqlens).
struct AppendParams {
  const void* k_new = nullptr;
  const void* v_new = nullptr;
  int64_t k_new_stride[3] = {0, 0, 0}, v_new_stride[3] = {0, 0, 0};
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  int64_t k_stride[3] = {0, 0, 0}, v_stride[3] = {0, 0, 0};  // the cache's (batch or page, position, head)
  const int* cache_seqlens = nullptr;
  const int* block_table = nullptr;
  int64_t block_table_stride = 0;
  int page_size = 0, num_pages = 0;
  int capacity = 0;  // positions per batch
  int batch = 0, seqlen_new = 0, heads_kv = 0, d = 0;
};
cudaError_t append_kv(const AppendParams& p, int max_sms, cudaStream_t stream);

// Runs the plan (causal folded into p's window): the decode kernel, which combines the splits itself
// (splits > 1: the last split of a row tile to finish merges the tile, counted in arrival_counters),
// or else the decode kernel and then the combine kernel; `workspace` holds plan.workspace_bytes.
// max_sms: the SM budget (0 = every SM). dependent_launch (cc 9.x, no SM budget): the kernels as
// programmatic dependent launches, each waiting in the kernel for the grid before it.
// A KV cache's per-sequence lengths and pages (DecodeParams' fields of the same names).
struct Cache {
  const int* cache_seqlens = nullptr;
  int seqlen_new = 0;
  const int* block_table = nullptr;
  int64_t block_table_stride = 0;
  int page_size = 0, num_pages = 0;
};
cudaError_t run(int d, bool bf16, const AttnParams& p, const Plan& plan, void* workspace, int max_sms,
                bool dependent_launch, cudaStream_t stream, const Cache* cache = nullptr);

// The per-head-dim launchers (one translation unit each: decode_d<d>.cu).
template <int D, bool BF16>
cudaError_t launch(const DecodeParams& p, int64_t ctas, int max_sms, bool dependent_launch, cudaStream_t stream);

}  // namespace tessera::attn::decode
