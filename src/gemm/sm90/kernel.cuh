// The Hopper GEMM (seeds 002/003): TMA loads into a ring of 128-byte-swizzled shared-memory stages,
// full/empty mbarriers, WGMMA with fp32 accumulators, warp specialisation and a persistent tile loop.
//
//   warpgroup 0 (producer, 40 registers): one elected thread walks the CTA's tiles and k-tiles and
//     issues the TMA loads of A and B into the next free stage (waits on its `empty` barrier, arms
//     its `full` barrier with the transaction byte count).
//   warpgroups 1..BM/64 (consumers, 232 registers): cooperative on one BM x BN tile, each owns 64
//     rows. Per k-tile: wait `full`, issue BK/16 WGMMAs 64xBNx16 reading A and B straight from
//     smem, keep one batch in flight, and release the previous stage once its WGMMAs retired.
//     Epilogue: accumulators -> fp32 smem sub-tile -> 8 outputs per thread (alpha, beta*C, cast),
//     while the producer already fills the ring for the next tile.
//
// Canonical problem (gemm/plan.hpp): D (M x N, row-major) = A (M x K) * B^T with B stored N x K; A
// and B K-major or MN-major, 16-byte aligned with 16-byte leading dimensions (TMA's rules; the
// dispatcher pads other operands first). Batches are the third TMA mode (stride 0 = broadcast).
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>

#include "gemm/epilogue/epilogue.cuh"
#include "gemm/kernel_params.hpp"
#include "gemm/raster.hpp"

namespace tessera::gemm_impl::sm90 {

using namespace cute;

template <int DT> struct ElementOf;
template <> struct ElementOf<kF16> { using type = cute::half_t; };
template <> struct ElementOf<kBF16> { using type = cute::bfloat16_t; };

// Global operand (rows, K, batches) with the contiguous mode's unit stride static, as TMA wants.
template <bool KMajor>
using OperandStride = std::conditional_t<KMajor, Stride<int64_t, _1, int64_t>, Stride<_1, int64_t, int64_t>>;

template <bool KMajor>
CUTE_HOST_DEVICE auto operand_stride(int64_t ld, int64_t batch_stride) {
  if constexpr (KMajor) return OperandStride<KMajor>{ld, _1{}, batch_stride};
  else return OperandStride<KMajor>{_1{}, ld, batch_stride};
}

template <int BM_, int BN_, int BK_, int Stages_, int DT, bool AKMajor_, bool BKMajor_>
struct Traits {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, Stages = Stages_;
  static constexpr bool AKMajor = AKMajor_, BKMajor = BKMajor_;
  static constexpr int kConsumers = BM / 64;  // consumer warpgroups, 64 rows each
  static constexpr int kThreads = 128 * (1 + kConsumers);
  static constexpr int kProducerRegs = 40, kConsumerRegs = 232;  // 128*40 + 256*232 <= 64K registers
  using Element = typename ElementOf<DT>::type;

  // smem: 128-byte swizzle atoms (8 rows x 64 K-elements, or 64 MN-elements x 8 rows) tiled over
  // (rows, BK, Stages); the same layout describes the TMA box and the WGMMA descriptors.
  using AtomA = std::conditional_t<AKMajor, GMMA::Layout_K_SW128_Atom<Element>, GMMA::Layout_MN_SW128_Atom<Element>>;
  using AtomB = std::conditional_t<BKMajor, GMMA::Layout_K_SW128_Atom<Element>, GMMA::Layout_MN_SW128_Atom<Element>>;
  using SmemLayoutA = decltype(tile_to_shape(AtomA{}, Shape<Int<BM>, Int<BK>, Int<Stages>>{}));
  using SmemLayoutB = decltype(tile_to_shape(AtomB{}, Shape<Int<BN>, Int<BK>, Int<Stages>>{}));

  // Consumers tiled along M; each issues 64 x BN x 16 WGMMAs with both operands from smem.
  using TiledMma = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<_64, Int<BN>, Int<BK>>,
                           AKMajor ? GMMA::Major::K : GMMA::Major::MN, BKMajor ? GMMA::Major::K : GMMA::Major::MN>(),
      Layout<Shape<Int<kConsumers>, _1, _1>>{}));

  // Host: TMA descriptors for (rows, K, batches). Broadcast operands (batch stride 0) get one batch.
  template <bool KMajor, class SmemLayout, int Rows>
  static auto make_tma(const void* ptr, int rows, int k, int batches, int64_t ld, int64_t batch_stride) {
    const int64_t outer = KMajor ? rows : k;
    Tensor g = make_tensor(make_gmem_ptr(static_cast<const Element*>(ptr)),
                           make_shape(rows, k, batch_stride ? batches : 1),
                           operand_stride<KMajor>(ld, batch_stride ? batch_stride : ld * outer));
    return make_tma_copy(SM90_TMA_LOAD{}, g, SmemLayout{}(_, _, 0), Shape<Int<Rows>, Int<BK>>{}, _1{});
  }
  static auto make_tma_a(const GemmParams& p) {
    return make_tma<AKMajor, SmemLayoutA, BM>(p.a, p.m, p.k, p.batch, p.lda, p.batch_stride_a);
  }
  static auto make_tma_b(const GemmParams& p) {
    return make_tma<BKMajor, SmemLayoutB, BN>(p.b, p.n, p.k, p.batch, p.ldb, p.batch_stride_b);
  }
  using TmaA = decltype(make_tma_a(GemmParams{}));
  using TmaB = decltype(make_tma_b(GemmParams{}));
  static constexpr uint32_t kTxBytes = (BM + BN) * BK * sizeof(Element);  // full boxes, OOB zero-filled

  // Epilogue staging: one 64 x kEpiN fp32 sub-tile per consumer warpgroup. Row stride kEpiN + 8
  // floats = 8 (mod 32) words, so the float2 stores of a quarter warp (4 rows) hit distinct banks.
  static constexpr int kEpiN = 32, kEpiLd = kEpiN + 8;

  struct SharedStorage {
    alignas(1024) Element a[cosize_v<SmemLayoutA>];  // 128-byte swizzle repeats every 1024 bytes
    alignas(1024) Element b[cosize_v<SmemLayoutB>];
    alignas(16) float epi[kConsumers][64 * kEpiLd];
    alignas(8) uint64_t full[Stages];
    uint64_t empty[Stages];
  };
  static constexpr int kSmemBytes = int(sizeof(SharedStorage));

  static_assert(BM % 64 == 0 && kConsumers >= 1 && kConsumers <= 2, "64 rows per consumer warpgroup");
  static_assert(BN % kEpiN == 0 && BK % 64 == 0, "tile vs swizzle atom / epilogue sub-tile");
};

template <class T>
struct KernelParams {
  GemmParams g;
  typename T::TmaA tma_a;
  typename T::TmaB tma_b;
};

// The CTA's i-th tile of the persistent walk -> (batch, tile_m, tile_n); grouped raster per batch.
struct TileCoord {
  int l, m, n;
};
__device__ __forceinline__ TileCoord tile_at(long long tile, int tiles_m, int tiles_n) {
  const long long per_batch = (long long)tiles_m * tiles_n;
  TileCoord c;
  c.l = int(tile / per_batch);
  grouped_raster(int(tile - c.l * per_batch), tiles_m, tiles_n, c.m, c.n);
  return c;
}

template <class T>
__global__ void __launch_bounds__(T::kThreads, 1) gemm_kernel(const __grid_constant__ KernelParams<T> p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using Element = typename T::Element;
  using FullBarrier = cutlass::arch::ClusterTransactionBarrier;
  using EmptyBarrier = cutlass::arch::ClusterBarrier;
  constexpr int BM = T::BM, BN = T::BN, BK = T::BK, Stages = T::Stages;

  extern __shared__ __align__(1024) unsigned char smem_raw[];
  auto& smem = *reinterpret_cast<typename T::SharedStorage*>(smem_raw);
  const int warp_group = threadIdx.x / 128;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;

  if (warp == 0 && elect_one_sync()) {
    prefetch_tma_descriptor(p.tma_a.get_tma_descriptor());
    prefetch_tma_descriptor(p.tma_b.get_tma_descriptor());
    for (int s = 0; s < Stages; ++s) {
      FullBarrier::init(&smem.full[s], 1);                     // the producer's arrive + TMA bytes
      EmptyBarrier::init(&smem.empty[s], 4 * T::kConsumers);  // one arrive per consumer warp
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();

  const GemmParams& g = p.g;
  const int tiles_m = (g.m + BM - 1) / BM, tiles_n = (g.n + BN - 1) / BN;
  const long long tiles = (long long)tiles_m * tiles_n * g.batch;
  const int k_tiles = (g.k + BK - 1) / BK;

  Tensor sA = make_tensor(make_smem_ptr(smem.a), typename T::SmemLayoutA{});  // (BM,BK,PIPE)
  Tensor sB = make_tensor(make_smem_ptr(smem.b), typename T::SmemLayoutB{});  // (BN,BK,PIPE)

  if (warp_group == 0) {
    // ---------------- producer ----------------
    cutlass::arch::warpgroup_reg_dealloc<T::kProducerRegs>();
    if (warp == 0 && elect_one_sync()) {
      const int la_n = g.batch_stride_a ? g.batch : 1, lb_n = g.batch_stride_b ? g.batch : 1;
      Tensor mA = p.tma_a.get_tma_tensor(make_shape(g.m, g.k, la_n));                   // (M,K,L) coords
      Tensor mB = p.tma_b.get_tma_tensor(make_shape(g.n, g.k, lb_n));                   // (N,K,L) coords
      Tensor gA = local_tile(mA, Shape<Int<BM>, Int<BK>>{}, make_coord(_, _, _));        // (BM,BK,m,k,l)
      Tensor gB = local_tile(mB, Shape<Int<BN>, Int<BK>>{}, make_coord(_, _, _));        // (BN,BK,n,k,l)
      auto tma_a = p.tma_a.get_slice(0);
      auto tma_b = p.tma_b.get_slice(0);
      Tensor tAgA = tma_a.partition_S(gA);  // (TMA,TMA_M,TMA_K,m,k,l)
      Tensor tAsA = tma_a.partition_D(sA);  // (TMA,TMA_M,TMA_K,PIPE)
      Tensor tBgB = tma_b.partition_S(gB);  // (TMA,TMA_N,TMA_K,n,k,l)
      Tensor tBsB = tma_b.partition_D(sB);  // (TMA,TMA_N,TMA_K,PIPE)
      int stage = 0;
      uint32_t phase = 0;
      for (long long tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const TileCoord c = tile_at(tile, tiles_m, tiles_n);
        const int la = g.batch_stride_a ? c.l : 0, lb = g.batch_stride_b ? c.l : 0;
        for (int kt = 0; kt < k_tiles; ++kt) {
          EmptyBarrier::wait(&smem.empty[stage], phase ^ 1);  // a fresh barrier passes parity 1
          FullBarrier::arrive_and_expect_tx(&smem.full[stage], T::kTxBytes);
          copy(p.tma_a.with(smem.full[stage]), tAgA(_, _, _, c.m, kt, la), tAsA(_, _, _, stage));
          copy(p.tma_b.with(smem.full[stage]), tBgB(_, _, _, c.n, kt, lb), tBsB(_, _, _, stage));
          if (++stage == Stages) { stage = 0; phase ^= 1; }
        }
      }
    }
    return;
  }

  // ---------------- consumers ----------------
  cutlass::arch::warpgroup_reg_alloc<T::kConsumerRegs>();
  const int ctid = threadIdx.x - 128;  // 0 .. 128*kConsumers-1
  typename T::TiledMma mma;
  auto thr_mma = mma.get_thread_slice(ctid);
  Tensor tCsA = thr_mma.partition_A(sA);                               // (MMA,MMA_M,MMA_K,PIPE)
  Tensor tCsB = thr_mma.partition_B(sB);                               // (MMA,MMA_N,MMA_K,PIPE)
  Tensor tCrA = thr_mma.make_fragment_A(tCsA);                         // smem descriptors
  Tensor tCrB = thr_mma.make_fragment_B(tCsB);
  Tensor acc = partition_fragment_C(mma, Shape<Int<BM>, Int<BN>>{});  // (MMA,MMA_M,MMA_N) fp32
  static_assert(decltype(size(acc))::value == BN / 2, "one 64 x BN WGMMA accumulator per thread");

  // WGMMA accumulator layout of a 64 x BN warpgroup tile: thread (warp w, lane) holds rows
  // 16w + lane/4 + 8h (h = 0, 1) and columns 8j + 2(lane%4) + c (c = 0, 1), at acc(c + 2h + 4j).
  const int wg_warp = warp % 4;
  float* epi = smem.epi[warp_group - 1];
  const int epi_barrier = warp_group;  // named barrier per consumer warpgroup (0 is __syncthreads)
  const int wtid = threadIdx.x % 128;

  int stage = 0;
  uint32_t phase = 0;
  for (long long tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const TileCoord c = tile_at(tile, tiles_m, tiles_n);

    // Mainloop: one batch of BK/16 WGMMAs per k-tile; the previous batch retires while the next
    // one is issued, and only then is its stage handed back to the producer.
    mma.accumulate_ = GMMA::ScaleOut::Zero;
    if (k_tiles == 0) clear(acc);
    warpgroup_fence_operand(acc);
    int prev_stage = -1;
    for (int kt = 0; kt < k_tiles; ++kt) {
      FullBarrier::wait(&smem.full[stage], phase);
      warpgroup_arrive();
      CUTE_UNROLL
      for (int kb = 0; kb < size<2>(tCrA); ++kb) {
        cute::gemm(mma, tCrA(_, _, kb, stage), tCrB(_, _, kb, stage), acc);
        mma.accumulate_ = GMMA::ScaleOut::One;
      }
      warpgroup_commit_batch();
      warpgroup_wait<1>();
      if (prev_stage >= 0 && lane == 0) EmptyBarrier::arrive(&smem.empty[prev_stage]);
      prev_stage = stage;
      if (++stage == Stages) { stage = 0; phase ^= 1; }
    }
    warpgroup_wait<0>();
    if (prev_stage >= 0 && lane == 0) EmptyBarrier::arrive(&smem.empty[prev_stage]);
    warpgroup_fence_operand(acc);

    // Epilogue, one 64 x kEpiN sub-tile at a time through this warpgroup's staging buffer.
    constexpr int kEpiN = T::kEpiN, kLd = T::kEpiLd;
    const int row0 = c.m * BM + (warp_group - 1) * 64;
    CUTE_UNROLL
    for (int sub = 0; sub < BN / kEpiN; ++sub) {
      CUTE_UNROLL
      for (int jj = 0; jj < kEpiN / 8; ++jj) {
        const int j = sub * (kEpiN / 8) + jj;
        CUTE_UNROLL
        for (int h = 0; h < 2; ++h) {
          const int r = 16 * wg_warp + lane / 4 + 8 * h, col = 8 * jj + 2 * (lane % 4);
          *reinterpret_cast<float2*>(epi + r * kLd + col) = make_float2(acc(4 * j + 2 * h), acc(4 * j + 2 * h + 1));
        }
      }
      cutlass::arch::NamedBarrier::arrive_and_wait(128, epi_barrier);
      constexpr int kChunksPerRow = kEpiN / 8;
      CUTE_UNROLL
      for (int it = 0; it < 64 * kChunksPerRow / 128; ++it) {
        const int idx = it * 128 + wtid;
        const int r = idx / kChunksPerRow, c8 = (idx % kChunksPerRow) * 8;
        const int m = row0 + r, n0 = c.n * BN + sub * kEpiN + c8;
        if (m < g.m && n0 < g.n) {
          const float4* src = reinterpret_cast<const float4*>(epi + r * kLd + c8);
          const float4 lo = src[0], hi = src[1];
          float out[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
          epilogue_row8(g.epi, c.l, m, n0, g.n, out);
        }
      }
      cutlass::arch::NamedBarrier::arrive_and_wait(128, epi_barrier);  // the buffer is free for the next sub-tile
    }
  }
#endif
}

}  // namespace tessera::gemm_impl::sm90
