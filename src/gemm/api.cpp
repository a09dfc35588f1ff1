// tessera::gemm: validate -> the launch plan (memoized, gemm/launch_plan.hpp) -> pad unaligned
// operands into the workspace if the plan says so -> launch.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "core/device.hpp"
#include "core/environment.hpp"
#include "core/status.hpp"
#include "gemm/configs.hpp"
#include "gemm/fallback/fallback.hpp"
#include "gemm/launch_plan.hpp"
#include "gemm/plan.hpp"
#include "gemm/sm80/launch.hpp"
#include "gemm/sm90/launch.hpp"
#include "gemm/skinny/skinny.hpp"
#include "tessera/tessera.hpp"

namespace tessera {

namespace {

using detail::fail;
using detail::invalid;
using gemm_impl::Config;
using gemm_impl::GemmPlan;
using gemm_impl::Kernel;
using gemm_impl::LaunchPlan;

constexpr size_t kWorkspaceAlign = 256;

Status cuda_status(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::success();
  return fail(TESSERA_STATUS_CUDA_ERROR, std::string(what) + ": " + cudaGetErrorString(e));
}

Status device_for_gemm(detail::DeviceInfo* dev) {
  if (Status s = detail::current_device(dev); !s.ok()) return s;
  if (dev->cc_major < 8)
    return fail(TESSERA_STATUS_NOT_SUPPORTED, "tessera's GEMM kernels need an sm_80 or newer GPU; this device is sm_" +
                                                  std::to_string(dev->cc_major * 10 + dev->cc_minor));
  return Status::success();
}

bool is_empty(const GemmArgs& args) {
  const int64_t m = args.op_a == Op::N ? args.a.rows : args.a.cols;
  const int64_t n = args.op_b == Op::N ? args.b.cols : args.b.rows;
  return m == 0 || n == 0 || args.d.batch_count == 0;
}

// Copies an operand the kernels cannot read as it is into the workspace (16-bit: zero padded;
// fp32, s8 and fp8: K-major, fp32 split for 3xTF32) and points the canonical params at the copy.
Status pad_into(const gemm_impl::OperandPlan& op, char* dst, const void** ptr, int64_t* ld, int64_t* batch_stride,
                cudaStream_t stream) {
  const int64_t contiguous = op.k_major ? op.k : op.rows;
  const int64_t outer = op.copies_k_major() ? op.rows : op.k_major ? op.rows : op.k;
  cudaError_t e;
  if (op.f32)
    e = gemm_impl::fallback::prepare_f32(static_cast<const float*>(op.ptr), op.ld, op.batch_stride, op.k_major, op.rows,
                                         op.k, reinterpret_cast<float*>(dst), op.padded_k, op.split, op.padded_batches,
                                         stream);
  else if (op.b8)
    e = gemm_impl::fallback::prepare_8bit(static_cast<const int8_t*>(op.ptr), op.ld, op.batch_stride, op.k_major, op.rows,
                                        op.k, reinterpret_cast<int8_t*>(dst), op.padded_k, op.padded_batches, stream);
  else
    e = gemm_impl::fallback::pad_operand(op.ptr, op.ld, op.batch_stride, outer, contiguous, dst, op.padded_ld,
                                         op.padded_batches, stream);
  if (e != cudaSuccess) return cuda_status(e, "copying an operand into the workspace");
  *ptr = dst;
  *ld = op.padded_ld;
  *batch_stride = op.padded_batches > 1 ? op.padded_ld * outer : 0;
  return Status::success();
}

Status run_gemm(const GemmArgs& args, void* stream_ptr, void* workspace, size_t workspace_bytes) {
  if (Status s = gemm_impl::validate(args); !s.ok()) return s;
  if (workspace_bytes > 0 && workspace == nullptr)
    return invalid("workspace: null pointer with workspace_bytes = " + std::to_string(workspace_bytes));
  if (workspace && reinterpret_cast<uintptr_t>(workspace) % kWorkspaceAlign != 0)
    return invalid("workspace: must be 256-byte aligned (cudaMalloc memory is)");
  // Argument errors (a bad override included) come before the device, with or without a GPU.
  if (Status s = gemm_impl::overrides_error(args); !s.ok()) return s;
  if (is_empty(args)) return Status::success();
  detail::DeviceInfo dev;
  if (Status s = device_for_gemm(&dev); !s.ok()) return s;
  LaunchPlan lp;
  if (Status s = gemm_impl::plan_for(args, dev, workspace_bytes, &lp); !s.ok()) return s;

  // The canonical problem at this call's addresses, in the plan's orientation.
  const GemmPlan plan = gemm_impl::make_plan(args, lp.flip);
  gemm_impl::GemmParams p = plan.params;
  auto stream = static_cast<cudaStream_t>(stream_ptr);
  char* ws = static_cast<char*>(workspace);
  if (lp.pad_a)
    if (Status s = pad_into(plan.a, ws, &p.a, &p.lda, &p.batch_stride_a, stream); !s.ok()) return s;
  if (lp.pad_b)
    if (Status s = pad_into(plan.b, ws + lp.pad_b_offset, &p.b, &p.ldb, &p.batch_stride_b, stream); !s.ok()) return s;
  if (lp.pad_a || lp.pad_b) p.k = int(plan.kernel_k);  // 3xTF32: the copies' three K ranges

  const Config& cfg = *lp.config;
  cudaError_t e;
  if (cfg.kernel == Kernel::Fallback) {
    e = gemm_impl::fallback::simt(plan.ab_dtype, plan.a.k_major, plan.b.k_major, plan.params, stream);
  } else if (cfg.kernel == Kernel::Skinny) {
    e = gemm_impl::skinny::run(plan.ab_dtype, p, lp.skinny_w_tiles, detail::environment().gemm_pdl && dev.cc_major == 9,
                              stream);
  } else if (cfg.kernel == Kernel::Sm90) {
    gemm_impl::sm90::Launch l = lp.sm90;
    if (l.splits > 1 || l.stream_k) l.workspace = ws + lp.fixup_offset;
    e = gemm_impl::sm90::run(cfg.id, plan.ab_dtype, plan.a.kernel_k_major(), plan.b.kernel_k_major(), p, l, stream);
  } else {
    e = gemm_impl::sm80::run(cfg.id, plan.ab_dtype, plan.a.kernel_k_major(), plan.b.kernel_k_major(), p, stream);
  }
  return cuda_status(e, cfg.name);
}

// gemm_workspace_size without a usable device: an upper bound over every config and the GPUs
// gemm/configs.hpp names (kSplitKBoundSms, kStreamKBoundSms), as a device-free answer.
size_t device_free_workspace(const GemmArgs& args, const detail::Environment& env) {
  const GemmPlan plan = gemm_impl::make_plan(args);
  size_t bytes = plan.workspace_bytes;
  if (plan.empty) return bytes;
  const gemm_impl::GemmParams& p = plan.params;
  const size_t pads = plan.a.pad_bytes + plan.b.pad_bytes;
  if (env.gemm_splits > 1)  // room for the forced ranges on any config
    bytes = std::max(bytes, pads + gemm_impl::splitk_workspace_bound(p.m, p.n, p.k, p.batch, env.gemm_splits));
  if (env.gemm_streamk == 1) {  // room for stream-K on any config and GPU up to the bound
    size_t most = 0;
    for (const Config& c : gemm_impl::configs())
      if (c.kernel == Kernel::Sm90) most = std::max(most, gemm_impl::streamk_bytes(c, gemm_impl::kSplitKBoundSms));
    bytes = std::max(bytes, pads + most);
  }
  return bytes;
}

}  // namespace

Status gemm(const GemmArgs& args, void* stream, void* workspace, size_t workspace_bytes) {
  return detail::remember(run_gemm(args, stream, workspace, workspace_bytes));
}

Status gemm_workspace_size(const GemmArgs& args, size_t* bytes) {
  auto impl = [&]() -> Status {
    if (!bytes) return invalid("bytes: null pointer");
    if (Status s = gemm_impl::validate(args); !s.ok()) return s;
    if (Status s = gemm_impl::overrides_error(args); !s.ok()) return s;
    *bytes = 0;
    if (is_empty(args)) return Status::success();
    // With a device: exactly what its plan uses; without one, a bound that covers any device.
    detail::DeviceInfo dev;
    if (!device_for_gemm(&dev).ok()) {
      *bytes = device_free_workspace(args, detail::environment());
      return Status::success();
    }
    // A call the plan refuses (a requested config that cannot run it) is refused by gemm() itself,
    // with the reason; asking for its workspace is not an error.
    LaunchPlan lp;
    const Status s = gemm_impl::plan_for(args, dev, gemm_impl::kAnyWorkspace, &lp);
    if (s.code == TESSERA_STATUS_INVALID_ARGUMENT) return s;
    *bytes = s.ok() ? lp.workspace_bytes : device_free_workspace(args, detail::environment());
    return Status::success();
  };
  return detail::remember(impl());
}

Status gemm_select_config(const GemmArgs& args, std::string* name) {
  auto impl = [&]() -> Status {
    if (!name) return invalid("name: null pointer");
    if (Status s = gemm_impl::validate(args); !s.ok()) return s;
    if (Status s = gemm_impl::overrides_error(args); !s.ok()) return s;
    detail::DeviceInfo dev;
    if (Status s = device_for_gemm(&dev); !s.ok()) return s;
    // Assuming the workspace gemm_workspace_size asks for (so unaligned operands can be padded).
    LaunchPlan lp;
    if (Status s = gemm_impl::plan_for(args, dev, gemm_impl::kAnyWorkspace, &lp); !s.ok()) return s;
    *name = gemm_impl::config_spelling(*lp.config, lp.flip);
    return Status::success();
  };
  return detail::remember(impl());
}

std::vector<ConfigInfo> gemm_configs() {
  std::vector<ConfigInfo> out;
  for (const gemm_impl::Config& c : gemm_impl::configs()) out.push_back({c.name, c.reason, c.flip});
  return out;
}

void reread_environment() {
  detail::reread_environment();
  gemm_impl::invalidate_plans();  // attention's choice reads the snapshot on every call
}

}  // namespace tessera
