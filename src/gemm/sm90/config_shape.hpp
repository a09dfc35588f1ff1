// Compile-time view of sm90/configs.def: ConfigShape<id> holds one row's tile numbers.
#pragma once

namespace tessera::gemm_impl::sm90 {

// The consumer warpgroups' schedule (kernel.cuh): both on one tile, or alternating tiles.
enum KernelSchedule : int { kCooperative = 0, kPingpong = 1 };

template <int Id>
struct ConfigShape;

#define TESSERA_SM90_CONFIG(id, name, bm, bn, bk, stages, cluster_m, cluster_n, schedule, throughput, reason) \
  template <>                                                                                      \
  struct ConfigShape<id> {                                                                         \
    static constexpr int BM = bm, BN = bn, BK = bk, Stages = stages;                               \
    static constexpr int ClusterM = cluster_m, ClusterN = cluster_n;                               \
    static constexpr bool Pingpong = (schedule) == kPingpong;                                      \
  };
#include "gemm/sm90/configs.def"
#undef TESSERA_SM90_CONFIG

// The rows configs.def also compiles for other operand types (TESSERA_SM90_TF32 / _S8 / _FP8 /
// _FP8_BLOCK, one variant each): the one list that the dispatch table and the heuristic's Config flags read.
enum RowVariant : int { kTf32Rows, kS8Rows, kFp8Rows, kFp8BlockRows };
struct VariantRow {
  int id;
  RowVariant variant;
};
constexpr VariantRow kVariantRows[] = {
#define TESSERA_SM90_CONFIG(...)
#define TESSERA_SM90_TF32(row, reason) {row, kTf32Rows},
#define TESSERA_SM90_S8(row, reason) {row, kS8Rows},
#define TESSERA_SM90_FP8(row, reason) {row, kFp8Rows},
#define TESSERA_SM90_FP8_BLOCK(row, reason) {row, kFp8BlockRows},
#include "gemm/sm90/configs.def"
#undef TESSERA_SM90_TF32
#undef TESSERA_SM90_S8
#undef TESSERA_SM90_FP8
#undef TESSERA_SM90_FP8_BLOCK
#undef TESSERA_SM90_CONFIG
};
constexpr bool has_variant(int id, RowVariant v) {
  for (const VariantRow& r : kVariantRows)
    if (r.id == id && r.variant == v) return true;
  return false;
}
constexpr bool has_tf32(int id) { return has_variant(id, kTf32Rows); }  // fp32 operands as tf32
constexpr bool has_s8(int id) { return has_variant(id, kS8Rows); }      // s8 operands
constexpr bool has_fp8(int id) { return has_variant(id, kFp8Rows); }    // e4m3 and e5m2 operands
constexpr bool has_fp8_block(int id) { return has_variant(id, kFp8BlockRows); }  // ... with block scales

// Consumer warpgroups of a configuration: one per 64 rows of the tile (cooperative) or two.
constexpr int consumer_warpgroups(int bm, bool pingpong) { return pingpong ? 2 : bm / 64; }

// Stream-K's fix-up (adding the later workers' partials into the accumulators) needs registers the
// three-warpgroup tile does not have: its consumers get 152 per thread (setmaxnreg, 512 threads in
// 64K), and the fix-up's loads spilled them. Those configs run data-parallel or split-K only.
constexpr bool supports_stream_k(int bm, bool pingpong) { return consumer_warpgroups(bm, pingpong) < 3; }

// The tiles at most 128 wide with one or two consumer warpgroups (the decode and few-tile shapes'
// tiles) have registers to spare around their mainloop; the wider ones' consumers use every
// register setmaxnreg gives them (128x256: R221 of 224; 192x192: R149 of 152), so code beyond the
// common path spills there. The features below are compiled into the roomy tiles only.
constexpr bool consumers_have_room(int bm, int bn, bool pingpong) {
  return bn <= 128 && consumer_warpgroups(bm, pingpong) < 3;
}

// fp8's promoted sums take a second set of accumulators: the roomy tiles have the registers, and so do
// two consumer warpgroups of 64x192 (96 + 96 fp32 under setmaxnreg's 224), the widest tile that promotes.
constexpr bool promotes_fp8(int bm, int bn, bool pingpong) {
  return consumers_have_room(bm, bn, pingpong) || (bn == 192 && consumer_warpgroups(bm, pingpong) == 2);
}
// Block scales are applied as each k-tile is promoted, one factor per tile column: the tile must lie
// within one 128-column block of B's scales (kernel_params.hpp kScaleBlockK).
constexpr bool takes_fp8_block_scales(int bm, int bn, bool pingpong) {
  return promotes_fp8(bm, bn, pingpong) && 128 % bn == 0;
}

// Split-K's parallel fold (fixup.cuh: in one round every range folds 1/splits of its tile); its
// code spilled 4 to 196 bytes of the wide tiles. They fold serially: the last range to arrive sums
// every partial alone.
constexpr bool supports_parallel_fold(int bm, int bn, bool pingpong) { return consumers_have_room(bm, bn, pingpong); }

// The transposed TMA-store epilogue of a column-major canonical D (the flipped orientation,
// gemm/plan.hpp), the decode tiles' reason to exist; its addresses and branch spilled the 128x256
// and 192x192 consumers, so those tiles refuse a column-major D.
constexpr bool supports_flip(int bm, int bn, bool pingpong) { return consumers_have_room(bm, bn, pingpong); }

// The one-tile kernel (traits.cuh, Traits::kOneTile) of the cooperative tiles with one or two
// consumer warpgroups, whose problems may fit in one wave (decode shapes, ~1000^3 on the narrow
// tiles; 2048^3 and 1024x4096xK on 128x256 pairs): a second kernel per row, a fraction of the
// first's code, launched when every CTA has exactly one tile and the epilogue only scales
// (launch.cuh). The three-warpgroup tiles (192 rows) have no second kernel: one wave of them is
// rare and their TUs are the slowest to compile.
constexpr bool supports_one_tile(int bm, int bn, bool pingpong) { return !pingpong && consumer_warpgroups(bm, pingpong) < 3; }

// The L2 warm-up at kernel entry (mainloop.cuh l2_warm, KernelParams::prefetch_a / prefetch_b) is compiled into
// the decode tiles (cooperative, a side of 64), the only ones that use it (gemm/configs.cpp
// l2_warm_ktiles); in the 64x256 ping-pong tile it cost a stack slot.
constexpr bool supports_l2_warm(int bm, int bn, bool pingpong) { return !pingpong && (bm == 64 || bn == 64); }

// The epilogue's shared memory per consumer warpgroup (the two epilogue_*.cuh): the 16-bit D leaves in 64 x 64
// sub-tiles (8 KB) stored by TMA, double-buffered where shared memory allows (the next sub-tile is
// written while the previous one's store still reads its buffer), else one buffer; the fp32 staging
// (64 x 40 floats, 10 KB) reuses the same bytes.
constexpr int kSmemOptinBytes = 232448;  // 227 KB: an H100's / H200's dynamic shared memory per block
constexpr int kEpiStoreBytes = 64 * 64 * 2, kEpiStagingBytes = 64 * 40 * 4;
constexpr int smem_bytes_with(int bm, int bn, int bk, int stages, bool pingpong, int epi_bytes) {
  const int consumers = consumer_warpgroups(bm, pingpong);
  const int bytes = stages * (bm + bn) * bk * 2 + consumers * epi_bytes + stages * 16 + (pingpong ? 16 : 8) +
                    consumers * (8 + 4);
  return (bytes + 1023) / 1024 * 1024;  // the storage struct is 1024-byte aligned
}
constexpr int epilogue_buffers(int bm, int bn, int bk, int stages, bool pingpong) {
  return smem_bytes_with(bm, bn, bk, stages, pingpong, 2 * kEpiStoreBytes) <= kSmemOptinBytes ? 2 : 1;
}
constexpr int epilogue_bytes(int bm, int bn, int bk, int stages, bool pingpong) {
  const int store = epilogue_buffers(bm, bn, bk, stages, pingpong) * kEpiStoreBytes;
  return store > kEpiStagingBytes ? store : kEpiStagingBytes;
}

// Dynamic shared memory of a configuration, in plain C++ for the host table: the A and B rings,
// the epilogue buffers, the full/empty barriers, the ping-pong turn barriers, the C barriers and the
// split-K flags.
// launch.cuh checks it against sizeof(SharedStorage).
constexpr int smem_bytes_for(int bm, int bn, int bk, int stages, bool pingpong) {
  return smem_bytes_with(bm, bn, bk, stages, pingpong, epilogue_bytes(bm, bn, bk, stages, pingpong));
}

}  // namespace tessera::gemm_impl::sm90
