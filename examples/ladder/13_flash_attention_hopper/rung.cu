// Rung 13: FlashAttention on Hopper (sm_90a), assembled from tessera's own pieces.
//
// This rung writes no mainloop of its own: it is the top of the ladder, where the production
// attention kernel's parts (src/attention/sm90ws/) are put together by hand for one configuration,
// d = 128, 128 query rows x 128 keys per block, K/V rings of 2 stages (configs.def row 22,
// fa3_sm90_d128_128x128), one CTA per query block. What each piece does and what it adds over
// rung 12 is in README.md; in short:
//   Traits<...>          (traits.cuh)   tiles, GMMA smem layouts, the two WGMMAs, TMA types, smem
//   load<T>              (mainloop.cuh) producer: warp 0 (one lane issues) streams Q, K, V by TMA
//                                       into mbarrier rings
//   mma<T>               (mainloop.cuh) consumer warpgroup: S = Q K^T, online softmax, O += P V on
//                                       WGMMA, softmax overlapped with the next GEMMs, ping-pong
//   store<T>             (epilogue.cuh) O / l -> smem -> 16-byte stores
//   query_block, OnlineSoftmax (attention/common.cuh)   the CTA's block and the softmax state
//   launch_kernel        (attention/launch_kernel.cuh)  smem opt-in and the grid
// The kernel body below is src/attention/sm90ws/kernel.cuh without the persistent block walk.
#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>

#include <atomic>
#include <cmath>

#include "attention/common.cuh"
#include "attention/launch_kernel.cuh"
#include "attention/params.hpp"
#include "attention/sm90ws/epilogue.cuh"
#include "attention/sm90ws/mainloop.cuh"
#include "attention/sm90ws/pipeline.cuh"
#include "attention/sm90ws/traits.cuh"
#include "common/harness.hpp"

// A named namespace: nvcc's registration stub cannot name kernels of an anonymous namespace once
// CuTe's headers (which open one of their own) are in scope.
namespace rung13 {

using namespace cute;
namespace attn = tessera::attn;
namespace ws = tessera::attn::sm90ws;

constexpr int kD = 128, kBM = 128, kBN = 128, kStages = 2;
// kBM / 64 = 2 consumer warpgroups (64 query rows each, ping-pong) + 1 producer warpgroup.
template <bool kCausal>
using Traits = ws::Traits<kD, kBM, kBN, kStages, /*BF16=*/false, kCausal>;

template <class T>
__global__ void __launch_bounds__(T::kThreads, 1) fa3_kernel(const __grid_constant__ ws::KernelParams<T> kp) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  auto& smem = *reinterpret_cast<typename T::SharedStorage*>(smem_raw);  // Q, K ring, V ring, O, barriers
  // This CTA's query block (block0 + blockIdx.x; causal: longest first) and the key blocks
  // [n_begin, n_end) some of its rows see. S is a multiple of kBM = kBN here, so every row sees
  // at least one key and n_end > n_begin (the production kernel also handles empty blocks).
  const attn::QueryBlock qb = attn::query_block<T::BM, T::BN, T::Causal>(kp.p);

  // Full barriers count the producer's arrive plus the TMA's bytes (transaction count); empty
  // barriers one arrive per consumer warp. One thread initialises, fence + __syncthreads publish.
  if (threadIdx.x == 0) {
    prefetch_tma_descriptor(kp.tma_q.get_tma_descriptor());
    prefetch_tma_descriptor(kp.tma_k.get_tma_descriptor());
    prefetch_tma_descriptor(kp.tma_v.get_tma_descriptor());
    ws::FullBarrier::init(&smem.q_full, 1);
    ws::FullBarrier::init(&smem.v_tail, 1);  // load()'s own, for packed (varlen) sequences only
    ws::EmptyBarrier::init(&smem.q_empty, 4 * T::kConsumers);  // load() waits on it (passes at once here)
    for (int s = 0; s < T::Stages; ++s) {
      ws::FullBarrier::init(&smem.k_full[s], 1);
      ws::FullBarrier::init(&smem.v_full[s], 1);
      ws::EmptyBarrier::init(&smem.k_empty[s], 4 * T::kConsumers);
      ws::EmptyBarrier::init(&smem.v_empty[s], 4 * T::kConsumers);
    }
    cutlass::arch::fence_barrier_init();
  }
  __syncthreads();

  // Both roles start the rings at stage 0, phase 0 and advance them in the same key order, so they
  // agree on each block's stage without exchanging it. Q's barriers are used once: phase 0.
  ws::PipeState<T::Stages> pipe;
  constexpr uint32_t kQPhase = 0;
  const int warp_group = int(threadIdx.x) / 128;

  if (warp_group == 0) {  // producer: TMA needs one issuing lane and few registers
    cutlass::arch::warpgroup_reg_dealloc<T::kProducerRegs>();
    uint32_t tail_phase = 0;
    if (threadIdx.x < 32) ws::load<T>(kp, smem, qb, pipe, kQPhase, tail_phase, cute::elect_one_sync());
    return;  // the smem stays: the CTA lives until the consumers exit
  }

  // Consumers: setmaxnreg hands them the producer's registers (O 64 + S 64 + P 32 per thread).
  cutlass::arch::warpgroup_reg_alloc<T::kConsumerRegs>();
  const int wg = warp_group - 1, ctid = int(threadIdx.x) - 128;  // consumer warpgroup, thread among consumers
  typename T::TiledMmaO mma_o;
  Tensor acc_o = partition_fragment_C(mma_o, Shape<Int<T::BM>, Int<T::D>>{});  // ((2,2,D/8),1,1) fp32: 64 rows x D
  clear(acc_o);
  constexpr int kRows = decltype(size<0>(attn::rowcol(acc_o.layout())))::value;  // query rows per thread (2)
  attn::OnlineSoftmax<kRows> softmax;
  softmax.init();
  ws::mma<T>(smem, kp.p, qb, wg, ctid, acc_o, softmax, pipe, kQPhase);  // every key block of qb
  ws::store<T>(smem, kp.p, qb, wg, ctid, acc_o, softmax);              // O / l -> gmem (lse: none)
  // mma() already gave Q's buffer back after its last S = Q K^T (for the next query block of a
  // persistent CTA; this CTA has none, so nobody waits for it).
#endif
}

// Q, K, V, O: [B, H, S, D] -> AttnParams' (batch, seq, head) strides; the rest as the library's API
// fills them (api.cpp: params_of) for a plain causal or full call.
template <bool kCausal>
void launch_impl(const half* Q, const half* K, const half* V, half* O, int B, int H, int S, cudaStream_t stream) {
  using T = Traits<kCausal>;
  attn::AttnParams p;
  p.q = Q, p.k = K, p.v = V, p.o = O;
  p.batch = B, p.seqlen_q = p.seqlen_k = p.max_seqlen_q = S, p.heads_q = p.heads_kv = H;
  const int64_t stride[3] = {int64_t(H) * S * kD, kD, int64_t(S) * kD};
  for (int i = 0; i < 3; ++i) p.q_stride[i] = p.k_stride[i] = p.v_stride[i] = p.o_stride[i] = stride[i];
  p.scale = 1.0f / std::sqrt(float(kD));
  p.scale_log2 = p.scale * 1.4426950408889634f;  // exp2 with log2(e) folded in
  p.window_left = -1, p.window_right = kCausal ? 0 : -1;
  // The TMA descriptors (host-built, passed as __grid_constant__): Traits::make_tma_* describe each
  // operand as (seq, D, head, batch) with boxes of (kBM or kBN, D) in the GMMA-swizzled smem layout.
  ws::KernelParams<T> kp{p, T::make_tma_q(p), T::make_tma_k(p), T::make_tma_v(p), ws::kOwnBlock};
  // launch_kernel raises the dynamic-smem limit once, sets m_blocks and launches one CTA per
  // (query block, head, batch).
  static std::atomic<unsigned long long> configured{0};
  LADDER_CUDA(attn::launch_kernel(&fa3_kernel<T>, kBM, T::kThreads, T::kSmemBytes, configured, kp,
                                  /*max_sms=*/0, stream));
}

void launch(const half* Q, const half* K, const half* V, half* O, int B, int H, int S, int D, bool causal,
            cudaStream_t stream) {
  (void)D;  // the harness passes head_dim = kD
  if (causal) launch_impl<true>(Q, K, V, O, B, H, S, stream);
  else launch_impl<false>(Q, K, V, O, B, H, S, stream);
}

}  // namespace rung13

int main(int argc, char** argv) {
  return ladder::run_attention_rung(argc, argv, {"13_flash_attention_hopper", 90, 90, rung13::kBM, rung13::kBN, rung13::kBN},
                                    rung13::kD, rung13::launch);
}
