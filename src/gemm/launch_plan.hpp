// One GEMM launch, decided on the host: which kernel runs, in which orientation, how K is cut, what
// the workspace holds and how the kernel starts. gemm(), gemm_workspace_size() and
// gemm_select_config() read the same plan; the launchers only carry it out, so every refusal is a
// status here, before anything launches. A plan depends on the call's signature (device, shapes,
// majors, dtypes, alignment classes, epilogue, batch, SM budget, workspace given, the overrides),
// never on its addresses, so plans are memoized: per host thread (no lock on any path), a bounded
// table, dropped when the environment is re-read or a tuning is stored.
#pragma once
#include <cstddef>

#include "core/device.hpp"
#include "gemm/configs.hpp"
#include "gemm/sm90/launch.hpp"
#include "tessera/tessera.hpp"

namespace tessera::gemm_impl {

struct LaunchPlan {
  const Config* config = nullptr;  // what runs: an sm90 or sm80 row, or the fallback
  bool flip = false;               // the flipped orientation (gemm/plan.hpp make_plan's `flip`)
  // The workspace, in this order: A's zero-padded copy, B's, then the split-K / stream-K area
  // (fixup_offset, 256-byte aligned like the copies).
  bool pad_a = false, pad_b = false;
  size_t pad_b_offset = 0, fixup_offset = 0;
  size_t workspace_bytes = 0;  // the whole of it (0: none)
  sm90::Launch sm90;           // config->kernel == Kernel::Sm90: how it launches (workspace unset)
  int skinny_w_tiles = 1;      // config->kernel == Kernel::Skinny: n8 tiles of W per CTA (skinny::w_tiles)
};

// The workspace that lets the call take the plan's fastest path.
constexpr size_t kAnyWorkspace = ~size_t(0);

// The overrides as this call sees them: a malformed TESSERA_* variable, or a TESSERA_GEMM_CONFIG this
// build does not know (GemmArgs::config, checked by validate, wins over it). Before the device, so
// that such an argument error is one with or without a GPU.
Status overrides_error(const GemmArgs& args);

// The plan for `args` (validate and overrides_error passed) on `dev`, given `workspace_bytes`
// (kAnyWorkspace: as much as the plan wants), or the status that refuses the call.
Status plan_for(const GemmArgs& args, const detail::DeviceInfo& dev, size_t workspace_bytes, LaunchPlan* out);

// Drops every thread's memoized plans (their next call re-plans): the environment was re-read or a
// tuning stored.
void invalidate_plans();

}  // namespace tessera::gemm_impl
