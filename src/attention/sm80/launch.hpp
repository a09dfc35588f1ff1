// Host-side declarations of the sm_80 attention launchers (instantiated in generated files).
#pragma once
#include <cuda_runtime_api.h>

#include "attention/params.hpp"

namespace tessera::attn::sm80 {

template <int Cfg, bool BF16, bool Causal>
cudaError_t launch(const AttnParams& p, int max_sms, cudaStream_t stream);

// Runs configuration `cfg` (an id of attention/configs.def).
// max_sms: the SM budget (0 = every SM; launch_kernel.cuh).
cudaError_t run(int cfg, bool bf16, bool causal, const AttnParams& p, int max_sms, cudaStream_t stream);

}  // namespace tessera::attn::sm80
