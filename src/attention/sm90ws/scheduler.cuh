// The dynamic block walk (launch.hpp: kDynamic). CTA c (one per SM) starts with block c; each later
// block is a ticket from the launch's counter (tickets[0]: blocks handed out past the first
// gridDim.x), so whichever CTA finishes first takes the next block in the grid's order (causal: the
// longest first). The producer draws the ticket once it has issued a block's loads (the ring is
// full then: it waits for a free stage anyway) and hands it to the consumers through a two-entry
// ring in shared memory; the consumers take it when they finish the block. A CTA
// whose ticket is past the end stops, and the last one to stop zeroes the counter and its companion
// (tickets[1]: CTAs stopped) for the next launch that uses the slot (tickets.hpp).
#pragma once

#include <cutlass/arch/barrier.h>

namespace tessera::attn::sm90ws {

// In the CTA's shared storage.
struct TicketRing {
  int block[2];
  uint64_t full[2], empty[2];
};

// Producer, lane 0: the CTA's next block.
__device__ __forceinline__ int draw_ticket(unsigned* tickets) {
  return int(atomicAdd(&tickets[0], 1u)) + int(gridDim.x);
}

// Producer warp: hands lane 0's `block` to the consumers as the CTA's (visit + 1)-th block; returns
// it to every lane.
__device__ __forceinline__ int publish_ticket(TicketRing& ring, int visit, int block) {
  const int i = visit % 2;
  cutlass::arch::ClusterBarrier::wait(&ring.empty[i], ((visit / 2) & 1) ^ 1);  // a fresh barrier passes parity 1
  if (threadIdx.x % 32 == 0) {
    ring.block[i] = block;
    cutlass::arch::ClusterBarrier::arrive(&ring.full[i]);  // releases the store above
  }
  return __shfl_sync(0xffffffff, block, 0);
}

// Consumer threads: the block after their `visit`-th. Every consumer thread arrives to free the entry
// (kernel.cuh counts 128 per consumer warpgroup), so that each read is released by its own thread's
// arrive before the producer writes the entry again.
__device__ __forceinline__ int take_ticket(TicketRing& ring, int visit) {
  const int i = visit % 2;
  cutlass::arch::ClusterBarrier::wait(&ring.full[i], (visit / 2) & 1);
  const int block = ring.block[i];
  cutlass::arch::ClusterBarrier::arrive(&ring.empty[i]);
  return block;
}

// Producer, lane 0, after drawing past the end.
__device__ __forceinline__ void stop_drawing(unsigned* tickets) {
  __threadfence();  // this CTA's last draw comes before its count
  if (atomicAdd(&tickets[1], 1u) == gridDim.x - 1) {  // every CTA has drawn its last
    atomicExch(&tickets[0], 0u);
    atomicExch(&tickets[1], 0u);
  }
}

}  // namespace tessera::attn::sm90ws
