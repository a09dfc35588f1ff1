// Attention forward on Hopper, warp-specialised (FlashAttention-3's structure, our code on CuTe).
// A CTA computes O for blocks of BM query rows of one (batch, query head) each: its own block, or,
// with one CTA per SM, several (launch.hpp: Walk). The kernel only orchestrates:
//   warpgroup 0, the producer: gives up registers (setmaxnreg) and its first warp streams Q, K and
//     V by TMA through mbarrier rings (mainloop.cuh: load);
//   warpgroups 1.., the consumers (64 query rows each): take the registers, run the GEMMs and the
//     online softmax (mainloop.cuh: mma), then each stores its rows (epilogue.cuh) while the producer
//     already loads the next block's K, V and (where O has its own buffer) Q.
// The CTA's place in the problem and its key-block range (masks, windows, causal longest-first order)
// come from QueryBlock (attention/common.cuh), as in the other families; which blocks it takes, from
// the walk (launch.hpp: Walk; the dynamic one in scheduler.cuh).
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>

#include "attention/common.cuh"
#include "attention/sm90ws/epilogue.cuh"
#include "attention/sm90ws/launch.hpp"
#include "attention/sm90ws/mainloop.cuh"
#include "attention/sm90ws/scheduler.cuh"
#include "attention/sm90ws/traits.cuh"

namespace tessera::attn::sm90ws {

template <class T>
__global__ void __launch_bounds__(T::kThreads, 1) attention_kernel(const __grid_constant__ KernelParams<T> kp) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  auto& smem = *reinterpret_cast<typename T::SharedStorage*>(smem_raw);
  const AttnParams& p = kp.p;
  const int warp_group = int(threadIdx.x) / 128;
  // The blocks this CTA walks, [first, end) by stride, in the grid's order (blocks that share K and V
  // side by side, for L2; causal, the longest first): its own block, every gridDim.x-th block, its
  // share of consecutive blocks, or the tickets it draws (launch.hpp: Walk).
  const int blocks = p.m_blocks * p.heads_q * p.batch, cta = int(blockIdx.x), ctas = int(gridDim.x);
  const bool dynamic = kp.walk == kDynamic;
  int first = p.block0 + cta, end = first + 1, stride = 1;
  if (kp.walk == kStrided || dynamic) end = blocks, stride = ctas;
  if (kp.walk == kChunk) first = int(int64_t(blocks) * cta / ctas), end = int(int64_t(blocks) * (cta + 1) / ctas);
  auto block_at = [&](int block) { return query_block<T::BM, T::BN, T::Causal>(p, block); };

  if (threadIdx.x == 0) {
    prefetch_tma_descriptor(kp.tma_q.get_tma_descriptor());
    prefetch_tma_descriptor(kp.tma_k.get_tma_descriptor());
    prefetch_tma_descriptor(kp.tma_v.get_tma_descriptor());
    FullBarrier::init(&smem.q_full, 1);                       // the producer's arrive + TMA bytes
    FullBarrier::init(&smem.v_tail, 1);
    EmptyBarrier::init(&smem.q_empty, 4 * T::kConsumers);     // one arrive per consumer warp
    for (int s = 0; s < T::Stages; ++s) {
      FullBarrier::init(&smem.k_full[s], 1);
      FullBarrier::init(&smem.v_full[s], 1);
      EmptyBarrier::init(&smem.k_empty[s], 4 * T::kConsumers);
      EmptyBarrier::init(&smem.v_empty[s], 4 * T::kConsumers);
    }
    for (int i = 0; i < 2; ++i) {
      EmptyBarrier::init(&smem.tickets.full[i], 1);
      EmptyBarrier::init(&smem.tickets.empty[i], 128 * T::kConsumers);  // every consumer thread (take_ticket)
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();

  PipeState<T::Stages> st;  // the K/V rings, carried from block to block by both roles
  uint32_t q_phase = 0;     // Q's barriers flip once per block
  if (warp_group == 0) {
    cutlass::arch::warpgroup_reg_dealloc<T::kProducerRegs>();
    if (threadIdx.x < 32) {
      const bool leader = cute::elect_one_sync();
      uint32_t tail_phase = 0;  // the producer's own barrier for a varlen sequence's last V block
      for (int block = first, visit = 0; block < end; ++visit) {
        const QueryBlock qb = block_at(block);
        if (qb.row0 < qb.seqlen_q) {  // else past a shorter varlen sequence's end: no rows
          if (qb.n_end > qb.n_begin) {
            load<T>(kp, smem, qb, st, q_phase, tail_phase, leader);
          } else {  // no key to see: nothing to load, but Q's buffer changes hands all the same
            EmptyBarrier::wait(&smem.q_empty, q_phase ^ 1);
            if (leader) FullBarrier::arrive(&smem.q_full);
          }
          q_phase ^= 1;
        }
        // The next block: drawn once this one's loads are issued (its consumers need it only when
        // done with it), so that no value lives across them (the producer's registers are few).
        block = dynamic ? publish_ticket(smem.tickets, visit, threadIdx.x == 0 ? draw_ticket(kp.tickets) : 0)
                        : block + stride;
      }
      if (dynamic && threadIdx.x == 0) stop_drawing(kp.tickets);
    }
    return;
  }
  cutlass::arch::warpgroup_reg_alloc<T::kConsumerRegs>();
  const int wg = warp_group - 1, ctid = int(threadIdx.x) - 128;
  typename T::TiledMmaO mma_o;
  Tensor acc_o = partition_fragment_C(mma_o, Shape<Int<T::BM>, Int<T::D>>{});  // ((2,2,D/8),1,1) fp32
  constexpr int kRows = decltype(size<0>(rowcol(acc_o.layout())))::value;  // query rows this thread holds (2)
  // Every block takes Q's buffer (q_full) and gives it back (q_empty) once its last S = Q K^T (mma),
  // or, where O leaves through that buffer, its epilogue is done; a block without keys (O = 0,
  // LSE = -inf) only takes and gives.
  // A dynamic walk's next block is read back from shared memory at the top of the loop, where it is
  // needed, rather than carried through the block in a register.
  start_turns<T>(wg);
  for (int visit = 0;; ++visit) {
    const int block = !dynamic ? first + visit * stride : visit == 0 ? first : take_ticket(smem.tickets, visit - 1);
    if (block >= end) break;
    const QueryBlock qb = block_at(block);
    if (qb.row0 >= qb.seqlen_q) continue;  // as the producer: neither touches Q's or the rings' barriers
    clear(acc_o);
    OnlineSoftmax<kRows> softmax;
    softmax.init();
    if (qb.n_end > qb.n_begin) {
      mma<T>(smem, p, qb, wg, ctid, acc_o, softmax, st, q_phase);
    } else {
      FullBarrier::wait(&smem.q_full, q_phase);
      if constexpr (T::kSeparateO) release_q<T>(smem, ctid);
    }
    store<T>(smem, p, qb, wg, ctid, acc_o, softmax);
    if constexpr (!T::kSeparateO) release_q<T>(smem, ctid);
    q_phase ^= 1;
  }
  end_turns<T>(wg);
#endif
}

}  // namespace tessera::attn::sm90ws
