// Definition of the warp-specialised sm_90a attention launcher; included only by the generated
// instantiations.
#pragma once
#include "attention/launch_kernel.cuh"
#include "attention/sm90ws/config_shape.hpp"
#include "attention/sm90ws/kernel.cuh"
#include "attention/sm90ws/launch.hpp"
#include "attention/sm90ws/tickets.hpp"
#include "core/environment.hpp"

namespace tessera::attn::sm90ws {

template <int Cfg, bool BF16, bool Causal>
cudaError_t launch(const AttnParams& p, int max_sms, cudaStream_t stream) {
  using S = ConfigShape<Cfg>;
  using T = Traits<S::D, S::BM, S::BN, S::Stages, BF16, Causal>;
  static std::atomic<unsigned long long> configured{0};  // per device: the smem limit was raised
  Walk walk = block_walk(p, S::D, S::BM, Causal, T::kSeparateO);
  unsigned* tickets = nullptr;
  if (Causal && detail::environment().attn_dynamic)  // block_walk: kChunk or kOwnBlock
    if ((tickets = ticket_counters(stream))) walk = kDynamic;
  KernelParams<T> kp{p, T::make_tma_q(p), T::make_tma_k(p), T::make_tma_v(p), walk, tickets};
  return launch_kernel(&attention_kernel<T>, S::BM, T::kThreads, T::kSmemBytes, configured, kp, max_sms, stream,
                       walk != kOwnBlock);
}

}  // namespace tessera::attn::sm90ws
