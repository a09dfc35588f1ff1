// Rung 08: Hopper's two new engines, used the plainest way. TMA copies whole tiles from global to
// shared memory (one instruction per tile, addresses computed by the hardware from a descriptor,
// swizzle applied on the way in), and WGMMA multiplies straight out of shared memory, a whole
// warpgroup (4 warps, 128 threads) per instruction, asynchronously. A ring of `Stages` buffers is
// guarded by one mbarrier per stage that counts the bytes TMA has delivered ("transaction bytes").
// No specialisation yet: thread 0 issues the loads and then computes like everybody else.
//
// Shapes: M % 128 == 0, N % 128 == 0, K % 64 == 0 (no bounds checks: TMA could clip, the plain
// epilogue below could not).
#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>

#include "common/harness.hpp"

using namespace cute;

// A named namespace: nvcc's host stub for a kernel *template* in an anonymous namespace does not
// compile (the rungs with plain kernels use an anonymous one).
namespace rung08 {

constexpr int BM = 128, BN = 128, BK = 64, Stages = 4;
constexpr int kThreads = 128;  // one warpgroup

// Shared memory: CuTe's GMMA 128-byte swizzle atom (8 rows x 64 halves; each row one 128-byte line
// whose 16-byte chunks are XOR-permuted by row % 8) tiled over (rows, BK, Stages). TMA writes this
// layout (it swizzles in hardware) and WGMMA's smem descriptors read it: conflict-free, and no
// ldmatrix or register staging for A and B at all.
using SmemLayoutA = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<half_t>{}, Shape<Int<BM>, Int<BK>, Int<Stages>>{}));
using SmemLayoutB = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<half_t>{}, Shape<Int<BN>, Int<BK>, Int<Stages>>{}));

struct SharedStorage {
  alignas(1024) half_t a[cosize_v<SmemLayoutA>];  // the swizzle pattern repeats every 1024 bytes
  alignas(1024) half_t b[cosize_v<SmemLayoutB>];
  alignas(8) uint64_t full[Stages];  // mbarrier per stage: "this stage's k-tile has landed"
};
// 4 x (16 KB + 16 KB) + barriers = 129 KB (the struct rounds up to 1 KB): above the 48 KB default,
// hence the attribute below.
constexpr int kSmemBytes = int(sizeof(SharedStorage));
static_assert(kSmemBytes <= 227 * 1024, "sm_90 allows 227 KB of dynamic shared memory per CTA");
constexpr uint32_t kTxBytes = (BM + BN) * BK * sizeof(half_t);  // bytes that complete one stage

// WGMMA 64 x 128 x 16, both operands K-major in shared memory ("SS"), fp32 accumulators. One
// warpgroup covers the 128-row tile by issuing it twice along M (cute::gemm walks MMA_M = 2).
using TiledMma = decltype(make_tiled_mma(SM90_64x128x16_F32F16F16_SS<GMMA::Major::K, GMMA::Major::K>{}));

template <class TmaA, class TmaB>
__global__ void __launch_bounds__(kThreads, 1)
    gemm_kernel(const __grid_constant__ TmaA tma_a, const __grid_constant__ TmaB tma_b, half_t* C, int M, int N, int K) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using Barrier = cutlass::arch::ClusterTransactionBarrier;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  auto& smem = *reinterpret_cast<SharedStorage*>(smem_raw);
  const int k_tiles = K / BK;
  const int m_tile = int(blockIdx.x), n_tile = int(blockIdx.y);

  // TMA tensors hold coordinates, not addresses: the descriptor (in the kernel's parameter space,
  // hence __grid_constant__) knows the base pointer, strides and swizzle.
  Tensor mA = tma_a.get_tma_tensor(make_shape(M, K));                                // (M,K)
  Tensor mB = tma_b.get_tma_tensor(make_shape(N, K));                                // (N,K)
  Tensor gA = local_tile(mA, Shape<Int<BM>, Int<BK>>{}, make_coord(m_tile, _));     // (BM,BK,k)
  Tensor gB = local_tile(mB, Shape<Int<BN>, Int<BK>>{}, make_coord(n_tile, _));     // (BN,BK,k)
  Tensor sA = make_tensor(make_smem_ptr(smem.a), SmemLayoutA{});                    // (BM,BK,PIPE)
  Tensor sB = make_tensor(make_smem_ptr(smem.b), SmemLayoutB{});                    // (BN,BK,PIPE)
  // One "thread" of TMA moves the whole box: slice 0 is the only slice.
  Tensor tAgA = tma_a.get_slice(0).partition_S(gA);  // (TMA,TMA_M,TMA_K,k)
  Tensor tAsA = tma_a.get_slice(0).partition_D(sA);  // (TMA,TMA_M,TMA_K,PIPE)
  Tensor tBgB = tma_b.get_slice(0).partition_S(gB);  // (TMA,TMA_N,TMA_K,k)
  Tensor tBsB = tma_b.get_slice(0).partition_D(sB);  // (TMA,TMA_N,TMA_K,PIPE)

  if (threadIdx.x == 0) {
    prefetch_tma_descriptor(tma_a.get_tma_descriptor());
    prefetch_tma_descriptor(tma_b.get_tma_descriptor());
    // Arrival count 1: the one arrive_and_expect_tx below. The phase then completes only once
    // that arrive has happened AND the expected bytes have all been written by TMA.
    for (int s = 0; s < Stages; ++s) Barrier::init(&smem.full[s], 1);
    cutlass::arch::fence_barrier_init();  // make the inits visible to the TMA unit (async proxy)
  }
  __syncthreads();

  // Thread 0 only: load k-tile kt into stage kt % Stages.
  auto issue = [&](int kt) {
    const int s = kt % Stages;
    Barrier::arrive_and_expect_tx(&smem.full[s], kTxBytes);
    copy(tma_a.with(smem.full[s]), tAgA(_, _, _, kt), tAsA(_, _, _, s));
    copy(tma_b.with(smem.full[s]), tBgB(_, _, _, kt), tBsB(_, _, _, s));
  };
  if (threadIdx.x == 0)
    for (int kt = 0; kt < Stages && kt < k_tiles; ++kt) issue(kt);  // prologue: fill the ring

  TiledMma mma;
  auto thr_mma = mma.get_thread_slice(threadIdx.x);
  Tensor tCsA = thr_mma.partition_A(sA);         // (MMA,MMA_M,MMA_K,PIPE)
  Tensor tCsB = thr_mma.partition_B(sB);         // (MMA,MMA_N,MMA_K,PIPE)
  Tensor tCrA = thr_mma.make_fragment_A(tCsA);   // smem *descriptors*, not data: WGMMA reads smem
  Tensor tCrB = thr_mma.make_fragment_B(tCsB);
  Tensor acc = partition_fragment_C(mma, Shape<Int<BM>, Int<BN>>{});  // (MMA,MMA_M,MMA_N) fp32, 128 / thread

  // Mainloop. Stage s receives its n-th k-tile (n = kt / Stages) when its barrier completes phase
  // n, so we wait for parity n & 1. The barrier can't run a phase ahead: a stage is refilled only
  // after every warp has passed the __syncthreads below, i.e. after everybody waited on it.
  mma.accumulate_ = GMMA::ScaleOut::Zero;  // the first WGMMA writes acc instead of adding: no clear()
  warpgroup_fence_operand(acc);            // keep the compiler from moving acc accesses across WGMMAs
  for (int kt = 0; kt < k_tiles; ++kt) {
    const int s = kt % Stages;
    Barrier::wait(&smem.full[s], (kt / Stages) & 1);
    warpgroup_arrive();  // wgmma.fence: earlier register and smem writes are visible to WGMMA
    CUTE_UNROLL
    for (int kb = 0; kb < size<2>(tCrA); ++kb) {  // BK / 16 = 4 k-blocks, 2 WGMMAs (MMA_M) each
      cute::gemm(mma, tCrA(_, _, kb, s), tCrB(_, _, kb, s), acc);
      mma.accumulate_ = GMMA::ScaleOut::One;
    }
    warpgroup_commit_batch();  // this k-tile's WGMMAs form one group...
    warpgroup_wait<1>();       // ...and we only wait for the *previous* group: one stays in flight
    // The previous stage has been read by this warp's WGMMAs; the barrier makes it all 4 warps'
    // before thread 0 lets TMA overwrite it with the k-tile `Stages` further on.
    __syncthreads();
    if (threadIdx.x == 0 && kt >= 1 && kt - 1 + Stages < k_tiles) issue(kt - 1 + Stages);
  }
  warpgroup_wait<0>();
  warpgroup_fence_operand(acc);

  // Plain epilogue: every thread writes its accumulators to C, two adjacent columns (acc(i),
  // acc(i + 1), i even) as one half2. The WGMMA fragment gives each warp 16 rows, a quad of lanes
  // 8 consecutive columns: 16-byte pieces per row, not coalesced (rung 11 fixes that).
  Tensor mC = make_tensor(make_gmem_ptr(C), make_shape(M, N), make_stride(N, _1{}));  // (M,N)
  Tensor gC = local_tile(mC, Shape<Int<BM>, Int<BN>>{}, make_coord(m_tile, n_tile));  // (BM,BN)
  Tensor tCgC = thr_mma.partition_C(gC);                                               // (MMA,MMA_M,MMA_N)
  CUTE_UNROLL
  for (int i = 0; i < size(acc); i += 2)
    *reinterpret_cast<__half2*>(&tCgC(i)) = __floats2half2_rn(acc(i), acc(i + 1));
#endif
}

void launch(const half* A, const half* B, half* C, int M, int N, int K, cudaStream_t stream) {
  // Host side: one TMA descriptor per operand, built from the global tensor and one stage's smem
  // layout (which fixes the box, BM x BK, and the 128-byte swizzle).
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

}  // namespace rung08

int main(int argc, char** argv) {
  return ladder::run_gemm_rung(argc, argv, ladder::Rung{"08_tma_wgmma", 90, 90, rung08::BM, rung08::BN, rung08::BK},
                                rung08::launch);
}
