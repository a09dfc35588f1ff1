// Attention forward on Hopper, warp-specialised (FlashAttention-3's structure, our code on CuTe).
// One CTA computes O for BM query rows of one (batch, query head); the kernel only orchestrates:
//   warpgroup 0, the producer: gives up registers (setmaxnreg) and one thread streams Q, K and V by
//     TMA through mbarrier rings (mainloop.cuh: load);
//   warpgroups 1.., the consumers (64 query rows each): take the registers, run the GEMMs and the
//     online softmax (mainloop.cuh: mma), then each stores its rows (epilogue.cuh).
// The CTA's place in the problem and its key-block range (masks, windows, causal longest-first order)
// come from QueryBlock (attention/common.cuh), as in the other families.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>

#include "attention/common.cuh"
#include "attention/sm90ws/epilogue.cuh"
#include "attention/sm90ws/mainloop.cuh"
#include "attention/sm90ws/traits.cuh"

namespace tessera::attn::sm90ws {

template <class T>
__global__ void __launch_bounds__(T::kThreads, 1) attention_kernel(const __grid_constant__ KernelParams<T> kp) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  auto& smem = *reinterpret_cast<typename T::SharedStorage*>(smem_raw);
  const AttnParams& p = kp.p;
  const QueryBlock qb = query_block<T::BM, T::BN, T::Causal>(p);
  const bool has_keys = qb.n_end > qb.n_begin;  // else O = 0 and LSE = -inf, nothing to load
  const int warp_group = int(threadIdx.x) / 128;

  if (threadIdx.x == 0) {
    prefetch_tma_descriptor(kp.tma_q.get_tma_descriptor());
    prefetch_tma_descriptor(kp.tma_k.get_tma_descriptor());
    prefetch_tma_descriptor(kp.tma_v.get_tma_descriptor());
    FullBarrier::init(&smem.q_full, 1);  // the producer's arrive + TMA bytes
    for (int s = 0; s < T::Stages; ++s) {
      FullBarrier::init(&smem.k_full[s], 1);
      FullBarrier::init(&smem.v_full[s], 1);
      EmptyBarrier::init(&smem.k_empty[s], 4 * T::kConsumers);  // one arrive per consumer warp
      EmptyBarrier::init(&smem.v_empty[s], 4 * T::kConsumers);
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();

  if (warp_group == 0) {
    cutlass::arch::warpgroup_reg_dealloc<T::kProducerRegs>();
    if (has_keys && threadIdx.x < 32 && cute::elect_one_sync()) load<T>(kp, smem, qb);
    return;
  }
  cutlass::arch::warpgroup_reg_alloc<T::kConsumerRegs>();
  const int wg = warp_group - 1, ctid = int(threadIdx.x) - 128;
  typename T::TiledMmaO mma_o;
  Tensor acc_o = partition_fragment_C(mma_o, Shape<Int<T::BM>, Int<T::D>>{});  // ((2,2,D/8),1,1) fp32
  clear(acc_o);
  constexpr int kRows = decltype(size<0>(rowcol(acc_o.layout())))::value;  // query rows this thread holds (2)
  OnlineSoftmax<kRows> softmax;
  softmax.init();
  if (has_keys) mma<T>(smem, p, qb, wg, ctid, acc_o, softmax);
  store<T>(smem, p, qb, wg, ctid, acc_o, softmax);
#endif
}

}  // namespace tessera::attn::sm90ws
