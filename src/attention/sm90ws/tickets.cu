// The dynamic walk's counter pool (tickets.hpp), one per device, zero when the module loads.
#include <atomic>

#include "attention/sm90ws/tickets.hpp"
#include "core/device.hpp"

namespace tessera::attn::sm90ws {
namespace {
__device__ unsigned g_ticket_pool[2 * kTicketSlots];
}  // namespace

unsigned* ticket_counters(cudaStream_t stream) {
  static std::atomic<unsigned*> pools[detail::kMaxDevices];
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev >= detail::kMaxDevices) return nullptr;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess) return nullptr;
  const bool captured = capture != cudaStreamCaptureStatusNone;
  unsigned* pool = pools[dev].load(std::memory_order_acquire);
  if (!pool) {
    // Not inside a capture: a lookup there could load the module, which a capture may not allow.
    if (captured) return nullptr;
    void* p = nullptr;
    if (cudaGetSymbolAddress(&p, g_ticket_pool) != cudaSuccess) {
      (void)cudaGetLastError();  // this launch takes a static walk; the call goes on
      return nullptr;
    }
    pool = static_cast<unsigned*>(p);
    pools[dev].store(pool, std::memory_order_release);
  }
  const int slot = ticket_slot(dev, stream, captured);
  return slot < 0 ? nullptr : pool + 2 * slot;
}

}  // namespace tessera::attn::sm90ws
