// The decode family's host side: its plan (how many key splits) and the dispatch by head dim.
#include <algorithm>
#include <climits>

#include "attention/decode/decode.hpp"
#include "core/environment.hpp"

namespace tessera::attn::decode {

size_t workspace_bytes(int64_t batch, int64_t heads_kv, int row_tiles, int splits, int d) {
  if (splits <= 1) return 0;
  const size_t rows = size_t(batch) * size_t(heads_kv) * size_t(row_tiles) * kRows;
  return size_t(splits) * rows * (size_t(d) + 1) * sizeof(float);
}

int wave_ctas_per_sm(int d, int cta_tiles, int ctas_per_sm, int warps) {
  if (cta_tiles > 1) return std::min(ctas_per_sm, kMaxSharedKvCtasPerSm);  // more CTAs in flight gain there, to a point
  // Fewer, longer splits, as many per SM as keep the bytes in flight: less to merge.
  return std::clamp(kWaveBytesInFlight / bytes_in_flight(d, warps), 1, std::max(1, ctas_per_sm));
}

int cluster_limit_for(int cc_major, int max_sms, bool sm80_paths) {
  return cc_major == 9 && max_sms <= 0 && !sm80_paths ? kMaxClusterSplits : 0;
}

Plan make_plan(int64_t batch, int64_t seqlen_q, int64_t seqlen_k, int64_t heads_q, int64_t heads_kv, int d, int sms,
               int ctas_per_sm, size_t workspace_bytes_given, int64_t window_left, int cluster_limit) {
  Plan pl;
  pl.group = int(heads_q / heads_kv);
  pl.rows = int(seqlen_q) * pl.group;
  pl.row_tiles = (pl.rows + kRows - 1) / kRows;
  pl.tiles_per_cta = tiles_per_cta(d, pl.row_tiles);
  const int cta_tiles = (pl.row_tiles + pl.tiles_per_cta - 1) / pl.tiles_per_cta;  // CTAs per (batch, KV head, split)
  const int64_t units = batch * heads_kv * cta_tiles;
  // Keys before the first row's window are seen by no row.
  if (window_left >= 0) pl.key_block0 = int(std::max<int64_t>(0, seqlen_k - seqlen_q - window_left) / kBlockN);
  const int64_t key_blocks = std::max<int64_t>(1, (seqlen_k + kBlockN - 1) / kBlockN - pl.key_block0);
  // The splits for CTAs of `warps` warps a tile, `per_sm` of which fit an SM, and the CTAs per SM
  // of the wave they fill.
  struct Split {
    int64_t splits;
    int wave_ctas;
  };
  auto split = [&](int warps, int per_sm) {
    auto splits_for = [&](int wave) {
      const int64_t target = int64_t(std::max(1, sms)) * wave;
      return std::min<int64_t>({std::max<int64_t>(1, target / units),
                                std::max<int64_t>(1, key_blocks / (warps * kMinBlocksPerWarp)), kMaxSplits});
    };
    const int wave = wave_ctas_per_sm(d, cta_tiles, per_sm, warps);
    const int64_t splits = splits_for(wave);
    if (wave > 1 && cta_tiles == 1 && key_blocks / (splits * warps) < kMinBlocksPerWarpExtraCtas)
      return Split{splits_for(1), 1};
    return Split{splits, wave};
  };
  // A CTA of two row tiles keeps one tile's rings (and its bytes in flight), so the wave is the one-tile
  // rule's, of the CTAs an SM holds of that shape (shape_ctas_per_sm).
  const Split narrow = split(kWarps, shape_ctas_per_sm(d, pl.tiles_per_cta, kWarps, ctas_per_sm));
  // Wide CTAs where the keys split or CTAs share a KV head.
  const int wide_per_sm = shape_ctas_per_sm(d, 1, kWideWarps, ctas_per_sm);
  if (has_wide(d) && pl.tiles_per_cta == 1 && (narrow.splits > 1 || cta_tiles > 1) && wide_per_sm >= 1 &&
      key_blocks / (narrow.splits * kWarps) >= kMinStepsForWide)
    pl.warps = kWideWarps;
  const Split chosen = pl.warps == kWideWarps ? split(kWideWarps, wide_per_sm) : narrow;
  int64_t splits = chosen.splits;
  const int wave_ctas = chosen.wave_ctas;
  // Clusters combine the splits: pairs always, larger ones only while the grid takes at most half the
  // wave's CTA slots (past that the GPU runs some of a cluster's CTAs two to an SM and the slowest
  // holds the cluster: slower than the workspace combine on long calls).
  const bool cluster = splits > 1 && splits <= std::min(cluster_limit, kMaxClusterSplits) &&
                       (splits == 2 || units * splits * 2 <= int64_t(std::max(1, sms)) * wave_ctas);
  // No more than the workspace holds (a cluster combine needs none), and no more CTAs than a 1-D grid
  // walk counts.
  if (!cluster && splits > 1 && workspace_bytes_given != SIZE_MAX) {
    const size_t per_split = workspace_bytes(batch, heads_kv, pl.row_tiles, 2, d) / 2;
    splits = std::min<int64_t>(splits, int64_t(workspace_bytes_given / per_split));
  }
  splits = std::max<int64_t>(1, std::min<int64_t>(splits, INT_MAX / std::max<int64_t>(1, units)));
  // Even splits: every split but the last gets blocks_per_split blocks, and none is empty.
  pl.blocks_per_split = int((key_blocks + splits - 1) / splits);
  pl.splits = int((key_blocks + pl.blocks_per_split - 1) / pl.blocks_per_split);
  if (pl.splits < 1) pl.splits = 1;
  pl.ctas = units * pl.splits;
  pl.cluster_combine = cluster && pl.splits > 1;
  pl.workspace_bytes = pl.cluster_combine ? 0 : workspace_bytes(batch, heads_kv, pl.row_tiles, pl.splits, d);
  return pl;
}

cudaError_t run(int d, bool bf16, const AttnParams& a, const Plan& pl, void* workspace, int max_sms,
                bool dependent_launch, cudaStream_t stream, const Cache* cache) {
  DecodeParams p;
  p.a = a;
  p.group = pl.group;
  p.rows = pl.rows;
  p.row_tiles = pl.row_tiles;
  p.tiles_per_cta = pl.tiles_per_cta;
  p.warps = pl.warps;
  p.key_block0 = pl.key_block0;
  if (cache) {
    p.cache_seqlens = cache->cache_seqlens;
    p.seqlen_new = cache->seqlen_new;
    p.block_table = cache->block_table;
    p.block_table_stride = cache->block_table_stride;
    p.page_size = cache->page_size;
    p.num_pages = cache->num_pages;
  }
  p.splits = pl.splits;
  p.blocks_per_split = pl.blocks_per_split;
  p.cluster_combine = pl.cluster_combine;
  p.by_splits = FastDiv(pl.splits);
  p.by_cta_tiles = FastDiv((pl.row_tiles + pl.tiles_per_cta - 1) / pl.tiles_per_cta);
  p.by_heads_kv = FastDiv(int(a.heads_kv));
  p.a.by_group = FastDiv(pl.group);
  p.by_page_size = FastDiv(p.page_size);
  if (pl.splits > 1 && !pl.cluster_combine) {
    const size_t rows = size_t(a.batch) * size_t(a.heads_kv) * size_t(pl.row_tiles) * kRows;
    p.part_o = static_cast<float*>(workspace);
    p.part_lse = p.part_o + size_t(pl.splits) * rows * size_t(d);
    if (rows / kRows <= size_t(kArrivalTiles) && pl.rows <= kFusedCombineRows && detail::environment().attn_dynamic)
      p.arrivals = arrival_counters(stream);
  }
  auto go = [&](auto fn_f16, auto fn_bf16) { return (bf16 ? fn_bf16 : fn_f16)(p, pl.ctas, max_sms, dependent_launch, stream); };
  switch (d) {
    case 64: return go(&launch<64, false>, &launch<64, true>);
    case 96: return go(&launch<96, false>, &launch<96, true>);
    case 128: return go(&launch<128, false>, &launch<128, true>);
    case 256: return go(&launch<256, false>, &launch<256, true>);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace tessera::attn::decode
