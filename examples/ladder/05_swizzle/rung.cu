// Rung 05 - swizzled shared memory. Rung 04 plus one idea: the shared-memory tiles get a
// Swizzle<3,3,3> layout. Without it, the 8 row addresses of one ldmatrix phase (8 rows x 16 bytes
// of a 64-byte-wide K-major tile) fall on only 2 distinct bank groups: a 4-way bank conflict on
// every ldmatrix. The swizzle XORs the 16-byte chunk index with row bits, so the 8 rows land on 8
// different chunks (README.md derives it). Both variants are compiled from the same kernel:
// `--variant swizzle` (default) or `--variant noswizzle`; --test verifies both.
#include "common/harness.hpp"

#include <cute/tensor.hpp>

#include <cstdio>
#include <cstring>
#include <type_traits>

using namespace cute;

namespace rung {

constexpr int kTileM = 128, kTileN = 128, kTileK = 32;
constexpr int kThreads = 128;  // 4 warps
constexpr int kDefaultStages = 3;

using TiledMma = decltype(make_tiled_mma(SM80_16x8x16_F32F16F16F32_TN{},
                                         Layout<Shape<_2, _2, _1>>{},  // warps: 2 (M) x 2 (N)
                                         Tile<_32, _32, _16>{}));

// New: the shared-memory layout is built from an 8x32 atom (8 rows of 64 bytes = 512 bytes),
// optionally composed with Swizzle<3,3,3>: offset bits [3,6) (which 16-byte chunk of a 128-byte
// line) are XORed with bits [6,9) (which 128-byte line, i.e. row / 2 mod 8). It acts on the
// element offset of the whole tiled layout, so every stage and every 8-row group is swizzled.
using SmemAtomPlain = Layout<Shape<_8, Int<kTileK>>, Stride<Int<kTileK>, _1>>;  // (8,BK)
using SmemAtomSwizzled = decltype(composition(Swizzle<3, 3, 3>{}, SmemAtomPlain{}));
template <bool kSwizzle>
using SmemAtom = std::conditional_t<kSwizzle, SmemAtomSwizzled, SmemAtomPlain>;
template <bool kSwizzle, int kStages>
using SmemLayoutA = decltype(tile_to_shape(SmemAtom<kSwizzle>{}, Shape<Int<kTileM>, Int<kTileK>, Int<kStages>>{}));
template <bool kSwizzle, int kStages>
using SmemLayoutB = decltype(tile_to_shape(SmemAtom<kSwizzle>{}, Shape<Int<kTileN>, Int<kTileK>, Int<kStages>>{}));

// Global -> shared: cp.async, 16 bytes per thread, as in rung 03.
using G2SCopy = decltype(make_tiled_copy(Copy_Atom<SM80_CP_ASYNC_CACHEGLOBAL<uint128_t>, half_t>{},
                                         Layout<Shape<_32, _4>, Stride<_4, _1>>{},  // threads (32,4)
                                         Layout<Shape<_1, _8>>{}));                // values (1,8)

template <bool kSwizzle, int kStages>
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
  half_t* smem_b = smem_a + cosize_v<SmemLayoutA<kSwizzle, kStages>>;
  Tensor sA = make_tensor(make_smem_ptr(smem_a), SmemLayoutA<kSwizzle, kStages>{});  // (BM,BK,PIPE)
  Tensor sB = make_tensor(make_smem_ptr(smem_b), SmemLayoutB<kSwizzle, kStages>{});  // (BN,BK,PIPE)

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

template <bool kSwizzle, int kStages>
void launch_stages(const half* A, const half* B, half* C, int M, int N, int K, cudaStream_t stream) {
  constexpr int smem_bytes = (cosize_v<SmemLayoutA<kSwizzle, kStages>> + cosize_v<SmemLayoutB<kSwizzle, kStages>>) * sizeof(half_t);
  if constexpr (smem_bytes > 48 * 1024)
    LADDER_CUDA(cudaFuncSetAttribute(gemm_kernel<kSwizzle, kStages>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes));
  dim3 grid(M / kTileM, N / kTileN);
  gemm_kernel<kSwizzle, kStages><<<grid, kThreads, smem_bytes, stream>>>(reinterpret_cast<const half_t*>(A),
                                                               reinterpret_cast<const half_t*>(B),
                                                               reinterpret_cast<half_t*>(C), M, N, K);
}

}  // namespace rung

int main(int argc, char** argv) {
  auto run = [&](bool swizzle) {
    ladder::Rung r{swizzle ? "05_swizzle" : "05_swizzle_off", 80, 0, rung::kTileM, rung::kTileN, rung::kTileK};
    return ladder::run_gemm_rung(argc, argv, r,
                                 swizzle ? rung::launch_stages<true, rung::kDefaultStages>
                                         : rung::launch_stages<false, rung::kDefaultStages>);
  };
  const char* variant = nullptr;
  bool test = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--variant") && i + 1 < argc) variant = argv[i + 1];
    if (!std::strcmp(argv[i], "--test")) test = true;
  }
  if (variant && std::strcmp(variant, "swizzle") && std::strcmp(variant, "noswizzle")) {
    std::fprintf(stderr, "--variant must be swizzle or noswizzle\n");
    return 2;
  }
  if (!variant && test) {  // --test alone verifies both variants
    int a = run(true), b = run(false);
    return a == 0 ? b : a;  // a skip (77) is the same for both
  }
  return run(!variant || !std::strcmp(variant, "swizzle"));
}
