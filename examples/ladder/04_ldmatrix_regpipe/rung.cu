// Rung 04 - ldmatrix and a register double buffer. Rung 03 plus two ideas on the shared ->
// register leg:
//  * ldmatrix (SM75_U32x4_LDSM_N): one instruction per warp loads four 8x8 fp16 matrices and
//    hands every lane exactly the pairs the mma.sync fragment wants - 4x fewer shared-memory
//    instructions than 32-bit loads, and the fragment shuffle is done by the hardware.
//  * The K tile (32) is two k-blocks of 16. While the MMAs of k-block kb run, the ldmatrix of
//    k-block kb+1 is already issued into the other half of the fragment: a second, register-level
//    pipeline inside the shared-memory one, so the MMAs do not wait on shared-memory latency.
#include "common/harness.hpp"

#include <cute/tensor.hpp>

using namespace cute;

namespace rung {

constexpr int kTileM = 128, kTileN = 128, kTileK = 32;
constexpr int kThreads = 128;  // 4 warps
constexpr int kDefaultStages = 3;

using TiledMma = decltype(make_tiled_mma(SM80_16x8x16_F32F16F16F32_TN{},
                                         Layout<Shape<_2, _2, _1>>{},  // warps: 2 (M) x 2 (N)
                                         Tile<_32, _32, _16>{}));

// (BM,BK,PIPE), K-major within a stage; no swizzle yet (rung 05).
template <int kStages>
using SmemLayoutA = Layout<Shape<Int<kTileM>, Int<kTileK>, Int<kStages>>,
                           Stride<Int<kTileK>, _1, Int<kTileM * kTileK>>>;
template <int kStages>
using SmemLayoutB = Layout<Shape<Int<kTileN>, Int<kTileK>, Int<kStages>>,
                           Stride<Int<kTileK>, _1, Int<kTileN * kTileK>>>;

// Global -> shared: cp.async, 16 bytes per thread, as in rung 03.
using G2SCopy = decltype(make_tiled_copy(Copy_Atom<SM80_CP_ASYNC_CACHEGLOBAL<uint128_t>, half_t>{},
                                         Layout<Shape<_32, _4>, Stride<_4, _1>>{},  // threads (32,4)
                                         Layout<Shape<_1, _8>>{}));                // values (1,8)

template <int kStages>
__global__ void __launch_bounds__(kThreads) gemm_kernel(const half_t* A, const half_t* B, half_t* C,
                                                         int M, int N, int K) {
  Tensor mA = make_tensor(make_gmem_ptr(A), make_shape(M, K), make_stride(K, _1{}));  // (M,K)
  Tensor mB = make_tensor(make_gmem_ptr(B), make_shape(N, K), make_stride(K, _1{}));  // (N,K)
  Tensor mC = make_tensor(make_gmem_ptr(C), make_shape(M, N), make_stride(N, _1{}));  // (M,N)

  auto cta_tiler = make_shape(Int<kTileM>{}, Int<kTileN>{}, Int<kTileK>{});
  auto cta_coord = make_coord(blockIdx.x, blockIdx.y, _);
  Tensor gA = local_tile(mA, cta_tiler, cta_coord, Step<_1, X, _1>{});  // (BM,BK,k)
  Tensor gB = local_tile(mB, cta_tiler, cta_coord, Step<X, _1, _1>{});  // (BN,BK,k)
  Tensor gC = local_tile(mC, cta_tiler, cta_coord, Step<_1, _1, X>{});  // (BM,BN)

  extern __shared__ __align__(128) unsigned char smem[];
  half_t* smem_a = reinterpret_cast<half_t*>(smem);
  half_t* smem_b = smem_a + cosize_v<SmemLayoutA<kStages>>;
  Tensor sA = make_tensor(make_smem_ptr(smem_a), SmemLayoutA<kStages>{});  // (BM,BK,PIPE)
  Tensor sB = make_tensor(make_smem_ptr(smem_b), SmemLayoutB<kStages>{});  // (BN,BK,PIPE)

  G2SCopy g2s;
  ThrCopy thr_g2s = g2s.get_slice(threadIdx.x);
  Tensor tAgA = thr_g2s.partition_S(gA);  // (CPY,CPY_M,CPY_K,k)
  Tensor tAsA = thr_g2s.partition_D(sA);  // (CPY,CPY_M,CPY_K,PIPE)
  Tensor tBgB = thr_g2s.partition_S(gB);  // (CPY,CPY_N,CPY_K,k)
  Tensor tBsB = thr_g2s.partition_D(sB);  // (CPY,CPY_N,CPY_K,PIPE)

  TiledMma mma;
  ThrMMA thr_mma = mma.get_slice(threadIdx.x);
  Tensor tCrA = thr_mma.partition_fragment_A(sA(_, _, 0));  // (MMA,MMA_M,MMA_K) MMA_K = 2 k-blocks
  Tensor tCrB = thr_mma.partition_fragment_B(sB(_, _, 0));  // (MMA,MMA_N,MMA_K)
  Tensor tCgC = thr_mma.partition_C(gC);                     // (MMA,MMA_M,MMA_N)
  Tensor tCrC = thr_mma.make_fragment_C(tCgC);               // (MMA,MMA_M,MMA_N) fp32
  clear(tCrC);

  // New: shared -> registers by ldmatrix. make_tiled_copy_A/B arrange the LDSM atoms to produce the
  // MMA's fragment layout; retile_D views the MMA fragment in the copy's (CPY,..) shape.
  auto s2r_A = make_tiled_copy_A(Copy_Atom<SM75_U32x4_LDSM_N, half_t>{}, mma);
  auto s2r_B = make_tiled_copy_B(Copy_Atom<SM75_U32x4_LDSM_N, half_t>{}, mma);
  ThrCopy thr_s2r_A = s2r_A.get_slice(threadIdx.x);
  ThrCopy thr_s2r_B = s2r_B.get_slice(threadIdx.x);
  Tensor tXsA = thr_s2r_A.partition_S(sA);  // (CPY,CPY_M,CPY_K,PIPE)
  Tensor tXrA = thr_s2r_A.retile_D(tCrA);   // (CPY,CPY_M,CPY_K)
  Tensor tXsB = thr_s2r_B.partition_S(sB);  // (CPY,CPY_N,CPY_K,PIPE)
  Tensor tXrB = thr_s2r_B.retile_D(tCrB);   // (CPY,CPY_N,CPY_K)

  const int k_tiles = size<2>(gA);
  constexpr int kBlocks = size<2>(tCrA);  // k-blocks per K tile: 32 / 16 = 2

  CUTE_UNROLL
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < k_tiles) {
      copy(g2s, tAgA(_, _, _, s), tAsA(_, _, _, s));
      copy(g2s, tBgB(_, _, _, s), tBsB(_, _, _, s));
    }
    cp_async_fence();  // group i always means tile i (empty groups past the end)
  }

  // Register pipeline prologue: wait for tile 0 and load its k-block 0.
  cp_async_wait<kStages - 2>();
  __syncthreads();
  copy(s2r_A, tXsA(_, _, 0, 0), tXrA(_, _, 0));
  copy(s2r_B, tXsB(_, _, 0, 0), tXrB(_, _, 0));

  for (int k = 0; k < k_tiles; ++k) {
    int stage = k % kStages;
    CUTE_UNROLL
    for (int kb = 0; kb < kBlocks; ++kb) {
      if (kb == kBlocks - 1) {
        // The last k-block's fragments are already in registers: move the shared-memory
        // pipeline on. After this wait + barrier tile k+1 has landed, and every warp has issued
        // all its ldmatrix of tile k, so tile k's stage may be overwritten next iteration.
        cp_async_wait<kStages - 2>();
        __syncthreads();
        stage = (k + 1) % kStages;
      }
      // Load k-block kb+1 (of this tile, or k-block 0 of the next) while kb is multiplied.
      const int kb_next = (kb + 1) % kBlocks;
      copy(s2r_A, tXsA(_, _, kb_next, stage), tXrA(_, _, kb_next));
      copy(s2r_B, tXsB(_, _, kb_next, stage), tXrB(_, _, kb_next));
      if (kb == 0) {
        // Refill the stage read in iteration k-1 with tile k+kStages-1. Safe: every warp passed
        // the barrier at the end of iteration k-1, after its last ldmatrix of that stage.
        const int k_next = k + kStages - 1;
        if (k_next < k_tiles) {
          copy(g2s, tAgA(_, _, _, k_next), tAsA(_, _, _, k_next % kStages));
          copy(g2s, tBgB(_, _, _, k_next), tBsB(_, _, _, k_next % kStages));
        }
        cp_async_fence();
      }
      gemm(mma, tCrA(_, _, kb), tCrB(_, _, kb), tCrC);
    }
  }

  Tensor tCrD = make_fragment_like<half_t>(tCrC);
  CUTE_UNROLL
  for (int i = 0; i < size(tCrC); ++i) tCrD(i) = half_t(tCrC(i));
  copy(AutoVectorizingCopyWithAssumedAlignment<32>{}, tCrD, tCgC);
}

template <int kStages>
void launch_stages(const half* A, const half* B, half* C, int M, int N, int K, cudaStream_t stream) {
  constexpr int smem_bytes = (cosize_v<SmemLayoutA<kStages>> + cosize_v<SmemLayoutB<kStages>>) * sizeof(half_t);
  if constexpr (smem_bytes > 48 * 1024)
    LADDER_CUDA(cudaFuncSetAttribute(gemm_kernel<kStages>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes));
  dim3 grid(M / kTileM, N / kTileN);
  gemm_kernel<kStages><<<grid, kThreads, smem_bytes, stream>>>(reinterpret_cast<const half_t*>(A),
                                                               reinterpret_cast<const half_t*>(B),
                                                               reinterpret_cast<half_t*>(C), M, N, K);
}

}  // namespace rung

int main(int argc, char** argv) {
  return ladder::run_gemm_rung(argc, argv,
                                {"04_ldmatrix_regpipe", 80, 0, rung::kTileM, rung::kTileN, rung::kTileK},
                                rung::launch_stages<rung::kDefaultStages>);
}
