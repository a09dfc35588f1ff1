// Definition of the warp-specialised sm_90a attention launcher; included only by the generated
// instantiations.
#pragma once
#include "attention/launch_kernel.cuh"
#include "attention/sm90ws/config_shape.hpp"
#include "attention/sm90ws/kernel.cuh"
#include "attention/sm90ws/launch.hpp"

namespace tessera::attn::sm90ws {

// Whether one CTA per SM walks the blocks (loading the next block while it stores this one) rather
// than one CTA per block. Non-causal blocks all take the same time; the walk pays where a block's
// keys are few enough that its start and end (barrier set-up, first loads, O's store) are a visible
// share of it. Causal blocks differ up to the sequence length: one CTA each, longest first, which
// the hardware's dynamic block scheduler balances better than a static walk.
inline bool persistent_walk(const AttnParams& p, int head_dim, bool causal) {
  return !causal && int64_t(p.seqlen_k) * head_dim <= (int64_t(1) << 20);
}

template <int Cfg, bool BF16, bool Causal>
cudaError_t launch(const AttnParams& p, int max_sms, cudaStream_t stream) {
  using S = ConfigShape<Cfg>;
  using T = Traits<S::D, S::BM, S::BN, S::Stages, BF16, Causal>;
  static std::atomic<unsigned long long> configured{0};  // per device: the smem limit was raised
  const bool persistent = persistent_walk(p, S::D, Causal);
  KernelParams<T> kp{p, T::make_tma_q(p), T::make_tma_k(p), T::make_tma_v(p), persistent ? 1 : 0};
  return launch_kernel(&attention_kernel<T>, S::BM, T::kThreads, T::kSmemBytes, configured, kp, max_sms, stream,
                       persistent);
}

}  // namespace tessera::attn::sm90ws
