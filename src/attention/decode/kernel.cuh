// Decode attention (decode.hpp): a CTA takes the 16 packed query rows of one row tile (or of
// tiles_per_cta tiles) of one (batch, KV head) and one split of the keys; a tile's kWarps warps (a
// wide CTA's kWideWarps) walk interleaved 16-key blocks of the split (warp w: blocks w, w + kWarps,
// ...), each warp on its own:
//   K and V blocks stream through the warp's own smem ring (cp.async, `stages` deep, a __syncwarp
//   per block: no CTA barrier in the loop; with several tiles, warp w of each tile shares ring w
//   and the CTA meets once a block), S = Q K^T on mma.sync m16n8k16 (Q from smem by
//   ldmatrix), the masks, the online softmax in exp2 with the scale folded in, P in registers as
//   the A operand of O += P V (V by ldmatrix.trans).
// Then a tile's warps' (max, sum, O) meet in smem (re-using the rings) and one pass per row merges
// them: O / sum and the LSE go to the output (one split) or to the workspace (several), which the
// combine kernel reduces. The kernel is memory-bound on K and V: 16-row tiles keep the tensor core
// mostly idle, and the rows that padding adds cost no traffic.
#pragma once

#include <cooperative_groups.h>
#include <cute/tensor.hpp>

#include "attention/common.cuh"
#include "attention/decode/decode.hpp"
#include "attention/decode/kv_rows.hpp"
#include "attention/sm80/kernel.cuh"
#include "core/dependent_launch.cuh"

namespace tessera::attn::decode {

using namespace cute;

template <int D_, bool BF16, int kTiles_ = 1, int kWarps_ = kWarps>
struct Traits {
  // kTiles row tiles of kWarps warps each; warp w of every tile walks ring w.
  static constexpr int D = D_, kStages = stages_for(D_), kTiles = kTiles_, kWarps = kWarps_;
  static constexpr int kThreads = 32 * kWarps * kTiles;
  // As many CTAs per SM as make_plan counts on (Hopper's shared memory): registers to match.
  static constexpr int kMinCtasPerSm =
      cute::max(1, shape_ctas_per_sm(D, kTiles, kWarps, ctas_per_sm(D, kHopperSmemPerSm)));
  using Element = typename sm80::ElementOf<BF16>::type;
  // The sm80 family's swizzled rows (sm80/kernel.cuh), at 16 rows: conflict-free ldmatrix.
  static constexpr int kAtomCols = D % 64 == 0 ? 64 : 32;
  using SmemAtom = decltype(composition(Swizzle<kAtomCols == 64 ? 3 : 2, 3, 3>{},
                                        Layout<Shape<_8, Int<kAtomCols>>, Stride<Int<kAtomCols>, _1>>{}));
  using SmemLayoutTile = decltype(tile_to_shape(SmemAtom{}, Shape<Int<kRows>, Int<D>>{}));  // (16,D): Q, a K or V block
  using SmemLayoutVt = decltype(composition(SmemLayoutTile{}, make_layout(Shape<Int<D>, Int<kBlockN>>{}, GenRowMajor{})));
  static_assert(kRows == kBlockN, "Q tiles and K/V blocks share one smem layout");
  // One warp: a 16 x 16 x 16 tile of m16n8k16 atoms (N = 16 so that ldmatrix.x4 feeds two atoms).
  using TiledMma = decltype(make_tiled_mma(MMA_Atom<typename sm80::ElementOf<BF16>::MmaOp>{}, Layout<Shape<_1, _1, _1>>{},
                                           Tile<_16, _16, _16>{}));
  // gmem -> smem of one block by one warp: 16-byte vectors, lanes along D first.
  static constexpr int kThrPerRow = kAtomCols / 8;
  using GmemCopy = decltype(make_tiled_copy(Copy_Atom<SM80_CP_ASYNC_CACHEGLOBAL_ZFILL<uint128_t>, Element>{},
                                            Layout<Shape<Int<32 / kThrPerRow>, Int<kThrPerRow>>, Stride<Int<kThrPerRow>, _1>>{},
                                            Layout<Shape<_1, _8>>{}));
  static constexpr int kTileElems = int(cosize_v<SmemLayoutTile>);
  // The merge area (after the loop, over the rings): per tile, each warp's O (16 x D fp32), max and sum.
  static constexpr int kMergeFloats = kWarps * kRows * (D + 2);
  static_assert(smem_bytes(D, kTiles, kWarps) == (kTiles + kWarps * kStages * 2) * kTileElems * 2, "decode.hpp's smem formula");
  static_assert(kTiles * kMergeFloats * 4 <= kWarps * kStages * 2 * kTileElems * 2, "merge areas fit the rings");
};

// A warp's place: (batch, KV head, row tile, split), the CTA's `tiles` row tiles rt = 0.. in it,
// splits fastest so that neighbouring CTAs read neighbouring keys. (A tile past the row tiles, which
// the plan never makes, would walk and load as the others do and write nothing.)
struct Place {
  int b, hkv, tile, split;
  int64_t ws_row0;  // the tile's first row in the workspace's (batch, KV head, packed row) order
};
__device__ __forceinline__ Place place_of(const DecodeParams& p, int tiles, int rt) {
  const int c = int(p.block0) + int(blockIdx.x);  // < 2^31: the plan's CTAs (make_plan)
  const int bhr = p.by_splits.div(c), bh = p.by_cta_tiles.div(bhr);  // (b, hkv, CTA of tiles), (b, hkv)
  Place w;
  w.split = c - bhr * p.splits;
  w.tile = (bhr - bh * p.by_cta_tiles.d) * tiles + rt;
  w.b = p.by_heads_kv.div(bh);
  w.hkv = bh - w.b * p.a.heads_kv;
  w.ws_row0 = ((int64_t(w.b) * p.a.heads_kv + w.hkv) * p.row_tiles + w.tile) * kRows;
  return w;
}

// Keys of batch b: all of them, or (a KV cache) its cached ones, clamped to the capacity, plus the
// appended ones. Read from L2 (.cg): the kernel also reads it before a dependent launch's wait, and
// such an early look must not leave a stale line in L1.
__device__ __forceinline__ int keys_of(const DecodeParams& p, int b) {
  if (!p.cache_seqlens) return p.a.seqlen_k;
  const int cached = min(max(__ldcg(p.cache_seqlens + b), 0), p.a.seqlen_k - p.seqlen_new);
  return cached + p.seqlen_new;
}

// Batch b's rows of K (or V, with its strides): base pointer of the head, and where key j lives.
template <class Element>
__device__ __forceinline__ const Element* kv_base(const DecodeParams& p, const void* x, const int64_t* stride, int b,
                                                  int hkv, KvRows* rows) {
  rows->row = stride[1];
  if (p.block_table) {
    rows->page = stride[0];
    rows->table = p.block_table + b * p.block_table_stride;
    rows->page_size = p.page_size;
    rows->last_page = p.num_pages - 1;
    return static_cast<const Element*>(x) + hkv * stride[2];
  }
  return static_cast<const Element*>(x) + b * stride[0] + hkv * stride[2];
}

// Fetches the 128-byte line at p into L2 (no registers, nothing to wait for).
__device__ __forceinline__ void prefetch_l2(const void* p) { asm volatile("prefetch.global.L2 [%0];" ::"l"(p)); }

// Packed row r of (b, hkv) -> its query token and head.
struct Row {
  int token, head;
};
__device__ __forceinline__ Row row_of(const DecodeParams& p, int hkv, int r) {
  const int token = p.a.by_group.div(r);
  return {token, hkv * p.group + r - token * p.group};
}

// The LSE (natural log) of output row q of batch b, for callers that were asked for LSEs.
__device__ __forceinline__ void store_lse(const AttnParams& a, int b, Row q, float lse) {
  a.lse[(int64_t(b) * a.heads_q + q.head) * a.seqlen_q + q.token] = lse;
}

// The fused combine, after a CTA has written its split's partials: the CTA whose split arrives last
// at its (batch, KV head, row tile) combines the tile's rows and zeroes the count again for the next
// launch on the slot. Counts are 8 bits (splits <= kMaxSplits < 256), four tiles a word. The rows
// go in parallel (the tile's LSEs, then its weights, then (row, 8 columns) per thread), so that the
// merge costs about one L2 round trip per phase; in split order and with the sums of combine_row,
// as the combine kernel would. `scratch`: kRows x (kMaxSplits + 1) floats of shared memory.
template <class Element, int D, int kWarps>
__device__ __forceinline__ void combine_if_last(const DecodeParams& p, const Place& w, int row0, float* scratch) {
  static_assert(kMaxSplits < 256, "an 8-bit count");
  constexpr int kThreads = 32 * kWarps;
  __shared__ bool last;
  __threadfence();  // this thread's partials before the count
  __syncthreads();
  if (threadIdx.x == 0) {
    const int64_t unit = w.ws_row0 / kRows;
    unsigned* word = p.arrivals + unit / 4;
    const int shift = 8 * int(unit % 4);
    last = (atomicAdd(word, 1u << shift) >> shift & 0xffu) == unsigned(p.splits - 1);
    if (last) atomicSub(word, unsigned(p.splits) << shift);  // every split is in: nobody else counts here
  }
  __syncthreads();
  if (!last) return;
  __threadfence();  // the other splits' partials after their counts
  const AttnParams& a = p.a;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, rows = min(kRows, p.rows - row0), splits = p.splits;
  const int64_t ws_rows = int64_t(a.batch) * a.heads_kv * p.row_tiles * kRows;
  float* weight = scratch;                       // [kRows][kMaxSplits]: the LSEs, then the weights
  float* scale = scratch + kRows * kMaxSplits;   // [kRows]: 1 / the sum of a row's weights
  for (int i = threadIdx.x; i < rows * splits; i += kThreads)
    weight[i / splits * kMaxSplits + i % splits] = __ldcg(p.part_lse + (i % splits) * ws_rows + w.ws_row0 + i / splits);
  __syncthreads();
  for (int r = warp; r < rows; r += kWarps) {  // a warp per row, lanes over the splits
    float* lse = weight + r * kMaxSplits;
    float mx = -INFINITY, sum = 0.0f;
    for (int s = lane; s < splits; s += 32) mx = fmaxf(mx, lse[s]);
    CUTE_UNROLL
    for (int k = 16; k > 0; k /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, k));
    for (int s = lane; s < splits; s += 32) {
      const float x = mx == -INFINITY ? 0.0f : exp2f(lse[s] - mx);
      lse[s] = x;
      sum += x;
    }
    CUTE_UNROLL
    for (int k = 16; k > 0; k /= 2) sum += __shfl_xor_sync(0xffffffff, sum, k);
    if (lane == 0) {
      scale[r] = sum > 0.0f ? 1.0f / sum : 0.0f;
      const Row q = row_of(p, w.hkv, row0 + r);
      if (a.lse) store_lse(a, w.b, q, sum > 0.0f ? (mx + __log2f(sum)) * 0.69314718055994530942f : -INFINITY);
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < rows * (D / 8); i += kThreads) {
    const int r = i / (D / 8), c = i % (D / 8) * 8;
    const float* src = p.part_o + (w.ws_row0 + r) * D + c;
    float o[8] = {};
#pragma unroll 4
    for (int s = 0; s < splits; ++s) {
      const float4 x0 = __ldcg(reinterpret_cast<const float4*>(src + s * ws_rows * D));
      const float4 x1 = __ldcg(reinterpret_cast<const float4*>(src + s * ws_rows * D) + 1);
      const float wgt = weight[r * kMaxSplits + s];
      o[0] += wgt * x0.x, o[1] += wgt * x0.y, o[2] += wgt * x0.z, o[3] += wgt * x0.w;
      o[4] += wgt * x1.x, o[5] += wgt * x1.y, o[6] += wgt * x1.z, o[7] += wgt * x1.w;
    }
    Element out[8];
    CUTE_UNROLL
    for (int e = 0; e < 8; ++e) out[e] = Element(o[e] * scale[r]);
    const Row q = row_of(p, w.hkv, row0 + r);
    *reinterpret_cast<uint4*>(static_cast<Element*>(a.o) + w.b * a.o_stride[0] + q.token * a.o_stride[1] +
                              q.head * a.o_stride[2] + c) = *reinterpret_cast<const uint4*>(out);
  }
}

// The cluster combine (plan.cluster_combine): the CTAs of one CTA tile's splits (kTiles row tiles
// from packed row row0) form a cluster, each holding its split's normalised O and LSE in its own
// shared memory (`result`, per row tile: kRows x D floats, then kRows LSEs, base 2). After a cluster
// barrier the CTAs share out the (tile, row, 8 columns) items and read every split's values across
// the cluster (distributed shared memory): no workspace, no counter, no round trip through L2. Sums
// in split order with the weights of combine_if_last. A second barrier keeps every CTA's shared
// memory alive until the others have read it. Hopper SASS only: the plan asks for it on cc 9.x only,
// and an older build of this kernel traps instead of leaving O unwritten.
template <class Element, int D, int kThreads, int kTiles>
__device__ __forceinline__ void combine_in_cluster(const DecodeParams& p, const Place& w, int row0, float* result) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  static_assert(kMaxClusterSplits <= 8, "a portable cluster");
  constexpr int kTileFloats = kRows * (D + 1);
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every split's result is in its CTA's shared memory
  const AttnParams& a = p.a;
  const int splits = p.splits, rank = int(cluster.block_rank());
  const float* split_result[kMaxClusterSplits];
  CUTE_UNROLL
  for (int s = 0; s < kMaxClusterSplits; ++s) split_result[s] = cluster.map_shared_rank(result, s < splits ? s : 0);
  const int items = (kTiles == 1 ? min(kRows, p.rows - row0) : kTiles * kRows) * (D / 8);
  for (int i = rank * kThreads + int(threadIdx.x); i < items; i += splits * kThreads) {
    const int tr = i / (D / 8), c = i % (D / 8) * 8;  // tr: (tile, row), the tile's rows contiguous
    if (kTiles > 1 && row0 + tr >= p.rows) continue;
    const int t = kTiles == 1 ? 0 : tr / kRows, r = kTiles == 1 ? tr : tr % kRows;
    // One tile: every split's O loads with its LSE, all in flight at once. Two: each split's O loads as
    // it is weighted (all of them held until the max spilled the two-tile d = 64 CTA's 128 registers).
    constexpr int kHeld = kTiles == 1 ? kMaxClusterSplits : 1;
    float lse[kMaxClusterSplits], mx = -INFINITY;
    float4 x0[kHeld], x1[kHeld];
    auto o_of = [&](int s) { return split_result[s] + t * kTileFloats + r * D + c; };
    CUTE_UNROLL
    for (int s = 0; s < kMaxClusterSplits; ++s)
      if (s < splits) {
        lse[s] = split_result[s][t * kTileFloats + kRows * D + r];
        if constexpr (kTiles == 1) {
          x0[s] = *reinterpret_cast<const float4*>(o_of(s));
          x1[s] = *reinterpret_cast<const float4*>(o_of(s) + 4);
        }
        mx = fmaxf(mx, lse[s]);
      }
    float o[8] = {}, sum = 0.0f;
    CUTE_UNROLL
    for (int s = 0; s < kMaxClusterSplits; ++s)
      if (s < splits) {
        const int h = kTiles == 1 ? s : 0;
        if constexpr (kTiles > 1) {
          x0[h] = *reinterpret_cast<const float4*>(o_of(s));
          x1[h] = *reinterpret_cast<const float4*>(o_of(s) + 4);
        }
        const float wgt = mx == -INFINITY ? 0.0f : exp2f(lse[s] - mx);
        sum += wgt;
        o[0] += wgt * x0[h].x, o[1] += wgt * x0[h].y, o[2] += wgt * x0[h].z, o[3] += wgt * x0[h].w;
        o[4] += wgt * x1[h].x, o[5] += wgt * x1[h].y, o[6] += wgt * x1[h].z, o[7] += wgt * x1[h].w;
      }
    const float scale = sum > 0.0f ? 1.0f / sum : 0.0f;
    Element out[8];
    CUTE_UNROLL
    for (int e = 0; e < 8; ++e) out[e] = Element(o[e] * scale);
    const Row q = row_of(p, w.hkv, row0 + tr);
    *reinterpret_cast<uint4*>(static_cast<Element*>(a.o) + w.b * a.o_stride[0] + q.token * a.o_stride[1] +
                              q.head * a.o_stride[2] + c) = *reinterpret_cast<const uint4*>(out);
    if (a.lse && c == 0) store_lse(a, w.b, q, sum > 0.0f ? (mx + __log2f(sum)) * 0.69314718055994530942f : -INFINITY);
  }
  cluster.sync();  // no CTA leaves (and frees its shared memory) while another still reads it
#else
  __trap();
#endif
}

// After the walk (the rings are free): the warps of a tile meet in smem, O unnormalised (16 x D fp32
// each), max (scaled, base 2) and sum, then one of their threads per (row, 8 consecutive d) merges
// them with the weights 2^(max_w - max): O / sum and the LSE to the output (one split) or to the
// workspace, or (cluster_result, not null) to the CTA's own shared memory for combine_in_cluster.
// `area`: the tile's merge area (T::kMergeFloats) over the rings.
template <class T, class ThrMma, class AccO, class Softmax>
__device__ __forceinline__ void merge_warps(const DecodeParams& p, const Place& w, int row0, ThrMma const& thr_mma,
                                            AccO& acc_o, Softmax& softmax, typename T::Element* area,
                                            float* cluster_result) {
  using Element = typename T::Element;
  constexpr int D = T::D, kWarps = T::kWarps, kThrRows = decltype(size<0>(sm80::rowcol(acc_o.layout())))::value;
  const AttnParams& a = p.a;
  const int warp = threadIdx.x / 32 % kWarps, lane = threadIdx.x % 32;
  float* m_o = reinterpret_cast<float*>(area);  // [kWarps][16][D]
  float* m_max = m_o + kWarps * kRows * D;      // [kWarps][16]
  float* m_sum = m_max + kWarps * kRows;        // [kWarps][16]
  Tensor o_rc = make_tensor(acc_o.data(), sm80::rowcol(acc_o.layout()));
  Tensor tOcO = thr_mma.partition_C(make_identity_tensor(Shape<Int<kRows>, Int<D>>{}));
  Tensor tOcO_rc = make_tensor(tOcO.data(), sm80::rowcol(tOcO.layout()));
  CUTE_UNROLL
  for (int r = 0; r < kThrRows; ++r) {
    const int row = get<0>(tOcO_rc(r, 0));
    CUTE_UNROLL
    for (int c = 0; c < size<1>(o_rc); ++c) m_o[(warp * kRows + row) * D + get<1>(tOcO_rc(r, c))] = o_rc(r, c);
    const float sum = quad_sum(softmax.row_sum[r]);
    if (lane % 4 == 0) {
      m_max[warp * kRows + row] = softmax.row_max[r] == -INFINITY ? -INFINITY : softmax.row_max[r] * a.scale_log2;
      m_sum[warp * kRows + row] = sum;
    }
  }
  __syncthreads();

  for (int i = warp * 32 + lane; i < kRows * (D / 8); i += kWarps * 32) {
    const int r = i / (D / 8), c = (i % (D / 8)) * 8;
    if (row0 + r >= p.rows) continue;
    float mx = -INFINITY;
    CUTE_UNROLL
    for (int k = 0; k < kWarps; ++k) mx = fmaxf(mx, m_max[k * kRows + r]);
    float weight[kWarps], sum = 0.0f;
    CUTE_UNROLL
    for (int k = 0; k < kWarps; ++k) {
      weight[k] = mx == -INFINITY ? 0.0f : fast_exp2(m_max[k * kRows + r] - mx);
      sum += weight[k] * m_sum[k * kRows + r];
    }
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    float o[8];
    CUTE_UNROLL
    for (int e = 0; e < 8; ++e) {
      float v = 0.0f;
      CUTE_UNROLL
      for (int k = 0; k < kWarps; ++k) v += weight[k] * m_o[(k * kRows + r) * D + c + e];
      o[e] = v * inv;
    }
    const float lse2 = sum > 0.0f ? mx + __log2f(sum) : -INFINITY;  // base 2
    const Row q = row_of(p, w.hkv, row0 + r);
    if (p.splits == 1) {
      Element out[8];
      CUTE_UNROLL
      for (int e = 0; e < 8; ++e) out[e] = Element(o[e]);
      *reinterpret_cast<uint4*>(static_cast<Element*>(a.o) + w.b * a.o_stride[0] + q.token * a.o_stride[1] +
                                q.head * a.o_stride[2] + c) = *reinterpret_cast<const uint4*>(out);
      if (a.lse && c == 0) store_lse(a, w.b, q, lse2 * 0.69314718055994530942f);
    } else if (cluster_result) {
      float4* dst = reinterpret_cast<float4*>(cluster_result + r * D + c);
      dst[0] = make_float4(o[0], o[1], o[2], o[3]);
      dst[1] = make_float4(o[4], o[5], o[6], o[7]);
      if (c == 0) cluster_result[kRows * D + r] = lse2;
    } else {
      const int64_t ws_rows = int64_t(a.batch) * a.heads_kv * p.row_tiles * kRows;
      const int64_t row = w.split * ws_rows + w.ws_row0 + r;
      float4* dst = reinterpret_cast<float4*>(p.part_o + row * D + c);
      dst[0] = make_float4(o[0], o[1], o[2], o[3]);
      dst[1] = make_float4(o[4], o[5], o[6], o[7]);
      if (c == 0) p.part_lse[row] = lse2;
    }
  }
}

// Row tile t's Q in shared memory (the tiles lie first, before the rings): (16,D).
template <class T>
__device__ __forceinline__ auto q_tile(typename T::Element* smem_e, int t) {
  return make_tensor(make_smem_ptr(smem_e + t * T::kTileElems), typename T::SmemLayoutTile{});
}

// Q: the CTA's row tiles, 16 packed rows each, -> smem, zeros past the last row (16-byte loads; a
// swizzle keeps 8-element groups whole). `rt`: this thread's row tile in the CTA (w.tile is that tile).
template <class T>
__device__ __forceinline__ void load_q(const DecodeParams& p, const Place& w, int rt, typename T::Element* smem_e) {
  using Element = typename T::Element;
  constexpr int D = T::D;
  const AttnParams& a = p.a;
  for (int i = int(threadIdx.x); i < T::kTiles * kRows * (D / 8); i += T::kThreads) {
    const int qt = i / (kRows * (D / 8)), r = i / (D / 8) % kRows, c = (i % (D / 8)) * 8;
    const int row = (w.tile - rt + qt) * kRows + r;  // packed row r of the CTA's tile qt
    uint4 v = {0, 0, 0, 0};
    if (row < p.rows) {
      const Row q = row_of(p, w.hkv, row);
      v = *reinterpret_cast<const uint4*>(static_cast<const Element*>(a.q) + w.b * a.q_stride[0] +
                                          q.token * a.q_stride[1] + q.head * a.q_stride[2] + c);
    }
    *reinterpret_cast<uint4*>(&q_tile<T>(smem_e, qt)(r, c)) = v;
  }
}

// The warps on one ring meet: a warp alone needs only its lanes; with several tiles (a warp of each
// on every ring) the whole CTA meets, which compute-sanitizer's racecheck follows (it reported the
// post-walk merge racing the rings' reads when each ring's two warps met at a named barrier).
template <int kTiles>
__device__ __forceinline__ void ring_sync() {
  if constexpr (kTiles == 1)
    __syncwarp();
  else
    __syncthreads();
}

// T::kMinCtasPerSm CTAs per SM (__launch_bounds__'s second argument; at least one: without it ptxas
// held the d = 96 two-tile kernel to 128 registers and spilled).
template <class T>
__global__ void __launch_bounds__(T::kThreads, T::kMinCtasPerSm) decode_kernel(DecodeParams p) {
  using Element = typename T::Element;
  constexpr int D = T::D, kStages = T::kStages, kWarps = T::kWarps;
  extern __shared__ __align__(128) unsigned char smem[];
  allow_dependent_launch();  // the stream's next kernel (a dependent launch) may take free SMs and wait there
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int kw = warp % kWarps, rt = warp / kWarps;  // the ring this warp walks, its row tile in the CTA
  const Place w = place_of(p, T::kTiles, rt);
  const AttnParams& a = p.a;
  const int row0 = w.tile * kRows;

  Element* smem_e = reinterpret_cast<Element*>(smem);
  Tensor sQ = q_tile<T>(smem_e, rt);  // (16,D)

  // This warp's ring and its K / V blocks of (b, hkv). With several tiles, the warps on one ring
  // share its loads (K by the first tile's warp, V by the second's) and meet once a block
  // (ring_sync).
  Element* ring = smem_e + T::kTileElems * (T::kTiles + kw * kStages * 2);
  auto sK = [&](int s) { return make_tensor(make_smem_ptr(ring + s * 2 * T::kTileElems), typename T::SmemLayoutTile{}); };
  auto sV = [&](int s) { return make_tensor(make_smem_ptr(ring + (s * 2 + 1) * T::kTileElems), typename T::SmemLayoutTile{}); };
  auto sVt = [&](int s) { return make_tensor(make_smem_ptr(ring + (s * 2 + 1) * T::kTileElems), typename T::SmemLayoutVt{}); };
  KvRows k_rows, v_rows;
  const Element* k_ptr = kv_base<Element>(p, a.k, a.k_stride, w.b, w.hkv, &k_rows);
  const Element* v_ptr = kv_base<Element>(p, a.v, a.v_stride, w.b, w.hkv, &v_rows);
  const bool loads_k = T::kTiles == 1 || rt == 0, loads_v = T::kTiles == 1 || rt == 1;
  typename T::GmemCopy g2s;
  auto thr_g2s = g2s.get_slice(lane);
  Tensor tKcK = thr_g2s.partition_S(make_identity_tensor(Shape<Int<kBlockN>, Int<D>>{}));  // (CPY,CPY_N,CPY_D) -> (key, d)

  // This warp's share of the split's key blocks (blocks first, first + kWarps, ... below `last`) and
  // where the blocks of its steps 0..31 live (lane i: step i; `page`, clamped, and `in_page`, the
  // block's first row in it; a contiguous cache: page 0 and the block's first key), with the paged
  // cache's block-table entries of steps 32..63 read ahead (`entry_next`), so that no step waits for
  // its page number or divides by the page size.
  struct Share {
    int n_keys, first, steps, walk, entry_next, page, in_page;  // walk: the steps of the split's longest ring
  };
  auto block_key = [&](const Share& sh, int step) { return (sh.first + step * kWarps) * kBlockN; };
  auto entry_of = [&](const Share& sh, int step) {
    return k_rows.table && step < sh.steps ? __ldcg(k_rows.table + p.by_page_size.div(block_key(sh, step))) : 0;
  };
  auto place = [&](Share& sh, int entry, int step) {  // this lane's block: step `step`, entry `entry`
    const int key = block_key(sh, step);
    sh.page = k_rows.table ? k_rows.page_of(entry) : 0;
    sh.in_page = k_rows.table ? key - p.by_page_size.div(key) * k_rows.page_size : key;
  };
  auto share = [&] {
    Share sh;
    sh.n_keys = keys_of(p, w.b);
    const int key_blocks = (sh.n_keys + kBlockN - 1) / kBlockN;
    const int first0 = p.key_block0 + w.split * p.blocks_per_split;  // ring 0's first block
    sh.first = first0 + kw;
    const int last = min(key_blocks, p.key_block0 + (w.split + 1) * p.blocks_per_split);  // one past
    sh.steps = sh.first < last ? (last - sh.first + kWarps - 1) / kWarps : 0;
    sh.walk = first0 < last ? (last - first0 + kWarps - 1) / kWarps : 0;
    place(sh, entry_of(sh, lane), lane);
    sh.entry_next = entry_of(sh, 32 + lane);
    return sh;
  };
  // The first blocks, up to kPrefetchBytes per CTA past the ring's first fill, asked of L2 before the
  // wait for the previous grid (a dependent launch runs this beside its tail; prefetching binds no
  // values, and L2 is where that grid's writes land). The look at the lengths and pages here may be
  // stale; the walk below reads them again. A short split (a few blocks per warp) then waits for DRAM
  // about once instead of once per ring refill.
  {
    const Share sh = share();
    constexpr int kRowLines = (D * 2 + 127) / 128, kPrefetchSteps = kPrefetchBytes / (kWarps * kBlockN * D * 2 * 2);
    constexpr int kWarmSteps = kStages - 1 + kPrefetchSteps, kLines = kWarmSteps * kBlockN * kRowLines;
    static_assert(kWarmSteps <= 32 && kLines % 32 == 0, "one entry a lane; every lane takes each turn");
    for (int i = lane; i < kLines; i += 32) {
      const int step = i / (kBlockN * kRowLines), row = i / kRowLines % kBlockN, line = i % kRowLines;
      const int pg = __shfl_sync(0xffffffff, sh.page, step), r = __shfl_sync(0xffffffff, sh.in_page, step) + row;
      if (step < sh.steps && block_key(sh, step) + row < sh.n_keys) {
        if (loads_k) prefetch_l2(k_ptr + k_rows.at_page(pg, r) + line * 64);
        if (loads_v) prefetch_l2(v_ptr + v_rows.at_page(pg, r) + line * 64);
      }
    }
  }
  wait_for_prior_grid();  // Q, K, V and the cache's lengths and pages are final from here on

  Share sh = share();
  const int n_keys = sh.n_keys, first = sh.first, steps = sh.steps;
  // One tile: each warp walks its own steps. Several: the CTA meets once a step (ring_sync), so every
  // warp takes as many steps as the longest ring (the rings differ by at most a block).
  const int walk = T::kTiles == 1 ? steps : sh.walk;
  // Where this warp's `step`-th block lives (page, row in the page), from the lane that holds it;
  // called for every step in order (the window moves on every 32 steps).
  auto block_pos = [&](int step) {
    if (!k_rows.table) return make_int2(0, block_key(sh, step));
    if (step % 32 == 0 && step > 0) {
      place(sh, sh.entry_next, step + lane);
      sh.entry_next = entry_of(sh, step + 32 + lane);
    }
    return make_int2(__shfl_sync(0xffffffff, sh.page, step % 32), __shfl_sync(0xffffffff, sh.in_page, step % 32));
  };
  auto load = [&](int step) {  // block of this warp's `step` -> ring slot step % kStages
    if (step < steps) {
      const int j0 = block_key(sh, step), s = step % kStages;
      const int2 pos = block_pos(step);
      auto block = [&](const Element* base, const KvRows& rows) {  // (16,D) at key j0 (one page)
        return make_tensor(make_gmem_ptr(base + rows.at_page(pos.x, pos.y)), Shape<Int<kBlockN>, Int<D>>{},
                           make_stride(rows.row, _1{}));
      };
      if (loads_k) copy_rows(g2s, thr_g2s.partition_S(block(k_ptr, k_rows)), thr_g2s.partition_D(sK(s)), tKcK, n_keys - j0);
      if (loads_v) copy_rows(g2s, thr_g2s.partition_S(block(v_ptr, v_rows)), thr_g2s.partition_D(sV(s)), tKcK, n_keys - j0);
    }
    cp_async_fence();  // an empty group past the end keeps the wait counts uniform
  };
  for (int s = 0; s < kStages - 1; ++s) load(s);

  load_q<T>(p, w, rt, smem_e);  // while the first K/V blocks are on their way

  typename T::TiledMma mma;
  auto thr_mma = mma.get_slice(lane);
  Tensor tSrQ = thr_mma.partition_fragment_A(sQ);     // (MMA,1,D/16)
  Tensor tSrK = thr_mma.partition_fragment_B(sK(0));  // (MMA,2,D/16)
  Tensor tOrVt = thr_mma.partition_fragment_B(sVt(0));  // (MMA,D/8,1)
  Tensor acc_o = partition_fragment_C(mma, Shape<Int<kRows>, Int<D>>{});  // (MMA,1,D/8) fp32
  clear(acc_o);
  auto s2r_q = make_tiled_copy_A(Copy_Atom<SM75_U32x4_LDSM_N, Element>{}, mma);
  auto s2r_k = make_tiled_copy_B(Copy_Atom<SM75_U32x4_LDSM_N, Element>{}, mma);
  auto s2r_v = make_tiled_copy_B(Copy_Atom<SM75_U16x8_LDSM_T, Element>{}, mma);
  Tensor tSsQ = s2r_q.get_slice(lane).partition_S(sQ);
  Tensor tSrQ_v = s2r_q.get_slice(lane).retile_D(tSrQ);
  Tensor tSrK_v = s2r_k.get_slice(lane).retile_D(tSrK);
  Tensor tOrVt_v = s2r_v.get_slice(lane).retile_D(tOrVt);

  // Each S element's (packed row, key in block), viewed (rows, cols); a row's visible keys [lo, hi):
  // the window (causal is its right side at 0) around the row's token, bottom-right aligned.
  Tensor tScS = thr_mma.partition_C(make_identity_tensor(Shape<Int<kRows>, Int<kBlockN>>{}));
  Tensor tScS_rc = make_tensor(tScS.data(), sm80::rowcol(tScS.layout()));
  constexpr int kThrRows = decltype(size<0>(sm80::rowcol(acc_o.layout())))::value;  // 2: rows g and g + 8
  int key_lo[kThrRows], key_hi[kThrRows];
  CUTE_UNROLL
  for (int r = 0; r < kThrRows; ++r) {
    const int64_t i = p.a.by_group.div(row0 + get<0>(tScS_rc(r, 0))) + int64_t(n_keys) - a.seqlen_q;
    key_lo[r] = a.window_left < 0 ? 0 : int(max<int64_t>(0, i - a.window_left));
    key_hi[r] = a.window_right < 0 ? n_keys : int(min<int64_t>(n_keys, max<int64_t>(0, i + a.window_right + 1)));
  }
  // Softcap: scale * s -> softcap * tanh(scale * s / softcap), kept in units of s for the softmax.
  const float cap_in = a.softcap > 0.0f ? a.scale / a.softcap : 0.0f, cap_out = a.softcap > 0.0f ? a.softcap / a.scale : 0.0f;
  OnlineSoftmax<kThrRows> softmax;
  softmax.init();
  __syncthreads();  // sQ written

  for (int step = 0; step < walk; ++step) {
    cp_async_wait<kStages - 2>();
    ring_sync<T::kTiles>();  // the block landed for every lane; every lane is done with the slot refilled next
    load(step + kStages - 1);
    if (T::kTiles > 1 && step >= steps) continue;  // this ring has no block at the last step
    const int s = step % kStages, col0 = (first + step * kWarps) * kBlockN;

    Tensor acc_s = partition_fragment_C(mma, Shape<Int<kRows>, Int<kBlockN>>{});  // (MMA,1,2) fp32
    clear(acc_s);
    Tensor tSsK = s2r_k.get_slice(lane).partition_S(sK(s));
    CUTE_UNROLL
    for (int kb = 0; kb < size<2>(tSrQ); ++kb) {
      copy(s2r_q, tSsQ(_, _, kb), tSrQ_v(_, _, kb));
      copy(s2r_k, tSsK(_, _, kb), tSrK_v(_, _, kb));
      cute::gemm(mma, tSrQ(_, _, kb), tSrK(_, _, kb), acc_s);
    }
    Tensor sc = make_tensor(acc_s.data(), sm80::rowcol(acc_s.layout()));  // (rows, cols)
    CUTE_UNROLL
    for (int r = 0; r < size<0>(sc); ++r)
      CUTE_UNROLL
      for (int c = 0; c < size<1>(sc); ++c) {
        const int key = col0 + get<1>(tScS_rc(r, c));
        if (cap_in > 0.0f) sc(r, c) = cap_out * tanhf(sc(r, c) * cap_in);
        if (key < key_lo[r] || key >= key_hi[r]) sc(r, c) = -INFINITY;
      }
    if (softmax.update(sc, a)) {
      Tensor o_rc = make_tensor(acc_o.data(), sm80::rowcol(acc_o.layout()));
      softmax.rescale(o_rc);
    }
    Tensor tOrP32 = make_tensor(acc_s.data(), sm80::acc_as_a(acc_s.layout()));  // (MMA,1,1) fp32
    Tensor tOrP = make_tensor_like<Element>(tOrP32(_, _, 0));
    CUTE_UNROLL
    for (int i = 0; i < size(tOrP); ++i) tOrP(i) = Element(tOrP32(_, _, 0)(i));
    copy(s2r_v, s2r_v.get_slice(lane).partition_S(sVt(s))(_, _, 0), tOrVt_v(_, _, 0));
    cute::gemm(mma, tOrP, tOrVt(_, _, 0), acc_o);
  }
  cp_async_wait<0>();
  __syncthreads();  // every warp is done with its ring: the merge area overlays them

  Element* merge_area = smem_e + T::kTileElems * T::kTiles;
  // The cluster combine's result area lies past the merge area: other CTAs read it while this one merges.
  float* cluster_result = reinterpret_cast<float*>(merge_area + T::kTiles * T::kMergeFloats * 2);
  static_assert((T::kTiles * (T::kTileElems + T::kMergeFloats * 2)) * 2 + T::kTiles * kRows * (D + 1) * 4 <=
                    smem_bytes(D, T::kTiles, kWarps),
                "the cluster combine's result areas fit");
  const bool in_cluster = p.splits > 1 && p.cluster_combine;
  merge_warps<T>(p, w, row0, thr_mma, acc_o, softmax, merge_area + rt * T::kMergeFloats * 2,
                 in_cluster ? cluster_result + rt * kRows * (D + 1) : nullptr);
  static_assert(kRows * (kMaxSplits + 1) * 4 <= smem_bytes(D), "the fused combine's scratch fits");
  if (in_cluster) {
    const int cta_row0 = T::kTiles == 1 ? row0 : (w.tile - rt) * kRows;  // the CTA's first packed row
    combine_in_cluster<Element, D, T::kThreads, T::kTiles>(p, w, cta_row0, cluster_result);
  } else if constexpr (T::kTiles == 1) {  // the plan fuses the workspace combine for one-tile CTAs only (kFusedCombineRows)
    if (p.splits > 1 && p.arrivals) combine_if_last<Element, D, kWarps>(p, w, row0, reinterpret_cast<float*>(smem));
  }
}

// One output row of the combine, by one warp: packed row r of (b, hkv) (its query token and head),
// from the splits' partials in the workspace: the LSEs -> weights, then O = sum of weight x partial O,
// in split order; O and the LSE to the outputs.
template <class Element, int D>
__device__ __forceinline__ void combine_row(const DecodeParams& p, int b, int hkv, int r, int lane) {
  static_assert(D % 32 == 0, "lanes over D");
  const AttnParams& a = p.a;
  const Row q = row_of(p, hkv, r);
  const int64_t ws_rows = int64_t(a.batch) * a.heads_kv * p.row_tiles * kRows;
  const int64_t row = (int64_t(b) * a.heads_kv + hkv) * p.row_tiles * kRows + r;
  // The splits' LSEs, 32 at a time across the lanes (lane i: splits i, i + 32, ...), so that their
  // loads overlap instead of one L2 round trip per split; max and sum by shuffles.
  constexpr int kChunks = (kMaxSplits + 31) / 32;
  float w[kChunks], mx = -INFINITY;
  CUTE_UNROLL
  for (int j = 0; j < kChunks; ++j) {
    const int s = lane + 32 * j;
    w[j] = s < p.splits ? p.part_lse[s * ws_rows + row] : -INFINITY;
    mx = fmaxf(mx, w[j]);
  }
  CUTE_UNROLL
  for (int k = 16; k > 0; k /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, k));
  float sum = 0.0f;
  CUTE_UNROLL
  for (int j = 0; j < kChunks; ++j) {
    w[j] = mx == -INFINITY ? 0.0f : exp2f(w[j] - mx);  // exp2(-inf) = 0 for the lanes past the last split
    sum += w[j];
  }
  CUTE_UNROLL
  for (int k = 16; k > 0; k /= 2) sum += __shfl_xor_sync(0xffffffff, sum, k);
  // O = sum of weight x partial O, in split order; the loads of several splits in flight at once.
  constexpr int kPer = D / 32;  // elements per lane (D = 96: 3)
  float o[kPer] = {};
  CUTE_UNROLL
  for (int j = 0; j < kChunks; ++j) {
    const int n = min(32, p.splits - 32 * j);
#pragma unroll 8
    for (int t = 0; t < n; ++t) {
      const float wgt = __shfl_sync(0xffffffff, w[j], t);
      const float* src = p.part_o + ((32 * j + t) * ws_rows + row) * D;
      CUTE_UNROLL
      for (int e = 0; e < kPer; ++e) o[e] += wgt * src[lane + 32 * e];
    }
  }
  const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
  Element* dst = static_cast<Element*>(a.o) + b * a.o_stride[0] + q.token * a.o_stride[1] + q.head * a.o_stride[2];
  CUTE_UNROLL
  for (int e = 0; e < kPer; ++e) dst[lane + 32 * e] = Element(o[e] * inv);
  if (a.lse && lane == 0) store_lse(a, b, q, sum > 0.0f ? (mx + __log2f(sum)) * 0.69314718055994530942f : -INFINITY);
}

// The combine kernel (when the decode kernel has no arrival counters): one warp per output row
// (b, query head, token).
template <class Element, int D>
__global__ void __launch_bounds__(128) combine_kernel(DecodeParams p) {
  wait_for_prior_grid();  // the splits' partials (a dependent launch; else a no-op)
  const AttnParams& a = p.a;
  const int64_t out_row = (p.block0 + blockIdx.x) * 4 + threadIdx.x / 32;  // over (b, head, token)
  if (out_row >= int64_t(a.batch) * a.heads_q * a.seqlen_q) return;
  const int token = int(out_row % a.seqlen_q), head = int(out_row / a.seqlen_q % a.heads_q);
  const int b = int(out_row / (int64_t(a.seqlen_q) * a.heads_q));
  combine_row<Element, D>(p, b, head / p.group, token * p.group + head % p.group, threadIdx.x % 32);
}

}  // namespace tessera::attn::decode
