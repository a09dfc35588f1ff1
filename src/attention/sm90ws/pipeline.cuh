// The K and V pipelines' bookkeeping: which ring stage a key block uses and the parity to wait on.
#pragma once

#include <cstdint>

namespace tessera::attn::sm90ws {

// The i-th key block a CTA visits (in its walk order) sits in stage i % Stages; each wrap of the ring
// flips the phase whose completion a waiter watches. Producer and consumers advance their own copy
// in the same order, so they agree on every block's stage without talking.
template <int Stages>
struct PipeState {
  int stage = 0;
  uint32_t phase = 0;
  __device__ __forceinline__ void advance() {
    if (++stage == Stages) {
      stage = 0;
      phase ^= 1;
    }
  }
};

}  // namespace tessera::attn::sm90ws
