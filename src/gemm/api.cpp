// tessera::gemm: validate -> plan (canonicalise) -> choose a configuration -> pad unaligned
// operands into the workspace if needed -> launch.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "core/device.hpp"
#include "core/status.hpp"
#include "gemm/configs.hpp"
#include "gemm/fallback/fallback.hpp"
#include "gemm/plan.hpp"
#include "gemm/sm80/launch.hpp"
#include "gemm/sm90/launch.hpp"
#include "gemm/tune_cache.hpp"
#include "tessera/tessera.hpp"

namespace tessera {
namespace {

using detail::fail;
using detail::invalid;
using gemm_impl::Config;
using gemm_impl::GemmPlan;
using gemm_impl::Kernel;

constexpr size_t kWorkspaceAlign = 256;

Status cuda_status(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return Status::success();
  return fail(TESSERA_STATUS_CUDA_ERROR, std::string(what) + ": " + cudaGetErrorString(e));
}

// The configuration requested by the caller (args, then TESSERA_GEMM_CONFIG), or {null}.
Status requested_config(const GemmArgs& args, gemm_impl::ConfigChoice* out) {
  *out = {};
  std::string name = args.config;
  const char* from = "config";
  if (name.empty()) {
    if (const char* env = std::getenv("TESSERA_GEMM_CONFIG"); env && *env) {
      name = env;
      from = "TESSERA_GEMM_CONFIG";
    }
  }
  if (name.empty()) return Status::success();
  *out = gemm_impl::find_config_choice(name);
  if (!out->config) return invalid(std::string(from) + ": " + gemm_impl::spelling_error(name));
  return Status::success();
}

// An integer override in the environment within [lo, hi]: `unset` when absent; anything else is an
// argument error naming the variable.
Status integer_override(const char* var, long lo, long hi, int unset, int* value) {
  *value = unset;
  const char* env = std::getenv(var);
  if (!env || !*env) return Status::success();
  char* end = nullptr;
  const long v = std::strtol(env, &end, 10);
  if (*end != '\0' || v < lo || v > hi)
    return invalid(std::string(var) + ": must be an integer in " + std::to_string(lo) + ".." + std::to_string(hi) +
                   " (got '" + env + "')");
  *value = int(v);
  return Status::success();
}

// A 0|1 override in the environment: -1 when unset, else 0 or 1; any other value is an argument error.
Status binary_override(const char* var, int* mode) {
  *mode = -1;
  const char* env = std::getenv(var);
  if (!env || !*env) return Status::success();
  if (std::strcmp(env, "0") != 0 && std::strcmp(env, "1") != 0)
    return invalid(std::string(var) + ": must be 0 or 1 (got '" + env + "')");
  *mode = env[0] - '0';
  return Status::success();
}

// The measurement overrides in the environment, read and checked once per call (a typo is an
// argument error, not silently the default), before the device is touched:
struct Overrides {
  // TESSERA_GEMM_SPLITS=N (1..kMaxSplits, e.g. for a split-K sweep) replaces the heuristic's number
  // of K ranges on the sm90 path; gemm_workspace_size then has room for it (a smaller workspace
  // lowers it). 0 = unset.
  int splits = 0;
  // TESSERA_GEMM_STREAMK=0|1 turns stream-K off, or on wherever it can run (split-K ranges from
  // TESSERA_GEMM_SPLITS take precedence); -1 = the heuristic's choice.
  int streamk = -1;
  // TESSERA_GEMM_FLIP=0|1 (also for tests): 0 never computes the orientation opposite to D's
  // storage, 1 does wherever the transposed-store epilogue can run it (gemm/plan.hpp, flip_ok), with
  // the heuristic's or the requested configuration; -1 = the heuristic's choice.
  int flip = -1;
  // TESSERA_GEMM_L2_WARM=N (0..64) replaces the heuristic's L2 warm-up at entry
  // (gemm_impl::l2_warm_ktiles) on the configs that have one; -1 = the heuristic's.
  int l2_warm = -1;
  // TESSERA_SM90_EPILOGUE=tma|smem16|staged forces how the sm90 kernels store D where that mode can
  // run (sm90::EpiMode); kEpiAuto = the kernel's choice.
  int epilogue = gemm_impl::sm90::kEpiAuto;
  // TESSERA_GEMM_PDL=0 launches without programmatic dependent launch; unset or 1 keeps it.
  bool pdl = true;
  // TESSERA_GEMM_ONE_TILE=0 keeps one-wave sm90 launches on the general kernel (sm90 launch.cuh).
  bool one_tile = true;
};

Status read_overrides(Overrides* o) {
  *o = Overrides{};
  if (Status s = integer_override("TESSERA_GEMM_SPLITS", 1, gemm_impl::kMaxSplits, 0, &o->splits); !s.ok()) return s;
  if (Status s = binary_override("TESSERA_GEMM_STREAMK", &o->streamk); !s.ok()) return s;
  if (Status s = binary_override("TESSERA_GEMM_FLIP", &o->flip); !s.ok()) return s;
  if (Status s = integer_override("TESSERA_GEMM_L2_WARM", 0, 64, -1, &o->l2_warm); !s.ok()) return s;
  if (const char* env = std::getenv("TESSERA_SM90_EPILOGUE"); env && *env) {
    using namespace gemm_impl::sm90;
    const std::pair<const char*, int> modes[] = {{"tma", kEpiTma}, {"smem16", kEpiSmem16}, {"staged", kEpiStaged}};
    o->epilogue = -1;
    for (const auto& [spelling, mode] : modes)
      if (!std::strcmp(env, spelling)) o->epilogue = mode;
    if (o->epilogue < 0)
      return invalid(std::string("TESSERA_SM90_EPILOGUE: must be tma, smem16 or staged (got '") + env + "')");
  }
  int pdl = -1;
  if (Status s = binary_override("TESSERA_GEMM_PDL", &pdl); !s.ok()) return s;
  o->pdl = pdl != 0;
  int one_tile = -1;
  if (Status s = binary_override("TESSERA_GEMM_ONE_TILE", &one_tile); !s.ok()) return s;
  o->one_tile = one_tile != 0;
  return Status::success();
}

struct Choice {
  const Config* config = nullptr;
  bool explicit_choice = false;
  bool flip = false;  // run on the flipped orientation (make_plan's `flip`)
};

// `req`: the caller's requested configuration (requested_config), or {null} for the heuristic.
// `tma_ok`: the operands can be read by TMA (aligned, or padded into the caller's workspace) and K > 0.
// `flip`: HeuristicInput::flip, 0 where the flipped orientation cannot run (flip_mode).
Status choose(const gemm_impl::ConfigChoice& req, const GemmPlan& plan, const detail::DeviceInfo& dev, bool tma_ok,
              int flip, Choice* out) {
  const int cc = dev.cc_major * 10 + dev.cc_minor;
  if (const Config* c = req.config) {
    if (cc < c->min_cc || cc > c->max_cc || c->smem_bytes > dev.smem_optin)
      return fail(TESSERA_STATUS_NOT_SUPPORTED, std::string("config: '") + c->name + "' needs sm_" +
                                                    std::to_string(c->min_cc) +
                                                    (c->max_cc == c->min_cc ? std::string("") : std::string("+")) +
                                                    " and " + std::to_string(c->smem_bytes) +
                                                    " bytes of shared memory; this device is sm_" + std::to_string(cc) +
                                                    " with " + std::to_string(dev.smem_optin));
    // (K = 0, D = beta * C, has no product to orient: it runs as any K = 0 call does.)
    if (req.flip && plan.params.k > 0 && (flip == 0 || !tma_ok))
      return fail(TESSERA_STATUS_NOT_SUPPORTED,
                  std::string("config: '") + gemm_impl::config_spelling(*c, true) +
                      "': this call cannot run on the flipped orientation (it needs a D of the operands' 16-bit "
                      "dtype, D and C 16-byte aligned with C laid out like D and D's contiguous extent a multiple of 8, "
                      "TMA-readable operands and K > 0, and "
                      "no TESSERA_GEMM_FLIP=0, TESSERA_GEMM_SPLITS, TESSERA_GEMM_STREAMK=1 or non-TMA "
                      "TESSERA_SM90_EPILOGUE override)");
    *out = {c, true, (req.flip || flip == 2) && c->flip && tma_ok};
    return Status::success();
  }
  const gemm_impl::HeuristicInput in{plan.params.m, plan.params.n, plan.params.k, plan.params.batch, dev.sm_count,
                                     cc,           dev.smem_optin, tma_ok,        flip};
  const gemm_impl::Selection pick = gemm_impl::select(in);
  *out = {pick.config, false, pick.flip};  // select_sm90 flips only configs that can (Config::flip)
  // A configuration `tessera tune` measured fastest here (gemm/tune_cache.hpp), if this call can run it
  // in the orientation it was timed in.
  if (pick.config->kernel != Kernel::Fallback)
    if (const gemm_impl::ConfigChoice tuned = gemm_impl::tuned_config(plan, dev, tma_ok); tuned.config)
      if (!tuned.flip || flip != 0) *out = {tuned.config, false, tuned.flip || (flip == 2 && tuned.config->flip)};
  return Status::success();
}

// HeuristicInput::flip for this call: 0 where the flipped orientation cannot run (the plan's D or C,
// or an override that needs another epilogue or decomposition: gemm/sm90/kernel.cuh epilogue_mode).
int flip_mode(const GemmPlan& plan, const Overrides& o) {
  const bool epi_ok = o.epilogue == gemm_impl::sm90::kEpiAuto || o.epilogue == gemm_impl::sm90::kEpiTma;
  if (!plan.flip_ok || !epi_ok || o.splits > 1 || o.streamk == 1 || o.flip == 0) return 0;
  return o.flip == 1 ? 2 : 1;
}

Status device_for_gemm(detail::DeviceInfo* dev) {
  if (Status s = detail::current_device(dev); !s.ok()) return s;
  if (dev->cc_major < 8)
    return fail(TESSERA_STATUS_NOT_SUPPORTED, "tessera's GEMM kernels need an sm_80 or newer GPU; this device is sm_" +
                                                  std::to_string(dev->cc_major * 10 + dev->cc_minor));
  return Status::success();
}

// Copies an unaligned operand into the workspace and points the canonical params at the copy.
Status pad_into(const gemm_impl::OperandPlan& op, char* dst, const void** ptr, int64_t* ld, int64_t* batch_stride,
                cudaStream_t stream) {
  const int64_t contiguous = op.k_major ? op.k : op.rows;
  const int64_t outer = op.k_major ? op.rows : op.k;
  cudaError_t e = gemm_impl::fallback::pad_operand(op.ptr, op.ld, op.batch_stride, outer, contiguous, dst, op.padded_ld,
                                              op.padded_batches, stream);
  if (e != cudaSuccess) return cuda_status(e, "padding an unaligned operand");
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
  gemm_impl::ConfigChoice req;  // an unknown name is an argument error, with or without a GPU
  if (Status s = requested_config(args, &req); !s.ok()) return s;
  Overrides o;
  if (Status s = read_overrides(&o); !s.ok()) return s;
  GemmPlan plan = gemm_impl::make_plan(args);
  if (plan.empty) return Status::success();

  detail::DeviceInfo dev;
  if (Status s = device_for_gemm(&dev); !s.ok()) return s;
  const bool aligned = plan.a.aligned && plan.b.aligned;
  const size_t pad_bytes = plan.a.pad_bytes + plan.b.pad_bytes;  // the workspace's first part
  const bool tma_ok = plan.params.k > 0 && (aligned || workspace_bytes >= pad_bytes);
  Choice choice;
  if (Status s = choose(req, plan, dev, tma_ok, flip_mode(plan, o), &choice); !s.ok()) return s;
  // The flipped orientation: the same operands and pads with the roles of A and B (M and N) swapped.
  if (choice.flip) plan = gemm_impl::make_plan(args, true);
  auto stream = static_cast<cudaStream_t>(stream_ptr);

  gemm_impl::GemmParams p = plan.params;
  const Config* cfg = choice.config;
  if (cfg->kernel != Kernel::Fallback && !aligned) {
    if (workspace_bytes >= pad_bytes) {
      char* ws = static_cast<char*>(workspace);
      if (!plan.a.aligned)
        if (Status s = pad_into(plan.a, ws, &p.a, &p.lda, &p.batch_stride_a, stream); !s.ok()) return s;
      if (!plan.b.aligned)
        if (Status s = pad_into(plan.b, ws + plan.a.pad_bytes, &p.b, &p.ldb, &p.batch_stride_b, stream); !s.ok())
          return s;
    } else if (choice.explicit_choice) {
      return fail(TESSERA_STATUS_NOT_SUPPORTED,
                  std::string("config: '") + cfg->name + "' needs " + std::to_string(pad_bytes) +
                      " bytes of workspace to pad an operand that is not 16-byte aligned (got " +
                      std::to_string(workspace_bytes) + "); pass a workspace or use simt_fallback");
    } else {
      cfg = &gemm_impl::fallback_config();  // correct for any alignment, without workspace
    }
  }

  // K = 0 (D = beta * C) has no TMA box to describe: any kernel computes it, the fallback will do.
  if (cfg->kernel == Kernel::Sm90 && p.k == 0) cfg = &gemm_impl::fallback_config();

  cudaError_t e;
  if (cfg->kernel == Kernel::Fallback)
    e = gemm_impl::fallback::simt(plan.ab_dtype, plan.a.k_major, plan.b.k_major, plan.params, stream);
  else if (cfg->kernel == Kernel::Sm90) {
    // Split-K or stream-K in the workspace after the pad copies, as far as the caller's bytes allow.
    // (The flipped orientation runs data-parallel: its epilogue is the TMA store, split-K's is the staging.)
    gemm_impl::Decomposition d = choice.flip ? gemm_impl::Decomposition{}
                                             : gemm_impl::select_decomposition(*cfg, p.m, p.n, p.k, p.batch, dev.sm_count);
    if (o.splits > 0 && !choice.flip) d = gemm_impl::Decomposition{o.splits, false};
    if (o.streamk >= 0 && d.splits == 1 && !choice.flip) d.stream_k = o.streamk == 1 && cfg->stream_k;
    const size_t room = workspace_bytes > pad_bytes ? workspace_bytes - pad_bytes : 0;
    while (d.splits > 1 && gemm_impl::splitk_bytes(*cfg, p.m, p.n, p.batch, d.splits) > room) --d.splits;
    if (d.stream_k && (d.splits > 1 || gemm_impl::streamk_bytes(*cfg, dev.sm_count) > room)) d.stream_k = false;
    gemm_impl::sm90::Decomposition dec{d};
    if (d.splits > 1 || d.stream_k) dec.workspace = static_cast<char*>(workspace) + pad_bytes;
    dec.l2_warm = o.l2_warm >= 0 && cfg->l2_warm ? o.l2_warm
                                                 : gemm_impl::l2_warm_ktiles(*cfg, d, p.m, p.n, p.batch, dev.sm_count);
    dec.epilogue = o.epilogue;
    dec.dependent_launch = o.pdl;
    dec.one_tile = o.one_tile;
    e = gemm_impl::sm90::run(cfg->id, plan.ab_dtype, plan.a.k_major, plan.b.k_major, p, dev.sm_count, dec, stream);
  }
  else
    e = gemm_impl::sm80::run(cfg->id, plan.ab_dtype, plan.a.k_major, plan.b.k_major, p, stream);
  return cuda_status(e, cfg->name);
}

}  // namespace

Status gemm(const GemmArgs& args, void* stream, void* workspace, size_t workspace_bytes) {
  return detail::remember(run_gemm(args, stream, workspace, workspace_bytes));
}

Status gemm_workspace_size(const GemmArgs& args, size_t* bytes) {
  if (!bytes) return detail::remember(invalid("bytes: null pointer"));
  if (Status s = gemm_impl::validate(args); !s.ok()) return detail::remember(s);
  Overrides o;
  if (Status s = read_overrides(&o); !s.ok()) return detail::remember(s);
  const GemmPlan plan = gemm_impl::make_plan(args);
  *bytes = plan.workspace_bytes;
  if (o.splits > 1 && !plan.empty) {  // room for the forced ranges on any config
    const gemm_impl::GemmParams& p = plan.params;
    *bytes = std::max(*bytes, plan.a.pad_bytes + plan.b.pad_bytes +
                                  gemm_impl::splitk_workspace_bound(p.m, p.n, p.k, p.batch, o.splits));
  }
  if (o.streamk == 1 && !plan.empty) {  // room for stream-K on any config and GPU up to the bound
    size_t most = 0;
    for (const gemm_impl::Config& c : gemm_impl::configs())
      if (c.kernel == gemm_impl::Kernel::Sm90) most = std::max(most, gemm_impl::streamk_bytes(c, gemm_impl::kSplitKBoundSms));
    *bytes = std::max(*bytes, plan.a.pad_bytes + plan.b.pad_bytes + most);
  }
  return detail::remember(Status::success());
}

Status gemm_select_config(const GemmArgs& args, std::string* name) {
  auto impl = [&]() -> Status {
    if (!name) return invalid("name: null pointer");
    if (Status s = gemm_impl::validate(args); !s.ok()) return s;
    gemm_impl::ConfigChoice req;
    if (Status s = requested_config(args, &req); !s.ok()) return s;
    const GemmPlan plan = gemm_impl::make_plan(args);
    detail::DeviceInfo dev;
    if (Status s = device_for_gemm(&dev); !s.ok()) return s;
    Choice choice;
    Overrides o;
    if (Status s = read_overrides(&o); !s.ok()) return s;
    // Assuming the workspace gemm_workspace_size asks for (so unaligned operands can be padded).
    if (Status s = choose(req, plan, dev, plan.params.k > 0, flip_mode(plan, o), &choice); !s.ok())
      return s;
    *name = gemm_impl::config_spelling(*choice.config, choice.flip);
    return Status::success();
  };
  return detail::remember(impl());
}

std::vector<ConfigInfo> gemm_configs() {
  std::vector<ConfigInfo> out;
  for (const gemm_impl::Config& c : gemm_impl::configs()) out.push_back({c.name, c.reason, c.flip});
  return out;
}

}  // namespace tessera
