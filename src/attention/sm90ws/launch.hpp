// Host-side declarations of the warp-specialised sm_90a attention launchers (instantiated in
// generated files).
#pragma once
#include <cuda_runtime_api.h>

#include "attention/params.hpp"

namespace tessera::attn::sm90ws {

template <int Cfg, bool BF16, bool Causal>
cudaError_t launch(const AttnParams& p, int max_sms, cudaStream_t stream);

// Runs configuration `cfg` (an sm90ws id of attention/configs.def).
// max_sms: the SM budget (0 = every SM; launch_kernel.cuh).
cudaError_t run(int cfg, bool bf16, bool causal, const AttnParams& p, int max_sms, cudaStream_t stream);

// Whether the TMA descriptors can describe these operands: every stride of a mode longer than one is
// positive and under 2^36 elements (TMA takes no broadcast; the cp.async families do).
bool supports(const AttnParams& p);

}  // namespace tessera::attn::sm90ws
