// Rung 10: a persistent kernel with a tile scheduler, then stream-K for the partial last wave.
// Rung 09 launched one CTA per output tile. Here the grid is one CTA per SM, and each CTA walks a
// list of work items (tile, k-tile range). Both roles walk the same list: the producer streams
// the k-tiles of item after item through the ring without draining it between tiles (the next
// tile's loads run under this tile's epilogue), the consumers compute and store.
//
// Part 1 (the walk): tiles in a grouped raster order, whole tiles first.
// Part 2 (stream-K): when the tile count is not a multiple of the grid, the tiles of the partial
//   last wave are not given out whole; their k-tiles are laid end to end and cut into equal
//   shares, one per CTA. Partial tiles meet again in a deterministic fix-up (see below).
//
// Shapes: M % 128 == 0, N % 256 == 0, K % 64 == 0.
#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>

#include "common/harness.hpp"

using namespace cute;

namespace rung10 {  // named: nvcc's host stub of a kernel template fails in an anonymous namespace

constexpr int BM = 128, BN = 256, BK = 64, Stages = 4;
constexpr int kConsumers = BM / 64;
constexpr int kThreads = 128 * (1 + kConsumers);
constexpr int kConsumerThreads = 128 * kConsumers;
constexpr int kProducerRegs = 40, kConsumerRegs = 232;

using SmemLayoutA = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<half_t>{}, Shape<Int<BM>, Int<BK>, Int<Stages>>{}));
using SmemLayoutB = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<half_t>{}, Shape<Int<BN>, Int<BK>, Int<Stages>>{}));

struct SharedStorage {
  alignas(1024) half_t a[cosize_v<SmemLayoutA>];
  alignas(1024) half_t b[cosize_v<SmemLayoutB>];
  alignas(8) uint64_t full[Stages];
  uint64_t empty[Stages];
};
// 193 KB: more than half of an SM's 228 KB, so exactly one CTA fits per SM (stream-K relies on it).
constexpr int kSmemBytes = int(sizeof(SharedStorage));
static_assert(kSmemBytes <= 227 * 1024 && 2 * kSmemBytes > 228 * 1024, "one CTA per SM");
constexpr uint32_t kTxBytes = (BM + BN) * BK * sizeof(half_t);

using TiledMma = decltype(make_tiled_mma(SM90_64x256x16_F32F16F16_SS<GMMA::Major::K, GMMA::Major::K>{},
                                         Layout<Shape<Int<kConsumers>, _1, _1>>{}));

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

template <class TmaA, class TmaB>
__global__ void __launch_bounds__(kThreads, 1)
    gemm_kernel(const __grid_constant__ TmaA tma_a, const __grid_constant__ TmaB tma_b, half_t* C, int M, int N, int K,
                const Schedule sched, float* partials, int* flags) {
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
  Tensor mC = make_tensor(make_gmem_ptr(C), make_shape(M, N), make_stride(N, _1{}));  // (M,N)
  const bool lane0 = threadIdx.x % 32 == 0;

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

    // Plain epilogue, as in rung 09, at the item's tile.
    int m, n;
    tile_coord(sched, item.tile, m, n);
    Tensor gC = local_tile(mC, Shape<Int<BM>, Int<BN>>{}, make_coord(m, n));  // (BM,BN)
    Tensor tCgC = thr_mma.partition_C(gC);                                      // (MMA,MMA_M,MMA_N)
    CUTE_UNROLL
    for (int i = 0; i < size(acc); i += 2)
      *reinterpret_cast<__half2*>(&tCgC(i)) = __floats2half2_rn(acc(i), acc(i + 1));
  }
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
  auto* kernel = &gemm_kernel<decltype(tma_a), decltype(tma_b)>;
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
  kernel<<<grid, kThreads, kSmemBytes, stream>>>(tma_a, tma_b, reinterpret_cast<half_t*>(C), M, N, K, s, ws.partials,
                                                 ws.flags);
}

}  // namespace rung10

int main(int argc, char** argv) {
  return ladder::run_gemm_rung(argc, argv,
                               ladder::Rung{"10_persistent_streamk", 90, 90, rung10::BM, rung10::BN, rung10::BK},
                               rung10::launch);
}
