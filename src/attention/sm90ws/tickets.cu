// The dynamic walk's counter pool (tickets.hpp), one per device, zero when the module loads.
#include "attention/launch_slots.hpp"
#include "attention/sm90ws/tickets.hpp"

namespace tessera::attn::sm90ws {
namespace {
constexpr int kWords = 2;
__device__ unsigned g_ticket_pool[kWords * kLaunchSlots];
cudaError_t lookup(void** address) { return cudaGetSymbolAddress(address, g_ticket_pool); }
}  // namespace

unsigned* ticket_counters(cudaStream_t stream) {
  static SlotPool pool{kWords, &lookup};
  return slot_words(pool, stream);
}

}  // namespace tessera::attn::sm90ws
