// The epilogue of the warp-specialised Hopper attention kernel: each consumer warpgroup normalises
// its 64 rows of O, writes their LSE, and moves them out through its own rows of Q's buffer with
// 16-byte coalesced stores (rows past the sequence skipped). Warpgroups never wait for each other.
// O goes through its own buffer (T::kSeparateO) or Q's rows of the warpgroup.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>

#include "attention/common.cuh"
#include "attention/wgmma_fragments.cuh"
#include "attention/sm90ws/mainloop.cuh"
#include "attention/sm90ws/traits.cuh"

namespace tessera::attn::sm90ws {

// Caller: this warpgroup's GEMMs are complete (where O leaves through Q's buffer, its rows of it are
// no longer read).
template <class T, class AccO, class Softmax>
__device__ __forceinline__ void store(typename T::SharedStorage& smem, const AttnParams& p, const QueryBlock& qb, int wg,
                                      int ctid, AccO& acc_o, Softmax const& softmax) {
  using Element = typename T::Element;
  constexpr int BM = T::BM, D = T::D;
  typename T::TiledMmaO mma_o;
  auto thr_o = mma_o.get_thread_slice(ctid);
  Tensor o_rc = make_tensor(acc_o.data(), rowcol(acc_o.layout()));
  Tensor tOcO = thr_o.partition_C(make_identity_tensor(Shape<Int<BM>, Int<D>>{}));
  const SeqRows rows = query_rows(p, qb.b);
  softmax.finish(o_rc, make_tensor(tOcO.data(), rowcol(tOcO.layout())), qb, p, rows);

  // Registers -> smem in the accumulator's layout: each thread writes only its warpgroup's rows,
  // once the warpgroup has read out the previous block's.
  Tensor sO = make_tensor(make_smem_ptr(T::kSeparateO ? smem.o : smem.q), typename T::SmemLayoutQ{});  // (BM,D)
  cutlass::arch::NamedBarrier::sync(128, kEpilogueBarrier + wg);
  Tensor rO = make_tensor_like<Element>(acc_o);
  CUTE_UNROLL
  for (int i = 0; i < size(acc_o); ++i) rO(i) = Element(acc_o(i));
  auto r2s = make_tiled_copy_C(Copy_Atom<DefaultCopy, Element>{}, mma_o);
  copy(r2s, r2s.get_slice(ctid).retile_S(rO), r2s.get_slice(ctid).partition_D(sO));
  cutlass::arch::NamedBarrier::sync(128, kEpilogueBarrier + wg);

  // smem -> gmem: the warpgroup's (64, D) rows, 8 elements per thread and copy, 4 threads per row
  // segment of 32 (D = 96 is three of them).
  const int m0 = qb.row0 + 64 * wg;  // this warpgroup's first query row
  Tensor mO = output_tensor<Element, D>(p, qb, rows);                                           // (seq,D)
  Tensor gO = local_tile(mO, Shape<_64, Int<D>>{}, make_coord(qb.m_block * (BM / 64) + wg, 0));   // (64,D)
  Tensor sOw = local_tile(sO, Shape<_64, Int<D>>{}, make_coord(wg, 0));                           // (64,D)
  Tensor cO = local_tile(make_identity_tensor(Shape<_64, Int<D>>{}), Shape<_64, Int<D>>{}, make_coord(0, 0));
  using Store = decltype(make_tiled_copy(Copy_Atom<UniversalCopy<uint128_t>, Element>{},
                                         Layout<Shape<_32, _4>, Stride<_4, _1>>{}, Layout<Shape<_1, _8>>{}));
  auto thr = Store{}.get_slice(ctid % 128);
  Tensor tOsO = thr.partition_S(sOw);  // (CPY,CPY_M,CPY_D)
  Tensor tOgO = thr.partition_D(gO);
  Tensor tOcOw = thr.partition_D(cO);
  CUTE_UNROLL
  for (int i = 0; i < size<1>(tOsO); ++i) {
    if (m0 + get<0>(tOcOw(0, i, 0)) < rows.len) {
      CUTE_UNROLL
      for (int j = 0; j < size<2>(tOsO); ++j) copy(Store{}, tOsO(_, i, j), tOgO(_, i, j));
    }
  }
}

}  // namespace tessera::attn::sm90ws
