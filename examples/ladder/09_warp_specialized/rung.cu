// Rung 09: warp specialisation. Rung 08's one warpgroup both fed the ring and computed, and
// synchronised the whole CTA once per k-tile before a stage could be refilled. Here the roles
// split:
//   warpgroup 0 (producer): one thread issues TMA loads, nothing else. It gives most of its
//     registers away (setmaxnreg 40).
//   warpgroups 1, 2 (consumers): WGMMA only, cooperatively on one 128 x 256 tile, 64 rows each,
//     with the producer's registers (setmaxnreg 232): 128 fp32 accumulators per thread.
// They talk through two mbarriers per stage: `full` (TMA's bytes have landed: producer -> consumers)
// and `empty` (every consumer warp is done reading: consumers -> producer). Nobody waits on a
// CTA-wide barrier in the mainloop any more: each side only waits for the other when the ring is
// really empty or really full.
//
// Shapes: M % 128 == 0, N % 256 == 0, K % 64 == 0.
#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>

#include "common/harness.hpp"

using namespace cute;

namespace rung09 {  // named: nvcc's host stub of a kernel template fails in an anonymous namespace

constexpr int BM = 128, BN = 256, BK = 64, Stages = 4;
constexpr int kConsumers = BM / 64;               // consumer warpgroups, 64 rows each
constexpr int kThreads = 128 * (1 + kConsumers);  // + the producer warpgroup = 384
// setmaxnreg: 384 threads x 168 registers fill the 64K register file (what __launch_bounds__(384, 1)
// lets ptxas use). The producer needs few, so it hands them over: 128 x 40 + 256 x 232 = 64512.
constexpr int kProducerRegs = 40, kConsumerRegs = 232;

using SmemLayoutA = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<half_t>{}, Shape<Int<BM>, Int<BK>, Int<Stages>>{}));
using SmemLayoutB = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<half_t>{}, Shape<Int<BN>, Int<BK>, Int<Stages>>{}));

struct SharedStorage {
  alignas(1024) half_t a[cosize_v<SmemLayoutA>];
  alignas(1024) half_t b[cosize_v<SmemLayoutB>];
  alignas(8) uint64_t full[Stages];  // producer -> consumers: stage holds its k-tile
  uint64_t empty[Stages];            // consumers -> producer: stage may be overwritten
};
// 4 x (16 KB + 32 KB) + barriers = 193 KB (the struct rounds up to 1 KB).
constexpr int kSmemBytes = int(sizeof(SharedStorage));
static_assert(kSmemBytes <= 227 * 1024, "sm_90 allows 227 KB of dynamic shared memory per CTA");
constexpr uint32_t kTxBytes = (BM + BN) * BK * sizeof(half_t);

// WGMMA 64 x 256 x 16; the two consumer warpgroups are laid along M (64 rows each).
using TiledMma = decltype(make_tiled_mma(SM90_64x256x16_F32F16F16_SS<GMMA::Major::K, GMMA::Major::K>{},
                                         Layout<Shape<Int<kConsumers>, _1, _1>>{}));

// Where a side is in the ring: the stage, and the parity of the barrier phase it waits for. Both
// sides walk the same sequence (stage 0, 1, .., Stages-1, 0, ..), flipping the parity per lap.
struct PipeState {
  int stage = 0;
  uint32_t phase = 0;
  __device__ void advance() {
    if (++stage == Stages) { stage = 0; phase ^= 1; }
  }
};

template <class TmaA, class TmaB>
__global__ void __launch_bounds__(kThreads, 1)
    gemm_kernel(const __grid_constant__ TmaA tma_a, const __grid_constant__ TmaB tma_b, half_t* C, int M, int N, int K) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using FullBarrier = cutlass::arch::ClusterTransactionBarrier;
  using EmptyBarrier = cutlass::arch::ClusterBarrier;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  auto& smem = *reinterpret_cast<SharedStorage*>(smem_raw);
  const int k_tiles = K / BK;
  const int m_tile = int(blockIdx.x), n_tile = int(blockIdx.y);
  const int warp_group = threadIdx.x / 128;

  Tensor sA = make_tensor(make_smem_ptr(smem.a), SmemLayoutA{});  // (BM,BK,PIPE)
  Tensor sB = make_tensor(make_smem_ptr(smem.b), SmemLayoutB{});  // (BN,BK,PIPE)

  if (threadIdx.x == 0) {
    prefetch_tma_descriptor(tma_a.get_tma_descriptor());
    prefetch_tma_descriptor(tma_b.get_tma_descriptor());
    for (int s = 0; s < Stages; ++s) {
      FullBarrier::init(&smem.full[s], 1);               // the producer's arrive (+ TMA's bytes)
      EmptyBarrier::init(&smem.empty[s], 4 * kConsumers);  // one arrive per consumer warp
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();  // the last CTA-wide barrier: from here on the roles only meet at mbarriers

  if (warp_group == 0) {
    // ---------------- producer ----------------
    cutlass::arch::warpgroup_reg_dealloc<kProducerRegs>();  // all 128 threads execute setmaxnreg
    if (threadIdx.x == 0) {
      Tensor mA = tma_a.get_tma_tensor(make_shape(M, K));                              // (M,K)
      Tensor mB = tma_b.get_tma_tensor(make_shape(N, K));                              // (N,K)
      Tensor gA = local_tile(mA, Shape<Int<BM>, Int<BK>>{}, make_coord(m_tile, _));   // (BM,BK,k)
      Tensor gB = local_tile(mB, Shape<Int<BN>, Int<BK>>{}, make_coord(n_tile, _));   // (BN,BK,k)
      Tensor tAgA = tma_a.get_slice(0).partition_S(gA);  // (TMA,TMA_M,TMA_K,k)
      Tensor tAsA = tma_a.get_slice(0).partition_D(sA);  // (TMA,TMA_M,TMA_K,PIPE)
      Tensor tBgB = tma_b.get_slice(0).partition_S(gB);  // (TMA,TMA_N,TMA_K,k)
      Tensor tBsB = tma_b.get_slice(0).partition_D(sB);  // (TMA,TMA_N,TMA_K,PIPE)
      PipeState w;
      for (int kt = 0; kt < k_tiles; ++kt) {
        // Fill n of a stage (lap n of the ring) needs release n-1: completed phase n-1, parity
        // (n-1) & 1 = phase ^ 1. On the first lap that is "phase -1", which a fresh barrier (in
        // phase 0) reports as complete: the empty ring is free without any arrive.
        EmptyBarrier::wait(&smem.empty[w.stage], w.phase ^ 1);
        FullBarrier::arrive_and_expect_tx(&smem.full[w.stage], kTxBytes);
        copy(tma_a.with(smem.full[w.stage]), tAgA(_, _, _, kt), tAsA(_, _, _, w.stage));
        copy(tma_b.with(smem.full[w.stage]), tBgB(_, _, _, kt), tBsB(_, _, _, w.stage));
        w.advance();
      }
    }
    // The producer may leave while its loads are in flight: they complete on the barriers, and
    // the CTA (its shared memory) lives until the consumers are done.
    return;
  }

  // ---------------- consumers ----------------
  cutlass::arch::warpgroup_reg_alloc<kConsumerRegs>();
  const int ctid = threadIdx.x - 128;  // thread index among the consumers
  TiledMma mma;
  auto thr_mma = mma.get_thread_slice(ctid);
  Tensor tCsA = thr_mma.partition_A(sA);        // (MMA,MMA_M,MMA_K,PIPE): this warpgroup's 64 rows
  Tensor tCsB = thr_mma.partition_B(sB);        // (MMA,MMA_N,MMA_K,PIPE)
  Tensor tCrA = thr_mma.make_fragment_A(tCsA);  // smem descriptors
  Tensor tCrB = thr_mma.make_fragment_B(tCsB);
  Tensor acc = partition_fragment_C(mma, Shape<Int<BM>, Int<BN>>{});  // (MMA,MMA_M,MMA_N) fp32, 128 / thread

  // Mainloop: one batch of BK/16 WGMMAs per k-tile, one batch kept in flight; a stage goes back to
  // the producer once the batch that read it has retired (warpgroup_wait<1> after the next one's
  // commit). Lane 0 of each warp arrives for its warp: WGMMA completion is tracked per warp.
  const bool lane0 = threadIdx.x % 32 == 0;
  PipeState r;
  int prev_stage = -1;
  mma.accumulate_ = GMMA::ScaleOut::Zero;
  warpgroup_fence_operand(acc);
  for (int kt = 0; kt < k_tiles; ++kt) {
    FullBarrier::wait(&smem.full[r.stage], r.phase);  // lap n's fill completed phase n: parity n & 1
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
  if (lane0) EmptyBarrier::arrive(&smem.empty[prev_stage]);  // k_tiles >= 1: prev_stage is set
  warpgroup_fence_operand(acc);

  // Plain epilogue, as in rung 08.
  Tensor mC = make_tensor(make_gmem_ptr(C), make_shape(M, N), make_stride(N, _1{}));  // (M,N)
  Tensor gC = local_tile(mC, Shape<Int<BM>, Int<BN>>{}, make_coord(m_tile, n_tile));  // (BM,BN)
  Tensor tCgC = thr_mma.partition_C(gC);                                               // (MMA,MMA_M,MMA_N)
  CUTE_UNROLL
  for (int i = 0; i < size(acc); i += 2)
    *reinterpret_cast<__half2*>(&tCgC(i)) = __floats2half2_rn(acc(i), acc(i + 1));
#endif
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
  kernel<<<dim3(M / BM, N / BN), kThreads, kSmemBytes, stream>>>(tma_a, tma_b, reinterpret_cast<half_t*>(C), M, N, K);
}

}  // namespace rung09

int main(int argc, char** argv) {
  return ladder::run_gemm_rung(argc, argv, ladder::Rung{"09_warp_specialized", 90, 90, rung09::BM, rung09::BN, rung09::BK},
                               rung09::launch);
}
