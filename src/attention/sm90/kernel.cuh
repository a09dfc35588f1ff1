// Attention forward on Hopper (sm_90a): the FlashAttention-2 algorithm of sm80/kernel.cuh with
// both GEMMs on WGMMA, which is what the tensor cores need to run at full rate on H100.
//
// One CTA of BM/64 warpgroups computes O for BM query rows of one (batch, query head); each
// warpgroup owns 64 rows, so a row's softmax state stays inside one warpgroup (quad shuffles only).
//   Q tile -> smem once. K and V go through a two-stage smem ring filled by cp.async from every
//   thread: block n-1 loads while block n computes. Key blocks run last to first (causal: the
//   masked diagonal blocks come first), from the last block some row sees down to the first one (a
//   window's left side stops the walk early).
//   S = Q K^T: WGMMA 64 x BN x 16, both operands read from 128B-swizzled smem by descriptor.
//   Softcap, mask (window / causal / sequence tail; only the blocks holding a key some row must not
//   see), online softmax in exp2 with the scale folded in, O rescaled only when a row max moved.
//   O += P V: WGMMA 64 x D x 16 with P straight from registers (the S accumulator converted to
//   f16/bf16 and re-read in the A-operand layout) and V^T read from smem as an MN-major operand.
//   O / rowsum -> smem (Q's buffer) -> 16-byte coalesced stores; LSE to gmem.
// With OVERLAP (configs.def) the two GEMMs of consecutive blocks are issued together, so the
// softmax of block n (SFU/ALU) runs while the tensor core does P V of block n+1 (FA3's
// intra-warpgroup pipelining); without it, one block's GEMMs and softmax run back to back.
// cp.async writes smem through the generic proxy and WGMMA reads it through the async proxy: every
// thread fences (fence.proxy.async) after its copies land, before the barrier that publishes them.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>

#include "attention/common.cuh"
#include "attention/params.hpp"
#include "attention/wgmma_fragments.cuh"

namespace tessera::attn::sm90 {

using namespace cute;

template <int D_, int BM_, int BN_, bool Overlap_, bool BF16, bool Causal_>
struct Traits {
  static constexpr int D = D_, BM = BM_, BN = BN_;
  // Overlap: softmax of block n runs while the tensor core does P V of block n+1 (needs P, S and O
  // live at once); without it each block's two GEMMs and softmax run back to back.
  static constexpr bool kOverlap = Overlap_;
  static constexpr int kWarpGroups = BM / 64, kThreads = 128 * kWarpGroups;
  static constexpr bool Causal = Causal_;
  using Element = std::conditional_t<BF16, cute::bfloat16_t, cute::half_t>;

  // Q and K/V rows are head_dim long with D contiguous: K-major for both GEMM operands of
  // S = Q K^T. 128-byte swizzle (64-element rows) is the conflict-free WGMMA layout.
  static_assert(D % 64 == 0, "head_dim must be a multiple of 64 (128-byte swizzle rows)");
  using Atom = GMMA::Layout_K_SW128_Atom<Element>;
  using SmemLayoutQ = decltype(tile_to_shape(Atom{}, Shape<Int<BM>, Int<D>>{}));         // (BM,D)
  using SmemLayoutKV = decltype(tile_to_shape(Atom{}, Shape<Int<BN>, Int<D>, _2>{}));    // (BN,D,stage)
  // V seen as the B operand of P V, (D, BN): the same bytes, D contiguous = MN-major.
  using SmemLayoutVt = decltype(composition(
      SmemLayoutKV{}, make_ordered_layout(Shape<Int<D>, Int<BN>, _2>{}, Step<_2, _1, _3>{})));  // (D,BN,stage)

  // Warpgroups tiled along M (64 query rows each).
  using WarpGroups = Layout<Shape<Int<kWarpGroups>, _1, _1>>;
  using TiledMmaS = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<_64, Int<BN>, Int<D>>, GMMA::Major::K, GMMA::Major::K>(),
      WarpGroups{}));
  using TiledMmaO = decltype(make_tiled_mma(
      GMMA::rs_op_selector<Element, Element, float, Shape<_64, Int<D>, Int<BN>>, GMMA::Major::K, GMMA::Major::MN>(),
      WarpGroups{}));

  // gmem <-> smem: 16-byte vectors, 8 threads per 64-element row segment.
  using GmemThrLayout = Layout<Shape<Int<kThreads / 8>, _8>, Stride<_8, _1>>;
  using GmemCopyIn = decltype(make_tiled_copy(Copy_Atom<SM80_CP_ASYNC_CACHEGLOBAL_ZFILL<uint128_t>, Element>{},
                                              GmemThrLayout{}, Layout<Shape<_1, _8>>{}));
  using GmemCopyOut = decltype(make_tiled_copy(Copy_Atom<UniversalCopy<uint128_t>, Element>{}, GmemThrLayout{},
                                               Layout<Shape<_1, _8>>{}));

  static constexpr int kQElems = int(cosize_v<SmemLayoutQ>);
  static constexpr int kKVElems = int(cosize_v<SmemLayoutKV>);  // both stages
  static constexpr int kSmemBytes = (kQElems + 2 * kKVElems) * int(sizeof(Element));
  static_assert(BM % 64 == 0 && BN % 16 == 0 && BN <= 256 && D <= 256, "tile vs WGMMA");
};

template <class T>
__global__ void __launch_bounds__(T::kThreads, 1) attention_kernel(AttnParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using Element = typename T::Element;
  constexpr int BM = T::BM, BN = T::BN, D = T::D;
  extern __shared__ __align__(1024) unsigned char smem[];  // 128B swizzle atoms repeat every 1 KB
  const int tid = threadIdx.x;
  const QueryBlock qb = query_block<BM, BN, T::Causal>(p);
  if (qb.row0 >= qb.seqlen_q) return;  // varlen: past this sequence's last query row
  auto heads = head_tensors<Element, D>(p, qb);
  Tensor mQ = get<0>(heads);  // (seq, D)
  Tensor mK = get<1>(heads);
  Tensor mV = get<2>(heads);
  Tensor gQ = local_tile(mQ, Shape<Int<BM>, Int<D>>{}, make_coord(qb.m_block, 0));  // (BM,D)
  Tensor cQ = local_tile(make_identity_tensor(shape(mQ)), Shape<Int<BM>, Int<D>>{}, make_coord(qb.m_block, 0));
  Tensor gK = local_tile(mK, Shape<Int<BN>, Int<D>>{}, make_coord(_, 0));  // (BN,D,n_blocks)
  Tensor gV = local_tile(mV, Shape<Int<BN>, Int<D>>{}, make_coord(_, 0));  // (BN,D,n_blocks)
  Tensor cK = local_tile(make_identity_tensor(shape(mK)), Shape<Int<BN>, Int<D>>{}, make_coord(_, 0));

  Element* smem_q = reinterpret_cast<Element*>(smem);
  Tensor sQ = make_tensor(make_smem_ptr(smem_q), typename T::SmemLayoutQ{});                               // (BM,D)
  Tensor sK = make_tensor(make_smem_ptr(smem_q + T::kQElems), typename T::SmemLayoutKV{});                 // (BN,D,2)
  Tensor sV = make_tensor(make_smem_ptr(smem_q + T::kQElems + T::kKVElems), typename T::SmemLayoutKV{});  // (BN,D,2)
  Tensor sVt = make_tensor(sV.data(), typename T::SmemLayoutVt{});                                          // (D,BN,2)

  // ---- copies gmem -> smem (zero-filled outside the sequence) ----
  typename T::GmemCopyIn g2s;
  auto thr_g2s = g2s.get_slice(tid);
  Tensor tQgQ = thr_g2s.partition_S(gQ);  // (CPY,CPY_M,CPY_D)
  Tensor tQsQ = thr_g2s.partition_D(sQ);
  Tensor tQcQ = thr_g2s.partition_S(cQ);
  Tensor tKgK = thr_g2s.partition_S(gK);  // (CPY,CPY_N,CPY_D,n_blocks)
  Tensor tKsK = thr_g2s.partition_D(sK);  // (CPY,CPY_N,CPY_D,2)
  Tensor tVgV = thr_g2s.partition_S(gV);
  Tensor tVsV = thr_g2s.partition_D(sV);
  Tensor tKcK = thr_g2s.partition_S(cK);  // (CPY,CPY_N,CPY_D,n_blocks) -> (s,d)

  // K and V of block n into `stage`, rows at or past `rows` zero-filled: the key count for the first
  // block visited, kAllRows for the others (copy_rows).
  auto load_kv = [&](int n, int stage, int rows) {
    copy_rows(g2s, tKgK(_, _, _, n), tKsK(_, _, _, stage), tKcK(_, _, _, n), rows);
    copy_rows(g2s, tVgV(_, _, _, n), tVsV(_, _, _, stage), tKcK(_, _, _, n), rows);
    cp_async_fence();
  };

  // ---- WGMMA partitions ----
  typename T::TiledMmaS mma_s;
  typename T::TiledMmaO mma_o;
  auto thr_s = mma_s.get_thread_slice(tid);
  auto thr_o = mma_o.get_thread_slice(tid);
  Tensor tSrQ = thr_s.partition_fragment_A(sQ);   // (MMA,MMA_M,MMA_K=D/16) descriptors
  Tensor tSrK = thr_s.partition_fragment_B(sK);   // (MMA,MMA_N,MMA_K=D/16,2)
  Tensor tOrV = thr_o.partition_fragment_B(sVt);  // (MMA,MMA_D,MMA_K=BN/16,2)
  Tensor acc_o = partition_fragment_C(mma_o, Shape<Int<BM>, Int<D>>{});  // ((2,2,D/8),1,1) fp32
  clear(acc_o);

  // Coordinates of each S accumulator element within the (BM, BN) block, viewed (rows, cols).
  Tensor tScS = thr_s.partition_C(make_identity_tensor(Shape<Int<BM>, Int<BN>>{}));
  Tensor tScS_rc = make_tensor(tScS.data(), rowcol(tScS.layout()));
  constexpr int kRows = decltype(size<0>(rowcol(acc_o.layout())))::value;  // query rows this thread holds (2)
  OnlineSoftmax<kRows> softmax;
  softmax.init();

  // Softcap, mask and softmax of S block n in place; O rescaled by the caller when the returned
  // flag says so.
  auto softmax_block = [&](auto& acc_s, int n_block) {
    Tensor s = make_tensor(acc_s.data(), rowcol(acc_s.layout()));  // (rows, cols)
    if (p.softcap > 0.0f) apply_softcap(s, p);
    if (qb.masked(n_block)) mask_keys<BM, BN, T::Causal>(s, tScS_rc, p, n_block * BN);
    return softmax.update(s, p);
  };
  auto rescale_o = [&]() {
    Tensor o_rc = make_tensor(acc_o.data(), rowcol(acc_o.layout()));
    softmax.rescale(o_rc);
  };
  // WGMMA batches, issued without waiting: S = Q K(stage)^T, and O += P V(stage).
  auto issue_s = [&](auto& acc_s, int stage) {
    warpgroup_fence_operand(acc_s);
    warpgroup_arrive();
    mma_s.accumulate_ = GMMA::ScaleOut::Zero;
    CUTE_UNROLL
    for (int kb = 0; kb < size<2>(tSrQ); ++kb) {
      cute::gemm(mma_s, tSrQ(_, _, kb), tSrK(_, _, kb, stage), acc_s);
      mma_s.accumulate_ = GMMA::ScaleOut::One;
    }
    warpgroup_commit_batch();
  };
  auto issue_pv = [&](auto& tOrP, int stage) {
    warpgroup_fence_operand(tOrP);
    warpgroup_fence_operand(acc_o);
    warpgroup_arrive();
    mma_o.accumulate_ = GMMA::ScaleOut::One;
    CUTE_UNROLL
    for (int kb = 0; kb < size<2>(tOrP); ++kb) cute::gemm(mma_o, tOrP(_, _, kb), tOrV(_, _, kb, stage), acc_o);
    warpgroup_commit_batch();
  };
  // All of this thread's cp.async copies landed and are visible to WGMMA; then the CTA barrier.
  auto wait_copies = [&]() {
    cp_async_wait<0>();
    cutlass::arch::fence_view_async_shared();
    __syncthreads();
  };

  // Main loop over blocks n_last down to n_first; the stage of block n is n & 1 for both K and V.
  //   Plain: per block, S = Q K^T, softmax, O += P V, each waited for; K/V(n-1) load meanwhile.
  //   Overlap (FA3's intra-warpgroup pipelining): S(n) and P(n+1) V(n+1) are issued together, and
  //   the softmax of S(n) runs while the tensor core still does P V; K(n-1) and V(n) load meanwhile.
  Tensor rP = make_tensor_like<Element>(partition_fragment_C(mma_s, Shape<Int<BM>, Int<BN>>{}));  // P, 16-bit
  Tensor tOrP = make_tensor(rP.data(), acc_as_a(rP.layout()));  // ((2,2,2),1,BN/16): the A operand of P V
  const int n_first = qb.n_begin, n_last = qb.n_end - 1;
  if (n_last >= n_first && !T::kOverlap) {
    copy_rows(g2s, tQgQ, tQsQ, tQcQ, qb.seqlen_q);
    load_kv(n_last, n_last & 1, qb.seqlen_k);
    for (int n_block = n_last; n_block >= n_first; --n_block) {
      wait_copies();  // K(n), V(n) (and Q) landed; every warpgroup is done with block n+1's stage
      if (n_block > n_first) load_kv(n_block - 1, (n_block - 1) & 1, kAllRows);
      Tensor acc_s = partition_fragment_C(mma_s, Shape<Int<BM>, Int<BN>>{});  // ((2,2,BN/8),1,1) fp32
      issue_s(acc_s, n_block & 1);
      warpgroup_wait<0>();
      warpgroup_fence_operand(acc_s);
      if (softmax_block(acc_s, n_block)) rescale_o();
      CUTE_UNROLL
      for (int i = 0; i < size(acc_s); ++i) rP(i) = Element(acc_s(i));
      issue_pv(tOrP, n_block & 1);
      warpgroup_wait<0>();
      warpgroup_fence_operand(acc_o);
    }
  }
  if (n_last >= n_first && T::kOverlap) {
    copy_rows(g2s, tQgQ, tQsQ, tQcQ, qb.seqlen_q);
    load_kv(n_last, n_last & 1, qb.seqlen_k);
    wait_copies();
    if (n_last > n_first) {
      copy_rows(g2s, tKgK(_, _, _, n_last - 1), tKsK(_, _, _, (n_last - 1) & 1), tKcK(_, _, _, n_last - 1), kAllRows);
      cp_async_fence();
    }
    {
      Tensor acc_s = partition_fragment_C(mma_s, Shape<Int<BM>, Int<BN>>{});  // ((2,2,BN/8),1,1) fp32
      issue_s(acc_s, n_last & 1);
      warpgroup_wait<0>();
      warpgroup_fence_operand(acc_s);
      softmax_block(acc_s, n_last);  // O is still zero: nothing to rescale
      CUTE_UNROLL
      for (int i = 0; i < size(acc_s); ++i) rP(i) = Element(acc_s(i));
    }
    for (int n_block = n_last - 1; n_block >= n_first; --n_block) {
      wait_copies();  // K(n) and V(n+1) landed; every warpgroup is done with the stages refilled next
      if (n_block > n_first)
        copy_rows(g2s, tKgK(_, _, _, n_block - 1), tKsK(_, _, _, (n_block - 1) & 1), tKcK(_, _, _, n_block - 1), kAllRows);
      copy_rows(g2s, tVgV(_, _, _, n_block), tVsV(_, _, _, n_block & 1), tKcK(_, _, _, n_block), kAllRows);
      cp_async_fence();

      Tensor acc_s = partition_fragment_C(mma_s, Shape<Int<BM>, Int<BN>>{});
      issue_s(acc_s, n_block & 1);
      issue_pv(tOrP, (n_block + 1) & 1);
      warpgroup_wait<1>();  // S(n) is done; P(n+1) V(n+1) may still run
      warpgroup_fence_operand(acc_s);
      const bool moved = softmax_block(acc_s, n_block);
      warpgroup_wait<0>();
      warpgroup_fence_operand(acc_o);
      warpgroup_fence_operand(tOrP);
      if (moved) rescale_o();  // O holds blocks > n, all weighted by the old max
      CUTE_UNROLL
      for (int i = 0; i < size(acc_s); ++i) rP(i) = Element(acc_s(i));
    }
    wait_copies();  // V(n_first) landed
    issue_pv(tOrP, n_first & 1);
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc_o);
  }

  // ---- epilogue: normalise, LSE, O -> smem (Q's buffer) -> gmem ----
  Tensor o_rc = make_tensor(acc_o.data(), rowcol(acc_o.layout()));
  Tensor tOcO = thr_o.partition_C(make_identity_tensor(Shape<Int<BM>, Int<D>>{}));
  const SeqRows rows = query_rows(p, qb.b);
  softmax.finish(o_rc, make_tensor(tOcO.data(), rowcol(tOcO.layout())), qb, p, rows);
  __syncthreads();  // every warpgroup's last S = Q K^T has read sQ before O overwrites it
  Tensor sO = make_tensor(sQ.data(), typename T::SmemLayoutQ{});  // (BM,D)
  Tensor gO = local_tile(output_tensor<Element, D>(p, qb, rows), Shape<Int<BM>, Int<D>>{}, make_coord(qb.m_block, 0));
  store_o<typename T::GmemCopyOut>(acc_o, mma_o, sO, gO, cQ, rows.len);
#endif
}

}  // namespace tessera::attn::sm90
