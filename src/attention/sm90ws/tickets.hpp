// The dynamic block walk's counters (launch.hpp: kDynamic): two words of a launch slot
// (attention/launch_slots.hpp) that the kernels leave zeroed (scheduler.cuh). Without a slot,
// launches take the static walks.
#pragma once
#include <cuda_runtime_api.h>

namespace tessera::attn::sm90ws {

// This launch's counters on the current device, or nullptr (static walk).
unsigned* ticket_counters(cudaStream_t stream);

}  // namespace tessera::attn::sm90ws
