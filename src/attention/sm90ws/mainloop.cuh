// The mainloop of the warp-specialised Hopper attention kernel, as its two roles:
//   load(): the producer warp streams Q once per query block and K, V per key block into their
//     rings by TMA, each buffer guarded by a full barrier (TMA bytes landed) and an empty one (every
//     consumer warp done with it). The rings' state carries over from one query block to the next.
//   mma(): a consumer warpgroup's 64 query rows: S = Q K^T on WGMMA, softcap / mask / online softmax
//     in registers, O += P V with P straight from registers. The GEMMs of consecutive blocks are issued
//     together, so the softmax of block n runs while the tensor core does P V of block n + 1 (FA3's
//     intra-warpgroup overlap); with two consumers they also take turns issuing (ping-pong), so one's
//     softmax runs beside the other's GEMMs.
// Key blocks run last to first (causal: the masked diagonal blocks first), from the last block some
// row sees down to the first one; both roles walk the same QueryBlock range.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>

#include "attention/common.cuh"
#include "attention/wgmma_fragments.cuh"
#include "attention/sm90ws/pipeline.cuh"
#include "attention/sm90ws/traits.cuh"

namespace tessera::attn::sm90ws {

using FullBarrier = cutlass::arch::ClusterTransactionBarrier;
using EmptyBarrier = cutlass::arch::ClusterBarrier;

// Named barriers (ids past CUTLASS's reserved ones): the consumers' turns, then one per consumer for
// its epilogue.
constexpr int kTurnBarrier = 1, kEpilogueBarrier = 3;

// Rows [rows, BN) of V's stage `stage`, by the calling warp, 16 bytes per store (Traits::kv_chunk).
template <class T>
__device__ __forceinline__ void zero_rows(typename T::SharedStorage& smem, int stage, int rows) {
  constexpr int kChunks = T::D / 8;  // 16-byte chunks per row
  const int lane = int(threadIdx.x % 32);
  auto zero = [&](int r, int c) {
    *reinterpret_cast<uint4*>(smem.v + T::kv_chunk(r, c, stage)) = make_uint4(0, 0, 0, 0);
  };
  if constexpr (32 % kChunks == 0) {
    for (int r = rows + lane / kChunks; r < T::BN; r += 32 / kChunks) zero(r, lane % kChunks);
  } else {
    for (int i = lane; i < (T::BN - rows) * kChunks; i += 32) zero(rows + i / kChunks, i % kChunks);
  }
}

// Producer: warp 0, whose elected lane (`leader`) issues every copy and arrive. K(n) and V(n) for
// n = n_last down to n_first, and Q after the first K (once the previous block's consumers released
// Q's buffer; q_phase: this block's parity).
template <class T>
__device__ __forceinline__ void load(KernelParams<T> const& kp, typename T::SharedStorage& smem, const QueryBlock& qb,
                                     PipeState<T::Stages>& st, uint32_t q_phase, uint32_t& tail_phase, bool leader) {
  constexpr int BM = T::BM, BN = T::BN, D = T::D;
  const AttnParams& p = kp.p;
  const int batches = tma_batches(p), b = batches == 1 ? 0 : qb.b;
  Tensor mQ = kp.tma_q.get_tma_tensor(make_shape(p.seqlen_q, D, p.heads_q, batches));  // (seq,D,head,batch)
  Tensor mK = kp.tma_k.get_tma_tensor(make_shape(p.seqlen_k, D, p.heads_kv, batches));
  Tensor mV = kp.tma_v.get_tma_tensor(make_shape(p.seqlen_k, D, p.heads_kv, batches));
  // The (batch, head)'s rows; a packed sequence's start at their first (varlen; 0 otherwise). Its
  // last blocks may reach into the next sequence's rows: queries there are never stored, keys there
  // are masked like those past a sequence's end, and V's rows there are zeroed (zero_v_tail).
  Tensor mQh = domain_offset(make_coord(qb.q_start, 0), mQ(_, _, qb.head, b));     // (seq,D)
  Tensor mKh = domain_offset(make_coord(qb.k_start, 0), mK(_, _, qb.head_kv, b));  // (seq,D)
  Tensor mVh = domain_offset(make_coord(qb.k_start, 0), mV(_, _, qb.head_kv, b));  // (seq,D)
  Tensor gQ = local_tile(mQh, Shape<Int<BM>, Int<D>>{}, make_coord(qb.m_block, 0));  // (BM,D)
  Tensor gK = local_tile(mKh, Shape<Int<BN>, Int<D>>{}, make_coord(_, 0));           // (BN,D,n)
  Tensor gV = local_tile(mVh, Shape<Int<BN>, Int<D>>{}, make_coord(_, 0));           // (BN,D,n)
  Tensor sQ = make_tensor(make_smem_ptr(smem.q), typename T::SmemLayoutQ{});   // (BM,D)
  Tensor sK = make_tensor(make_smem_ptr(smem.k), typename T::SmemLayoutKV{});  // (BN,D,PIPE)
  Tensor sV = make_tensor(make_smem_ptr(smem.v), typename T::SmemLayoutKV{});  // (BN,D,PIPE)
  auto tma_q = kp.tma_q.get_slice(0);
  auto tma_k = kp.tma_k.get_slice(0);
  auto tma_v = kp.tma_v.get_slice(0);
  Tensor tQgQ = tma_q.partition_S(gQ);  // (TMA,TMA_M,TMA_D)
  Tensor tQsQ = tma_q.partition_D(sQ);
  Tensor tKgK = tma_k.partition_S(gK);  // (TMA,TMA_N,TMA_D,n)
  Tensor tKsK = tma_k.partition_D(sK);  // (TMA,TMA_N,TMA_D,PIPE)
  Tensor tVgV = tma_v.partition_S(gV);
  Tensor tVsV = tma_v.partition_D(sV);

  for (int n = qb.n_end - 1; n >= qb.n_begin; --n) {
    EmptyBarrier::wait(&smem.k_empty[st.stage], st.phase ^ 1);  // a fresh barrier passes parity 1
    if (leader) {
      FullBarrier::arrive_and_expect_tx(&smem.k_full[st.stage], T::kKVBytes);
      copy(kp.tma_k.with(smem.k_full[st.stage]), tKgK(_, _, _, n), tKsK(_, _, _, st.stage));
    }
    if (n == qb.n_end - 1) {  // Q after the first K: that K's stage frees up sooner than Q's buffer
      EmptyBarrier::wait(&smem.q_empty, q_phase ^ 1);
      if (leader) {
        FullBarrier::arrive_and_expect_tx(&smem.q_full, T::kQBytes);
        copy(kp.tma_q.with(smem.q_full), tQgQ, tQsQ);
      }
    }
    EmptyBarrier::wait(&smem.v_empty[st.stage], st.phase ^ 1);
    // A packed sequence's last block (the first visited) may hold rows of the next one, or rows that
    // belong to none (whatever they hold, NaN included): P is 0 there, but 0 * NaN is not, so those
    // rows of V land under a barrier of the producer's own and become zeros before the consumers'
    // barrier opens. TMA itself zero-fills only past the tensor's end, all that fixed lengths need.
    const int keys = qb.seqlen_k - n * BN;  // the sequence's keys in block n (>= 1)
    if (p.cu_seqlens_k && keys < BN) {
      if (leader) {
        FullBarrier::arrive_and_expect_tx(&smem.v_tail, T::kKVBytes);
        copy(kp.tma_v.with(smem.v_tail), tVgV(_, _, _, n), tVsV(_, _, _, st.stage));
      }
      FullBarrier::wait(&smem.v_tail, tail_phase);
      tail_phase ^= 1;
      zero_rows<T>(smem, st.stage, keys);
      cutlass::arch::fence_view_async_shared();  // the zeros, visible to the consumers' WGMMA
      __syncwarp();
      if (leader) FullBarrier::arrive(&smem.v_full[st.stage]);
    } else if (leader) {
      FullBarrier::arrive_and_expect_tx(&smem.v_full[st.stage], T::kKVBytes);
      copy(kp.tma_v.with(smem.v_full[st.stage]), tVgV(_, _, _, n), tVsV(_, _, _, st.stage));
    }
    st.advance();
  }
}

// The two consumers' turns on the tensor core (ping-pong; mma() takes and passes them) form one chain
// over all of the CTA's blocks: consumer 1 hands the first turn to consumer 0 before its first block,
// and each hands over after each of its turns, its last one included, so that consumer 0 starts the
// next block's first S = Q K^T while consumer 1 still stores this block's O. Both take as many turns
// (the same per block), so consumer 1's hand-overs outnumber consumer 0's takes by the first:
// consumer 0 takes that one at the end, and no barrier is left half-arrived at exit.
template <class T>
__device__ __forceinline__ void start_turns(int wg) {
  if constexpr (T::kPingPong)
    if (wg == 1) cutlass::arch::NamedBarrier::arrive(2 * 128, kTurnBarrier);
}
template <class T>
__device__ __forceinline__ void end_turns(int wg) {
  if constexpr (T::kPingPong)
    if (wg == 0) cutlass::arch::NamedBarrier::sync(2 * 128, kTurnBarrier);
}

// One arrive per consumer warp: this warp no longer reads Q's buffer (its last S = Q K^T is done,
// or, where O leaves through Q's buffer, its epilogue).
template <class T>
__device__ __forceinline__ void release_q(typename T::SharedStorage& smem, int ctid) {
  __syncwarp();
  if (ctid % 32 == 0) EmptyBarrier::arrive(&smem.q_empty);
}

// Consumer warpgroup `wg` (0 .. kConsumers-1; ctid its thread's index among all consumers): O of its
// 64 rows, unnormalised, in acc_o; the row maxima and sums in `softmax`. Only called when the block
// visits at least one key block; st: the rings' state (advanced past this block's keys); q_phase:
// this block's parity of Q's barriers. Where O has its own buffer, Q's is given back as soon as the
// last S = Q K^T is done, so the next block's Q loads under this one's last P V and epilogue.
template <class T, class AccO, class Softmax>
__device__ __forceinline__ void mma(typename T::SharedStorage& smem, const AttnParams& p, const QueryBlock& qb, int wg,
                                    int ctid, AccO& acc_o, Softmax& softmax, PipeState<T::Stages>& st,
                                    uint32_t q_phase) {
  using Element = typename T::Element;
  constexpr int BM = T::BM, BN = T::BN;
  Tensor sQ = make_tensor(make_smem_ptr(smem.q), typename T::SmemLayoutQ{});   // (BM,D)
  Tensor sK = make_tensor(make_smem_ptr(smem.k), typename T::SmemLayoutKV{});  // (BN,D,PIPE)
  Tensor sVt = make_tensor(make_smem_ptr(smem.v), typename T::SmemLayoutVt{});  // (D,BN,PIPE)
  typename T::TiledMmaS mma_s;
  typename T::TiledMmaO mma_o;
  auto thr_s = mma_s.get_thread_slice(ctid);
  auto thr_o = mma_o.get_thread_slice(ctid);
  Tensor tSrQ = thr_s.partition_fragment_A(sQ);   // (MMA,MMA_M,MMA_K=D/16) descriptors
  Tensor tSrK = thr_s.partition_fragment_B(sK);   // (MMA,MMA_N,MMA_K=D/16,PIPE)
  Tensor tOrV = thr_o.partition_fragment_B(sVt);  // (MMA,MMA_D,MMA_K=BN/16,PIPE)
  // Coordinates of each S element within the (BM, BN) block, viewed (rows, cols).
  Tensor tScS = thr_s.partition_C(make_identity_tensor(Shape<Int<BM>, Int<BN>>{}));
  Tensor tScS_rc = make_tensor(tScS.data(), rowcol(tScS.layout()));
  Tensor rP = make_tensor_like<Element>(partition_fragment_C(mma_s, Shape<Int<BM>, Int<BN>>{}));  // P, 16-bit
  Tensor tOrP = make_tensor(rP.data(), acc_as_a(rP.layout()));  // ((2,2,2),1,BN/16): the A operand of P V

  // Turns (two consumers): wait for mine before issuing GEMMs, hand over after; the chain runs on
  // from one block to the next (start_turns / end_turns).
  auto take_turn = [&] {
    if constexpr (T::kPingPong) cutlass::arch::NamedBarrier::sync(2 * 128, kTurnBarrier + wg);
  };
  auto pass_turn = [&] {
    if constexpr (T::kPingPong) cutlass::arch::NamedBarrier::arrive(2 * 128, kTurnBarrier + (wg ^ 1));
  };
  // One arrive per consumer warp frees a stage (its WGMMAs that read it have completed).
  auto release = [&](uint64_t* empty) {
    if (ctid % 32 == 0) EmptyBarrier::arrive(empty);
  };
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
  auto issue_pv = [&](int stage) {
    warpgroup_fence_operand(tOrP);
    warpgroup_fence_operand(acc_o);
    warpgroup_arrive();
    mma_o.accumulate_ = GMMA::ScaleOut::One;
    CUTE_UNROLL
    for (int kb = 0; kb < size<2>(tOrP); ++kb) cute::gemm(mma_o, tOrP(_, _, kb), tOrV(_, _, kb, stage), acc_o);
    warpgroup_commit_batch();
  };
  // Softcap, mask and online softmax of S block n in place; true when O needs rescaling.
  auto softmax_block = [&](auto& acc_s, int n) {
    Tensor s = make_tensor(acc_s.data(), rowcol(acc_s.layout()));  // (rows, cols)
    if (p.softcap > 0.0f) apply_softcap(s, p);
    if (qb.masked(n)) mask_block(s, tScS_rc, qb, n * BN, qb.seqlen_k);
    return softmax.update(s, p);
  };
  auto release_q_early = [&] {
    if constexpr (T::kSeparateO) release_q<T>(smem, ctid);
  };
  auto to_p = [&](auto const& acc_s) {
    CUTE_UNROLL
    for (int i = 0; i < size(acc_s); ++i) rP(i) = Element(acc_s(i));
  };

  const int n_first = qb.n_begin, n_last = qb.n_end - 1;
  PipeState<T::Stages> k_st = st, v_st = st;  // the next K block to read; the V block P V reads next
  FullBarrier::wait(&smem.q_full, q_phase);
  {
    Tensor acc_s = partition_fragment_C(mma_s, Shape<Int<BM>, Int<BN>>{});  // ((2,2,BN/8),1,1) fp32
    FullBarrier::wait(&smem.k_full[k_st.stage], k_st.phase);
    take_turn();
    issue_s(acc_s, k_st.stage);
    pass_turn();
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc_s);
    release(&smem.k_empty[k_st.stage]);
    k_st.advance();
    if (n_last == n_first) release_q_early();
    softmax_block(acc_s, n_last);  // O is still zero: nothing to rescale
    to_p(acc_s);
  }
  for (int n = n_last - 1; n >= n_first; --n) {
    Tensor acc_s = partition_fragment_C(mma_s, Shape<Int<BM>, Int<BN>>{});
    FullBarrier::wait(&smem.k_full[k_st.stage], k_st.phase);
    FullBarrier::wait(&smem.v_full[v_st.stage], v_st.phase);
    take_turn();
    issue_s(acc_s, k_st.stage);
    issue_pv(v_st.stage);
    pass_turn();
    warpgroup_wait<1>();  // S(n) is done; P(n+1) V(n+1) may still run
    warpgroup_fence_operand(acc_s);
    release(&smem.k_empty[k_st.stage]);
    k_st.advance();
    if (n == n_first) release_q_early();
    const bool moved = softmax_block(acc_s, n);
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc_o);
    warpgroup_fence_operand(tOrP);
    release(&smem.v_empty[v_st.stage]);
    v_st.advance();
    if (moved) {  // O holds blocks > n, weighted by the old maxima
      Tensor o_rc = make_tensor(acc_o.data(), rowcol(acc_o.layout()));
      softmax.rescale(o_rc);
    }
    to_p(acc_s);
  }
  FullBarrier::wait(&smem.v_full[v_st.stage], v_st.phase);
  take_turn();
  issue_pv(v_st.stage);
  pass_turn();
  warpgroup_wait<0>();
  warpgroup_fence_operand(acc_o);
  release(&smem.v_empty[v_st.stage]);
  v_st.advance();
  st = v_st;
}

}  // namespace tessera::attn::sm90ws
