// The Ampere GEMM (seeds 000/001): cp.async multistage gmem->smem pipeline, swizzled smem,
// ldmatrix smem->registers double-buffered across k-blocks, SM80 16x8x16 mma.sync with fp32
// accumulators, and an epilogue staged through shared memory for coalesced 16-byte stores.
//
// Canonical problem (see gemm/canonicalize.cpp): D (M x N, row-major) = A (M x K) * B^T with B
// stored N x K. Each of A, B is K-major or MN-major; both are 16-byte aligned with a contiguous
// extent that is a multiple of 8 elements (the dispatcher pads other operands first).
//
// Runs on sm_80 and later; on Hopper it is compiled to sm_90 SASS from the same source.
#pragma once

#include <cute/tensor.hpp>

#include "gemm/epilogue/epilogue.cuh"
#include "gemm/kernel_params.hpp"
#include "gemm/raster.hpp"
#include "gemm/sm80/smem_layouts.hpp"

namespace tessera::gemm_impl::sm80 {

using namespace cute;

template <int DT> struct ElementOf;
template <> struct ElementOf<kF16> {
  using type = cute::half_t;
  using MmaOp = SM80_16x8x16_F32F16F16F32_TN;
};
template <> struct ElementOf<kBF16> {
  using type = cute::bfloat16_t;
  using MmaOp = SM80_16x8x16_F32BF16BF16F32_TN;
};
// fp32 operands as tf32 (the seed's Ampere multistage example): K-major only, as the plan delivers them.
// mma.sync truncates each fp32 word to tf32 (about twice the error of the sm90 rows, whose TMA loads
// round); rounding the fragments in registers is a conversion per element and k-block, which the
// mainloop cannot hide (docs/PERF.md, the tf32 section).
template <> struct ElementOf<kF32> {
  using type = cute::tfloat32_t;
  using MmaOp = SM80_16x8x8_F32TF32TF32F32_TN;
};
// s8 operands (the seed's mma.sync m16n8k32): int32 accumulators, exact sums; K-major only.
template <> struct ElementOf<kS8> {
  using type = int8_t;
  using MmaOp = SM80_16x8x32_S32S8S8S32_TN;
};

// Everything static about one kernel: tile, pipeline depth, warps, dtype and operand majors.
template <int BM_, int BN_, int BK_, int Stages_, int WarpsM_, int WarpsN_, int DT, bool AKMajor_, bool BKMajor_>
struct Traits {
  using Element = typename ElementOf<DT>::type;
  // configs.def counts BK in 16-bit elements: a tf32 k-tile holds half as many (the same bytes).
  static constexpr int BM = BM_, BN = BN_, BK = BK_ * 2 / int(sizeof(Element)), Stages = Stages_;
  static constexpr int WarpsM = WarpsM_, WarpsN = WarpsN_;
  static constexpr int kThreads = 32 * WarpsM * WarpsN;
  static constexpr bool AKMajor = AKMajor_, BKMajor = BKMajor_;
  static constexpr int kVec = 16 / int(sizeof(Element));  // elements per 16-byte cp.async
  static constexpr int kMmaK = 32 / int(sizeof(Element));  // K of one mma.sync: 32 bytes of each row
  // s8: int32 sums, staged as they are and handed to epilogue_row8_s32.
  static constexpr bool kIntSums = std::is_same_v<Element, int8_t>;
  using Accum = std::conditional_t<kIntSums, int32_t, float>;

  // Shared memory: (rows, BK, Stages) per operand; atoms and their swizzles in smem_layouts.hpp.
  using SmemLayoutA = decltype(tile_to_shape(SmemAtom<AKMajor, BK_, int(sizeof(Element))>{}, Shape<Int<BM>, Int<BK>, Int<Stages>>{}));
  using SmemLayoutB = decltype(tile_to_shape(SmemAtom<BKMajor, BK_, int(sizeof(Element))>{}, Shape<Int<BN>, Int<BK>, Int<Stages>>{}));

  // gmem -> smem: 16-byte cp.async per thread, zero-filled outside the matrix. Threads run along
  // the contiguous mode first so that each warp reads whole 64/128-byte segments.
  template <bool KMajor, int Rows>
  static auto make_gmem_copy() {
    using Atom = Copy_Atom<SM80_CP_ASYNC_CACHEGLOBAL_ZFILL<uint128_t>, Element>;
    if constexpr (KMajor) {
      constexpr int kThrK = BK / kVec;  // threads along K
      return make_tiled_copy(Atom{},
                             Layout<Shape<Int<kThreads / kThrK>, Int<kThrK>>, Stride<Int<kThrK>, _1>>{},
                             Layout<Shape<_1, Int<kVec>>>{});
    } else {
      constexpr int kThrMN = (Rows / 8 < kThreads) ? Rows / 8 : kThreads;  // threads along MN
      return make_tiled_copy(Atom{},
                             Layout<Shape<Int<kThrMN>, Int<kThreads / kThrMN>>, Stride<_1, Int<kThrMN>>>{},
                             Layout<Shape<_8, _1>>{});
    }
  }
  using GmemCopyA = decltype(make_gmem_copy<AKMajor, BM>());
  using GmemCopyB = decltype(make_gmem_copy<BKMajor, BN>());

  // MMA: warps tiled WarpsM x WarpsN; each warp spans 16 rows and 16 columns per atom step
  // (two 16x8x16 atoms along N) so that one ldmatrix.x4 feeds B.
  using TiledMma = decltype(make_tiled_mma(MMA_Atom<typename ElementOf<DT>::MmaOp>{},
                                           Layout<Shape<Int<WarpsM>, Int<WarpsN>, _1>>{},
                                           Tile<Int<16 * WarpsM>, Int<16 * WarpsN>, Int<kMmaK>>{}));

  // smem -> registers: ldmatrix, transposing for MN-major operands.
  using SmemCopyAtomA = Copy_Atom<std::conditional_t<AKMajor, SM75_U32x4_LDSM_N, SM75_U16x8_LDSM_T>, Element>;
  using SmemCopyAtomB = Copy_Atom<std::conditional_t<BKMajor, SM75_U32x4_LDSM_N, SM75_U16x8_LDSM_T>, Element>;

  // Epilogue staging: fp32 (BM, BN) with rows padded by 8 floats, so that the accumulator
  // fragments (float2 at rows r and r+8) land in distinct banks.
  static constexpr int kStageLd = BN + 8;
  static constexpr int kPipeBytes = int(cosize_v<SmemLayoutA> + cosize_v<SmemLayoutB>) * int(sizeof(Element));
  static constexpr int kEpiBytes = BM * kStageLd * int(sizeof(float));
  static constexpr int kSmemBytes = kPipeBytes > kEpiBytes ? kPipeBytes : kEpiBytes;

  static_assert(BM % (16 * WarpsM) == 0 && BN % (16 * WarpsN) == 0 && BK % kMmaK == 0, "tile vs MMA");
  static_assert(sizeof(Element) == 2 || (AKMajor && BKMajor), "tf32 and s8: K-major operands only (ldmatrix of 16-bit pairs)");
  static_assert((BM * BK / kVec) % kThreads == 0 && (BN * BK / kVec) % kThreads == 0, "copy tiling");
};

// One CTA tile (tile_m, tile_n) of batch l.
template <class T>
__device__ __forceinline__ void gemm_tile(const GemmParams& p, int l, int tile_m, int tile_n, unsigned char* smem) {
  using Element = typename T::Element;
  constexpr int BM = T::BM, BN = T::BN, BK = T::BK, Stages = T::Stages;
  const int tid = threadIdx.x;

  // Operand strides: the contiguous mode gets a static unit stride so that copies vectorise.
  auto stride_of = [](int64_t ld, auto k_major) {
    if constexpr (decltype(k_major)::value) return make_stride(ld, _1{});
    else return make_stride(_1{}, ld);
  };
  const Element* a_ptr = static_cast<const Element*>(p.a) + l * p.batch_stride_a;
  const Element* b_ptr = static_cast<const Element*>(p.b) + l * p.batch_stride_b;
  Tensor mA = make_tensor(make_gmem_ptr(a_ptr), make_shape(p.m, p.k), stride_of(p.lda, bool_constant<T::AKMajor>{}));  // (M,K)
  Tensor mB = make_tensor(make_gmem_ptr(b_ptr), make_shape(p.n, p.k), stride_of(p.ldb, bool_constant<T::BKMajor>{}));  // (N,K)

  auto cta_tiler = Shape<Int<BM>, Int<BN>, Int<BK>>{};
  auto cta_coord = make_coord(tile_m, tile_n, _);
  Tensor gA = local_tile(mA, cta_tiler, cta_coord, Step<_1, X, _1>{});  // (BM,BK,k_tiles)
  Tensor gB = local_tile(mB, cta_tiler, cta_coord, Step<X, _1, _1>{});  // (BN,BK,k_tiles)
  Tensor cA = local_tile(make_identity_tensor(shape(mA)), cta_tiler, cta_coord, Step<_1, X, _1>{});  // (BM,BK,k_tiles) -> (m,k)
  Tensor cB = local_tile(make_identity_tensor(shape(mB)), cta_tiler, cta_coord, Step<X, _1, _1>{});  // (BN,BK,k_tiles) -> (n,k)

  Tensor sA = make_tensor(make_smem_ptr(reinterpret_cast<Element*>(smem)), typename T::SmemLayoutA{});  // (BM,BK,PIPE)
  Tensor sB = make_tensor(make_smem_ptr(reinterpret_cast<Element*>(smem) + cosize_v<typename T::SmemLayoutA>),
                          typename T::SmemLayoutB{});  // (BN,BK,PIPE)

  typename T::GmemCopyA g2s_a;
  typename T::GmemCopyB g2s_b;
  auto thr_g2s_a = g2s_a.get_slice(tid);
  auto thr_g2s_b = g2s_b.get_slice(tid);
  Tensor tAgA = thr_g2s_a.partition_S(gA);  // (CPY,CPY_M,CPY_K,k_tiles)
  Tensor tAsA = thr_g2s_a.partition_D(sA);  // (CPY,CPY_M,CPY_K,PIPE)
  Tensor tAcA = thr_g2s_a.partition_S(cA);  // (CPY,CPY_M,CPY_K,k_tiles)
  Tensor tBgB = thr_g2s_b.partition_S(gB);  // (CPY,CPY_N,CPY_K,k_tiles)
  Tensor tBsB = thr_g2s_b.partition_D(sB);  // (CPY,CPY_N,CPY_K,PIPE)
  Tensor tBcB = thr_g2s_b.partition_S(cB);  // (CPY,CPY_N,CPY_K,k_tiles)

  typename T::TiledMma mma;
  auto thr_mma = mma.get_slice(tid);
  Tensor tCrA = thr_mma.partition_fragment_A(sA(_, _, 0));           // (MMA,MMA_M,MMA_K)
  Tensor tCrB = thr_mma.partition_fragment_B(sB(_, _, 0));           // (MMA,MMA_N,MMA_K)
  Tensor tCrC = partition_fragment_C(mma, Shape<Int<BM>, Int<BN>>{});  // (MMA,MMA_M,MMA_N) fp32 (s8: int32)
  clear(tCrC);

  auto s2r_a = make_tiled_copy_A(typename T::SmemCopyAtomA{}, mma);
  auto s2r_b = make_tiled_copy_B(typename T::SmemCopyAtomB{}, mma);
  auto thr_s2r_a = s2r_a.get_slice(tid);
  auto thr_s2r_b = s2r_b.get_slice(tid);
  Tensor tXsA = thr_s2r_a.partition_S(sA);   // (CPY,CPY_M,CPY_K,PIPE)
  Tensor tXrA = thr_s2r_a.retile_D(tCrA);    // (CPY,CPY_M,CPY_K)
  Tensor tXsB = thr_s2r_b.partition_S(sB);   // (CPY,CPY_N,CPY_K,PIPE)
  Tensor tXrB = thr_s2r_b.retile_D(tCrB);    // (CPY,CPY_N,CPY_K)

  // One k-tile into one pipeline stage. A 16-byte vector is inside the matrix iff its first
  // element is: the contiguous extent is a multiple of 8 (dispatcher's guarantee).
  auto load_tile = [&](int k_tile, int stage) {
    auto shape_a = shape(mA);
    auto shape_b = shape(mB);
    CUTE_UNROLL
    for (int i = 0; i < size<1>(tAsA); ++i) {
      CUTE_UNROLL
      for (int j = 0; j < size<2>(tAsA); ++j) {
        const bool in = elem_less(tAcA(0, i, j, k_tile), shape_a);
        copy(g2s_a.with(in), tAgA(_, i, j, k_tile), tAsA(_, i, j, stage));
      }
    }
    CUTE_UNROLL
    for (int i = 0; i < size<1>(tBsB); ++i) {
      CUTE_UNROLL
      for (int j = 0; j < size<2>(tBsB); ++j) {
        const bool in = elem_less(tBcB(0, i, j, k_tile), shape_b);
        copy(g2s_b.with(in), tBgB(_, i, j, k_tile), tBsB(_, i, j, stage));
      }
    }
  };

  const int k_tiles = (p.k + BK - 1) / BK;
  constexpr int kBlocks = size<2>(tCrA);  // k-blocks (of 16) per k-tile
  if (k_tiles > 0) {
    // Prologue: Stages-1 tiles in flight (empty commit groups past the end keep the count).
    int k_tile_next = 0;
    CUTE_UNROLL
    for (int s = 0; s < Stages - 1; ++s) {
      if (k_tile_next < k_tiles) load_tile(k_tile_next, s);
      cp_async_fence();
      ++k_tile_next;
    }
    int read_stage = 0;
    int write_stage = Stages - 1;
    cp_async_wait<Stages - 2>();
    __syncthreads();
    copy(s2r_a, tXsA(_, _, 0, read_stage), tXrA(_, _, 0));
    copy(s2r_b, tXsB(_, _, 0, read_stage), tXrB(_, _, 0));

    for (int k_tile = 0; k_tile < k_tiles; ++k_tile) {
      CUTE_UNROLL
      for (int kb = 0; kb < kBlocks; ++kb) {
        if (kb == kBlocks - 1) {
          // The next k-block comes from the next stage: wait until it has landed for every thread.
          read_stage = read_stage + 1 == Stages ? 0 : read_stage + 1;
          cp_async_wait<Stages - 2>();
          __syncthreads();
        }
        const int kb_next = (kb + 1) % kBlocks;  // register double buffer: fetch kb+1 while computing kb
        copy(s2r_a, tXsA(_, _, kb_next, read_stage), tXrA(_, _, kb_next));
        copy(s2r_b, tXsB(_, _, kb_next, read_stage), tXrB(_, _, kb_next));
        if (kb == 0) {
          // Refill the stage consumed in the previous k-tile (every thread passed the barrier
          // after its last ldmatrix from it).
          if (k_tile_next < k_tiles) load_tile(k_tile_next, write_stage);
          cp_async_fence();
          ++k_tile_next;
          write_stage = write_stage + 1 == Stages ? 0 : write_stage + 1;
        }
        cute::gemm(mma, tCrA(_, _, kb), tCrB(_, _, kb), tCrC);
      }
    }
    cp_async_wait<0>();
    __syncthreads();  // the epilogue re-uses the pipeline's shared memory
  }

  // Epilogue: accumulators -> smem (fp32, or the int32 sums) -> 8 consecutive outputs per thread per step.
  using Accum = typename T::Accum;
  Accum* stage = reinterpret_cast<Accum*>(smem);
  Tensor sC = make_tensor(make_smem_ptr(stage),
                          make_layout(Shape<Int<BM>, Int<BN>>{}, Stride<Int<T::kStageLd>, _1>{}));  // (BM,BN)
  Tensor tCsC = thr_mma.partition_C(sC);  // (MMA,MMA_M,MMA_N)
  copy(tCrC, tCsC);
  __syncthreads();

  constexpr int kChunksPerRow = BN / 8;
  constexpr int kChunks = BM * kChunksPerRow;
  static_assert(kChunks % T::kThreads == 0, "epilogue chunking");
  // A loop, not unrolled: one inlined copy of the epilogue (dtype, beta * C, bias, activation)
  // instead of one per chunk, which was most of the kernel's code and compile time.
#pragma unroll 1
  for (int it = 0; it < kChunks / T::kThreads; ++it) {
    const int idx = it * T::kThreads + tid;
    const int r = idx / kChunksPerRow;
    const int c8 = (idx % kChunksPerRow) * 8;
    const int m = tile_m * BM + r;
    const int n0 = tile_n * BN + c8;
    if (m < p.m && n0 < p.n) {
      if constexpr (T::kIntSums) {
        const int4* src = reinterpret_cast<const int4*>(stage + r * T::kStageLd + c8);
        const int4 lo = src[0], hi = src[1];
        const int sums[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
        epilogue_row8_s32<true>(p, l, m, n0, p.n, sums);
      } else {
        const float4* src = reinterpret_cast<const float4*>(stage + r * T::kStageLd + c8);
        const float4 lo = src[0], hi = src[1];
        float acc[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
        epilogue_row8<true>(p.epi, l, m, n0, p.n, acc);
      }
    }
  }
}

template <class T>
__global__ void __launch_bounds__(T::kThreads, 1) gemm_kernel(GemmParams p) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int tiles_m = (p.m + T::BM - 1) / T::BM;
  const int tiles_n = (p.n + T::BN - 1) / T::BN;
  int tile_m, tile_n;
  grouped_raster(int(blockIdx.x), tiles_m, tiles_n, tile_m, tile_n);
  // One batch per grid row (no loop: a loop keeps addresses live across batches and pushed the
  // 128x256 config past 255 registers). The launcher splits batches beyond the grid limit.
  gemm_tile<T>(p, int(blockIdx.y), tile_m, tile_n, smem);
}

}  // namespace tessera::gemm_impl::sm80
