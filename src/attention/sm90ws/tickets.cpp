// Slots of the dynamic walk's counters (tickets.hpp).
#include "attention/sm90ws/tickets.hpp"
#include "core/device.hpp"

#include <functional>
#include <memory>
#include <thread>

namespace tessera::attn::sm90ws {

int TicketSlots::slot(cudaStream_t stream, size_t thread, bool captured) {
  std::lock_guard<std::mutex> lock(mu_);
  if (captured) return captured_ < kCapturedSlots ? kStreamSlots + captured_++ : -1;
  const Key key{stream, stream == cudaStreamPerThread ? thread : 0};
  if (auto it = streams_.find(key); it != streams_.end()) return it->second;
  if (streams_.size() >= size_t(kStreamSlots)) return -1;
  const int s = int(streams_.size());
  streams_.emplace(key, s);
  return s;
}

int ticket_slot(int device, cudaStream_t stream, bool captured) {
  static TicketSlots* tables = new TicketSlots[detail::kMaxDevices];  // never destroyed: usable at exit
  if (device < 0 || device >= detail::kMaxDevices) return -1;
  thread_local struct {
    int device = -1;
    cudaStream_t stream = nullptr;
    int slot = -1;
  } last;
  if (!captured && last.device == device && last.stream == stream) return last.slot;
  const int s = tables[device].slot(stream, std::hash<std::thread::id>()(std::this_thread::get_id()), captured);
  if (!captured && s >= 0) last = {device, stream, s};
  return s;
}

}  // namespace tessera::attn::sm90ws
