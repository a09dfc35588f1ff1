// The launch plan (launch_plan.hpp): the host's decisions for one GEMM, and their memo.
#include "gemm/launch_plan.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/environment.hpp"
#include "core/status.hpp"
#include "gemm/launch_batched.hpp"  // kMaxGridBatch
#include "gemm/plan.hpp"
#include "gemm/sm90/config_shape.hpp"
#include "gemm/skinny/skinny.hpp"
#include "gemm/tune_cache.hpp"

namespace tessera::gemm_impl {
namespace {

using detail::fail;
using detail::invalid;

static_assert(detail::Environment::kMaxGemmSplits == kMaxSplits, "TESSERA_GEMM_SPLITS' range is split-K's");
static_assert(sm90::kEpiStaged == 0 && sm90::kEpiTma == 1 && sm90::kEpiSmem16 == 2 && sm90::kEpiAuto == 3,
              "Environment::sm90_epilogue spells sm90::EpiMode");

// The configuration the caller asked for (GemmArgs::config, else TESSERA_GEMM_CONFIG), or {null};
// the spellings were checked (validate, overrides_error).
ConfigChoice requested_config(const GemmArgs& args, const detail::Environment& env) {
  const std::string& name = args.config.empty() ? env.gemm_config : args.config;
  return name.empty() ? ConfigChoice{} : find_config_choice(name);
}

// K as the heuristic and the sm90 rows count it: the kernels' K (3xTF32 triples it, once the operands
// are prepared) in 16-bit steps, since configs.def's BK counts 16-bit elements (a tf32 k-tile holds
// BK / 2, an 8-bit one 2 x BK).
long long k_steps(const GemmPlan& plan, bool prepared) {
  const long long k = prepared ? plan.kernel_k : plan.params.k;
  return plan.ab_dtype == kF32 ? 2 * k : plan.ab_dtype == kS8 || is_fp8(plan.ab_dtype) ? (k + 1) / 2 : k;
}

// The configs that run the operands of a call the 16-bit-only configs cannot (fp32, 3xTF32, s8, fp8).
std::string config_names_with(bool Config::*has) {
  std::string s;
  for (const Config& c : configs())
    if (c.*has) s += (s.empty() ? "" : ", ") + std::string(c.name);
  return s;
}

struct Choice {
  const Config* config = nullptr;
  bool explicit_choice = false;
  bool flip = false;
};

// HeuristicInput::flip for this call: 0 where the flipped orientation cannot run (the plan's D or C,
// or an override that needs another epilogue or decomposition: sm90::epilogue_mode).
int flip_mode(const GemmPlan& plan, const detail::Environment& env) {
  const bool epi_ok = env.sm90_epilogue == sm90::kEpiAuto || env.sm90_epilogue == sm90::kEpiTma;
  if (!plan.flip_ok || !epi_ok || env.gemm_splits > 1 || env.gemm_streamk == 1 || env.gemm_flip == 0) return 0;
  return env.gemm_flip == 1 ? 2 : 1;
}

// `req`: the caller's configuration, or {null} for the tuning cache and the heuristic. `tma_ok`: the
// operands can be read by TMA (aligned, or padded into the workspace) and K > 0. `flip`: flip_mode.
Status choose(const ConfigChoice& req, const GemmPlan& plan, const detail::DeviceInfo& dev, bool tma_ok, int flip,
              Choice* out) {
  const int cc = dev.cc_major * 10 + dev.cc_minor;
  HeuristicInput in{plan.params.m, plan.params.n, k_steps(plan, tma_ok), plan.params.batch, dev.sm_count,
                    cc,            dev.smem_optin, tma_ok,        flip};
  in.f32 = plan.ab_dtype == kF32;
  in.f32x3 = in.f32 && plan.a.split != kSplitNone;
  in.s8 = plan.ab_dtype == kS8;
  in.fp8 = is_fp8(plan.ab_dtype);
  in.fp8_promote = in.fp8 && plan.promote;
  in.fp8_block = in.fp8 && plan.params.block.row != nullptr;
  in.skinny_ok = tma_ok && plan.a.k_major && plan.b.k_major && !in.f32 && !in.s8 && !in.fp8;
  // fp8 runs on Hopper's fp8 tensor cores (or, without the workspace for copies, on the CUDA cores there).
  if (in.fp8 && cc != 90)
    return fail(TESSERA_STATUS_NOT_SUPPORTED, std::string(plan.ab_dtype == kE4M3 ? "e4m3" : "e5m2") +
                                                  " operands: tessera's fp8 GEMM runs on sm_90 (Hopper's fp8 tensor "
                                                  "cores); this device is sm_" + std::to_string(cc));
  if (const Config* c = req.config) {
    if ((in.f32 && !c->tf32) || (in.f32x3 && !c->tf32x3) || (in.s8 && !c->s8) || (in.fp8 && !c->fp8) ||
        (in.fp8_promote && !c->fp8_promote) || (in.fp8_block && !c->fp8_block)) {
      const char* what = in.s8           ? "s8 operands"
                         : in.fp8_block   ? "fp8 operands with block scales"
                         : in.fp8_promote ? "fp8 operands with promoted sums (precision default)"
                         : in.fp8         ? "fp8 operands"
                         : in.f32x3       ? "f32 operands (tf32x3)"
                                          : "f32 operands (tf32)";
      bool Config::*has = in.s8 ? &Config::s8 : in.fp8_block ? &Config::fp8_block : in.fp8_promote ? &Config::fp8_promote
                          : in.fp8 ? &Config::fp8 : in.f32x3 ? &Config::tf32x3 : &Config::tf32;
      return fail(TESSERA_STATUS_NOT_SUPPORTED, std::string("config: '") + c->name + "' has no kernel for " + what +
                                                    "; those with one: " + config_names_with(has));
    }
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
                  std::string("config: '") + config_spelling(*c, true) +
                      "': this call cannot run on the flipped orientation (it needs a D of the operands' 16-bit "
                      "dtype, D and C 16-byte aligned with C laid out like D and D's contiguous extent a multiple of 8, "
                      "TMA-readable operands and K > 0, and "
                      "no TESSERA_GEMM_FLIP=0, TESSERA_GEMM_SPLITS, TESSERA_GEMM_STREAMK=1 or non-TMA "
                      "TESSERA_SM90_EPILOGUE override)");
    // (K = 0 runs as any K = 0 call does: the fallback.)
    if (c->kernel == Kernel::Skinny && plan.params.k > 0 && !skinny_runs(in, skinny::kMaxRows))
      return fail(TESSERA_STATUS_NOT_SUPPORTED,
                  std::string("config: '") + c->name + "' needs both operands K-major (op(A) row-major, op(B) "
                  "column-major), readable in 16-byte vectors (aligned, or padded into the workspace), and M or N "
                  "at most " + std::to_string(skinny::kMaxRows) + " (got M = " + std::to_string(plan.params.m) +
                  ", N = " + std::to_string(plan.params.n) + ")");
    *out = {c, true, (req.flip || flip == 2) && c->flip && tma_ok};
    return Status::success();
  }
  const Selection pick = select(in);
  *out = {pick.config, false, pick.flip};  // select_sm90 flips only configs that can (Config::flip)
  // A configuration `tessera tune` measured fastest here (gemm/tune_cache.hpp), if this call can run it
  // in the orientation it was timed in.
  if (pick.config->kernel != Kernel::Fallback)
    if (const ConfigChoice tuned = tuned_config(plan, dev, tma_ok); tuned.config)
      if ((!tuned.flip || flip != 0) && (!in.f32 || tuned.config->tf32) && (!in.f32x3 || tuned.config->tf32x3) &&
          (!in.s8 || tuned.config->s8) && (!in.fp8 || tuned.config->fp8) &&
          (!in.fp8_promote || tuned.config->fp8_promote) && (!in.fp8_block || tuned.config->fp8_block) &&
          (tuned.config->kernel != Kernel::Skinny || skinny_runs(in, skinny::kMaxRows)))
        *out = {tuned.config, false, tuned.flip || (flip == 2 && tuned.config->flip)};
  return Status::success();
}

// The sm90 launch of `cfg` on the canonical problem `plan` with `room` bytes for split-K / stream-K.
Status plan_sm90(const Config& cfg, const GemmPlan& plan, bool flip, const detail::DeviceInfo& dev, int budget,
                 bool budgeted, size_t room, const detail::Environment& env, LaunchPlan* lp) {
  const GemmParams& p = plan.params;
  const long long k = k_steps(plan, true);
  // The flipped orientation runs data-parallel: its epilogue is the TMA store, split-K's the staging.
  Decomposition dc = flip ? Decomposition{} : select_decomposition(cfg, p.m, p.n, k, p.batch, budget);
  if (env.gemm_splits > 0 && !flip) dc = Decomposition{env.gemm_splits, false};
  if (env.gemm_streamk >= 0 && dc.splits == 1 && !flip) dc.stream_k = env.gemm_streamk == 1 && cfg.stream_k;
  if (budgeted) dc.stream_k = false;  // a stream-K owner waits for later workers: none may wait with a budget
  if (plan.ab_dtype == kS8) dc = Decomposition{};  // int32 sums: the kernels have no split-K / stream-K fix-up for them
  while (dc.splits > 1 && splitk_bytes(cfg, p.m, p.n, p.batch, dc.splits) > room) --dc.splits;

  const int cluster = cfg.cluster_m * cfg.cluster_n;
  int clusters = sm90::prepare(cfg.id, plan.ab_dtype, plan.a.kernel_k_major(), plan.b.kernel_k_major(), dev.sm_count,
                               p.block.row != nullptr);
  if (clusters < 0)
    return fail(TESSERA_STATUS_CUDA_ERROR, std::string(cfg.name) + ": setting up the kernel: " +
                                               cudaGetErrorString(cudaError_t(-clusters)));
  clusters = std::max(1, std::min(clusters, budget / cluster));
  if (dc.stream_k && (dc.splits > 1 || streamk_bytes(cfg, clusters * cluster) > room)) dc.stream_k = false;

  sm90::Launch& l = lp->sm90;
  l.splits = dc.splits;
  l.stream_k = dc.stream_k;
  l.clusters = clusters;
  l.epi_mode = sm90::epilogue_mode(cfg.flip, plan.ab_dtype, p.epi, dc.splits, env.sm90_epilogue);
  if (l.epi_mode < 0)  // flip_mode and choose() keep such a call off the flipped orientation
    return fail(TESSERA_STATUS_INTERNAL_ERROR, std::string(cfg.name) + ": no epilogue can store this column-major D");
  l.l2_warm = env.gemm_l2_warm >= 0 && cfg.l2_warm ? env.gemm_l2_warm
                                                   : l2_warm_ktiles(cfg, dc, p.m, p.n, p.batch, budget);
  l.dependent_launch = env.gemm_pdl;
  l.promote = plan.promote;  // 3xTF32, fp8 (choose() kept them to rows that promote)

  // The grid of every batch chunk the launcher will cut (launch_batched): the first and the last.
  const sm90::TileShape shape{cfg.bm, cfg.bn, cfg.bk, cfg.cluster_m, cfg.cluster_n};
  sm90::Grid g, last;
  const int first_chunk = std::min(p.batch, kMaxGridBatch);
  const int last_chunk = p.batch % kMaxGridBatch ? p.batch % kMaxGridBatch : first_chunk;
  if (!sm90::grid_of(shape, p.m, p.n, k, first_chunk, dc.splits, dc.stream_k, clusters, &g) ||
      !sm90::grid_of(shape, p.m, p.n, k, last_chunk, dc.splits, dc.stream_k, clusters, &last))
    return fail(TESSERA_STATUS_NOT_SUPPORTED, std::string(cfg.name) +
                                                  ": the problem has more work items than the kernel's 32-bit walk "
                                                  "counts (M, N, K, batch); split the batch");
  const bool one_round = g.sched.units <= clusters && p.batch <= kMaxGridBatch;
  l.fold_parallel = dc.splits > 1 && !budgeted && one_round && sm90::supports_parallel_fold(cfg.bm, cfg.bn, cfg.pingpong);
  // The one-tile kernel: one wave in which every CTA has one whole tile, and an epilogue that only
  // scales and converts (D by TMA; no C, bias or activation).
  l.one_tile = sm90::supports_one_tile(cfg.bm, cfg.bn, cfg.pingpong) && env.gemm_one_tile && dc.splits == 1 &&
               g.sched.sk_units == 0 && one_round && l.epi_mode == sm90::kEpiTma && p.epi.beta == 0.0f &&
               p.epi.bias == nullptr && p.epi.activation == kActNone && g.tiles_mc <= 65535;
  if (dc.splits > 1) lp->workspace_bytes += splitk_bytes(cfg, p.m, p.n, p.batch, dc.splits);
  else if (dc.stream_k) lp->workspace_bytes += streamk_bytes(cfg, clusters * cluster);
  return Status::success();
}

Status plan_uncached(const GemmArgs& args, const ConfigChoice& req, const detail::DeviceInfo& dev, size_t ws,
                     const detail::Environment& env, LaunchPlan* out) {
  GemmPlan plan = make_plan(args);
  // The SM budget: the heuristic plans for the SMs the call may use.
  const bool budgeted = args.max_sms > 0 && args.max_sms < dev.sm_count;
  const int budget = budgeted ? args.max_sms : dev.sm_count;
  detail::DeviceInfo within = dev;
  within.sm_count = budget;
  const bool aligned = plan.a.aligned && plan.b.aligned;
  const size_t pad_bytes = plan.a.pad_bytes + plan.b.pad_bytes;  // the workspace's first part
  // (3xTF32 triples K: past the kernels' 32-bit K it runs on the fallback, in plain fp32.)
  const bool tma_ok = plan.params.k > 0 && (aligned || ws >= pad_bytes) && plan.kernel_k <= kMaxKernelK;
  Choice choice;
  if (Status s = choose(req, plan, within, tma_ok, flip_mode(plan, env), &choice); !s.ok()) return s;
  // The flipped orientation: the same operands and pads with the roles of A and B (M and N) swapped.
  if (choice.flip) plan = make_plan(args, true);

  LaunchPlan lp;
  lp.flip = choice.flip;
  const Config* cfg = choice.config;
  if (cfg->kernel != Kernel::Fallback && !aligned) {
    if (tma_ok) {
      lp.pad_a = !plan.a.aligned;
      lp.pad_b = !plan.b.aligned;
      lp.pad_b_offset = plan.a.pad_bytes;
      lp.workspace_bytes = pad_bytes;
    } else if (choice.explicit_choice) {
      return fail(TESSERA_STATUS_NOT_SUPPORTED,
                  std::string("config: '") + cfg->name + "' needs " + std::to_string(pad_bytes) +
                      " bytes of workspace to pad an operand that is not 16-byte aligned (got " + std::to_string(ws) +
                      "); pass a workspace or use simt_fallback");
    } else {
      cfg = &fallback_config();  // correct for any alignment, without workspace
    }
  }
  // K = 0 (D = beta * C) has no TMA box to describe: any kernel computes it, the fallback will do.
  if ((cfg->kernel == Kernel::Sm90 || cfg->kernel == Kernel::Skinny) && plan.params.k == 0) cfg = &fallback_config();
  lp.config = cfg;
  lp.fixup_offset = lp.workspace_bytes;
  if (cfg->kernel == Kernel::Sm90) {
    const size_t room = ws > lp.fixup_offset ? ws - lp.fixup_offset : 0;
    if (Status s = plan_sm90(*cfg, plan, choice.flip, dev, budget, budgeted, room, env, &lp); !s.ok()) return s;
  }
  if (cfg->kernel == Kernel::Skinny)
    lp.skinny_w_tiles = skinny::w_tiles(std::min(plan.params.m, plan.params.n), std::max(plan.params.m, plan.params.n),
                                        plan.params.batch, budget);
  *out = lp;
  return Status::success();
}

// ---- the memo ------------------------------------------------------------------------------------

// Bumped by invalidate_plans(); every key carries it, so older plans never match again.
std::atomic<unsigned> g_plan_epoch{0};

// A call's signature: everything plan_uncached reads except the addresses, of which only the
// alignment classes count (16 bytes: TMA, vector epilogues). C counts only when it is read.
struct Key {
  static constexpr int kWords = 32;
  uint64_t w[kWords] = {};
  bool operator==(const Key& o) const { return std::memcmp(w, o.w, sizeof w) == 0; }
  uint64_t hash() const {
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (uint64_t v : w) h = (h ^ v) * 0xff51afd7ed558ccdull, h ^= h >> 32;
    return h;
  }
};

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

Key key_of(const GemmArgs& a, const ConfigChoice& req, int device, size_t ws) {
  Key k;
  int i = 0;
  auto put = [&](uint64_t v) { k.w[i++] = v; };
  auto matrix = [&](const Matrix& m) {
    put(uint64_t(m.rows));
    put(uint64_t(m.cols));
    put(uint64_t(m.ld));
    put(uint64_t(m.batch_count));
    put(uint64_t(m.batch_stride));
    put(uint64_t(m.dtype) | uint64_t(m.layout) << 8 | uint64_t(aligned16(m.ptr)) << 16);
  };
  const bool use_c = a.beta != 0.0f;
  put(uint64_t(uint32_t(device)) | uint64_t(g_plan_epoch.load(std::memory_order_relaxed)) << 32);
  put(uint64_t(a.op_a) | uint64_t(a.op_b) << 8 | uint64_t(use_c) << 16 | uint64_t(a.bias_mode) << 24 |
      uint64_t(aligned16(a.bias)) << 32 | uint64_t(a.activation) << 40 | uint64_t(a.precision) << 48 |
      uint64_t(a.scale_mode) << 56);
  matrix(a.a);
  matrix(a.b);
  matrix(a.d);
  if (use_c) matrix(a.c);
  else i += 6;
  put(uint64_t(a.bias_batch_stride));
  put(reinterpret_cast<uintptr_t>(req.config) | uint64_t(req.flip));  // table entries: 8-byte aligned
  put(uint64_t(uint32_t(a.max_sms)));
  put(uint64_t(ws));
  return k;
}

// This thread's plans: 16 sets of 4, the oldest of a set replaced first.
class PlanTable {
 public:
  const LaunchPlan* find(const Key& k, uint64_t h) const {
    const Set& s = sets_[h % kSets];
    for (int j = 0; j < kWays; ++j)
      if (s.used[j] && s.keys[j] == k) return &s.plans[j];
    return nullptr;
  }
  void insert(const Key& k, uint64_t h, const LaunchPlan& p) {
    Set& s = sets_[h % kSets];
    const int j = s.next;
    s.keys[j] = k;
    s.plans[j] = p;
    s.used[j] = true;
    s.next = (j + 1) % kWays;
  }

 private:
  static constexpr int kSets = 16, kWays = 4;
  struct Set {
    std::array<Key, kWays> keys{};
    std::array<LaunchPlan, kWays> plans{};
    std::array<bool, kWays> used{};
    int next = 0;
  };
  std::array<Set, kSets> sets_{};
};

}  // namespace

Status overrides_error(const GemmArgs& args) {
  const detail::Environment& env = detail::environment();
  if (!env.gemm_error.ok()) return env.gemm_error;
  if (args.config.empty() && !env.gemm_config.empty() && !find_config_choice(env.gemm_config).config)
    return invalid("TESSERA_GEMM_CONFIG: " + spelling_error(env.gemm_config));
  return Status::success();
}

Status plan_for(const GemmArgs& args, const detail::DeviceInfo& dev, size_t workspace_bytes, LaunchPlan* out) {
  const detail::Environment& env = detail::environment();
  const ConfigChoice req = requested_config(args, env);
  thread_local PlanTable table;
  // The plan for as much workspace as it wants, and, when the caller gives less, the one for that.
  for (size_t ws : {kAnyWorkspace, workspace_bytes}) {
    const Key key = key_of(args, req, dev.device, ws);
    const uint64_t h = key.hash();
    if (const LaunchPlan* p = table.find(key, h)) {
      *out = *p;
    } else {
      if (Status s = plan_uncached(args, req, dev, ws, env, out); !s.ok()) return s;  // refusals are not kept
      table.insert(key, h, *out);
    }
    if (out->workspace_bytes <= workspace_bytes) return Status::success();
  }
  return Status::success();
}

void invalidate_plans() { g_plan_epoch.fetch_add(1, std::memory_order_relaxed); }

}  // namespace tessera::gemm_impl
