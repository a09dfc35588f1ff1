// Rung 11: the epilogue through shared memory, by stmatrix and a TMA store. Rung 10 wrote each
// thread's accumulators straight to global memory: per warp 16 rows x 16 bytes per instruction,
// and every register of the tile live until its store had issued. Here each consumer warpgroup
// converts its 64 x 256 fp32 accumulators to fp16 in 64 x 64 sub-tiles, writes them with
// stmatrix (8x8 16-bit matrices, 4 per instruction) into a 128-byte-swizzled shared buffer, and
// one thread hands the buffer to TMA, which writes whole 128-byte lines of C. Two buffers per
// warpgroup: sub-tile j+1 is written while sub-tile j's store reads; the last store of a tile
// drains under the next tile's mainloop (the kernel is persistent, rung 10).
//
// Shapes: M % 128 == 0, N % 256 == 0, K % 64 == 0.
#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>

#include "common/harness.hpp"

using namespace cute;

namespace rung11 {  // named: nvcc's host stub of a kernel template fails in an anonymous namespace

constexpr int BM = 128, BN = 256, BK = 64, Stages = 4;
constexpr int kConsumers = BM / 64;
constexpr int kThreads = 128 * (1 + kConsumers);
constexpr int kConsumerThreads = 128 * kConsumers;
constexpr int kProducerRegs = 40, kConsumerRegs = 232;

using SmemLayoutA = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<half_t>{}, Shape<Int<BM>, Int<BK>, Int<Stages>>{}));
using SmemLayoutB = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<half_t>{}, Shape<Int<BN>, Int<BK>, Int<Stages>>{}));

// The epilogue's sub-tile: 64 rows (one warpgroup's) x 64 columns of fp16 = 64 lines of 128 bytes,
// 128-byte swizzled (16-byte chunk XOR row % 8), so that stmatrix's 8 rows of 16 bytes hit 8
// different bank groups, and TMA (which knows the swizzle) reads it back in C's order.
constexpr int kEpiN = 64, kEpiBuffers = 2;
using SmemLayoutD = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<half_t>{}, Shape<_64, Int<kEpiN>>{}));

struct SharedStorage {
  alignas(1024) half_t a[cosize_v<SmemLayoutA>];
  alignas(1024) half_t b[cosize_v<SmemLayoutB>];
  alignas(1024) half_t d[kConsumers][kEpiBuffers][cosize_v<SmemLayoutD>];  // 2 x 2 x 8 KB
  alignas(8) uint64_t full[Stages];
  uint64_t empty[Stages];
};
// 192 KB + 32 KB + barriers = 225 KB: more than half of an SM's 228 KB, so exactly one CTA fits
// per SM (stream-K relies on it).
constexpr int kSmemBytes = int(sizeof(SharedStorage));
static_assert(kSmemBytes <= 227 * 1024 && 2 * kSmemBytes > 228 * 1024, "one CTA per SM");
constexpr uint32_t kTxBytes = (BM + BN) * BK * sizeof(half_t);

using TiledMma = decltype(make_tiled_mma(SM90_64x256x16_F32F16F16_SS<GMMA::Major::K, GMMA::Major::K>{},
                                         Layout<Shape<Int<kConsumers>, _1, _1>>{}));
// The epilogue's view of one warpgroup: a 64 x 64 WGMMA's accumulator layout is exactly the
// 64 x 256 one restricted to 64 consecutive columns (thread t holds columns 8j + 2(t%4) + {0,1} of
// rows 16(t/32) + (t%32)/4 + {0,8}, at acc(4j + 2h + c)), so sub-tile s of the big fragment is
// acc(32 s .. 32 s + 31) in this layout's order. make_tiled_copy_C lays stmatrix over it.
using EpiMma = decltype(make_tiled_mma(SM90_64x64x16_F32F16F16_SS<GMMA::Major::K, GMMA::Major::K>{}));

struct PipeState {
  int stage = 0;
  uint32_t phase = 0;
  __device__ void advance() {
    if (++stage == Stages) { stage = 0; phase ^= 1; }
  }
};

// ---------------- Part 1: the persistent walk ----------------
// Launch constants of the walk (the host fills them; both roles of every CTA read the same).
struct Schedule {
  int tiles_m, tiles_n, k_tiles;
  int dp_rounds;  // whole tiles per CTA: tiles / grid full waves, data-parallel
  int sk_ctas;    // stream-K: CTAs 0 .. sk_ctas-1 share the remaining tiles' k-tiles ...
  int sk_iters, sk_extra;  // ... sk_iters each, one more for the first sk_extra of them
  // First k-tile of `cta`'s share, counted over the streamed tiles laid end to end.
  __device__ int share_begin(int cta) const {
    const int c = min(cta, sk_ctas);
    return c * sk_iters + min(c, sk_extra);
  }
};
struct Work {
  int tile;                // index in the raster order
  int kt_begin, kt_end;    // the k-tiles of the tile this item computes
};

// The CTA's next work item; `pos` (one int of state) counts whole tiles, then k-tiles of the share.
__device__ bool next_work(const Schedule& s, int& pos, Work& w) {
  const int cta = int(blockIdx.x), ctas = int(gridDim.x);
  if (pos < s.dp_rounds) {  // full waves: CTA c takes tiles c, c + grid, c + 2 grid, ...
    w = Work{cta + pos * ctas, 0, s.k_tiles};
    ++pos;
    return true;
  }
  const int it = s.share_begin(cta) + (pos - s.dp_rounds), end = s.share_begin(cta + 1);
  if (it >= end) return false;
  const int t = it / s.k_tiles;  // streamed tile; its k-tiles are [t * k_tiles, (t + 1) * k_tiles)
  w.tile = s.dp_rounds * ctas + t;
  w.kt_begin = it - t * s.k_tiles;
  w.kt_end = min(s.k_tiles, end - t * s.k_tiles);  // the share may end inside the tile
  pos += w.kt_end - w.kt_begin;
  return true;
}

// Raster: tile index -> (m, n) in groups of 8 tile-rows walked column by column. The ~132 CTAs of
// a wave then work on a block of about 8 x 16 tiles: they read 8 row-panels of A and ~16
// column-panels of B (24 panels, each shared by 8-16 CTAs in L2) instead of, row by row, 1 panel of
// A and all tiles_n panels of B, which for a wide C do not stay in L2 until the next row needs them.
__device__ void tile_coord(const Schedule& s, int tile, int& m, int& n) {
  constexpr int kGroupM = 8;
  const int group = tile / (kGroupM * s.tiles_n), first_m = group * kGroupM;
  const int rows = min(kGroupM, s.tiles_m - first_m);  // the last group may be shorter
  const int in_group = tile - group * kGroupM * s.tiles_n;
  m = first_m + in_group % rows;
  n = in_group / rows;
}

// ---------------- Part 2: stream-K fix-up helpers ----------------
__device__ void store_release(int* p, int v) { asm volatile("st.release.gpu.global.b32 [%0], %1;" ::"l"(p), "r"(v) : "memory"); }
__device__ int load_acquire(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
constexpr int kFixupBarrier = 1;  // named barrier of the 256 consumer threads (0 is __syncthreads)

constexpr int kEpiBarrier = 2;  // + warpgroup - 1: a named barrier per consumer warpgroup

template <class TmaA, class TmaB, class TmaD>
__global__ void __launch_bounds__(kThreads, 1)
    gemm_kernel(const __grid_constant__ TmaA tma_a, const __grid_constant__ TmaB tma_b,
                const __grid_constant__ TmaD tma_d, int M, int N, int K, const Schedule sched, float* partials,
                int* flags) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using FullBarrier = cutlass::arch::ClusterTransactionBarrier;
  using EmptyBarrier = cutlass::arch::ClusterBarrier;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  auto& smem = *reinterpret_cast<SharedStorage*>(smem_raw);
  const int warp_group = threadIdx.x / 128;

  Tensor sA = make_tensor(make_smem_ptr(smem.a), SmemLayoutA{});  // (BM,BK,PIPE)
  Tensor sB = make_tensor(make_smem_ptr(smem.b), SmemLayoutB{});  // (BN,BK,PIPE)

  if (threadIdx.x == 0) {
    prefetch_tma_descriptor(tma_a.get_tma_descriptor());
    prefetch_tma_descriptor(tma_b.get_tma_descriptor());
    prefetch_tma_descriptor(tma_d.get_tma_descriptor());
    for (int s = 0; s < Stages; ++s) {
      FullBarrier::init(&smem.full[s], 1);
      EmptyBarrier::init(&smem.empty[s], 4 * kConsumers);
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();

  if (warp_group == 0) {
    // ---------------- producer: the same walk, loads only ----------------
    cutlass::arch::warpgroup_reg_dealloc<kProducerRegs>();
    if (threadIdx.x == 0) {
      Tensor mA = tma_a.get_tma_tensor(make_shape(M, K));                          // (M,K)
      Tensor mB = tma_b.get_tma_tensor(make_shape(N, K));                          // (N,K)
      Tensor gA = local_tile(mA, Shape<Int<BM>, Int<BK>>{}, make_coord(_, _));    // (BM,BK,m,k)
      Tensor gB = local_tile(mB, Shape<Int<BN>, Int<BK>>{}, make_coord(_, _));    // (BN,BK,n,k)
      Tensor tAgA = tma_a.get_slice(0).partition_S(gA);  // (TMA,TMA_M,TMA_K,m,k)
      Tensor tAsA = tma_a.get_slice(0).partition_D(sA);  // (TMA,TMA_M,TMA_K,PIPE)
      Tensor tBgB = tma_b.get_slice(0).partition_S(gB);  // (TMA,TMA_N,TMA_K,n,k)
      Tensor tBsB = tma_b.get_slice(0).partition_D(sB);  // (TMA,TMA_N,TMA_K,PIPE)
      PipeState w;  // continues across tiles: the ring never drains between them
      int pos = 0;
      for (Work item; next_work(sched, pos, item);) {
        int m, n;
        tile_coord(sched, item.tile, m, n);
        for (int kt = item.kt_begin; kt < item.kt_end; ++kt) {
          EmptyBarrier::wait(&smem.empty[w.stage], w.phase ^ 1);
          FullBarrier::arrive_and_expect_tx(&smem.full[w.stage], kTxBytes);
          copy(tma_a.with(smem.full[w.stage]), tAgA(_, _, _, m, kt), tAsA(_, _, _, w.stage));
          copy(tma_b.with(smem.full[w.stage]), tBgB(_, _, _, n, kt), tBsB(_, _, _, w.stage));
          w.advance();
        }
      }
    }
    return;
  }

  // ---------------- consumers ----------------
  cutlass::arch::warpgroup_reg_alloc<kConsumerRegs>();
  const int ctid = threadIdx.x - 128;
  TiledMma mma;
  auto thr_mma = mma.get_thread_slice(ctid);
  Tensor tCsA = thr_mma.partition_A(sA);        // (MMA,MMA_M,MMA_K,PIPE)
  Tensor tCsB = thr_mma.partition_B(sB);        // (MMA,MMA_N,MMA_K,PIPE)
  Tensor tCrA = thr_mma.make_fragment_A(tCsA);
  Tensor tCrB = thr_mma.make_fragment_B(tCsB);
  Tensor acc = partition_fragment_C(mma, Shape<Int<BM>, Int<BN>>{});  // (MMA,MMA_M,MMA_N) fp32, 128 / thread
  const bool lane0 = threadIdx.x % 32 == 0;

  // Epilogue set-up. C as TMA coordinates, cut into 64 x 64 boxes.
  const int wg = warp_group - 1, wtid = threadIdx.x % 128;  // consumer warpgroup, thread in it
  Tensor mD = tma_d.get_tma_tensor(make_shape(M, N));                         // (M,N)
  Tensor gD = local_tile(mD, Shape<_64, Int<kEpiN>>{}, make_coord(_, _));     // (64,64,M/64,N/64)
  Tensor tDgD = tma_d.get_slice(0).partition_D(gD);                           // (TMA,TMA_M,TMA_N,M/64,N/64)
  auto r2s = make_tiled_copy_C(Copy_Atom<SM90_U32x4_STSM_N, half_t>{}, EpiMma{});  // stmatrix x4
  auto thr_r2s = r2s.get_slice(wtid);
  Tensor rD = make_tensor<half_t>(partition_shape_C(EpiMma{}, Shape<_64, Int<kEpiN>>{}));  // (MMA,1,1) fp16
  Tensor tRSrD = thr_r2s.retile_S(rD);                                                      // (CPY,CPY_M,CPY_N)
  static_assert(decltype(size(rD))::value * (BN / kEpiN) == decltype(size(acc))::value, "sub-tiles cover acc");

  PipeState r;
  int pos = 0;
  for (Work item; next_work(sched, pos, item);) {
    // Mainloop over the item's k-tiles, exactly rung 09's.
    int prev_stage = -1;
    mma.accumulate_ = GMMA::ScaleOut::Zero;
    warpgroup_fence_operand(acc);
    for (int kt = item.kt_begin; kt < item.kt_end; ++kt) {
      FullBarrier::wait(&smem.full[r.stage], r.phase);
      warpgroup_arrive();
      CUTE_UNROLL
      for (int kb = 0; kb < size<2>(tCrA); ++kb) {
        cute::gemm(mma, tCrA(_, _, kb, r.stage), tCrB(_, _, kb, r.stage), acc);
        mma.accumulate_ = GMMA::ScaleOut::One;
      }
      warpgroup_commit_batch();
      warpgroup_wait<1>();
      if (prev_stage >= 0 && lane0) EmptyBarrier::arrive(&smem.empty[prev_stage]);
      prev_stage = r.stage;
      r.advance();
    }
    warpgroup_wait<0>();
    if (lane0) EmptyBarrier::arrive(&smem.empty[prev_stage]);  // every item has >= 1 k-tile
    warpgroup_fence_operand(acc);

    // ---------------- Part 2: stream-K fix-up ----------------
    // A streamed tile's k-tiles may be cut between consecutive CTAs c, c+1, .., c+j. Only the
    // first item of a share can start inside a tile, so each CTA publishes at most one partial:
    // slot = its block index. CTA c+i (i >= 1) computes its part first thing in its share and
    // publishes it (fp32, in fragment order: float4 v of consumer thread t at v * 256 + t, so
    // coalesced and no shuffling); the owner c, which holds k-tile 0 and reaches the tile at the
    // end of its share, adds the slots in the fixed order c+1, c+2, .. (same bits every run) and
    // stores the tile. Deadlock-free: a publisher waits for nobody before publishing, and every
    // CTA is resident at once (grid <= SMs, one CTA per SM: see kSmemBytes). The flags go back
    // to 0 as they are consumed, so the next launch finds them clear without a memset.
    if (item.kt_begin > 0) {  // a publisher: its partial goes to the workspace, no epilogue
      float4* part = reinterpret_cast<float4*>(partials) + size_t(blockIdx.x) * (BM * BN / 4) + ctid;
      CUTE_UNROLL
      for (int v = 0; v < size(acc) / 4; ++v)
        __stcg(part + v * kConsumerThreads, make_float4(acc(4 * v), acc(4 * v + 1), acc(4 * v + 2), acc(4 * v + 3)));
      __threadfence();
      cutlass::arch::NamedBarrier::arrive_and_wait(kConsumerThreads, kFixupBarrier);  // all 256 stored
      if (ctid == 0) store_release(flags + blockIdx.x, 1);
      continue;
    }
    if (item.kt_end < sched.k_tiles) {  // the owner of a tile that continues in later shares
      const int tile_end = (item.tile - sched.dp_rounds * int(gridDim.x) + 1) * sched.k_tiles;  // stream k-tiles
      const int first = int(blockIdx.x) + 1;
      int last = first;  // contributors: first .. last-1, the CTAs whose shares begin inside the tile
      while (sched.share_begin(last) < tile_end) ++last;
      if (ctid == 0)
        for (int c = first; c < last; ++c) {
          while (load_acquire(flags + c) == 0) {
          }
          flags[c] = 0;  // consumed (only this thread reads it): clear for the next launch
        }
      // The acquires above, then this barrier, order the publishers' stores before our loads.
      cutlass::arch::NamedBarrier::arrive_and_wait(kConsumerThreads, kFixupBarrier);
      for (int c = first; c < last; ++c) {
        const float4* part = reinterpret_cast<const float4*>(partials) + size_t(c) * (BM * BN / 4) + ctid;
        CUTE_UNROLL
        for (int v = 0; v < size(acc) / 4; ++v) {
          const float4 x = __ldcg(part + v * kConsumerThreads);
          acc(4 * v) += x.x, acc(4 * v + 1) += x.y, acc(4 * v + 2) += x.z, acc(4 * v + 3) += x.w;
        }
      }
    }

    // Epilogue: per 64 x 64 sub-tile j of this warpgroup's 64 x 256 rows, in buffer j % 2.
    int m, n;
    tile_coord(sched, item.tile, m, n);
    CUTE_UNROLL
    for (int j = 0; j < BN / kEpiN; ++j) {
      // The buffer was last read by the store issued two sub-tiles ago (maybe the previous tile's):
      // bulk groups are per thread, so the issuing thread waits until at most the newest one (the
      // other buffer's) is still reading, then lets the warpgroup overwrite.
      if (wtid == 0) tma_store_wait<kEpiBuffers - 1>();
      cutlass::arch::NamedBarrier::arrive_and_wait(128, kEpiBarrier + wg);
      Tensor sD = make_tensor(make_smem_ptr(smem.d[wg][j % kEpiBuffers]), SmemLayoutD{});  // (64,64)
      CUTE_UNROLL
      for (int i = 0; i < size(rD); ++i) rD(i) = half_t(acc(j * size(rD) + i));
      copy(r2s, tRSrD, thr_r2s.partition_D(sD));  // stmatrix: registers -> swizzled smem
      // stmatrix writes through the generic proxy, TMA reads through the async proxy: each writer
      // fences its writes for the async proxy, then the barrier tells the issuing thread.
      tma_store_fence();
      cutlass::arch::NamedBarrier::arrive_and_wait(128, kEpiBarrier + wg);
      if (wtid == 0) {
        copy(tma_d, tma_d.get_slice(0).partition_S(sD), tDgD(_, _, _, m * kConsumers + wg, n * (BN / kEpiN) + j));
        tma_store_arrive();  // commit this store as a bulk group (what tma_store_wait counts)
      }
    }
  }
  // Shared memory must outlive the reads of the last stores (not their global writes).
  if (wtid == 0) tma_store_wait<0>();
#endif
}

// The stream-K workspace: one BM x BN fp32 partial and one flag per CTA of the grid. The harness
// hands us no workspace, so it is allocated here once and cached (grown if a larger grid ever
// needs more); a real library takes it from the caller (or a pool) instead of owning a global.
struct Workspace {
  float* partials = nullptr;
  int* flags = nullptr;
  int slots = 0;
};
Workspace& workspace(int slots) {
  static Workspace ws;
  if (ws.slots < slots) {
    if (ws.partials) {  // cudaFree waits for the device: no kernel still uses the old buffers
      LADDER_CUDA(cudaFree(ws.partials));
      LADDER_CUDA(cudaFree(ws.flags));
    }
    LADDER_CUDA(cudaMalloc(&ws.partials, size_t(slots) * BM * BN * sizeof(float)));
    LADDER_CUDA(cudaMalloc(&ws.flags, size_t(slots) * sizeof(int)));
    LADDER_CUDA(cudaMemset(ws.flags, 0, size_t(slots) * sizeof(int)));  // kernels leave them 0
    LADDER_CUDA(cudaDeviceSynchronize());
    ws.slots = slots;
  }
  return ws;
}

void launch(const half* A, const half* B, half* C, int M, int N, int K, cudaStream_t stream) {
  Tensor gA = make_tensor(make_gmem_ptr(reinterpret_cast<const half_t*>(A)), make_shape(M, K), make_stride(K, _1{}));
  Tensor gB = make_tensor(make_gmem_ptr(reinterpret_cast<const half_t*>(B)), make_shape(N, K), make_stride(K, _1{}));
  auto tma_a = make_tma_copy(SM90_TMA_LOAD{}, gA, SmemLayoutA{}(_, _, 0));
  auto tma_b = make_tma_copy(SM90_TMA_LOAD{}, gB, SmemLayoutB{}(_, _, 0));
  // C's descriptor: row-major M x N, stored one 64 x 64 swizzled sub-tile (SmemLayoutD) per TMA.
  Tensor gC = make_tensor(make_gmem_ptr(reinterpret_cast<half_t*>(C)), make_shape(M, N), make_stride(N, _1{}));
  auto tma_d = make_tma_copy(SM90_TMA_STORE{}, gC, SmemLayoutD{});
  auto* kernel = &gemm_kernel<decltype(tma_a), decltype(tma_b), decltype(tma_d)>;
  static bool configured = [&] {
    LADDER_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    return true;
  }();
  (void)configured;

  int device = 0, sms = 0;
  LADDER_CUDA(cudaGetDevice(&device));
  LADDER_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  Schedule s{};
  s.tiles_m = M / BM, s.tiles_n = N / BN, s.k_tiles = K / BK;
  const int tiles = s.tiles_m * s.tiles_n, grid = sms;  // one CTA per SM, all resident
  s.dp_rounds = tiles / grid;
  const int sk_tiles = tiles - s.dp_rounds * grid;  // the partial wave (0: none)
  // Stream the partial wave over at most 4 CTAs per tile (shares of >= k_tiles / 4 k-tiles): with
  // one tile left and 132 CTAs, one CTA would otherwise sum 131 partials. And at least 1 k-tile each.
  s.sk_ctas = std::min(grid, sk_tiles * std::min(4, s.k_tiles));
  const int sk_total = sk_tiles * s.k_tiles;
  s.sk_iters = s.sk_ctas ? sk_total / s.sk_ctas : 0;
  s.sk_extra = s.sk_ctas ? sk_total % s.sk_ctas : 0;
  Workspace& ws = workspace(grid);
  kernel<<<grid, kThreads, kSmemBytes, stream>>>(tma_a, tma_b, tma_d, M, N, K, s, ws.partials, ws.flags);
}

}  // namespace rung11

int main(int argc, char** argv) {
  return ladder::run_gemm_rung(argc, argv,
                               ladder::Rung{"11_tma_store_epilogue", 90, 90, rung11::BM, rung11::BN, rung11::BK},
                               rung11::launch);
}
