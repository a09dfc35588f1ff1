// Definition of the sm_90a attention launcher; included only by the generated instantiations.
#pragma once
#include "attention/launch_kernel.cuh"
#include "attention/sm90/config_shape.hpp"
#include "attention/sm90/kernel.cuh"
#include "attention/sm90/launch.hpp"

namespace tessera::attn::sm90 {

template <int Cfg, bool BF16, bool Causal>
cudaError_t launch(const AttnParams& p, int max_sms, cudaStream_t stream) {
  using S = ConfigShape<Cfg>;
  using T = Traits<S::D, S::BM, S::BN, S::Overlap, BF16, Causal>;
  static std::atomic<unsigned long long> configured{0};  // per device: the smem limit was raised
  return launch_kernel(&attention_kernel<T>, S::BM, T::kThreads, T::kSmemBytes, configured, p, max_sms, stream);
}

}  // namespace tessera::attn::sm90
