// The Hopper GEMM's compile-time description of one kernel (Traits: tile, stages, cluster,
// schedule, dtype, majors) and everything derived from it: shared-memory layouts and storage, the
// TiledMma, the TMA descriptors' types and the epilogue's sub-tile geometry. Host and device code
// both read it; kernel.cuh is the kernel built on it.
#pragma once

#include <cute/tensor.hpp>

#include "gemm/epilogue/epilogue.cuh"
#include "gemm/kernel_params.hpp"
#include "gemm/sm90/config_shape.hpp"

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
  // s8 operands sum into int32 accumulators (exact), which leave through the staging as their bits
  // (acc_bits) to epilogue_row8_s32: no TMA-store, split-K or stream-K path is compiled for them.
  static constexpr bool kIntSums = std::is_same_v<Element, int8_t>;
  using Accum = std::conditional_t<kIntSums, int32_t, float>;
  // fp8 operands: fp32 sums, scaled as they leave: a bf16 D with tensor scales (or block scales,
  // applied in the mainloop) by Store16, any other D through the staging (epilogue_row8_scaled);
  // split-K and stream-K fold the unscaled sums.
  static constexpr bool kFp8 = sizeof(Element) == 1 && !kIntSums;
  // D's type on the TMA-store paths (epilogue_mode): a 16-bit D of the operands' type, or fp8
  // operands' bf16 D; a tf32 or s8 kernel's D always leaves through the fp32 staging.
  using DElement = std::conditional_t<sizeof(Element) == 2, Element,
                                      std::conditional_t<kFp8, cute::bfloat16_t, cute::half_t>>;

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

}  // namespace tessera::gemm_impl::sm90
