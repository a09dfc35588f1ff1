// Slots of the attention kernels' counters (launch_slots.hpp).
#include "attention/launch_slots.hpp"

#include <functional>
#include <thread>

namespace tessera::attn {

int LaunchSlots::slot(cudaStream_t stream, size_t thread, bool captured) {
  std::lock_guard<std::mutex> lock(mu_);
  if (captured) return captured_ < kCapturedSlots ? kStreamSlots + captured_++ : -1;
  const Key key{stream, stream == cudaStreamPerThread ? thread : 0};
  if (auto it = streams_.find(key); it != streams_.end()) return it->second;
  if (streams_.size() >= size_t(kStreamSlots)) return -1;
  const int s = int(streams_.size());
  streams_.emplace(key, s);
  return s;
}

int launch_slot(int device, cudaStream_t stream, bool captured) {
  static LaunchSlots* tables = new LaunchSlots[detail::kMaxDevices];  // never destroyed: usable at exit
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

unsigned* slot_words(SlotPool& pool, cudaStream_t stream) {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev >= detail::kMaxDevices) return nullptr;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess) return nullptr;
  const bool captured = capture != cudaStreamCaptureStatusNone;
  unsigned* base = pool.address[dev].load(std::memory_order_acquire);
  if (!base) {
    if (captured) return nullptr;
    void* p = nullptr;
    if (pool.lookup(&p) != cudaSuccess) {
      (void)cudaGetLastError();  // this launch runs without counters; the call goes on
      return nullptr;
    }
    base = static_cast<unsigned*>(p);
    pool.address[dev].store(base, std::memory_order_release);
  }
  const int slot = launch_slot(dev, stream, captured);
  return slot < 0 ? nullptr : base + size_t(pool.words_per_slot) * slot;
}

}  // namespace tessera::attn
