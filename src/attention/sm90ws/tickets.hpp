// The dynamic block walk's counters (launch.hpp: kDynamic): two words a slot, in a pool of device
// memory that the kernels leave zeroed (scheduler.cuh). A slot belongs to one launch while it runs:
// launches on one stream run one after another, so each stream has a slot of its own (for good),
// and each launch captured into a graph gets one of its own (for good: the graph may replay it on
// any stream, beside the stream it was captured from). Past the pool, launches take the static walks.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace tessera::attn::sm90ws {

constexpr int kStreamSlots = 1024;
constexpr int kCapturedSlots = 7168;
constexpr int kTicketSlots = kStreamSlots + kCapturedSlots;

// Hands out the slots of one device's pool. Thread-safe.
class TicketSlots {
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
// stream first, so that a steady stream takes no lock.
int ticket_slot(int device, cudaStream_t stream, bool captured);

// Device code: the counters of `slot` on the current device, or nullptr (static walk) when the pool
// cannot be found (then it is looked up again by a later launch made outside a capture).
unsigned* ticket_counters(cudaStream_t stream);

}  // namespace tessera::attn::sm90ws
