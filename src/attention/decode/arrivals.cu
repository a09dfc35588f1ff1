// The fused combine's arrival counters (decode.hpp: arrival_counters), one pool per device, zero
// when the module loads.
#include "attention/decode/decode.hpp"
#include "attention/launch_slots.hpp"

namespace tessera::attn::decode {
namespace {
constexpr int kWords = kArrivalTiles / 4;  // 8-bit counts
__device__ unsigned g_arrival_pool[kWords * kLaunchSlots];
cudaError_t lookup(void** address) { return cudaGetSymbolAddress(address, g_arrival_pool); }
}  // namespace

unsigned* arrival_counters(cudaStream_t stream) {
  static SlotPool pool{kWords, &lookup};
  return slot_words(pool, stream);
}

}  // namespace tessera::attn::decode
