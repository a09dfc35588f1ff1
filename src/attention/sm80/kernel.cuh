// Attention forward, FlashAttention-2 structure (seed 004), on SM80 mma.sync. Runs on sm_80+.
//
// One CTA computes O for BLOCK_M query rows of one (batch, query head):
//   Q tile -> smem once; for each key block some row sees (last to first, so the masked blocks of
//   causal come first; a window's left side stops the walk early):
//     S = Q K^T (registers), softcap, mask (window / causal / sequence tail; only the blocks holding
//     a key some row must not see), online softmax in exp2 with the scale
//     folded in (running max and sum, rescale of O), P -> f16/bf16 in registers re-used as the A
//     operand of O += P V.
//   K and V have one smem buffer each: V(n) loads while S(n) = Q K(n)^T runs, and K(n-1) loads
//   while P V(n) runs.
//   O = O / rowsum -> smem (re-using Q's buffer) -> 16-byte coalesced stores; LSE to gmem.
#pragma once

#include <cute/tensor.hpp>

#include "attention/common.cuh"
#include "attention/params.hpp"

namespace tessera::attn::sm80 {

using namespace cute;

template <bool BF16>
struct ElementOf {
  using type = cute::half_t;
  using MmaOp = SM80_16x8x16_F32F16F16F32_TN;
};
template <>
struct ElementOf<true> {
  using type = cute::bfloat16_t;
  using MmaOp = SM80_16x8x16_F32BF16BF16F32_TN;
};

template <int D_, int BM_, int BN_, int Warps_, bool BF16, bool Causal_>
struct Traits {
  static constexpr int D = D_, BM = BM_, BN = BN_, kWarps = Warps_, kThreads = 32 * Warps_;
  static constexpr bool Causal = Causal_;
  using Element = typename ElementOf<BF16>::type;

  // smem rows are head_dim long (D contiguous). Swizzle atom of 64 elements (128 B rows,
  // Swizzle<3,3,3>) when D is a multiple of 64, else 32 elements (64 B rows, Swizzle<2,3,3>):
  // the same derivation as the GEMM's K-major operands (gemm/sm80/smem_layouts.hpp).
  static constexpr int kAtomCols = D % 64 == 0 ? 64 : 32;
  static constexpr int kSwizzleBits = kAtomCols == 64 ? 3 : 2;
  using SmemAtom = decltype(composition(Swizzle<kSwizzleBits, 3, 3>{},
                                        Layout<Shape<_8, Int<kAtomCols>>, Stride<Int<kAtomCols>, _1>>{}));
  using SmemLayoutQ = decltype(tile_to_shape(SmemAtom{}, Shape<Int<BM>, Int<D>>{}));   // (BM,D)
  using SmemLayoutKV = decltype(tile_to_shape(SmemAtom{}, Shape<Int<BN>, Int<D>>{}));  // (BN,D)
  // V seen as the B operand of P V: (D, BN), read with ldmatrix.trans.
  using SmemLayoutVt = decltype(composition(SmemLayoutKV{}, make_layout(Shape<Int<D>, Int<BN>>{}, GenRowMajor{})));

  using TiledMma = decltype(make_tiled_mma(MMA_Atom<typename ElementOf<BF16>::MmaOp>{},
                                           Layout<Shape<Int<Warps_>, _1, _1>>{},
                                           Tile<Int<16 * Warps_>, _16, _16>{}));

  // gmem <-> smem: 16-byte vectors, threads along D first.
  static constexpr int kThrPerRow = kAtomCols / 8;
  using GmemThrLayout = Layout<Shape<Int<kThreads / kThrPerRow>, Int<kThrPerRow>>, Stride<Int<kThrPerRow>, _1>>;
  using GmemCopyIn = decltype(make_tiled_copy(Copy_Atom<SM80_CP_ASYNC_CACHEGLOBAL_ZFILL<uint128_t>, Element>{},
                                              GmemThrLayout{}, Layout<Shape<_1, _8>>{}));
  using GmemCopyOut = decltype(make_tiled_copy(Copy_Atom<UniversalCopy<uint128_t>, Element>{}, GmemThrLayout{},
                                               Layout<Shape<_1, _8>>{}));

  static constexpr int kQElems = int(cosize_v<SmemLayoutQ>);
  static constexpr int kKVElems = int(cosize_v<SmemLayoutKV>);
  static constexpr int kSmemBytes = (kQElems + 2 * kKVElems) * int(sizeof(Element));
  static_assert(BM % (16 * Warps_) == 0 && BN % 16 == 0 && D % 16 == 0, "tile vs MMA");
};

// View of an accumulator fragment (MMA=(2 cols, 2 rows), MMA_M, MMA_N) as (rows, cols), so that a
// thread's values of one query row sit in one row of the view.
template <class Layout>
CUTE_HOST_DEVICE constexpr auto rowcol(Layout l) {
  auto d = logical_divide(l, Shape<_2>{});  // ((2 cols, 2 rows), MMA_M, MMA_N)
  return make_layout(make_layout(get<0, 1>(d), get<1>(d)), make_layout(get<0, 0>(d), get<2>(d)));
}

// Accumulator (4, MMA_M, MMA_N) re-read as an A operand (8, MMA_M, MMA_N / 2): two adjacent n8
// accumulator atoms hold exactly the values of one k16 A fragment, in A's register order.
template <class Layout>
CUTE_HOST_DEVICE constexpr auto acc_as_a(Layout l) {
  auto d = logical_divide(l, Shape<X, X, _2>{});  // (4, MMA_M, (2, MMA_N/2))
  return make_layout(make_layout(get<0>(d), get<2, 0>(d)), get<1>(d), get<2, 1>(d));
}

template <class T>
__global__ void __launch_bounds__(T::kThreads) attention_kernel(AttnParams p) {
  using Element = typename T::Element;
  constexpr int BM = T::BM, BN = T::BN, D = T::D;
  extern __shared__ __align__(128) unsigned char smem[];
  const int tid = threadIdx.x;
  const QueryBlock qb = query_block<BM, BN, T::Causal>(p);
  if (qb.row0 >= qb.seqlen_q) return;  // varlen: past this sequence's last query row
  auto heads = head_tensors<Element, D>(p, qb);
  Tensor mQ = get<0>(heads);  // (seq, D)
  Tensor mK = get<1>(heads);
  Tensor mV = get<2>(heads);
  Tensor gQ = local_tile(mQ, Shape<Int<BM>, Int<D>>{}, make_coord(qb.m_block, 0));  // (BM,D)
  Tensor cQ = local_tile(make_identity_tensor(shape(mQ)), Shape<Int<BM>, Int<D>>{}, make_coord(qb.m_block, 0));  // -> (s,d)
  Tensor gK = local_tile(mK, Shape<Int<BN>, Int<D>>{}, make_coord(_, 0));        // (BN,D,n_blocks)
  Tensor gV = local_tile(mV, Shape<Int<BN>, Int<D>>{}, make_coord(_, 0));        // (BN,D,n_blocks)
  Tensor cK = local_tile(make_identity_tensor(shape(mK)), Shape<Int<BN>, Int<D>>{}, make_coord(_, 0));

  Element* smem_q = reinterpret_cast<Element*>(smem);
  Tensor sQ = make_tensor(make_smem_ptr(smem_q), typename T::SmemLayoutQ{});                       // (BM,D)
  Tensor sK = make_tensor(make_smem_ptr(smem_q + T::kQElems), typename T::SmemLayoutKV{});                // (BN,D)
  Tensor sV = make_tensor(make_smem_ptr(smem_q + T::kQElems + T::kKVElems), typename T::SmemLayoutKV{});  // (BN,D)
  Tensor sVt = make_tensor(sV.data(), typename T::SmemLayoutVt{});                                   // (D,BN)

  // ---- copies gmem -> smem (zero-filled outside the sequence) ----
  typename T::GmemCopyIn g2s;
  auto thr_g2s = g2s.get_slice(tid);
  Tensor tQgQ = thr_g2s.partition_S(gQ);  // (CPY,CPY_M,CPY_D)
  Tensor tQsQ = thr_g2s.partition_D(sQ);
  Tensor tQcQ = thr_g2s.partition_S(cQ);
  Tensor tKgK = thr_g2s.partition_S(gK);  // (CPY,CPY_N,CPY_D,n_blocks)
  Tensor tKsK = thr_g2s.partition_D(sK);
  Tensor tVgV = thr_g2s.partition_S(gV);
  Tensor tVsV = thr_g2s.partition_D(sV);
  Tensor tKcK = thr_g2s.partition_S(cK);  // (CPY,CPY_N,CPY_D,n_blocks) -> (s,d)

  // ---- MMA partitions ----
  typename T::TiledMma mma;
  auto thr_mma = mma.get_slice(tid);
  Tensor tSrQ = thr_mma.partition_fragment_A(sQ);  // (MMA,MMA_M,MMA_K=D/16)
  Tensor tSrK = thr_mma.partition_fragment_B(sK);  // (MMA,MMA_N,MMA_K=D/16)
  Tensor tOrVt = thr_mma.partition_fragment_B(make_tensor(make_smem_ptr(smem_q), make_layout(Shape<Int<D>, Int<BN>>{})));  // (MMA,MMA_D,MMA_K=BN/16)
  Tensor acc_o = partition_fragment_C(mma, Shape<Int<BM>, Int<D>>{});  // (MMA,MMA_M,MMA_D) fp32
  clear(acc_o);

  auto s2r_q = make_tiled_copy_A(Copy_Atom<SM75_U32x4_LDSM_N, Element>{}, mma);
  auto s2r_k = make_tiled_copy_B(Copy_Atom<SM75_U32x4_LDSM_N, Element>{}, mma);
  auto s2r_v = make_tiled_copy_B(Copy_Atom<SM75_U16x8_LDSM_T, Element>{}, mma);
  Tensor tSsQ = s2r_q.get_slice(tid).partition_S(sQ);
  Tensor tSrQ_v = s2r_q.get_slice(tid).retile_D(tSrQ);
  Tensor tSsK = s2r_k.get_slice(tid).partition_S(sK);
  Tensor tSrK_v = s2r_k.get_slice(tid).retile_D(tSrK);
  Tensor tOsVt = s2r_v.get_slice(tid).partition_S(sVt);
  Tensor tOrVt_v = s2r_v.get_slice(tid).retile_D(tOrVt);

  // Coordinates of each S accumulator element within the (BM, BN) block, viewed (rows, cols).
  Tensor cS = make_identity_tensor(Shape<Int<BM>, Int<BN>>{});
  Tensor tScS = thr_mma.partition_C(cS);
  Tensor tScS_rc = make_tensor(tScS.data(), rowcol(tScS.layout()));
  constexpr int kRows = decltype(size<0>(rowcol(acc_o.layout())))::value;  // query rows this thread holds (2 * MMA_M)
  OnlineSoftmax<kRows> softmax;
  softmax.init();

  if (qb.n_end > qb.n_begin) {
    int n_block = qb.n_end - 1;
    copy_rows(g2s, tQgQ, tQsQ, tQcQ, qb.seqlen_q);
    copy_rows(g2s, tKgK(_, _, _, n_block), tKsK, tKcK(_, _, _, n_block), qb.seqlen_k);
    cp_async_fence();

    for (; n_block >= qb.n_begin; --n_block) {
      Tensor acc_s = partition_fragment_C(mma, Shape<Int<BM>, Int<BN>>{});  // (MMA,MMA_M,MMA_N) fp32
      clear(acc_s);
      cp_async_wait<0>();
      __syncthreads();  // K(n) (and Q) landed; every thread is done reading V(n+1)
      // The first block visited may reach past the sequence's end (copy_rows); it is masked, and a
      // masked block reads the key count again rather than hold it in a register through the loop.
      copy_rows(g2s, tVgV(_, _, _, n_block), tVsV, tKcK(_, _, _, n_block),
                qb.masked(n_block) ? key_count(p, qb.b) : kAllRows);
      cp_async_fence();

      // S = Q K^T, one k-block (16 of D) at a time.
#ifdef TESSERA_ATTN_PREFETCH
      copy(s2r_q, tSsQ(_, _, 0), tSrQ_v(_, _, 0));
      copy(s2r_k, tSsK(_, _, 0), tSrK_v(_, _, 0));
#endif
      CUTE_UNROLL
      for (int kb = 0; kb < size<2>(tSrQ); ++kb) {
#ifdef TESSERA_ATTN_PREFETCH
        if (kb + 1 < size<2>(tSrQ)) {
          copy(s2r_q, tSsQ(_, _, kb + 1), tSrQ_v(_, _, kb + 1));
          copy(s2r_k, tSsK(_, _, kb + 1), tSrK_v(_, _, kb + 1));
        }
#else
        copy(s2r_q, tSsQ(_, _, kb), tSrQ_v(_, _, kb));
        copy(s2r_k, tSsK(_, _, kb), tSrK_v(_, _, kb));
#endif
        cute::gemm(mma, tSrQ(_, _, kb), tSrK(_, _, kb), acc_s);
      }

      cp_async_wait<0>();
      __syncthreads();  // V(n) landed; every thread is done reading K(n)
      if (n_block > qb.n_begin) {
        copy_rows(g2s, tKgK(_, _, _, n_block - 1), tKsK, tKcK(_, _, _, n_block - 1), kAllRows);
        cp_async_fence();
      }

      // Softcap, masks (keys past the sequence end or outside a row's window) and the online softmax.
      Tensor s = make_tensor(acc_s.data(), rowcol(acc_s.layout()));  // (rows, cols)
      if (p.softcap > 0.0f) apply_softcap(s, p);
      if (qb.masked(n_block)) mask_keys<BM, BN, T::Causal>(s, tScS_rc, p, n_block * BN);
      if (softmax.update(s, p)) {
        Tensor o_rc = make_tensor(acc_o.data(), rowcol(acc_o.layout()));
        softmax.rescale(o_rc);
      }

      // O += P V. P stays in registers: the fp32 accumulator, viewed in the A-operand layout, is
      // converted one k-block at a time (so S's registers free up as P is consumed).
      Tensor tOrP32 = make_tensor(acc_s.data(), acc_as_a(acc_s.layout()));  // (MMA,MMA_M,MMA_K=BN/16) fp32
      // No prefetch of the next V fragment: with d = 128 it is 32 registers, which (next to O's
      // 128 and S's 64) is what pushes 4-warp tiles past 255 registers.
      CUTE_UNROLL
      for (int kb = 0; kb < size<2>(tOrP32); ++kb) {
        copy(s2r_v, tOsVt(_, _, kb), tOrVt_v(_, _, kb));
        Tensor tOrP = make_tensor_like<Element>(tOrP32(_, _, kb));  // (MMA,MMA_M)
        CUTE_UNROLL
        for (int i = 0; i < size(tOrP); ++i) tOrP(i) = Element(tOrP32(_, _, kb)(i));
        cute::gemm(mma, tOrP, tOrVt(_, _, kb), acc_o);
      }
    }
  }

  // ---- epilogue: normalise, LSE, O -> smem (Q's buffer) -> gmem ----
  Tensor o_rc = make_tensor(acc_o.data(), rowcol(acc_o.layout()));
  Tensor tOcO = thr_mma.partition_C(make_identity_tensor(Shape<Int<BM>, Int<D>>{}));
  const SeqRows rows = query_rows(p, qb.b);
  softmax.finish(o_rc, make_tensor(tOcO.data(), rowcol(tOcO.layout())), qb, p, rows);
  __syncthreads();  // every warp is done with sQ (its last S) before O overwrites it
  Tensor sO = make_tensor(sQ.data(), typename T::SmemLayoutQ{});  // (BM,D)
  Tensor gO = local_tile(output_tensor<Element, D>(p, qb, rows), Shape<Int<BM>, Int<D>>{}, make_coord(qb.m_block, 0));
  store_o<typename T::GmemCopyOut>(acc_o, mma, sO, gO, cQ, rows.len);
}

}  // namespace tessera::attn::sm80
