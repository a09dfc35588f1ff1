// Host-side declarations of the warp-specialised sm_90a attention launchers (instantiated in
// generated files).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "attention/params.hpp"
#include "core/host_device.hpp"

namespace tessera::attn::sm90ws {

// How the CTAs take the blocks. kOwnBlock: one CTA per block, in the grid's order (causal: longest
// first, which the hardware's dynamic block scheduler balances best). Otherwise one CTA per SM walks
// several, loading the next block while it stores this one, which pays where a block's keys are few
// enough that its start and end (barrier set-up, first loads, O's store) are a visible share of it:
// kStrided (block, block + gridDim.x, ...) for non-causal blocks, which all take the same time;
// kChunk (a run of consecutive blocks) for short causal ones, so every CTA gets each length alike;
// only where O has its own buffer (the next Q need not wait for the store) and a head has at most
// 6 query blocks (beyond, a chunk's uneven share of lengths costs more than the walk saves).
// Variable-length batches judge by their longest sequences (a chunk then also holds the empty
// blocks past shorter ones' ends, which cost a CTA almost nothing).
// kDynamic (scheduler.cuh) takes the place of both causal walks where the launch has a counter slot
// (tickets.hpp; TESSERA_ATTN_DYNAMIC=0 keeps the static ones): one CTA per SM draws the blocks in
// the grid's order, so a CTA loads its next block while it stores this one (kOwnBlock's CTAs start
// cold and end idle) and takes the next free block (a chunk's share is fixed in advance). Non-causal
// blocks all take the same time, and there it measured no gain over the static walks.
enum Walk : int { kOwnBlock = 0, kStrided = 1, kChunk = 2, kDynamic = 3 };
inline Walk block_walk(const AttnParams& p, int head_dim, int block_m, bool causal, bool separate_o) {
  const int64_t keys = planned_keys(p), rows = planned_rows(p);
  if (!causal) return keys * head_dim <= (int64_t(1) << 20) ? kStrided : kOwnBlock;
  return separate_o && (rows + block_m - 1) / block_m <= 6 ? kChunk : kOwnBlock;
}

// The batch mode the TMA descriptors describe: the call's batches, or for variable-length batches
// (packed rows, batch strides 0, which TMA cannot take) one, whose rows the sequences offset into.
TESSERA_HD int tma_batches(const AttnParams& p) { return p.cu_seqlens_q ? 1 : p.batch; }

template <int Cfg, bool BF16, bool Causal>
cudaError_t launch(const AttnParams& p, int max_sms, cudaStream_t stream);

// Runs configuration `cfg` (an sm90ws id of attention/configs.def).
// max_sms: the SM budget (0 = every SM; launch_kernel.cuh).
cudaError_t run(int cfg, bool bf16, bool causal, const AttnParams& p, int max_sms, cudaStream_t stream);

// Whether the TMA descriptors can describe these operands: every stride of a mode longer than one is
// positive and under 2^36 elements (TMA takes no broadcast; the cp.async families do).
bool supports(const AttnParams& p);

}  // namespace tessera::attn::sm90ws
