// Rung 02 - shared-memory tiling. Rung 01 plus one idea: the CTA first copies its 128x32 tiles of
// A and B into shared memory (all 128 threads, 128-bit loads), and the four warps then read their
// MMA fragments from there. Each element of A is now fetched from global memory once per CTA
// instead of once per warp column (twice), and the global loads are wide and coalesced.
// One stage, two barriers per K tile: loading and computing do not overlap yet (rung 03).
#include "common/harness.hpp"

#include <cute/tensor.hpp>

using namespace cute;

namespace rung {

constexpr int kTileM = 128, kTileN = 128, kTileK = 32;
constexpr int kThreads = 128;  // 4 warps

using TiledMma = decltype(make_tiled_mma(SM80_16x8x16_F32F16F16F32_TN{},
                                         Layout<Shape<_2, _2, _1>>{},  // warps: 2 (M) x 2 (N)
                                         Tile<_32, _32, _16>{}));

// Shared-memory tiles, plain K-major (row-major) 128x32 halves: 64-byte rows.
using SmemLayoutA = Layout<Shape<Int<kTileM>, Int<kTileK>>, Stride<Int<kTileK>, _1>>;  // (BM,BK)
using SmemLayoutB = Layout<Shape<Int<kTileN>, Int<kTileK>>, Stride<Int<kTileK>, _1>>;  // (BN,BK)

// Global -> shared: each thread moves 8 halves (128 bits); 4 threads cover one 32-half row, so
// the 128 threads copy a 32x32 block per step, 4 steps per 128x32 tile. Consecutive threads read
// consecutive 16 bytes: a warp's load is 8 rows x 64 contiguous bytes, every byte used.
using G2SCopy = decltype(make_tiled_copy(Copy_Atom<UniversalCopy<uint128_t>, half_t>{},
                                         Layout<Shape<_32, _4>, Stride<_4, _1>>{},  // threads (32,4)
                                         Layout<Shape<_1, _8>>{}));                // values (1,8)

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

  __shared__ alignas(128) half_t smem_a[cosize_v<SmemLayoutA>];
  __shared__ alignas(128) half_t smem_b[cosize_v<SmemLayoutB>];
  Tensor sA = make_tensor(make_smem_ptr(smem_a), SmemLayoutA{});  // (BM,BK)
  Tensor sB = make_tensor(make_smem_ptr(smem_b), SmemLayoutB{});  // (BN,BK)

  // New: the global -> shared copy, partitioned over all threads of the CTA.
  G2SCopy g2s;
  ThrCopy thr_g2s = g2s.get_slice(threadIdx.x);
  Tensor tAgA = thr_g2s.partition_S(gA);  // (CPY,CPY_M,CPY_K,k)  = ((8),4,1,k)
  Tensor tAsA = thr_g2s.partition_D(sA);  // (CPY,CPY_M,CPY_K)
  Tensor tBgB = thr_g2s.partition_S(gB);  // (CPY,CPY_N,CPY_K,k)
  Tensor tBsB = thr_g2s.partition_D(sB);  // (CPY,CPY_N,CPY_K)

  TiledMma mma;
  ThrMMA thr_mma = mma.get_slice(threadIdx.x);
  Tensor tCsA = thr_mma.partition_A(sA);                // (MMA,MMA_M,MMA_K) shared
  Tensor tCsB = thr_mma.partition_B(sB);                // (MMA,MMA_N,MMA_K) shared
  Tensor tCrA = thr_mma.make_fragment_A(tCsA);          // (MMA,MMA_M,MMA_K) registers
  Tensor tCrB = thr_mma.make_fragment_B(tCsB);          // (MMA,MMA_N,MMA_K) registers
  Tensor tCgC = thr_mma.partition_C(gC);                // (MMA,MMA_M,MMA_N)
  Tensor tCrC = thr_mma.make_fragment_C(tCgC);          // (MMA,MMA_M,MMA_N) fp32
  clear(tCrC);

  const int k_tiles = size<2>(gA);
  for (int k = 0; k < k_tiles; ++k) {
    copy(g2s, tAgA(_, _, _, k), tAsA);  // 128-bit global loads, 128-bit shared stores
    copy(g2s, tBgB(_, _, _, k), tBsB);
    __syncthreads();                    // the tile is complete before any warp reads it
    // Shared -> registers with 32-bit loads in the MMA's fragment order, then the MMAs.
    copy(AutoVectorizingCopyWithAssumedAlignment<32>{}, tCsA, tCrA);
    copy(AutoVectorizingCopyWithAssumedAlignment<32>{}, tCsB, tCrB);
    gemm(mma, tCrA, tCrB, tCrC);
    __syncthreads();                    // every warp has read the tile before it is overwritten
  }

  Tensor tCrD = make_fragment_like<half_t>(tCrC);
  CUTE_UNROLL
  for (int i = 0; i < size(tCrC); ++i) tCrD(i) = half_t(tCrC(i));
  copy(AutoVectorizingCopyWithAssumedAlignment<32>{}, tCrD, tCgC);
}

void launch(const half* A, const half* B, half* C, int M, int N, int K, cudaStream_t stream) {
  dim3 grid(M / kTileM, N / kTileN);
  gemm_kernel<<<grid, kThreads, 0, stream>>>(reinterpret_cast<const half_t*>(A),
                                             reinterpret_cast<const half_t*>(B),
                                             reinterpret_cast<half_t*>(C), M, N, K);
}

}  // namespace rung

int main(int argc, char** argv) {
  return ladder::run_gemm_rung(argc, argv, {"02_smem_tiling", 80, 0, rung::kTileM, rung::kTileN, rung::kTileK},
                                rung::launch);
}
