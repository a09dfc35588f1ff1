// The Hopper GEMM (seeds 002/003): TMA loads into a ring of 128-byte-swizzled shared-memory stages,
// full/empty mbarriers, WGMMA with fp32 accumulators, warp specialisation and a persistent tile loop.
//
//   warpgroup 0 (producer, 56 registers): one elected thread walks the CTA's tiles and k-tiles and
//     issues the TMA loads of A and B into the next free stage (waits on its `empty` barrier, arms
//     its `full` barrier with the transaction byte count). On the decode tiles warp 1 first
//     prefetches the weights' first k-tiles into L2 (KernelParams::prefetch_a / prefetch_b).
//   consumer warpgroups (224 registers; 152 when there are three), in one of two schedules:
//     cooperative: BM / 64 of them (one to three) on one BM x BN tile, each owns 64 rows; while they
//       run the epilogue the tensor cores idle (the producer already fills the ring for the next tile).
//     ping-pong: two, each on its own 64 x BN tile, the CTA's work items alternating between them;
//       their mainloops take turns (an mbarrier per warpgroup says "your turn"), so one's epilogue
//       runs under the other's mainloop and the tensor cores stay busy across tile boundaries.
//     Per k-tile: wait `full`, issue BK/16 WGMMAs 64xBNx16 reading A and B straight from smem,
//     keep one batch in flight, and release the previous stage once its WGMMAs retired.
//     Epilogue (EpiMode): a 16-bit D leaves as swizzled 64x64 sub-tiles stored by TMA, whose last
//     store drains under the next tile's mainloop; beta*C arrives by TMA in the same sub-tiles; fp32
//     D, a C that TMA cannot read and split-K go through fp32 sub-tiles.
//
// Work: a persistent walk over (tile, k-tile range) items (gemm/schedule.hpp): whole tiles, split-K
// ranges, or stream-K shares whose partial tiles are folded into the owner's accumulators. The
// one-tile kernel (Traits::kOneTile, the same template) runs a launch of one wave with a plain
// epilogue: each CTA's tile is its block index, and none of the code above that it does not need is
// compiled into it.
//
// Canonical problem (gemm/plan.hpp): D (M x N, row-major) = A (M x K) * B^T with B stored N x K; A
// and B K-major or MN-major, 16-byte aligned with 16-byte leading dimensions (TMA's rules; the
// dispatcher pads other operands first). Batches are the third TMA mode (stride 0 = broadcast).
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>

#include "core/dependent_launch.cuh"
#include "gemm/epilogue/epilogue.cuh"
#include "gemm/kernel_params.hpp"
#include "gemm/raster.hpp"
#include "gemm/schedule.hpp"
#include "gemm/sm90/config_shape.hpp"
#include "gemm/sm90/launch.hpp"
#include "gemm/sm90/probe.cuh"

namespace tessera::gemm_impl::sm90 {

using namespace cute;

template <int DT> struct ElementOf;
template <> struct ElementOf<kF16> { using type = cute::half_t; };
template <> struct ElementOf<kBF16> { using type = cute::bfloat16_t; };
// fp32 operands on the tensor cores as tf32 (WGMMA reads the top 19 bits of each word); K-major only.
template <> struct ElementOf<kF32> { using type = cute::tfloat32_t; };
// s8 operands: int32 accumulators, exact sums; K-major only.
template <> struct ElementOf<kS8> { using type = int8_t; };
// fp8 operands: fp32 accumulators (promoted: KernelParams::promote), scaled sums; K-major only.
template <> struct ElementOf<kE4M3> { using type = cute::float_e4m3_t; };
template <> struct ElementOf<kE5M2> { using type = cute::float_e5m2_t; };

// Global operand (rows, K, batches) with the contiguous mode's unit stride static, as TMA wants.
template <bool KMajor>
using OperandStride = std::conditional_t<KMajor, Stride<int64_t, _1, int64_t>, Stride<_1, int64_t, int64_t>>;

template <bool KMajor>
CUTE_HOST_DEVICE auto operand_stride(int64_t ld, int64_t batch_stride) {
  if constexpr (KMajor) return OperandStride<KMajor>{ld, _1{}, batch_stride};
  else return OperandStride<KMajor>{_1{}, ld, batch_stride};
}

// EpiMode (how the epilogue stores D): gemm/sm90/launch.hpp.

template <int BM_, int BN_, int BK_, int Stages_, int ClusterM_, int ClusterN_, bool Pingpong_, int DT, bool AKMajor_,
          bool BKMajor_, bool OneTile_ = false, bool BlockScales_ = false>
struct Traits {
  using Element = typename ElementOf<DT>::type;
  // configs.def counts BK in 16-bit elements: a 32-bit operand's k-tile holds half as many, so that
  // every dtype's row has the same 128-byte swizzled rows and the same shared-memory bytes.
  static constexpr int BM = BM_, BN = BN_, BK = BK_ * 2 / int(sizeof(Element)), Stages = Stages_;
  static constexpr bool Pingpong = Pingpong_;
  // The one-tile kernel (config_shape.hpp, supports_one_tile): a launch of one wave, where every CTA
  // has one tile, gets a kernel without the persistent walk, split-K, stream-K, the fp32 staging and
  // the epilogue's extras: its CTA finds its tile in the block index and its TMA-store epilogue only
  // scales and converts. A quarter of the general kernel's code (128x64 pairs: 1072 SASS instructions
  // against 4096), which the CTA's cold start and its epilogue pay for: the first TMA issues sooner
  // after entry and the epilogue is shorter.
  static constexpr bool kOneTile = OneTile_;
  // Thread-block clusters of ClusterM x ClusterN CTAs (one of them 1): CTAs side by side along M
  // share the B tile, along N the A tile; each loads 1/ClusterM (1/ClusterN) of the shared box and
  // multicasts it into every CTA of the cluster.
  static constexpr int ClusterM = ClusterM_, ClusterN = ClusterN_, kCluster = ClusterM_ * ClusterN_;
  static constexpr bool AKMajor = AKMajor_, BKMajor = BKMajor_;
  // Cooperative: BM / 64 consumer warpgroups on one tile, 64 rows each. Ping-pong: two, each on its
  // own 64-row tile.
  static constexpr int kTileWarpgroups = Pingpong ? 1 : BM / 64;  // consumer warpgroups per tile
  static constexpr int kConsumers = Pingpong ? 2 : BM / 64;
  static constexpr int kTileThreads = 128 * kTileWarpgroups;
  static constexpr int kThreads = 128 * (1 + kConsumers);
  // setmaxnreg: ptxas compiles each role within its count (the producer spilled at 40 once it walked
  // split-K ranges and clusters); 128*56 + 256*224 = 64512 <= 64K registers. Three consumer
  // warpgroups (192-row tiles): 128*56 + 384*152 = 64K. ptxas reports such a kernel at the
  // launch's 128 registers per thread but compiles the consumers within the 152 (the 192x192
  // tile's SASS uses up to R149), which the 96 accumulators of a 64x192 consumer just fit.
  static constexpr int kProducerRegs = 56, kConsumerRegs = kConsumers == 3 ? 152 : 224;
  // D's type on the TMA-store paths, which only a 16-bit D of the operands' type takes
  // (epilogue_mode): a tf32 kernel's D always leaves through the fp32 staging.
  using DElement = std::conditional_t<sizeof(Element) == 2, Element, cute::half_t>;
  // s8 operands sum into int32 accumulators (exact), which leave through the staging as their bits
  // (acc_bits) to epilogue_row8_s32: no TMA-store, split-K or stream-K path is compiled for them.
  static constexpr bool kIntSums = std::is_same_v<Element, int8_t>;
  using Accum = std::conditional_t<kIntSums, int32_t, float>;
  // fp8 operands: fp32 sums, scaled as they leave through the staging (epilogue_row8_scaled); split-K
  // and stream-K fold the unscaled sums.
  static constexpr bool kFp8 = sizeof(Element) == 1 && !kIntSums;

  // smem: 128-byte swizzle atoms (8 rows x 64 K-elements, or 64 MN-elements x 8 rows) tiled over
  // (rows, BK, Stages); the same layout describes the TMA box and the WGMMA descriptors.
  // An MN-major B of 96 columns is not whole 64-element atoms: 32-element (64-byte) ones there.
  using AtomA = std::conditional_t<AKMajor, GMMA::Layout_K_SW128_Atom<Element>, GMMA::Layout_MN_SW128_Atom<Element>>;
  using AtomB = std::conditional_t<BKMajor, GMMA::Layout_K_SW128_Atom<Element>,
                                   std::conditional_t<BN % 64 == 0, GMMA::Layout_MN_SW128_Atom<Element>,
                                                      GMMA::Layout_MN_SW64_Atom<Element>>>;
  // MN-major operands tile their atoms along K first (Step<_2,_1,_3>): the TMA box is then whole
  // 64-element MN columns stacked along K, which a cluster can split between its CTAs along K
  // when BN / ClusterM is not a multiple of the atom's 64 (BN = 192 in pairs).
  template <bool KMajor>
  using TileOrder = std::conditional_t<KMajor, Step<_1, _2, _3>, Step<_2, _1, _3>>;
  using SmemLayoutA = decltype(tile_to_shape(AtomA{}, Shape<Int<BM>, Int<BK>, Int<Stages>>{}, TileOrder<AKMajor>{}));
  using SmemLayoutB = decltype(tile_to_shape(AtomB{}, Shape<Int<BN>, Int<BK>, Int<Stages>>{}, TileOrder<BKMajor>{}));

  // Consumers tiled along M; each issues 64 x BN x 16 WGMMAs with both operands from smem.
  using TiledMma = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, Accum, Shape<_64, Int<BN>, Int<BK>>,
                           AKMajor ? GMMA::Major::K : GMMA::Major::MN, BKMajor ? GMMA::Major::K : GMMA::Major::MN>(),
      Layout<Shape<Int<kTileWarpgroups>, _1, _1>>{}));

  // Host: TMA descriptors for (rows, K, batches). Broadcast operands (batch stride 0) get one batch.
  // The shared operand is multicast across the cluster: each CTA loads its part of the box.
  template <bool KMajor, class SmemLayout, int Rows, int Multicast>
  static auto make_tma(const void* ptr, int rows, int k, int batches, int64_t ld, int64_t batch_stride) {
    const int64_t outer = KMajor ? rows : k;
    Tensor g = make_tensor(make_gmem_ptr(static_cast<const Element*>(ptr)),
                           make_shape(rows, k, batch_stride ? batches : 1),
                           operand_stride<KMajor>(ld, batch_stride ? batch_stride : ld * outer));
    using Op = std::conditional_t<(Multicast > 1), SM90_TMA_LOAD_MULTICAST, SM90_TMA_LOAD>;
    return make_tma_copy(Op{}, g, SmemLayout{}(_, _, 0), Shape<Int<Rows>, Int<BK>>{}, Int<Multicast>{});
  }
  static auto make_tma_a(const GemmParams& p) {
    return make_tma<AKMajor, SmemLayoutA, BM, ClusterN>(p.a, p.m, p.k, p.batch, p.lda, p.batch_stride_a);
  }
  static auto make_tma_b(const GemmParams& p) {
    return make_tma<BKMajor, SmemLayoutB, BN, ClusterM>(p.b, p.n, p.k, p.batch, p.ldb, p.batch_stride_b);
  }
  using TmaA = decltype(make_tma_a(GemmParams{}));
  using TmaB = decltype(make_tma_b(GemmParams{}));

  // TMA-store epilogue (seed 003): each consumer warpgroup converts its 64 x BN rows to D's 16-bit
  // type in 64 x kStoreN sub-tiles and one thread stores each by TMA, which clips the ragged edges.
  // A row-major D's sub-tile is 64 rows of kStoreN elements (one 128-byte row where BN is a multiple
  // of 64, else 64 bytes), swizzled across the row's 16-byte chunks (the fragment's 4-byte pairs of
  // 8 rows land in 8 different bank groups). A column-major D's (EpilogueParams::d_col_major) is its
  // transpose, kStoreNT rows (D's columns) of 64 elements, 128-byte swizzled, which stmatrix.trans
  // writes from the same fragments. D is (M, N, batches) with N contiguous, or (N, M, batches) with
  // M contiguous.
  static constexpr int kStoreN = BN % 64 == 0 ? 64 : 32;
  using StoreAtom = std::conditional_t<kStoreN == 64, GMMA::Layout_K_SW128_Atom<DElement>, GMMA::Layout_K_SW64_Atom<DElement>>;
  using SmemLayoutD = decltype(tile_to_shape(StoreAtom{}, Shape<_64, Int<kStoreN>>{}));
  // A column-major D leaves in kStoreNT x 64 transposed sub-tiles: 64 rows of D's columns where BN
  // is a multiple of 64, else all BN at once (the 64x96 tile: one 12 KB store instead of three 64x32
  // ones in series, which lengthened its epilogue; whole 128-column sub-tiles spilled 128x128 with
  // a per-column bias, 32 more live registers).
  static constexpr int kStoreNT = BN % 64 == 0 ? 64 : BN;
  static_assert(kStoreNT == kStoreN || kStoreNT == BN, "several transposed sub-tiles share the row-major ones' buffers");
  using SmemLayoutDT = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<DElement>{}, Shape<Int<kStoreNT>, _64>{}));
  // (rows, cols, batches) with unit column stride; a broadcast (batch stride 0) is one batch.
  template <class Elem, class SmemLayout, class Op>
  static auto make_tma_rows(Op op, Elem* ptr, int rows, int cols, int batches, int64_t ld, int64_t batch_stride) {
    Tensor g = make_tensor(make_gmem_ptr(ptr), make_shape(rows, cols, batch_stride ? batches : 1),
                           make_stride(ld, _1{}, batch_stride ? batch_stride : ld * rows));
    return make_tma_copy(op, g, SmemLayout{});
  }
  static auto make_tma_d(const GemmParams& p) {
    const EpilogueParams& e = p.epi;
    return make_tma_rows<DElement, SmemLayoutD>(SM90_TMA_STORE{}, static_cast<DElement*>(e.d), p.m, p.n, p.batch, e.ldd,
                                               e.batch_stride_d);
  }
  static auto make_tma_dt(const GemmParams& p) {  // the column-major D as the row-major (N, M, L) D^T
    const EpilogueParams& e = p.epi;
    return make_tma_rows<DElement, SmemLayoutDT>(SM90_TMA_STORE{}, static_cast<DElement*>(e.d), p.n, p.m, p.batch, e.ldd,
                                                e.batch_stride_d);
  }
  using TmaD = decltype(make_tma_d(GemmParams{}));
  using TmaDT = decltype(make_tma_dt(GemmParams{}));
  // beta * C on the TMA-store path: C's sub-tile is loaded by TMA into the very buffer (and swizzle)
  // that D's sub-tile then leaves from; each thread reads C where it writes D (c_tma: C is stored
  // like D).
  static auto make_tma_c(const GemmParams& p) {
    const EpilogueParams& e = p.epi;
    return make_tma_rows<const DElement, SmemLayoutD>(SM90_TMA_LOAD{}, static_cast<const DElement*>(e.c), p.m, p.n,
                                                     p.batch, e.c_stride_m, e.batch_stride_c);
  }
  static auto make_tma_ct(const GemmParams& p) {
    const EpilogueParams& e = p.epi;
    return make_tma_rows<const DElement, SmemLayoutDT>(SM90_TMA_LOAD{}, static_cast<const DElement*>(e.c), p.n, p.m,
                                                      p.batch, e.c_stride_n, e.batch_stride_c);
  }
  using TmaC = decltype(make_tma_c(GemmParams{}));
  using TmaCT = decltype(make_tma_ct(GemmParams{}));
  // Byte offset of element (row, col) in a SmemLayoutD sub-tile: rows of kStoreRowBytes whose 16-byte
  // chunks are permuted by CuTe's Swizzle<3,4,3> (128-byte rows: chunk XOR row % 8) or Swizzle<2,4,3>
  // (64-byte rows: chunk XOR (row / 2) % 4), the buffers being 1024-byte aligned.
  // The epilogue writes and reads the sub-tiles through 32-bit shared addresses built from this:
  // CuTe applies the swizzle to the pointer's value, which hides that it points to shared memory,
  // and the compiler then issued generic 64-bit ST.E / LD.E (more address arithmetic, and the
  // generic path's latency before the TMA store's proxy fence). The CPU tests check it against
  // CuTe's layout.
  static constexpr int kStoreRowBytes = kStoreN * int(sizeof(DElement));  // 128 or 64
  static constexpr CUTE_HOST_DEVICE int store_offset(int row, int col) {
    const int byte = col * int(sizeof(DElement));
    const int line = kStoreN == 64 ? row : row >> 1;  // the swizzle's 128-byte line within 1024 bytes
    return row * kStoreRowBytes + ((((byte >> 4) ^ line) & (kStoreRowBytes / 16 - 1)) << 4) + (byte & 15);
  }
  // The same for a SmemLayoutDT sub-tile: element (m, n) of D at row n, column m (128-byte rows).
  static constexpr CUTE_HOST_DEVICE int store_offset_t(int m, int n) {
    const int byte = m * int(sizeof(DElement));
    return n * 128 + ((((byte >> 4) ^ n) & 7) << 4) + (byte & 15);
  }
  static constexpr bool kFlip = supports_flip(BM, BN, Pingpong);  // a column-major D (config_shape.hpp)
  static constexpr bool kL2Warm = supports_l2_warm(BM, BN, Pingpong);  // KernelParams::prefetch_a/_b
  // tf32 and fp8 tiles with registers for a second set of accumulators (KernelParams::promote: 3xTF32,
  // fp8 by default).
  static constexpr bool kPromote = !OneTile_ && ((sizeof(Element) == 4 && consumers_have_room(BM, BN, Pingpong)) ||
                                                 (kFp8 && promotes_fp8(BM, BN, Pingpong)));
  // K between promotions: 128 tf32 (4 k-tiles); 128 fp8 (every k-tile), where the fp8 WGMMA's own
  // accumulation keeps too few bits for longer runs.
  static constexpr int kPromoteKTiles = kFp8 ? 1 : 4;
  // fp8 block scales (GemmParams::block), a kernel of their own so that the other fp8 kernels keep
  // their registers: each k-tile's sums (one 128-deep scale block) are scaled as they are promoted.
  static constexpr bool kBlockScales = BlockScales_;
  static_assert(!kBlockScales || (kFp8 && kPromote && BK == kScaleBlockK && kScaleBlockK % BN == 0),
                "fp8 block scales: promoted rows, a k-tile per scale block, a tile within one column block");
  static constexpr uint32_t kTxBytes = (BM + BN) * BK * sizeof(Element);  // full boxes, OOB zero-filled

  // Epilogue buffers per consumer warpgroup (config_shape.hpp): kEpiBuffers 16-bit 64 x 64 TMA-store
  // sub-tiles (two where shared memory allows: one is filled while the other's store reads it), the
  // same bytes as the fp32 staging below.
  static constexpr int kEpiBuffers = epilogue_buffers(BM, BN, BK_, Stages, Pingpong);
  static constexpr int kEpiBytes = epilogue_bytes(BM, BN, BK_, Stages, Pingpong);
  // Epilogue staging: one 64 x kEpiN fp32 sub-tile per consumer warpgroup. Row stride kEpiN + 8
  // floats = 8 (mod 32) words, so the float2 stores of a quarter warp (4 rows) hit distinct banks.
  static constexpr int kEpiN = 32, kEpiLd = kEpiN + 8;

  struct SharedStorage {
    alignas(1024) Element a[cosize_v<SmemLayoutA>];  // 128-byte swizzle repeats every 1024 bytes
    alignas(1024) Element b[cosize_v<SmemLayoutB>];
    alignas(1024) float epi[kConsumers][kEpiBytes / 4];  // 128-byte swizzled TMA-store sub-tiles
    alignas(8) uint64_t full[Stages];
    uint64_t empty[Stages];
    uint64_t turn[Pingpong ? 2 : 1];  // ping-pong: consumer warpgroup i may start its next mainloop
    uint64_t c_full[kConsumers];      // beta * C by TMA: warpgroup i's C sub-tile has landed
    uint32_t splitk_last[kConsumers];  // split-K: "this range folds", to the tile's threads
  };
  static constexpr int kSmemBytes = int(sizeof(SharedStorage));

  static_assert(!kOneTile || supports_one_tile(BM, BN, Pingpong), "the one-tile kernel of a tile that has none");
  static_assert(BM % 64 == 0 && kConsumers >= 1 && kConsumers <= 3, "64 rows per consumer warpgroup");
  static_assert(!Pingpong || BM == 64, "ping-pong: each consumer warpgroup owns a whole 64-row tile");
  static_assert(kCluster <= 2 && ClusterM >= 1 && ClusterN >= 1, "clusters of 1 or 2 CTAs, along M or N");
  static_assert(BN % kEpiN == 0 && BK * sizeof(Element) % 128 == 0, "tile vs swizzle atom / epilogue sub-tile");
  static_assert(sizeof(Element) == 2 || (AKMajor && BKMajor), "WGMMA reads 32-bit and 8-bit operands K-major only");
  static_assert(!kIntSums || !kOneTile, "int32 sums leave through the staging: no one-tile kernel");
  static_assert(BN % kStoreN == 0 && kStoreN % 16 == 0 &&
                    (!kFlip || cosize_v<SmemLayoutDT> * sizeof(DElement) <= kEpiBytes) &&
                    kEpiBuffers * cosize_v<SmemLayoutD> * sizeof(DElement) <= kEpiBytes &&
                    64 * kEpiLd * sizeof(float) <= kEpiBytes && kEpiBytes % 1024 == 0,
                "the TMA-store sub-tile reuses a warpgroup's staging buffer");
};


template <class T>
struct KernelParams {
  GemmParams g;
  typename T::TmaA tma_a;
  typename T::TmaB tma_b;
  typename T::TmaD tma_d;    // valid when epi_mode == kEpiTma (tma_dt with d_col_major)
  typename T::TmaC tma_c;    // valid when epi_mode == kEpiTma and beta != 0 (tma_ct with d_col_major)
  typename T::TmaDT tma_dt;
  typename T::TmaCT tma_ct;
  int epi_mode;            // EpiMode: how the epilogue stores D
  Schedule sched;          // the persistent walk (gemm/schedule.hpp): data-parallel, split-K or stream-K
  float* partials;     // split-K: [tile][split][BM][BN] fp32 partial tiles
  unsigned* counters;  // split-K: per-tile count of finished ranges (zeroed by the launcher)
  float* sk_partials;  // stream-K: one BM x BN fp32 partial per CTA of the grid, in accumulator order
  int* sk_flags;       // stream-K: per CTA, 1 once its partial is published (zeroed by the launcher)
  // Tiles along M and N, and cluster tiles: read from the parameter space where used (computed in
  // the kernel they lived in registers across the persistent loop and spilled the 128x128 tile).
  int tiles_m, tiles_n, tiles_mc, tiles_nc;
  // L2 warm-up at entry: the first work item's first `prefetch_a` / `prefetch_b` k-tiles of A / B
  // are prefetched into L2 (TMA prefetch: no shared memory, no barrier) while the barriers are set
  // up, before the cluster has synchronised and before the wait for the previous kernel, so that
  // DRAM starts on them at once, under that kernel's tail when launched as its dependent (0 = none;
  // decode tiles only: Traits::kL2Warm, gemm/configs.cpp l2_warm_ktiles). Safe before the wait: a
  // prefetch fills L2 only, where the previous kernel's writes land.
  int prefetch_a, prefetch_b;
  // Split-K in one round (a worker per unit, so all of a tile's ranges are resident at once) on a
  // tile that folds in parallel (supports_parallel_fold): every range folds its share of the tile.
  // The ranges sign in by flags, one per tile and range, set to `fold_epoch` once the range's
  // partial is out: the launcher draws a new epoch for every launch (64 bits, from a random start,
  // never 0), so whatever the workspace held, an earlier launch's flags included, reads as "not
  // yet", and no memset precedes the launch (a cost a small problem would notice). In a captured
  // graph every replay repeats the epoch: there (fold_epoch == 0) they count in on the counters,
  // which the graph's memset clears. Else the counters, and the last range to arrive folds.
  int fold_parallel;
  unsigned long long* fold_flags;
  unsigned long long fold_epoch;
  // 3xTF32 on a kernel with Traits::kPromote: the accumulators are promoted (see the mainloop).
  int promote;
};

// This CTA's position in the grid and the grid's size, read where used: in registers across the
// persistent loop they spilled the 128x256 tile's consumers, which have none to spare.
__device__ __forceinline__ int cta_index() {
  int v;
  asm volatile("mov.u32 %0, %%ctaid.x;" : "=r"(v));
  return v;
}
__device__ __forceinline__ int thread_index() {
  int v;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(v));
  return v;
}
__device__ __forceinline__ int grid_size() {
  int v;
  asm volatile("mov.u32 %0, %%nctaid.x;" : "=r"(v));
  return v;
}

// Stream-K flags: a release store after the partial, an acquire load before reading it.
__device__ __forceinline__ void store_release(int* p, int v) {
  asm volatile("st.release.gpu.global.b32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
template <class Word>  // int or unsigned
__device__ __forceinline__ Word load_acquire(const Word* p) {
  static_assert(sizeof(Word) == 4, "a 32-bit flag or counter");
  Word v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void store_release(unsigned long long* p, unsigned long long v) {
  asm volatile("st.release.gpu.global.b64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ unsigned long long load_acquire(const unsigned long long* p) {
  unsigned long long v;
  asm volatile("ld.acquire.gpu.global.b64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

// The CTA's i-th tile of the persistent walk -> (batch, tile_m, tile_n); grouped raster per batch.
struct TileCoord {
  int l, m, n;
};
__device__ __forceinline__ TileCoord tile_at(int tile, int tiles_m, int tiles_n) {
  const int per_batch = tiles_m * tiles_n;
  TileCoord c;
  c.l = tile / per_batch;
  grouped_raster(tile - c.l * per_batch, tiles_m, tiles_n, c.m, c.n);
  return c;
}
// The tile of cluster rank `rank` in cluster tile `ctile` (clusters are cluster_m tiles tall or
// cluster_n tiles wide; one of the two is 1).
__device__ __forceinline__ TileCoord cta_tile(int ctile, int tiles_mc, int tiles_nc, int rank, int cluster_m,
                                              int cluster_n) {
  TileCoord c = tile_at(ctile, tiles_mc, tiles_nc);
  c.m = c.m * cluster_m + (cluster_m > 1 ? rank : 0);
  c.n = c.n * cluster_n + (cluster_n > 1 ? rank : 0);
  return c;
}

// fp8 block scales (GemmParams::block) along one work item's k-tiles, for one consumer thread: the
// factors of the k-tile to be promoted next (row0 / row1: the thread's two accumulator rows; col: the
// tile's 128 columns, which one scale block of B^T covers). Each promotion loads the following
// k-tile's into the same registers, so the loads (L1 / L2 hits: every CTA of a row or column block
// reads the same values) have a whole k-tile to land, and no copy waits for them. Rows past M read
// row M - 1's factors (their sums are zeros).
struct BlockScaleWalk {
  const float *r0, *r1, *c;
  float row0 = 1.0f, row1 = 1.0f, col = 1.0f;  // (an item without k-tiles promotes zeros)

  __device__ __forceinline__ void start(const GemmParams& g, int row, int n0, int kt_begin, int k_count) {
    const GemmParams::BlockScales& s = g.block;
    r0 = s.row + int64_t(min(row, g.m - 1)) * s.row_stride_m + int64_t(kt_begin) * s.row_stride_k;
    r1 = s.row + int64_t(min(row + 8, g.m - 1)) * s.row_stride_m + int64_t(kt_begin) * s.row_stride_k;
    c = s.col + int64_t(n0 / kScaleBlockK) * s.col_stride_n + int64_t(kt_begin) * s.col_stride_k;
    if (k_count > 0) row0 = __ldg(r0), row1 = __ldg(r1), col = __ldg(c);
  }
  // After a promotion: the following k-tile's factors.
  __device__ __forceinline__ void next(const GemmParams& g) {
    r0 += g.block.row_stride_k, r1 += g.block.row_stride_k, c += g.block.col_stride_k;
    row0 = __ldg(r0), row1 = __ldg(r1), col = __ldg(c);
  }
};

// Two fp32 values rounded to a 16-bit pair, `lo` in the low half (one cvt; going through an
// Element[2] array and a pointer cast left an 8-byte stack frame in the 128x128 kernel).
template <class Element>
CUTE_DEVICE uint32_t pack_pair(float lo, float hi) {
  uint32_t r;
  if constexpr (std::is_same_v<Element, cute::bfloat16_t>) asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  else asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// act() of 8 values rounded to 4 16-bit pairs (lo.x|lo.y, lo.z|lo.w, hi.x|hi.y, hi.z|hi.w), out of line
// (epilogue.cuh, activate_out_of_line): one call per two 8-column chunks of the TMA-store epilogue.
template <class Element>
static __device__ __noinline__ uint4 activate8_packed_out_of_line(int act, float4 lo, float4 hi) {
  activate_all(act, lo, hi);
  return make_uint4(pack_pair<Element>(lo.x, lo.y), pack_pair<Element>(lo.z, lo.w), pack_pair<Element>(hi.x, hi.y),
                    pack_pair<Element>(hi.z, hi.w));
}

// A 16-bit pair (as pack_pair lays it out: `lo` in the low half) -> two fp32 values.
template <class Element>
CUTE_DEVICE float2 unpack_pair(uint32_t pair) {
  if constexpr (std::is_same_v<Element, cute::bfloat16_t>) return make_float2(__uint_as_float(pair << 16), __uint_as_float(pair & 0xffff0000u));
  else return __half22float2(*reinterpret_cast<const __half2*>(&pair));
}

// An accumulator as the fp32 staging carries it: fp32 as it is, an int32 sum as its bits.
CUTE_DEVICE float acc_bits(float x) { return x; }
CUTE_DEVICE float acc_bits(int32_t x) { return __int_as_float(x); }

// The one-tile kernel's tile (Traits::kOneTile): the grid is (tiles_nc * cluster, tiles_mc, batches),
// the cluster along x, so the block index is the tile: no walk, no divisions by launch constants.
template <int ClusterM, int ClusterN>
__device__ __forceinline__ TileCoord one_tile_coord(int rank) {
  TileCoord c;
  c.l = int(blockIdx.z);
  c.m = int(blockIdx.y) * ClusterM + (ClusterM > 1 ? rank : 0);
  c.n = int(blockIdx.x) / (ClusterM * ClusterN) * ClusterN + (ClusterN > 1 ? rank : 0);
  return c;
}
// The one-tile kernel's walk, for the producer and the consumers alike: one item, the whole K of
// the block's tile; `taken` is the walk's state.
__device__ __forceinline__ bool one_tile_item(bool& taken, int k_tiles, WorkItem& w) {
  if (taken) return false;
  taken = true;
  w.tile = 0, w.split = 0, w.kt_begin = 0, w.kt_end = k_tiles;
  return true;
}

// A's and B's tiles in global memory as this CTA's TMA loads see them: its part of each box.
template <class T>
CUTE_DEVICE auto gmem_views(KernelParams<T> const& p, int cta_rank) {
  constexpr int BM = T::BM, BN = T::BN, BK = T::BK, ClusterM = T::ClusterM, ClusterN = T::ClusterN;
  const GemmParams& g = p.g;
  const int la_n = g.batch_stride_a ? g.batch : 1, lb_n = g.batch_stride_b ? g.batch : 1;
  Tensor mA = p.tma_a.get_tma_tensor(make_shape(g.m, g.k, la_n));             // (M,K,L) coords
  Tensor mB = p.tma_b.get_tma_tensor(make_shape(g.n, g.k, lb_n));             // (N,K,L) coords
  Tensor gA = local_tile(mA, Shape<Int<BM>, Int<BK>>{}, make_coord(_, _, _));  // (BM,BK,m,k,l)
  Tensor gB = local_tile(mB, Shape<Int<BN>, Int<BK>>{}, make_coord(_, _, _));  // (BN,BK,n,k,l)
  return make_tuple(p.tma_a.get_slice(ClusterN > 1 ? cta_rank : 0).partition_S(gA),   // (TMA,TMA_M,TMA_K,m,k,l)
                    p.tma_b.get_slice(ClusterM > 1 ? cta_rank : 0).partition_S(gB));  // (TMA,TMA_N,TMA_K,n,k,l)
}

// The mainloop's producer: one elected thread walks the CTA's work items and their k-tiles and
// issues the TMA loads of A and B into the ring (a stage once its `empty` barrier says every
// consumer warp of the cluster has read it; its `full` barrier armed with the bytes to land).
template <class T, class SA, class SB>
CUTE_DEVICE void load(KernelParams<T> const& p, typename T::SharedStorage& smem, SA& sA, SB& sB, int cta_rank) {
  using FullBarrier = cutlass::arch::ClusterTransactionBarrier;
  using EmptyBarrier = cutlass::arch::ClusterBarrier;
  constexpr int Stages = T::Stages, ClusterM = T::ClusterM, ClusterN = T::ClusterN, kCluster = T::kCluster;
  constexpr bool kOneTile = T::kOneTile;
  const GemmParams& g = p.g;
  const int &tiles_mc = p.tiles_mc, &tiles_nc = p.tiles_nc;
  auto views = gmem_views(p, cta_rank);
  Tensor tAgA = get<0>(views);  // (TMA,TMA_M,TMA_K,m,k,l)
  Tensor tBgB = get<1>(views);  // (TMA,TMA_N,TMA_K,n,k,l)
  Tensor tAsA = p.tma_a.get_slice(ClusterN > 1 ? cta_rank : 0).partition_D(sA);  // (TMA,TMA_M,TMA_K,PIPE)
  Tensor tBsB = p.tma_b.get_slice(ClusterM > 1 ? cta_rank : 0).partition_D(sB);  // (TMA,TMA_N,TMA_K,PIPE)
  int stage = 0;
  uint32_t phase = 0;
  bool cluster_ready = kCluster == 1;
  TESSERA_SM90_PROBE_PRODUCER_START()
  TESSERA_SM90_PROBE_PM(5)
  // Work items: the walk's, or the one-tile kernel's one (its tile from the block index).
  Walk walk(p.sched, int(blockIdx.x) / kCluster);
  bool one_tile_taken = false;
  auto next_item = [&](WorkItem& w) {
    if constexpr (kOneTile) return one_tile_item(one_tile_taken, p.sched.k_tiles, w);
    return walk.next(p.sched, int(blockIdx.x) / kCluster, int(gridDim.x) / kCluster, w);
  };
  for (WorkItem w; next_item(w);) {
    const TileCoord c = kOneTile ? one_tile_coord<ClusterM, ClusterN>(cta_rank)
                                 : cta_tile(w.tile, tiles_mc, tiles_nc, cta_rank, ClusterM, ClusterN);
    const int la = g.batch_stride_a ? c.l : 0, lb = g.batch_stride_b ? c.l : 0;
    for (int kt = w.kt_begin; kt < w.kt_end; ++kt) {
      if (!cluster_ready) {  // one thread: the unaligned form of cluster_wait
        TESSERA_SM90_PROBE_PM(6)
        asm volatile("barrier.cluster.wait;" ::: "memory");
        cluster_ready = true;
        TESSERA_SM90_PROBE_PM(7)
      }
      EmptyBarrier::wait(&smem.empty[stage], phase ^ 1);  // a fresh barrier passes parity 1
      TESSERA_SM90_PROBE_ISSUED()
      FullBarrier::arrive_and_expect_tx(&smem.full[stage], T::kTxBytes);
      constexpr uint16_t kAll = uint16_t((1 << kCluster) - 1);  // multicast to every CTA of the cluster
      if constexpr (ClusterN > 1)
        copy(p.tma_a.with(smem.full[stage], kAll), tAgA(_, _, _, c.m, kt, la), tAsA(_, _, _, stage));
      else
        copy(p.tma_a.with(smem.full[stage]), tAgA(_, _, _, c.m, kt, la), tAsA(_, _, _, stage));
      if constexpr (ClusterM > 1)
        copy(p.tma_b.with(smem.full[stage], kAll), tBgB(_, _, _, c.n, kt, lb), tBsB(_, _, _, stage));
      else
        copy(p.tma_b.with(smem.full[stage]), tBgB(_, _, _, c.n, kt, lb), tBsB(_, _, _, stage));
      if (++stage == Stages) { stage = 0; phase ^= 1; }
    }
  }
  // Tail (clusters): this CTA may exit only once the consumers of every CTA in the cluster have
  // released every stage, i.e. once all their remote arrives on this CTA's barriers have landed.
  // (Peers cannot exit before this CTA's multicast data reached them: they wait for it.)
  if constexpr (kCluster > 1) {
    for (int s = 0; s < Stages; ++s) {
      EmptyBarrier::wait(&smem.empty[stage], phase ^ 1);
      if (++stage == Stages) { stage = 0; phase ^= 1; }
    }
  }
}

// Stream-K fix-up of a work item that takes part in it (gemm/schedule.hpp). One partial slot per CTA
// (only a share's first item can start inside a tile), numbered rank * workers + worker so that the
// later workers' partials of a tile follow each other; a partial is the accumulators in fragment
// order (float4 i of the tile's thread t at i * kTileThreads + t: coalesced, no staging). A
// publisher stores it and raises its flag (returns true: the item is done); the owner waits for the
// later workers' flags (they computed their part first thing in their shares), adds their partials
// in worker order (the same bits whichever finished first) and returns false: on to the epilogue.
// ttid: the thread among the tile's threads; tile_barrier: the named barrier of the tile's warpgroups.
template <class T, class Acc>
CUTE_DEVICE bool stream_k_fixup(KernelParams<T> const& p, WorkItem const& w, bool sk_publisher, Acc& acc, int ttid,
                                int tile_barrier, int cta_rank) {
  constexpr int BM = T::BM, BN = T::BN, kCluster = T::kCluster;
  const Schedule& sched = p.sched;
  constexpr int kTileThreads = T::kTileThreads, kVecs = BN / 8;  // float4s of accumulators per thread
  const int sk_slot = cta_rank * (grid_size() / kCluster) + cta_index() / kCluster;
  if (sk_publisher) {
    float4* const part = reinterpret_cast<float4*>(p.sk_partials) + size_t(sk_slot) * (BM * BN / 4) + ttid;
    CUTE_UNROLL
    for (int i = 0; i < kVecs; ++i)
      __stcg(part + i * kTileThreads, make_float4(acc(4 * i), acc(4 * i + 1), acc(4 * i + 2), acc(4 * i + 3)));
    __threadfence();
    cutlass::arch::NamedBarrier::arrive_and_wait(kTileThreads, tile_barrier);
    if (ttid == 0) store_release(p.sk_flags + sk_slot, 1);
    return true;
  }
  for (int v = cta_index() / kCluster + 1, slot = sk_slot + 1; sk_folds_from(sched, w, v, grid_size() / kCluster);
       ++v, ++slot) {
    while (load_acquire(p.sk_flags + slot) == 0) {
    }
    const float4* const part = reinterpret_cast<const float4*>(p.sk_partials) + size_t(slot) * (BM * BN / 4) + ttid;
    CUTE_UNROLL
    for (int i = 0; i < kVecs; ++i) {
      const float4 x = __ldcg(part + i * kTileThreads);
      acc(4 * i) += x.x, acc(4 * i + 1) += x.y, acc(4 * i + 2) += x.z, acc(4 * i + 3) += x.w;
    }
  }
  return false;
}

template <class T>
__global__ void __launch_bounds__(T::kThreads, 1) gemm_kernel(const __grid_constant__ KernelParams<T> p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using Element = typename T::DElement;  // the body names only D's elements (the operands move by TMA)
  using FullBarrier = cutlass::arch::ClusterTransactionBarrier;
  using EmptyBarrier = cutlass::arch::ClusterBarrier;
  constexpr int BM = T::BM, BN = T::BN, Stages = T::Stages;

  extern __shared__ __align__(1024) unsigned char smem_raw[];
  auto& smem = *reinterpret_cast<typename T::SharedStorage*>(smem_raw);
  constexpr int ClusterM = T::ClusterM, ClusterN = T::ClusterN, kCluster = T::kCluster;
  constexpr bool kOneTile = T::kOneTile;  // one tile per CTA, plain TMA-store epilogue (Traits)
  const int warp_group = threadIdx.x / 128;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  // D leaves by TMA store (EpiMode kEpiTma; always in the one-tile kernel). Evaluated where used: the
  // mode is re-read from the parameters rather than held across the mainloop.
  auto stores_by_tma = [&] { return kOneTile || p.epi_mode == kEpiTma; };
  const int cta_rank = kCluster > 1 ? int(block_rank_in_cluster()) : 0;  // position in the cluster

  allow_dependent_launch();
  TESSERA_SM90_PROBE_ENTRY()
  TESSERA_SM90_PROBE_PM(0)

  if (T::kL2Warm && warp == 1 && (p.prefetch_a | p.prefetch_b)) {  // an idle producer warp, while warp 0 sets up
    if (elect_one_sync()) {
      auto warm = [&](const TileCoord& c, int kt_begin, int kt_end) {
        auto views = gmem_views(p, cta_rank);
        const int la = p.g.batch_stride_a ? c.l : 0, lb = p.g.batch_stride_b ? c.l : 0;
        for (int kt = kt_begin; kt < kt_begin + p.prefetch_a && kt < kt_end; ++kt)
          cute::prefetch(p.tma_a, get<0>(views)(_, _, _, c.m, kt, la));
        for (int kt = kt_begin; kt < kt_begin + p.prefetch_b && kt < kt_end; ++kt)
          cute::prefetch(p.tma_b, get<1>(views)(_, _, _, c.n, kt, lb));
      };
      if constexpr (kOneTile) {
        warm(one_tile_coord<ClusterM, ClusterN>(cta_rank), 0, p.sched.k_tiles);
      } else {
        Walk first(p.sched, int(blockIdx.x) / kCluster);
        if (WorkItem w; first.next(p.sched, int(blockIdx.x) / kCluster, int(gridDim.x) / kCluster, w))
          warm(cta_tile(w.tile, p.tiles_mc, p.tiles_nc, cta_rank, ClusterM, ClusterN), w.kt_begin, w.kt_end);
      }
    }
    __syncwarp();
  }
  if (warp == 0 && elect_one_sync()) {
    prefetch_tma_descriptor(p.tma_a.get_tma_descriptor());
    prefetch_tma_descriptor(p.tma_b.get_tma_descriptor());
    if (stores_by_tma()) {
      const bool col = T::kFlip && p.g.epi.d_col_major, with_c = !kOneTile && p.g.epi.beta != 0.0f;
      prefetch_tma_descriptor(col ? p.tma_dt.get_tma_descriptor() : p.tma_d.get_tma_descriptor());
      if (with_c) prefetch_tma_descriptor(col ? p.tma_ct.get_tma_descriptor() : p.tma_c.get_tma_descriptor());
    }
    if (!kOneTile)
      for (int i = 0; i < T::kConsumers; ++i) FullBarrier::init(&smem.c_full[i], 1);  // one thread's expect_tx
    for (int s = 0; s < Stages; ++s) {
      FullBarrier::init(&smem.full[s], 1);                     // the producer's arrive + TMA bytes
      // One arrive per consumer warp (of the warpgroups on the stage's tile) of every CTA in the
      // cluster: a stage is refilled (by this CTA's TMA and, through multicast, by its peers') only
      // once all of them have read it.
      EmptyBarrier::init(&smem.empty[s], 4 * T::kTileWarpgroups * kCluster);
    }
    if constexpr (T::Pingpong) {
      EmptyBarrier::init(&smem.turn[0], 128);  // every thread of the other warpgroup arrives
      EmptyBarrier::init(&smem.turn[1], 128);
    }
    cutlass::arch::fence_barrier_init();
  }
  TESSERA_SM90_PROBE_PM(1)
  // Clusters: the peers' barriers must be initialised before any multicast or remote arrive. Every
  // thread arrives now and waits only just before its first use of the pipeline (the producer before
  // its first TMA, the consumers before their mainloop), so that the barrier's round trip overlaps
  // the walk and tensor set-up.
  if constexpr (kCluster > 1) cluster_arrive_relaxed();  // fence_barrier_init released the inits
  else __syncthreads();
  wait_for_prior_grid();  // the launch and the set-up above overlap the previous kernel's tail
  TESSERA_SM90_PROBE_PM(2)

  const GemmParams& g = p.g;
  // Work items of the persistent walk (gemm/schedule.hpp): (cluster tile, k-tile range); a cluster
  // tile is ClusterM x ClusterN tiles (a rank past the last tile loads zeros by TMA, writes nothing).
  const int &tiles_m = p.tiles_m, &tiles_n = p.tiles_n, &tiles_mc = p.tiles_mc, &tiles_nc = p.tiles_nc;
  // Workers of the walk: the clusters (count and index re-read where used: see grid_size).

  Tensor sA = make_tensor(make_smem_ptr(smem.a), typename T::SmemLayoutA{});  // (BM,BK,PIPE)
  Tensor sB = make_tensor(make_smem_ptr(smem.b), typename T::SmemLayoutB{});  // (BN,BK,PIPE)

  if (warp_group == 0) {
    // ---------------- producer ----------------
    cutlass::arch::warpgroup_reg_dealloc<T::kProducerRegs>();
    TESSERA_SM90_PROBE_PM(3)
    if (warp == 0 && elect_one_sync()) load(p, smem, sA, sB, cta_rank);
    TESSERA_SM90_PROBE_LAST()
    return;
  }

  // ---------------- consumers ----------------
  cutlass::arch::warpgroup_reg_alloc<T::kConsumerRegs>();
  TESSERA_SM90_PROBE_PM(3)
  const int wtid = threadIdx.x % 128;
  // This thread among the tile's threads: both consumer warpgroups (cooperative) or its own (ping-pong).
  const int ttid = T::Pingpong ? wtid : int(threadIdx.x) - 128;
  typename T::TiledMma mma;
  auto thr_mma = mma.get_thread_slice(ttid);
  Tensor tCsA = thr_mma.partition_A(sA);                               // (MMA,MMA_M,MMA_K,PIPE)
  Tensor tCsB = thr_mma.partition_B(sB);                               // (MMA,MMA_N,MMA_K,PIPE)
  Tensor tCrA = thr_mma.make_fragment_A(tCsA);                         // smem descriptors
  Tensor tCrB = thr_mma.make_fragment_B(tCsB);
  Tensor acc = partition_fragment_C(mma, Shape<Int<BM>, Int<BN>>{});  // (MMA,MMA_M,MMA_N) fp32 (s8: int32)
  static_assert(decltype(size(acc))::value == BN / 2, "one 64 x BN WGMMA accumulator per thread");

  // WGMMA accumulator layout of a 64 x BN warpgroup tile: thread (warp w, lane) holds rows
  // 16w + lane/4 + 8h (h = 0, 1) and columns 8j + 2(lane%4) + c (c = 0, 1), at acc(c + 2h + 4j).
  const int wg_warp = warp % 4;
  float* epi = smem.epi[warp_group - 1];
  // Named barriers: 1..kConsumers one per consumer warpgroup (epilogue), kConsumers + 1 all
  // consumers (a cooperative tile's split-K / stream-K steps); 0 is __syncthreads.
  const int epi_barrier = warp_group;
  const int tile_barrier = T::Pingpong ? epi_barrier : T::kConsumers + 1;
  const int wg_row0 = T::Pingpong ? 0 : (warp_group - 1) * 64;  // this warpgroup's first row in the tile
  constexpr bool kBlockScales = T::kBlockScales;

  // A stage's WGMMAs retired: tell the producers of every CTA in the cluster (lane 0 of each warp).
  auto release = [&](int s) {
    if constexpr (kCluster > 1) {
      CUTE_UNROLL
      for (int r = 0; r < kCluster; ++r) EmptyBarrier::arrive(&smem.empty[s], uint32_t(r), lane == 0);
    } else if (lane == 0) {
      EmptyBarrier::arrive(&smem.empty[s]);
    }
  };

  int stage = 0;
  uint32_t phase = 0;
  uint32_t c_phase = 0;  // parity of this warpgroup's next C sub-tile (smem.c_full)
  const Schedule& sched = p.sched;
  Walk walk(sched, cta_index() / kCluster);
  // Ping-pong: the walk's items alternate between the warpgroups (the first is warpgroup 1's); each
  // passes over the other's item, advancing its ring position by the stages that item uses.
  // `turn_phase` is the parity of this warpgroup's next turn: a fresh barrier passes parity 1, so
  // warpgroup 1 starts at once and warpgroup 2 waits for warpgroup 1's first mainloop.
  uint32_t turn_phase = warp_group == 1 ? 1 : 0;
  bool one_tile_taken = false;
  auto next_item = [&](WorkItem& w, bool pass_one) {
    if constexpr (kOneTile) return one_tile_item(one_tile_taken, sched.k_tiles, w);
    if constexpr (T::Pingpong) {
      if (pass_one) {
        if (!walk.next(sched, cta_index() / kCluster, grid_size() / kCluster, w)) return false;
        const int t = stage + (w.kt_end - w.kt_begin);
        phase ^= (t / Stages) & 1;
        stage = t % Stages;
      }
    }
    return walk.next(sched, cta_index() / kCluster, grid_size() / kCluster, w);
  };
  if constexpr (kCluster > 1) cluster_wait();  // the peers' barriers are initialised (see above)
  TESSERA_SM90_PROBE_START()
  WorkItem w;
  for (bool pass_one = warp_group == 2; next_item(w, pass_one); pass_one = true) {
    TESSERA_SM90_PROBE_ITEM_BEGIN(w.tile)
    // The item's roles as predicates, so that only the tile, range and k-tile count stay in
    // registers across the mainloop (the 128x256 tile has none to spare next to its accumulators).
    const bool sk_publisher = !kOneTile && sk_publishes(sched, w), sk_owner = !kOneTile && sk_folds(sched, w);
    const int split = w.split, k_count = w.kt_end - w.kt_begin;

    // Mainloop: one batch of BK/16 WGMMAs per k-tile; the previous batch retires while the next
    // one is issued, and only then is its stage handed back to the producer. Ping-pong: wait for
    // this warpgroup's turn; once its last batch is issued, the other warpgroup's.
    if constexpr (T::Pingpong) {
      EmptyBarrier::wait(&smem.turn[warp_group - 1], turn_phase);
      turn_phase ^= 1;
    }
    mma.accumulate_ = GMMA::ScaleOut::Zero;
    if (k_count == 0) clear(acc);
    // 3xTF32 needs fp32-class sums, which the tensor cores' accumulation (it truncates as it adds: an
    // error that grows with K) does not give: every kPromoteKTiles k-tiles the WGMMA accumulators are
    // added into `total` with IEEE fp32 adds and restart from zero.
    [[maybe_unused]] auto total = make_fragment_like(acc);
    if constexpr (T::kPromote) clear(total);
    // fp8 block scales: each k-tile's sums (one 128-deep scale block) enter `total` times this
    // thread's two rows' factors (acc rows h = 0, 1) times the tile's column factor.
    [[maybe_unused]] BlockScaleWalk bs;
    if constexpr (kBlockScales) {
      const TileCoord c = cta_tile(w.tile, tiles_mc, tiles_nc, cta_rank, ClusterM, ClusterN);
      bs.start(g, c.m * BM + wg_row0 + 16 * wg_warp + lane / 4, c.n * BN, w.kt_begin, k_count);
    }
    warpgroup_fence_operand(acc);
    int prev_stage = -1;
    for (int kt = 0; kt < k_count; ++kt) {
      FullBarrier::wait(&smem.full[stage], phase);
      TESSERA_SM90_PROBE_CONSUMED(full, kt)
      warpgroup_arrive();
      CUTE_UNROLL
      for (int kb = 0; kb < size<2>(tCrA); ++kb) {
        cute::gemm(mma, tCrA(_, _, kb, stage), tCrB(_, _, kb, stage), acc);
        mma.accumulate_ = GMMA::ScaleOut::One;
      }
      warpgroup_commit_batch();
      warpgroup_wait<1>();
      if (prev_stage >= 0) {
        release(prev_stage);
        TESSERA_SM90_PROBE_CONSUMED(release, kt - 1)
      }
      prev_stage = stage;
      if (++stage == Stages) { stage = 0; phase ^= 1; }
      if constexpr (T::kPromote) {
        if (p.promote && (kt + 1) % T::kPromoteKTiles == 0 && kt + 1 < k_count) {
          warpgroup_wait<0>();
          warpgroup_fence_operand(acc);
          if constexpr (kBlockScales) {
            const float s0 = bs.row0 * bs.col, s1 = bs.row1 * bs.col;
            CUTE_UNROLL
            for (int i = 0; i < size(acc); ++i) total(i) = fmaf(acc(i), (i & 2) ? s1 : s0, total(i));
            bs.next(g);  // (a promotion inside the loop: another k-tile follows)
          } else {
            CUTE_UNROLL
            for (int i = 0; i < size(acc); ++i) total(i) += acc(i);
          }
          warpgroup_fence_operand(acc);
          mma.accumulate_ = GMMA::ScaleOut::Zero;
        }
      }
    }
    if constexpr (T::Pingpong) EmptyBarrier::arrive(&smem.turn[2 - warp_group]);
    warpgroup_wait<0>();
    if (prev_stage >= 0) {
      release(prev_stage);
      TESSERA_SM90_PROBE_CONSUMED(release, k_count - 1)
    }
    if constexpr (T::kPromote) {
      if (p.promote) {
        warpgroup_fence_operand(acc);
        if constexpr (kBlockScales) {
          const float s0 = bs.row0 * bs.col, s1 = bs.row1 * bs.col;
          CUTE_UNROLL
          for (int i = 0; i < size(acc); ++i) acc(i) = fmaf(acc(i), (i & 2) ? s1 : s0, total(i));
        } else {
          CUTE_UNROLL
          for (int i = 0; i < size(acc); ++i) acc(i) += total(i);
        }
      }
    }
    warpgroup_fence_operand(acc);
    TESSERA_SM90_PROBE_ITEM_END()
    TESSERA_SM90_PROBE_ITEM_KTILES(k_count)

    // Stream-K: a share's partial goes out, or the owner folds the later shares' partials in.
    if (!kOneTile && !T::kIntSums && supports_stream_k(BM, T::Pingpong) && (sk_publisher || sk_owner) &&
        stream_k_fixup(p, w, sk_publisher, acc, ttid, tile_barrier, cta_rank))
      continue;  // a publisher's share: its partial is out, the owner writes the tile

    // The tile's coordinates, only now: registers kept across the mainloop spilled a 128x256 tile.
    const TileCoord c = kOneTile ? one_tile_coord<ClusterM, ClusterN>(cta_rank) : cta_tile(w.tile, tiles_mc, tiles_nc, cta_rank, ClusterM, ClusterN);
    if (c.m >= tiles_m || c.n >= tiles_n) continue;  // a cluster rank past the last tile: nothing to write

    // The accumulators leave through this warpgroup's smem staging buffer, one 64 x kEpiN sub-tile
    // at a time, as 8 consecutive fp32 of one row per thread and step: emit(row, col, v[8]) gets
    // tile-relative coordinates (row < BM, col < BN, col % 8 == 0).
    constexpr int kEpiN = T::kEpiN, kLd = T::kEpiLd, kChunksPerRow = kEpiN / 8;
    // The read-back runs as a loop, so `emit` (the whole dtype / beta / bias epilogue) is inlined
    // once per sub-tile, not once per chunk. (The sub-tile loop stays unrolled: accumulators need
    // compile-time indices, and as a loop all of them stay live to the end, which spilled 128x256.)
    auto staged = [&](auto&& emit) {
      CUTE_UNROLL
      for (int sub = 0; sub < BN / kEpiN; ++sub) {
        CUTE_UNROLL
        for (int jj = 0; jj < kEpiN / 8; ++jj) {
          const int j = sub * (kEpiN / 8) + jj;
          CUTE_UNROLL
          for (int h = 0; h < 2; ++h) {
            const int r = 16 * wg_warp + lane / 4 + 8 * h, col = 8 * jj + 2 * (lane % 4);
            *reinterpret_cast<float2*>(epi + r * kLd + col) =
                make_float2(acc_bits(acc(4 * j + 2 * h)), acc_bits(acc(4 * j + 2 * h + 1)));
            // Three warpgroups (152 registers): the WGMMAs keep every accumulator live across the
            // persistent loop; zeroing the staged ones frees their registers for `emit`.
            if constexpr (T::kConsumers == 3) acc(4 * j + 2 * h) = acc(4 * j + 2 * h + 1) = 0;
          }
        }
        cutlass::arch::NamedBarrier::arrive_and_wait(128, epi_barrier);
#pragma unroll 1
        for (int it = 0; it < 64 * kChunksPerRow / 128; ++it) {
          const int idx = it * 128 + wtid;
          const int r = idx / kChunksPerRow, c8 = (idx % kChunksPerRow) * 8;
          const float4* src = reinterpret_cast<const float4*>(epi + r * kLd + c8);
          const float4 lo = src[0], hi = src[1];
          float v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
          emit(wg_row0 + r, sub * kEpiN + c8, v);
        }
        cutlass::arch::NamedBarrier::arrive_and_wait(128, epi_barrier);  // the buffer is free again
      }
    };
    auto store = [&](int row, int col, float (&v)[8]) {
      const int m = c.m * BM + row, n0 = c.n * BN + col;
      if (m >= g.m || n0 >= g.n) return;
      if constexpr (T::kIntSums) {
        int sums[8];
        CUTE_UNROLL
        for (int i = 0; i < 8; ++i) sums[i] = __float_as_int(v[i]);
        epilogue_row8_s32<false>(g, c.l, m, n0, g.n, sums);
      } else if constexpr (T::kFp8) {
        epilogue_row8_scaled<false>(g, c.l, m, n0, g.n, v);
      } else {
        epilogue_row8<false>(g.epi, c.l, m, n0, g.n, v);
      }
    };
    if constexpr (T::kIntSums) {  // data-parallel, through the staging (the plan decides nothing else)
      staged(store);
      continue;
    } else if (!T::kFp8 && (kOneTile || p.epi_mode != kEpiStaged)) {
      // Per 64 x kStoreN sub-tile, in buffer sub % kEpiBuffers: wait until the TMA store that last
      // read that buffer is done (the previous tile's last stores drain under this tile's mainloop;
      // with two buffers the previous sub-tile's store runs while this one is written), write the
      // fragment as 16-bit pairs, make the writes visible to the async proxy, and let one thread
      // issue the store. A column-major D (d_col_major) goes the same way through transposed
      // kStoreNT x 64 sub-tiles (T::SmemLayoutDT) and D^T's TMA descriptor.
      const EpilogueParams& e = g.epi;
      const bool col = T::kFlip && e.d_col_major;  // only on the TMA path (epilogue_mode)
      constexpr int kSubElems = 64 * T::kStoreN;
      auto buffer = [&](int sub) {  // (64,kStoreN) swizzled 16-bit sub-tile
        return make_tensor(make_smem_ptr(reinterpret_cast<Element*>(epi) + (sub % T::kEpiBuffers) * kSubElems),
                           typename T::SmemLayoutD{});
      };
      // The same bytes as the transposed (kStoreNT,64) sub-tile (several of them only where kStoreNT
      // is kStoreN: the same buffers).
      auto buffer_t = [&](int sub) {
        return make_tensor(make_smem_ptr(reinterpret_cast<Element*>(epi) + (sub % T::kEpiBuffers) * kSubElems),
                           typename T::SmemLayoutDT{});
      };
      // The same buffer as a 32-bit shared address (T::store_offset, T::store_offset_t).
      auto buffer_addr = [&](int sub) {
        return cute::cast_smem_ptr_to_uint(epi) + uint32_t((sub % T::kEpiBuffers) * kSubElems * sizeof(Element));
      };
      Tensor mD = p.tma_d.get_tma_tensor(make_shape(g.m, g.n, g.batch));                         // (M,N,L)
      Tensor tDgD = p.tma_d.get_slice(0).partition_D(
          local_tile(mD, Shape<_64, Int<T::kStoreN>>{}, make_coord(_, _, _)));                     // (TMA,1,1,m,n,l)
      Tensor mDT = p.tma_dt.get_tma_tensor(make_shape(g.n, g.m, g.batch));                       // (N,M,L)
      Tensor tDgDT = p.tma_dt.get_slice(0).partition_D(
          local_tile(mDT, Shape<Int<T::kStoreNT>, _64>{}, make_coord(_, _, _)));                   // (TMA,1,1,n,m,l)
      // beta * C: C's sub-tile lands by TMA in the buffer D's sub-tile then leaves from.
      const bool with_c = !kOneTile && e.beta != 0.0f;  // only on the TMA path (epilogue_mode)
      const int row_in_wg = 16 * wg_warp + lane / 4;
      const int m_base = c.m * BM + wg_row0;
      // Bias (D's type here) and activation: the bias values are loaded together up front (one
      // dependent load per element would serialise their latency), the activation a call per 8 values.
      const bool extras = !kOneTile && (has_bias_or_activation(e) || with_c);
      const Element* bias = kOneTile ? nullptr : static_cast<const Element*>(e.bias);
      if (bias) bias += c.l * e.batch_stride_bias;
      const bool bias_per_col = bias && e.bias_stride_n != 0;
      float bias_row[2] = {0.0f, 0.0f};  // a per-row bias: this thread's two rows
      if (bias && !bias_per_col) {
        CUTE_UNROLL
        for (int h = 0; h < 2; ++h) {
          const int m = m_base + row_in_wg + 8 * h;
          if (m < g.m) bias_row[h] = float(bias[int64_t(m) * e.bias_stride_m]);
        }
      }
      // Each thread's fragment -> 16-bit pairs in the swizzled sub-tile. Two copies of the loop, so
      // that the common one (no bias, no activation) stays a multiply and a convert per element.
      // kCol: the transposed sub-tile (kSub = kStoreNT columns), else a row-major one (kStoreN).
      auto fill = [&](int sub, auto with_extras, auto col_c) {
        constexpr bool kExtras = decltype(with_extras)::value, kCol = decltype(col_c)::value;
        constexpr int kSub = kCol ? T::kStoreNT : T::kStoreN;
        // Row-major sub-tile: this thread's first pair (row_in_wg, 2 * (lane % 4)). Its other pairs
        // lie at jj * 8 columns (the swizzled 16-byte chunk: XOR jj << 4 on a 1024-byte-aligned
        // buffer) and 8 rows further (+ 8 rows, the same swizzle): one LOP3 per two stores, and no
        // per-pair addresses for the compiler to hoist (they spilled the 128x128 kernel at 168 regs).
        const uint32_t sD = buffer_addr(sub) + T::store_offset(row_in_wg, 2 * (lane % 4));
        auto pair_addr = [&](int jj, int h) { return (sD ^ (jj << 4)) + h * T::kStoreRowBytes * 8; };
        // Transposed sub-tile: stmatrix / ldmatrix .x4.trans move this warp's 8 x 8 blocks (chunk jj + q,
        // rows + 8h) as matrix 2q + h; lane l addresses row l % 8 of matrix l / 8, i.e. D's column
        // 8 (jj + q) + l % 8, rows 16 wg_warp + 8h ... + 7 (16 bytes). Chunk pair jj is jj * 1024 on.
        const uint32_t sT =
            buffer_addr(sub) + T::store_offset_t(16 * wg_warp + 8 * ((lane / 8) % 2), 8 * (lane / 16) + lane % 8);
        float bias_col[kSub / 8][2] = {};  // a per-column bias: this thread's 2 * kSub / 8 columns
        if constexpr (kExtras) {
          if (bias_per_col) {
            CUTE_UNROLL
            for (int jj = 0; jj < kSub / 8; ++jj) {
              CUTE_UNROLL
              for (int cc = 0; cc < 2; ++cc) {
                const int n = c.n * BN + sub * kSub + 8 * jj + 2 * (lane % 4) + cc;
                if (n < g.n) bias_col[jj][cc] = float(bias[int64_t(n) * e.bias_stride_n]);
              }
            }
          }
        }
        // Two 8-column chunks at a time: this thread's 8 values of them (2 chunks x 2 rows x 2 columns).
        CUTE_UNROLL
        for (int jj = 0; jj < kSub / 8; jj += 2) {
          // C's pairs where D's go (the sub-tile's TMA load has landed): transposed, all four by one
          // ldmatrix up front; row-major, one load per pair where it is added (four live registers
          // spilled the three-warpgroup tiles).
          uint32_t cpk[2][2] = {};  // [chunk][h]
          if constexpr (kExtras) {
            if (with_c && kCol)
              asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                           : "=r"(cpk[0][0]), "=r"(cpk[0][1]), "=r"(cpk[1][0]), "=r"(cpk[1][1])
                           : "r"(sT + jj * 1024)
                           : "memory");
          }
          float v[2][2][2];  // [chunk][h][cc]: columns 8 * (jj + chunk) + cc, rows +0 / +8
          CUTE_UNROLL
          for (int q = 0; q < 2; ++q) {
            const int j = sub * (kSub / 8) + jj + q;
            CUTE_UNROLL
            for (int h = 0; h < 2; ++h) {
              CUTE_UNROLL
              for (int cc = 0; cc < 2; ++cc) {
                v[q][h][cc] = e.alpha * acc(4 * j + 2 * h + cc);
                if constexpr (kExtras) v[q][h][cc] += bias_row[h] + bias_col[jj + q][cc];
              }
              if constexpr (kExtras) {
                if (with_c) {
                  uint32_t cp = cpk[q][h];
                  if (!kCol) asm volatile("ld.shared.b32 %0, [%1];" : "=r"(cp) : "r"(pair_addr(jj + q, h)) : "memory");
                  const float2 cf = unpack_pair<Element>(cp);
                  v[q][h][0] += e.beta * cf.x, v[q][h][1] += e.beta * cf.y;
                }
              }
            }
          }
          uint32_t packed[2][2];  // [chunk][h]
          if (kExtras && e.activation != kActNone && T::kConsumers == 3) {
            // One value a call: three warpgroups' 152 registers spilled 12 bytes with more values
            // across one call.
            CUTE_UNROLL
            for (int q = 0; q < 2; ++q)
              CUTE_UNROLL
              for (int h = 0; h < 2; ++h)
                packed[q][h] = pack_pair<Element>(activate_out_of_line(e.activation, v[q][h][0]),
                                                  activate_out_of_line(e.activation, v[q][h][1]));
          } else if (kExtras && e.activation != kActNone) {
            const uint4 a = activate8_packed_out_of_line<Element>(
                e.activation, make_float4(v[0][0][0], v[0][0][1], v[0][1][0], v[0][1][1]),
                make_float4(v[1][0][0], v[1][0][1], v[1][1][0], v[1][1][1]));
            packed[0][0] = a.x, packed[0][1] = a.y, packed[1][0] = a.z, packed[1][1] = a.w;
          } else {
            CUTE_UNROLL
            for (int q = 0; q < 2; ++q)
              CUTE_UNROLL
              for (int h = 0; h < 2; ++h) packed[q][h] = pack_pair<Element>(v[q][h][0], v[q][h][1]);
          }
          if constexpr (kCol) {
            asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};"
                         ::"r"(sT + jj * 1024), "r"(packed[0][0]), "r"(packed[0][1]), "r"(packed[1][0]), "r"(packed[1][1])
                         : "memory");
          } else {
            CUTE_UNROLL
            for (int q = 0; q < 2; ++q)
              CUTE_UNROLL
              for (int h = 0; h < 2; ++h)
                asm volatile("st.shared.b32 [%0], %1;" ::"r"(pair_addr(jj + q, h)), "r"(packed[q][h]) : "memory");
          }
        }
      };
      auto store_tile = [&](auto col_c) {
        constexpr bool kCol = decltype(col_c)::value;
        constexpr int kSub = kCol ? T::kStoreNT : T::kStoreN;
        CUTE_UNROLL
        for (int sub = 0; sub < BN / kSub; ++sub) {
          if (stores_by_tma() && wtid == 0) {
            if (sub == 0) tma_store_wait<0>();  // a tile may end on either buffer: all of them free
            else tma_store_wait<T::kEpiBuffers - 1>();
          }
          cutlass::arch::NamedBarrier::arrive_and_wait(128, epi_barrier);  // the buffer is free
          const int mb = m_base / 64, nb = (c.n * BN) / kSub + sub;  // the sub-tile's coordinates
          if (with_c) {
            uint64_t* const landed = &smem.c_full[warp_group - 1];
            if (wtid == 0) {  // a box past D's edge loads zeros and still counts its bytes
              FullBarrier::arrive_and_expect_tx(landed, uint32_t(64 * kSub * sizeof(Element)));
              const int lc = e.batch_stride_c ? g.batch : 1, lcl = e.batch_stride_c ? c.l : 0;
              if constexpr (kCol) {
                Tensor gCT = local_tile(p.tma_ct.get_tma_tensor(make_shape(g.n, g.m, lc)), Shape<Int<kSub>, _64>{},
                                        make_coord(_, _, _));  // (kStoreNT,64,n,m,l)
                copy(p.tma_ct.with(*landed), p.tma_ct.get_slice(0).partition_S(gCT)(_, _, _, nb, mb, lcl),
                     p.tma_ct.get_slice(0).partition_D(buffer_t(sub)));
              } else {
                Tensor gC = local_tile(p.tma_c.get_tma_tensor(make_shape(g.m, g.n, lc)), Shape<_64, Int<T::kStoreN>>{},
                                       make_coord(_, _, _));  // (64,kStoreN,m,n,l)
                copy(p.tma_c.with(*landed), p.tma_c.get_slice(0).partition_S(gC)(_, _, _, mb, nb, lcl),
                     p.tma_c.get_slice(0).partition_D(buffer(sub)));
              }
            }
            FullBarrier::wait(landed, c_phase);
            c_phase ^= 1;
          }
          if (extras) fill(sub, cute::true_type{}, col_c);
          else fill(sub, cute::false_type{}, col_c);
          if (stores_by_tma()) {
            tma_store_fence();
            cutlass::arch::NamedBarrier::arrive_and_wait(128, epi_barrier);
            if (wtid == 0 && m_base < g.m && c.n * BN + sub * kSub < g.n) {  // boxes wholly outside D: none
              if constexpr (kCol)
                copy(p.tma_dt, p.tma_dt.get_slice(0).partition_S(buffer_t(sub)), tDgDT(_, _, _, nb, mb, c.l));
              else
                copy(p.tma_d, p.tma_d.get_slice(0).partition_S(buffer(sub)), tDgD(_, _, _, mb, nb, c.l));
              tma_store_arrive();
            }
          } else if constexpr (!kCol) {
            // 64 rows x kStoreN / 8 chunks of 16 bytes; consecutive threads write one row's chunks.
            cutlass::arch::NamedBarrier::arrive_and_wait(128, epi_barrier);
            Element* const d = static_cast<Element*>(e.d) + c.l * e.batch_stride_d;
            CUTE_UNROLL
            for (int it = 0; it < 64 * (T::kStoreN / 8) / 128; ++it) {
              const int idx = it * 128 + wtid, r = idx / (T::kStoreN / 8), q = idx % (T::kStoreN / 8);
              const int m = m_base + r, n = c.n * BN + sub * T::kStoreN + 8 * q;
              if (m >= g.m || n >= g.n) continue;
              uint4 chunk;
              asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
                           : "=r"(chunk.x), "=r"(chunk.y), "=r"(chunk.z), "=r"(chunk.w)
                           : "r"(buffer_addr(sub) + T::store_offset(r, 8 * q))
                           : "memory");
              Element* const dst = d + int64_t(m) * e.ldd + n;
              if (n + 8 <= g.n && e.d_vec) {
                *reinterpret_cast<uint4*>(dst) = chunk;
              } else {
                const Element* const v = reinterpret_cast<const Element*>(&chunk);
                CUTE_UNROLL
                for (int i = 0; i < 8; ++i)
                  if (n + i < g.n) dst[i] = v[i];
              }
            }
          }
        }
      };
      if constexpr (T::kFlip) {
        if (col) store_tile(cute::true_type{});
        else store_tile(cute::false_type{});
      } else {
        store_tile(cute::false_type{});
      }
      continue;
    }
    if constexpr (kOneTile) continue;
    if (sched.splits == 1) {
      staged(store);
      continue;
    }

    // Split-K: publish this range's partial tile (row-major BM x BN fp32), count the range in, and
    // fold: the sum of every range's partial comes from the workspace (this range's own too, so the
    // accumulators are dead by then), in an order that timing cannot change.
    const long long tile = ((long long)c.l * tiles_m + c.m) * tiles_n + c.n;  // this CTA's tile: its slots
    float* const tile_partials = p.partials + tile * sched.splits * (BM * BN);
    constexpr bool kParallelFold = supports_parallel_fold(BM, BN, T::Pingpong);
    if constexpr (kParallelFold) {
      // Straight from the accumulators, two columns a store: a warp's store covers 8 rows x 32
      // bytes, whole sectors, faster than through the smem staging as D leaves. The wider tiles
      // stage it: their registers are all taken (the direct stores spilled 12 bytes of 128x256 and
      // 32 of 192x192).
      float* const rows = tile_partials + split * (BM * BN) + (wg_row0 + 16 * wg_warp + lane / 4) * BN + 2 * (lane % 4);
      CUTE_UNROLL
      for (int j = 0; j < BN / 8; ++j)
        CUTE_UNROLL
        for (int h = 0; h < 2; ++h)
          __stcg(reinterpret_cast<float2*>(rows + 8 * h * BN + 8 * j), make_float2(acc(4 * j + 2 * h), acc(4 * j + 2 * h + 1)));
    } else {
      float* const mine = tile_partials + split * (BM * BN);
      staged([&](int row, int col, float (&v)[8]) {
        float4* dst = reinterpret_cast<float4*>(mine + row * BN + col);
        __stcg(dst, make_float4(v[0], v[1], v[2], v[3]));
        __stcg(dst + 1, make_float4(v[4], v[5], v[6], v[7]));
      });
    }
    TESSERA_SM90_PROBE_MARK(0)
    cutlass::arch::NamedBarrier::arrive_and_wait(T::kTileThreads, tile_barrier);
    TESSERA_SM90_PROBE_MARK(1)
    // One round (every unit has its own worker, so all of a tile's ranges run at once): each range
    // waits for the others and folds its 1/splits of the tile. Otherwise the last range to arrive
    // folds the whole tile alone: a range still queued behind an earlier unit of its worker cannot
    // be waited for. (The wider tiles always fold serially: supports_parallel_fold.)
    // The launcher says which (KernelParams::fold_parallel): it knows how many clusters fit at once.
    const bool one_round = kParallelFold && p.fold_parallel;
    uint32_t& folds = smem.splitk_last[T::Pingpong ? warp_group - 1 : 0];
    // One warp signs the range in for the tile's threads (the barrier above orders their stores
    // before its fence, as in a cooperative grid sync), and its acquires before the barrier below
    // order every range's stores before the fold's loads. Flags: raise this range's, then the
    // warp's lanes wait for every range's. Counters: count in; in one round wait for all, else
    // the last to count in folds.
    if (ttid < 32) {
      if (one_round && p.fold_epoch != 0) {
        unsigned long long* const flags = p.fold_flags + tile * sched.splits;
        if (ttid == 0) {
          __threadfence();
          store_release(flags + split, p.fold_epoch);
        }
        for (int r = ttid; r < sched.splits; r += 32)
          while (load_acquire(flags + r) != p.fold_epoch) {
          }
        __threadfence();
        __syncwarp();
        if (ttid == 0) folds = 1;
      } else if (ttid == 0) {
        __threadfence();
        const unsigned done = atomicAdd(p.counters + tile, 1u);
        if (one_round) {
          while (load_acquire(p.counters + tile) < unsigned(sched.splits)) {
          }
        }
        __threadfence();
        folds = one_round || done == unsigned(sched.splits - 1);
      }
    }
    cutlass::arch::NamedBarrier::arrive_and_wait(T::kTileThreads, tile_barrier);
    TESSERA_SM90_PROBE_MARK(2)
    if (!folds) continue;
    if constexpr (kParallelFold) {
      // The fold: float4s [u0, u1) of the tile (row-major), summed over every range's partial. In one
      // round range `split` folds its 1/splits of the tile's 8-float chunks, else the last range all.
      // A warp reads U consecutive float4s (U x 16 bytes, whole sectors) from each of `lanes`
      // partials at a time: lane (sub, u) sums ranges sub, sub + lanes, ... (kGroup loads in
      // flight), the subs add their sums in a butterfly, and the even lane of each pair of float4s
      // stores the 8-float chunk. The order depends on the splits, the tile and the round only, so
      // the bits do not depend on timing. The fold's cost is its L2 round trips, with every range
      // loading at once.
      constexpr int kChunks = BM * BN / 8, kGroup = 8;
      const int S = sched.splits;
      const int u0 = one_round ? 2 * (split * kChunks / S) : 0;
      const int u1 = one_round ? 2 * ((split + 1) * kChunks / S) : 2 * kChunks;
      int lanes = 1;  // 1, 2 or 4 partials a load instruction: U = 32, 16 or 8
      while (lanes < 4 && lanes * kGroup < S) lanes *= 2;
      // ttid, read again: one register less held across the mainloop (it spilled the 128x128 tile)
      const int fold_tid = T::Pingpong ? thread_index() % 128 : thread_index() - 128;
      const int U = 32 / lanes, sub = (fold_tid % 32) / U, u = fold_tid % U;
      const int per_pass = T::kTileThreads / 32 * U;
      const float4* const part0 = reinterpret_cast<const float4*>(tile_partials);
#pragma unroll 1  // one copy of `store` (see `staged`)
      for (int pass = u0; pass < u1; pass += per_pass) {  // uniform: the shuffles need every lane
        const int unit = pass + fold_tid / 32 * U + u;
        float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
        if (unit < u1) {
          // Ranges sub, sub + lanes, ...: one pointer, stepped (64-bit products cost registers).
          const float4* src = part0 + size_t(sub) * (BM * BN / 4) + unit;
          const size_t step = size_t(lanes) * (BM * BN / 4);
#pragma unroll 1
          for (int r0 = sub; r0 < S; r0 += kGroup * lanes, src += kGroup * step) {
            float4 x[kGroup];
            CUTE_UNROLL
            for (int q = 0; q < kGroup; ++q)
              if (r0 + q * lanes < S) x[q] = __ldcg(src + q * step);
            CUTE_UNROLL
            for (int q = 0; q < kGroup; ++q)
              if (r0 + q * lanes < S) sum.x += x[q].x, sum.y += x[q].y, sum.z += x[q].z, sum.w += x[q].w;
          }
        }
        for (int off = U; off < 32; off *= 2) {  // every sub ends with the same bits
          sum.x += __shfl_xor_sync(0xffffffffu, sum.x, off), sum.y += __shfl_xor_sync(0xffffffffu, sum.y, off);
          sum.z += __shfl_xor_sync(0xffffffffu, sum.z, off), sum.w += __shfl_xor_sync(0xffffffffu, sum.w, off);
        }
        float4 next;  // the odd neighbour's float4: the chunk's second half
        next.x = __shfl_down_sync(0xffffffffu, sum.x, 1), next.y = __shfl_down_sync(0xffffffffu, sum.y, 1);
        next.z = __shfl_down_sync(0xffffffffu, sum.z, 1), next.w = __shfl_down_sync(0xffffffffu, sum.w, 1);
        if (unit < u1 && sub == 0 && u % 2 == 0) {  // u1 is even: the odd neighbour is in range too
          float v[8] = {sum.x, sum.y, sum.z, sum.w, next.x, next.y, next.z, next.w};
          store(unit / 2 / (BN / 8), (unit / 2 % (BN / 8)) * 8, v);
        }
      }
      TESSERA_SM90_PROBE_MARK(3)
    } else {
      // The serial fold of the wide tiles. This warpgroup's 64 x BN rows: kIters chunks of 8 floats
      // per thread (chunk `it` is number it * 128 + wtid in row-major order), summed in registers
      // in passes of kPass chunks, range 0 first, then one range per L2 round trip (64 floats in
      // flight: a 256-wide tile keeps its dead 128 accumulators live across the persistent loop,
      // and more spilled it; three consumer warpgroups have 152 registers and keep 32 in flight,
      // as 64 spilled the 192x192 tile). The adds run in range order p_0 + p_1 + ...
      constexpr int kRowChunks = BN / 8, kIters = 64 * kRowChunks / 128, kPass = T::kConsumers == 3 ? 2 : 4;
      const float4* const base = reinterpret_cast<const float4*>(tile_partials) + (wg_row0 * BN) / 4 + 2 * wtid;
#pragma unroll 1  // one copy of `store` per pass (see `staged`)
      for (int p0 = 0; p0 < kIters; p0 += kPass) {
        float4 lo[kPass], hi[kPass];
        CUTE_UNROLL
        for (int q = 0; q < kPass; ++q) lo[q] = __ldcg(base + 256 * (p0 + q)), hi[q] = __ldcg(base + 256 * (p0 + q) + 1);
        for (int r = 1; r < sched.splits; ++r) {
          const float4* const part = base + size_t(r) * (BM * BN / 4);  // range r's partial
          float4 xl[kPass], xh[kPass];
          CUTE_UNROLL
          for (int q = 0; q < kPass; ++q) xl[q] = __ldcg(part + 256 * (p0 + q)), xh[q] = __ldcg(part + 256 * (p0 + q) + 1);
          CUTE_UNROLL
          for (int q = 0; q < kPass; ++q) {
            lo[q].x += xl[q].x, lo[q].y += xl[q].y, lo[q].z += xl[q].z, lo[q].w += xl[q].w;
            hi[q].x += xh[q].x, hi[q].y += xh[q].y, hi[q].z += xh[q].z, hi[q].w += xh[q].w;
          }
        }
        CUTE_UNROLL
        for (int q = 0; q < kPass; ++q) {
          const int idx = (p0 + q) * 128 + wtid;
          float v[8] = {lo[q].x, lo[q].y, lo[q].z, lo[q].w, hi[q].x, hi[q].y, hi[q].z, hi[q].w};
          store(wg_row0 + idx / kRowChunks, (idx % kRowChunks) * 8, v);
        }
      }
    }
  }
  TESSERA_SM90_PROBE_PM(4)
  // The last TMA stores must have read this CTA's shared memory before it exits.
  if (stores_by_tma() && wtid == 0) tma_store_wait<0>();
  TESSERA_SM90_PROBE_EXIT()
  TESSERA_SM90_PROBE_LAST()
#endif
}

}  // namespace tessera::gemm_impl::sm90
