// Rung 01 - CuTe basics: a tiled tensor-core GEMM built from layouts, a copy atom and an MMA atom.
//   C[M,N] = A[M,K] * B[N,K]^T, fp16 in, fp32 accumulate, fp16 out (the "TN" GEMM).
// Each CTA owns a 128x128 tile of C and walks K in 32-wide tiles. Operands go straight from
// global memory into registers: no shared memory, so every warp fetches its own A and B (the
// only reuse is whatever L1/L2 catch). Everything later rungs add is about that data movement.
#include "common/harness.hpp"

#include <cute/tensor.hpp>

using namespace cute;

namespace rung {

constexpr int kTileM = 128, kTileN = 128, kTileK = 32;
constexpr int kThreads = 128;  // 4 warps

// The MMA atom is one warp's mma.sync.m16n8k16 (fp16 x fp16 -> fp32, A and B K-major = "TN").
// 2x2 warps tile it to 32x16x16; the Tile<_32,_32,_16> permutation lets each warp take two atoms
// side by side along N, so one step of the tiled MMA covers 32x32x16. Over the CTA's 128x128x32
// tile each thread then owns (128/32) x (128/32) x (32/16) MMA steps: 4 x 4 x 2.
using TiledMma = decltype(make_tiled_mma(SM80_16x8x16_F32F16F16F32_TN{},
                                         Layout<Shape<_2, _2, _1>>{},  // warps: 2 (M) x 2 (N)
                                         Tile<_32, _32, _16>{}));

__global__ void __launch_bounds__(kThreads) gemm_kernel(const half_t* A, const half_t* B, half_t* C,
                                                         int M, int N, int K) {
  // Whole matrices as CuTe tensors: (shape):(stride). A and B are K-major, C is N-major.
  Tensor mA = make_tensor(make_gmem_ptr(A), make_shape(M, K), make_stride(K, _1{}));  // (M,K)
  Tensor mB = make_tensor(make_gmem_ptr(B), make_shape(N, K), make_stride(K, _1{}));  // (N,K)
  Tensor mC = make_tensor(make_gmem_ptr(C), make_shape(M, N), make_stride(N, _1{}));  // (M,N)

  // This CTA's tiles. The K mode of gA/gB is left as a loop index k.
  auto cta_tiler = make_shape(Int<kTileM>{}, Int<kTileN>{}, Int<kTileK>{});
  auto cta_coord = make_coord(blockIdx.x, blockIdx.y, _);
  Tensor gA = local_tile(mA, cta_tiler, cta_coord, Step<_1, X, _1>{});  // (BM,BK,k)
  Tensor gB = local_tile(mB, cta_tiler, cta_coord, Step<X, _1, _1>{});  // (BN,BK,k)
  Tensor gC = local_tile(mC, cta_tiler, cta_coord, Step<_1, _1, X>{});  // (BM,BN)

  // The tiled MMA says which elements of A, B and C each thread holds (its "fragments").
  TiledMma mma;
  ThrMMA thr_mma = mma.get_slice(threadIdx.x);
  Tensor tCrA = thr_mma.partition_fragment_A(gA(_, _, 0));  // (MMA,MMA_M,MMA_K) registers
  Tensor tCrB = thr_mma.partition_fragment_B(gB(_, _, 0));  // (MMA,MMA_N,MMA_K) registers
  Tensor tCgC = thr_mma.partition_C(gC);                     // (MMA,MMA_M,MMA_N) global
  Tensor tCrC = thr_mma.make_fragment_C(tCgC);               // (MMA,MMA_M,MMA_N) fp32 accumulators
  clear(tCrC);

  // Copy atom: a 32-bit load per instruction. make_tiled_copy_A/B lay copy atoms over threads
  // exactly as the MMA lays its operand fragments, so a thread loads what it will multiply
  // (the MMA fragment holds K-pairs: 2 consecutive halves = one 32-bit word).
  auto g2r_A = make_tiled_copy_A(Copy_Atom<UniversalCopy<uint32_t>, half_t>{}, mma);
  auto g2r_B = make_tiled_copy_B(Copy_Atom<UniversalCopy<uint32_t>, half_t>{}, mma);
  ThrCopy thr_g2r_A = g2r_A.get_slice(threadIdx.x);
  ThrCopy thr_g2r_B = g2r_B.get_slice(threadIdx.x);
  Tensor tAgA = thr_g2r_A.partition_S(gA);   // (CPY,CPY_M,CPY_K,k) global source
  Tensor tArA = thr_g2r_A.retile_D(tCrA);    // (CPY,CPY_M,CPY_K)   the MMA fragment, seen by the copy
  Tensor tBgB = thr_g2r_B.partition_S(gB);   // (CPY,CPY_N,CPY_K,k)
  Tensor tBrB = thr_g2r_B.retile_D(tCrB);    // (CPY,CPY_N,CPY_K)

  const int k_tiles = size<2>(gA);
  for (int k = 0; k < k_tiles; ++k) {
    copy(g2r_A, tAgA(_, _, _, k), tArA);  // global -> registers, then wait for it ...
    copy(g2r_B, tBgB(_, _, _, k), tBrB);
    gemm(mma, tCrA, tCrB, tCrC);          // ... and multiply: 4 x 4 x 2 mma.sync per thread
  }

  // Epilogue: fp32 -> fp16 in registers, then each thread stores its N-pairs straight to global
  // memory. The pairs are 4-byte aligned (N is a multiple of the tile), which we promise to the
  // vectorising copy so that it emits 32-bit stores.
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
  return ladder::run_gemm_rung(argc, argv, {"01_cute_basics", 80, 0, rung::kTileM, rung::kTileN, rung::kTileK},
                                rung::launch);
}
