// Rung 12: FlashAttention-2 forward on mma.sync (sm_80+), one (batch, head) query block per CTA.
//
//   O = softmax(scale * Q K^T [causal]) V,  Q, K, V, O: [B, H, S, D] fp16, D = 64.
//
// A CTA owns kBM = 64 query rows; each of its 4 warps owns 16 of them (one m16 MMA row), so a row's
// max and sum live inside one quad of one warp: no shared memory, no __syncthreads for the softmax.
// Per key block n (kBN = 64 keys):
//   S = Q K(n)^T        in registers (fp32), Q's fragments loaded once and kept in registers
//   mask                causal: only the diagonal block; blocks above it are never visited
//   online softmax      m' = max(m, rowmax S); P = 2^(S*c - m'*c) with c = scale*log2(e);
//                       l = l * 2^((m-m')*c) + rowsum P; O *= 2^((m-m')*c)
//   O += P V(n)         P converted to fp16 and used straight from registers as the A operand
// K(n) and V(n) have one smem buffer each: V(n) streams in (cp.async) while S(n) is computed,
// K(n+1) while the softmax and P V(n) are. Finally O /= l, staged through smem, 16-byte stores.
#include <cute/tensor.hpp>

#include "common/harness.hpp"

using namespace cute;

// A named namespace: nvcc's registration stub cannot name kernels of an anonymous namespace once
// CuTe's headers (which open one of their own) are in scope.
namespace rung12 {

constexpr int kD = 64, kBM = 64, kBN = 64, kWarps = 4, kThreads = 32 * kWarps;
using Element = half_t;
static_assert(kBM == kBN, "the causal block skip below assumes square blocks on the diagonal");

// K-major tiles with 64-element (128-byte) rows: Swizzle<3,3,3> keeps both the 16-byte cp.async
// writes and the ldmatrix reads of 8 rows x 16 bytes free of bank conflicts (rung 05).
using SmemAtom = decltype(composition(Swizzle<3, 3, 3>{}, Layout<Shape<_8, _64>, Stride<_64, _1>>{}));
using SmemLayoutQ = decltype(tile_to_shape(SmemAtom{}, Shape<Int<kBM>, Int<kD>>{}));   // (BM,D)
using SmemLayoutKV = decltype(tile_to_shape(SmemAtom{}, Shape<Int<kBN>, Int<kD>>{}));  // (BN,D)
// V as the B operand of P V is (D, BN): the same bytes, index (d, n) -> sV(n, d). D is contiguous,
// i.e. B is MN-major, so it is read with ldmatrix.trans.
using SmemLayoutVt = decltype(composition(SmemLayoutKV{}, make_layout(Shape<Int<kD>, Int<kBN>>{}, LayoutRight{})));

// 4 warps stacked along M (16 rows each); the 16-wide N tile lets one ldmatrix.x4 feed two n8 MMAs.
using TiledMma = decltype(make_tiled_mma(SM80_16x8x16_F32F16F16F32_TN{}, Layout<Shape<Int<kWarps>, _1, _1>>{},
                                         Tile<Int<16 * kWarps>, _16, _16>{}));
// gmem -> smem: 16-byte cp.async, 8 threads per 64-element row, 16 rows per pass.
using G2S = decltype(make_tiled_copy(Copy_Atom<SM80_CP_ASYNC_CACHEGLOBAL<uint128_t>, Element>{},
                                     Layout<Shape<_16, _8>, Stride<_8, _1>>{}, Layout<Shape<_1, _8>>{}));
using S2G = decltype(make_tiled_copy(Copy_Atom<UniversalCopy<uint128_t>, Element>{},
                                     Layout<Shape<_16, _8>, Stride<_8, _1>>{}, Layout<Shape<_1, _8>>{}));

// Accumulator fragment ((2 cols, 2 rows), MMA_M, MMA_N) seen as (rows, cols): all values of one
// query row of this thread in one row of the view.
template <class L>
CUTE_HOST_DEVICE constexpr auto rowcol(L l) {
  return make_layout(make_layout(get<0, 1>(l), get<1>(l)), make_layout(get<0, 0>(l), get<2>(l)));
}
// The same fragment re-read as the A operand of m16n8k16, ((4, 2), MMA_M, MMA_N / 2): the two n8
// accumulators j = 2k, 2k+1 hold columns 16k + {2t, 2t+1} and 16k + 8 + {2t, 2t+1} of rows g and
// g + 8, which is exactly A's k16 fragment (a0..a3, a4..a7) of this thread, in A's register order.
template <class L>
CUTE_HOST_DEVICE constexpr auto acc_as_a(L l) {
  auto d = logical_divide(l, Shape<X, X, _2>{});  // (4, MMA_M, (2, MMA_N/2))
  return make_layout(make_layout(get<0>(d), get<2, 0>(d)), get<1>(d), get<2, 1>(d));
}

__device__ __forceinline__ float exp2_approx(float x) {  // MUFU.EX2
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
// A row's 64 columns are spread over the 4 threads of a quad (lanes 4g .. 4g+3).
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffff, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffff, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffff, x, 1);
  return x + __shfl_xor_sync(0xffffffff, x, 2);
}

template <bool kCausal>
__global__ void __launch_bounds__(kThreads) fa2_kernel(const Element* Q, const Element* K, const Element* V, Element* O,
                                                        int S, float scale_log2) {
  __shared__ alignas(128) Element smem[cosize_v<SmemLayoutQ> + 2 * cosize_v<SmemLayoutKV>];
  const int tid = threadIdx.x;
  // Causal: the last query blocks see the most keys; launching them first lets the short ones fill
  // the tail of the grid.
  const int m_block = kCausal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int64_t head = int64_t(blockIdx.y) * S * kD;  // (batch, head) slice: [S, D], D contiguous
  // Causal with kBM == kBN and S_q == S_k: key blocks past the diagonal block are fully masked.
  const int n_blocks = kCausal ? m_block + 1 : S / kBN;

  Tensor mQ = make_tensor(make_gmem_ptr(Q + head), make_shape(S, Int<kD>{}), make_stride(Int<kD>{}, _1{}));  // (S,D)
  Tensor mK = make_tensor(make_gmem_ptr(K + head), make_shape(S, Int<kD>{}), make_stride(Int<kD>{}, _1{}));
  Tensor mV = make_tensor(make_gmem_ptr(V + head), make_shape(S, Int<kD>{}), make_stride(Int<kD>{}, _1{}));
  Tensor mO = make_tensor(make_gmem_ptr(O + head), make_shape(S, Int<kD>{}), make_stride(Int<kD>{}, _1{}));
  Tensor gQ = local_tile(mQ, Shape<Int<kBM>, Int<kD>>{}, make_coord(m_block, 0));  // (BM,D)
  Tensor gO = local_tile(mO, Shape<Int<kBM>, Int<kD>>{}, make_coord(m_block, 0));  // (BM,D)
  Tensor gK = local_tile(mK, Shape<Int<kBN>, Int<kD>>{}, make_coord(_, 0));        // (BN,D,n)
  Tensor gV = local_tile(mV, Shape<Int<kBN>, Int<kD>>{}, make_coord(_, 0));        // (BN,D,n)

  Tensor sQ = make_tensor(make_smem_ptr(smem), SmemLayoutQ{});                                        // (BM,D)
  Tensor sK = make_tensor(make_smem_ptr(smem + cosize_v<SmemLayoutQ>), SmemLayoutKV{});               // (BN,D)
  Tensor sV = make_tensor(make_smem_ptr(smem + cosize_v<SmemLayoutQ> + cosize_v<SmemLayoutKV>), SmemLayoutKV{});
  Tensor sVt = make_tensor(sV.data(), SmemLayoutVt{});                                                // (D,BN)

  G2S g2s;
  auto thr_g2s = g2s.get_slice(tid);
  Tensor tQgQ = thr_g2s.partition_S(gQ);  // (CPY,CPY_M,CPY_D)
  Tensor tQsQ = thr_g2s.partition_D(sQ);
  Tensor tKgK = thr_g2s.partition_S(gK);  // (CPY,CPY_N,CPY_D,n)
  Tensor tKsK = thr_g2s.partition_D(sK);
  Tensor tVgV = thr_g2s.partition_S(gV);
  Tensor tVsV = thr_g2s.partition_D(sV);

  TiledMma mma;
  auto thr_mma = mma.get_slice(tid);
  Tensor tSrQ = thr_mma.partition_fragment_A(sQ);   // (MMA,MMA_M=1,MMA_K=D/16)   fp16
  Tensor tSrK = thr_mma.partition_fragment_B(sK);   // (MMA,MMA_N=BN/8,MMA_K=D/16)
  Tensor tOrVt = thr_mma.partition_fragment_B(sVt);  // (MMA,MMA_N=D/8,MMA_K=BN/16)
  Tensor tOrO = partition_fragment_C(mma, Shape<Int<kBM>, Int<kD>>{});  // ((2,2),1,D/8) fp32
  clear(tOrO);
  // smem -> registers with ldmatrix (V transposed on the way: .trans).
  auto s2r_q = make_tiled_copy_A(Copy_Atom<SM75_U32x4_LDSM_N, Element>{}, mma);
  auto s2r_k = make_tiled_copy_B(Copy_Atom<SM75_U32x4_LDSM_N, Element>{}, mma);
  auto s2r_v = make_tiled_copy_B(Copy_Atom<SM75_U16x8_LDSM_T, Element>{}, mma);
  Tensor tSsQ = s2r_q.get_slice(tid).partition_S(sQ);
  Tensor tSrQ_v = s2r_q.get_slice(tid).retile_D(tSrQ);
  Tensor tSsK = s2r_k.get_slice(tid).partition_S(sK);
  Tensor tSrK_v = s2r_k.get_slice(tid).retile_D(tSrK);
  Tensor tOsVt = s2r_v.get_slice(tid).partition_S(sVt);
  Tensor tOrVt_v = s2r_v.get_slice(tid).retile_D(tOrVt);
  // (row, col) of each S element inside the (BM, BN) block: the causal mask's coordinates.
  Tensor tScS = thr_mma.partition_C(make_identity_tensor(Shape<Int<kBM>, Int<kBN>>{}));
  Tensor tScS_rc = make_tensor(tScS.data(), rowcol(tScS.layout()));  // (rows=2, cols=BN/4)

  // Online-softmax state of the 2 rows (g and g + 8 of the warp's 16) this thread holds. row_sum
  // is this thread's share of the row; the quad's shares are added once, at the end.
  constexpr int kRows = decltype(size<0>(rowcol(tOrO.layout())))::value;
  float row_max[kRows], row_sum[kRows];
  CUTE_UNROLL
  for (int r = 0; r < kRows; ++r) row_max[r] = -INFINITY, row_sum[r] = 0.0f;

  // Prologue: Q and K(0) in flight; Q is needed first and only once, so it goes to registers.
  copy(g2s, tQgQ, tQsQ);
  cp_async_fence();
  copy(g2s, tKgK(_, _, _, 0), tKsK);
  cp_async_fence();
  cp_async_wait<1>();  // Q landed (K(0) may still be in flight)
  __syncthreads();
  copy(s2r_q, tSsQ, tSrQ_v);  // 16 rows x 64 of Q per warp: 16 registers, reused for every key block

  for (int n = 0; n < n_blocks; ++n) {
    cp_async_wait<0>();
    __syncthreads();  // K(n) landed for all threads; every warp is done reading V(n-1) (P V of n-1)
    copy(g2s, tVgV(_, _, _, n), tVsV);  // V(n) loads under S(n)
    cp_async_fence();

    Tensor tSrS = partition_fragment_C(mma, Shape<Int<kBM>, Int<kBN>>{});  // ((2,2),1,BN/8) fp32
    clear(tSrS);
    CUTE_UNROLL
    for (int k = 0; k < size<2>(tSrK); ++k) {  // S = Q K^T, 16 of D per step
      copy(s2r_k, tSsK(_, _, k), tSrK_v(_, _, k));
      gemm(mma, tSrQ(_, _, k), tSrK(_, _, k), tSrS);
    }

    cp_async_wait<0>();
    __syncthreads();  // V(n) landed; every warp is done reading K(n)
    if (n + 1 < n_blocks) {  // K(n+1) loads under the softmax and P V(n)
      copy(g2s, tKgK(_, _, _, n + 1), tKsK);
      cp_async_fence();
    }

    Tensor s = make_tensor(tSrS.data(), rowcol(tSrS.layout()));  // (rows, cols)
    // Causal: only the diagonal block (n == m_block) mixes visible and hidden keys. With kBM ==
    // kBN its rows and columns share an origin, so key c is hidden from row r exactly when c > r.
    // Every row keeps column 0 of block 0, so no row max is ever -inf (no NaN from inf - inf).
    if (kCausal && n == m_block) {
      CUTE_UNROLL
      for (int i = 0; i < size(s); ++i)
        if (get<1>(tScS_rc(i)) > get<0>(tScS_rc(i))) s(i) = -INFINITY;
    }
    // Online softmax. Order matters: the new max first, then the correction 2^((m_old - m_new) c),
    // which rescales the old sum and the old O (both still weighted by m_old) before block n's
    // weights, taken against m_new, are added to them. exp2 with scale * log2(e) folded into one FFMA.
    CUTE_UNROLL
    for (int r = 0; r < kRows; ++r) {
      float m = row_max[r];
      CUTE_UNROLL
      for (int c = 0; c < size<1>(s); ++c) m = fmaxf(m, s(r, c));
      m = quad_max(m);  // the whole row's max: every thread of the quad must use the same one
      const float m_scaled = m * scale_log2;
      const float correction = exp2_approx(row_max[r] * scale_log2 - m_scaled);  // 0 on the first block
      row_max[r] = m;
      float sum = 0.0f;
      CUTE_UNROLL
      for (int c = 0; c < size<1>(s); ++c) {
        s(r, c) = exp2_approx(s(r, c) * scale_log2 - m_scaled);
        sum += s(r, c);
      }
      row_sum[r] = row_sum[r] * correction + sum;
      Tensor o = make_tensor(tOrO.data(), rowcol(tOrO.layout()));
      CUTE_UNROLL
      for (int c = 0; c < size<1>(o); ++c) o(r, c) *= correction;
    }

    // O += P V(n): P to fp16 in place of S's layout, then re-read as the A operand (acc_as_a):
    // no trip through shared memory.
    Tensor tSrP = make_tensor_like<Element>(tSrS);
    CUTE_UNROLL
    for (int i = 0; i < size(tSrS); ++i) tSrP(i) = Element(tSrS(i));
    Tensor tOrP = make_tensor(tSrP.data(), acc_as_a(tSrP.layout()));  // ((4,2),1,BN/16)
    CUTE_UNROLL
    for (int k = 0; k < size<2>(tOrP); ++k) {
      copy(s2r_v, tOsVt(_, _, k), tOrVt_v(_, _, k));
      gemm(mma, tOrP(_, _, k), tOrVt(_, _, k), tOrO);
    }
  }

  // Epilogue: O /= l (the quad's four shares of the row summed now), fp16, through Q's smem (free:
  // Q lives in registers since the prologue) so that the global stores are 16-byte and coalesced.
  Tensor o = make_tensor(tOrO.data(), rowcol(tOrO.layout()));
  CUTE_UNROLL
  for (int r = 0; r < kRows; ++r) {
    const float inv = 1.0f / quad_sum(row_sum[r]);
    CUTE_UNROLL
    for (int c = 0; c < size<1>(o); ++c) o(r, c) *= inv;
  }
  Tensor rO = make_tensor_like<Element>(tOrO);
  CUTE_UNROLL
  for (int i = 0; i < size(tOrO); ++i) rO(i) = Element(tOrO(i));
  auto r2s = make_tiled_copy_C(Copy_Atom<DefaultCopy, Element>{}, mma);
  Tensor sO = make_tensor(sQ.data(), SmemLayoutQ{});  // (BM,D)
  copy(r2s, r2s.get_slice(tid).retile_S(rO), r2s.get_slice(tid).partition_D(sO));
  __syncthreads();  // rows of sO were written by other threads than the ones storing them
  S2G s2g;
  copy(s2g, s2g.get_slice(tid).partition_S(sO), s2g.get_slice(tid).partition_D(gO));
}

void launch(const half* Q, const half* K, const half* V, half* O, int B, int H, int S, int D, bool causal,
            cudaStream_t stream) {
  (void)D;  // the harness passes head_dim = kD
  const dim3 grid(S / kBM, B * H);
  const float scale_log2 = 1.4426950408889634f / sqrtf(float(kD));  // log2(e) / sqrt(D)
  auto q = reinterpret_cast<const Element*>(Q), k = reinterpret_cast<const Element*>(K);
  auto v = reinterpret_cast<const Element*>(V);
  auto o = reinterpret_cast<Element*>(O);
  if (causal) fa2_kernel<true><<<grid, kThreads, 0, stream>>>(q, k, v, o, S, scale_log2);
  else fa2_kernel<false><<<grid, kThreads, 0, stream>>>(q, k, v, o, S, scale_log2);
}

}  // namespace rung12

int main(int argc, char** argv) {
  return ladder::run_attention_rung(argc, argv, {"12_flash_attention2", 80, 0, rung12::kBM, rung12::kBN, rung12::kBN}, rung12::kD, rung12::launch);
}
