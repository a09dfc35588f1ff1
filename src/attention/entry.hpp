// What the attention entries (api.cpp: attention, kvcache.cpp: attention_with_kvcache, varlen.cpp:
// attention_varlen) share after validation: the kernels' parameters, the decode family's plan and
// the prefill families' configuration and launch. Implemented in api.cpp.
#pragma once
#include <cstddef>
#include <cstdint>

#include "attention/decode/decode.hpp"
#include "attention/params.hpp"
#include "core/device.hpp"
#include "tessera/tessera.hpp"

namespace tessera::attn {

// AttnParams of a validated call: the scale (and its base-2 form), causal folded into the window,
// a window side reaching past every key dropped, the softcap factors.
AttnParams params_of(const AttentionArgs& args);

// Whether decode calls launch as programmatic dependent launches (decode::run's dependent_launch;
// decode_dependent_launch: on this device, cc 9.x only).
// Off: behind the GEMM that precedes attention in a decode step an early launch gains nothing, and
// calls of many CTAs, back to back or between GEMMs, run slower with it (docs/PERF.md); only small
// calls back to back would gain.
constexpr bool kDecodeDependentLaunch = false;
inline bool decode_dependent_launch(const detail::DeviceInfo& dev) {
  return kDecodeDependentLaunch && dev.cc_major == 9;
}

// The decode family's plan on `dev` under the call's SM budget (max_sms), given workspace_bytes of
// workspace; false when a CTA does not fit the device's shared memory.
bool decode_plan_on(const detail::DeviceInfo& dev, int64_t batch, int64_t seqlen_q, int64_t seqlen_k, int64_t heads_q,
                    int64_t heads_kv, int64_t head_dim, int max_sms, size_t workspace_bytes, int64_t window_left,
                    decode::Plan* out);

// The TESSERA_ATTN_* overrides for a prefill call of head_dim, checked before any device is:
// INVALID_ARGUMENT for a malformed or unknown value (or a row of another head dim), NOT_SUPPORTED
// for a row whose family cannot run the call (varlen: variable-length batches).
Status check_prefill_overrides(int64_t head_dim, bool varlen);

// NOT_SUPPORTED on a device older than sm_80.
Status check_device(const detail::DeviceInfo& dev);

// Runs the prefill configuration for head_dim (the default for `dev`, or the override) on `stream`:
// NOT_SUPPORTED where the device cannot run it (an sm_90a row off cc 9.0, shared memory), or for a
// varlen call (p.cu_seqlens_q set) when no row of a family that runs them fits.
Status run_prefill(const detail::DeviceInfo& dev, int64_t head_dim, bool bf16, bool varlen, const AttnParams& p,
                   int max_sms, void* stream);

// A stand-in device for workspace queries without a usable GPU: 256 SMs holding 4 decode CTAs of
// this head dim each, so that the plan's workspace bounds any real GPU's.
detail::DeviceInfo workspace_bound_device(int64_t head_dim);

}  // namespace tessera::attn
