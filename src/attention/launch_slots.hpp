// Slots of device memory that attention kernels coordinate through (sm90ws/tickets.hpp: the dynamic
// block walk's counters; decode/decode.hpp: the key splits' arrival counts). Each family keeps a
// pool of words per slot, zero when the module loads, that its kernels leave zeroed. A slot belongs
// to one launch while it runs: launches on one stream run one after another, so each stream has a
// slot of its own (for good), and each launch captured into a graph gets one of its own (for good:
// the graph may replay it on any stream, beside the stream it was captured from). Past the pool, the
// kernels run without counters (each family's fallback).
#pragma once
#include <cuda_runtime_api.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "core/device.hpp"

namespace tessera::attn {

constexpr int kStreamSlots = 1024;
constexpr int kCapturedSlots = 7168;
constexpr int kLaunchSlots = kStreamSlots + kCapturedSlots;

// Hands out the slots of one device. Thread-safe.
class LaunchSlots {
 public:
  // The slot of a launch on `stream` (`thread`: the calling thread's key, which tells the per-thread
  // default streams apart), or of a captured launch; -1 when none is left.
  int slot(cudaStream_t stream, size_t thread, bool captured);

 private:
  struct Key {
    cudaStream_t stream;
    size_t thread;
    bool operator==(const Key& o) const { return stream == o.stream && thread == o.thread; }
  };
  struct Hash {
    size_t operator()(const Key& k) const { return std::hash<const void*>()(k.stream) ^ (k.thread * 0x9e3779b97f4a7c15ull); }
  };
  std::mutex mu_;
  std::unordered_map<Key, int, Hash> streams_;
  int captured_ = 0;
};

// The slot of a launch on `device` and `stream` (captured or not): a per-thread cache of the last
// stream first, so that a steady stream takes no lock. One slot numbering serves every pool.
int launch_slot(int device, cudaStream_t stream, bool captured);

// A family's pool on each device: `lookup` finds the current device's __device__ array of
// kLaunchSlots * words_per_slot words (cudaGetSymbolAddress in the .cu that defines it).
struct SlotPool {
  int words_per_slot;
  cudaError_t (*lookup)(void** address);
  std::atomic<unsigned*> address[detail::kMaxDevices] = {};  // per device, once found
};

// The words of this launch's slot in `pool` on the current device, or nullptr (run without
// counters) when no slot is left or the pool cannot be found (then it is looked up again by a later
// launch made outside a capture: a lookup inside one could load the module, which a capture may
// not allow).
unsigned* slot_words(SlotPool& pool, cudaStream_t stream);

}  // namespace tessera::attn
