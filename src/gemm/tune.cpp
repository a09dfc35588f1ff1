// The library's side of `tessera tune`: the cache key of a planned problem, the cached
// configuration gemm() may use (tuned_config, called by api.cpp's choose()), and the public
// gemm_tune_store / gemm_tune_cache_path.
#include <optional>
#include <string>

#include "core/device.hpp"
#include "core/status.hpp"
#include "gemm/configs.hpp"
#include "gemm/plan.hpp"
#include "gemm/launch_plan.hpp"
#include "gemm/tune_cache.hpp"
#include "tessera/tessera.hpp"

namespace tessera {
namespace gemm_impl {

TuneKey make_tune_key(const GemmPlan& plan, const detail::DeviceInfo& dev) {
  TuneKey key;
  key.device = dev.name;
  key.cc = dev.cc_major * 10 + dev.cc_minor;
  key.m = plan.params.m;
  key.n = plan.params.n;
  key.k = plan.params.k;
  key.batch = plan.params.batch;
  key.ab_dtype = plan.ab_dtype;
  key.a_k_major = plan.a.k_major;
  key.b_k_major = plan.b.k_major;
  key.d_dtype = plan.params.epi.d_dtype;
  return key;
}

namespace {

bool device_can_run(const Config& c, const detail::DeviceInfo& dev) {
  const int cc = dev.cc_major * 10 + dev.cc_minor;
  return cc >= c.min_cc && cc <= c.max_cc && c.smem_bytes <= dev.smem_optin;
}

}  // namespace

ConfigChoice tuned_config(TuneCache& cache, const GemmPlan& plan, const detail::DeviceInfo& dev, bool tma_ok) {
  if (cache.empty()) return {};  // the common case: no file, or nothing tuned
  const std::optional<std::string> name = cache.lookup(make_tune_key(plan, dev));
  if (!name) return {};
  const ConfigChoice c = find_config_choice(*name);
  if (!c.config || !device_can_run(*c.config, dev)) return {};
  if (c.config->kernel == Kernel::Sm90 && !tma_ok) return {};  // as in select_config
  return c;
}

}  // namespace gemm_impl

std::string gemm_tune_cache_path() { return gemm_impl::global_tune_cache().path(); }

Status gemm_tune_store(const GemmArgs& args, const std::string& config, std::string* path) {
  auto impl = [&]() -> Status {
    if (Status s = gemm_impl::validate(args); !s.ok()) return s;
    const gemm_impl::Config* c = gemm_impl::find_config_choice(config).config;
    if (!c) return detail::invalid("config: " + gemm_impl::spelling_error(config));
    const gemm_impl::GemmPlan plan = gemm_impl::make_plan(args);
    if (plan.empty) return detail::invalid("nothing to tune: M, N or the batch count is 0");
    detail::DeviceInfo dev;
    if (Status s = detail::current_device(&dev); !s.ok()) return s;
    if (!gemm_impl::device_can_run(*c, dev))
      return detail::fail(TESSERA_STATUS_NOT_SUPPORTED,
                          std::string("config: '") + c->name + "' cannot run on this device (" + dev.name + ", sm_" +
                              std::to_string(dev.cc_major * 10 + dev.cc_minor) + ")");
    gemm_impl::TuneCache& cache = gemm_impl::global_tune_cache();
    std::string error;
    if (!cache.store(gemm_impl::make_tune_key(plan, dev), config, &error))
      return detail::fail(TESSERA_STATUS_INTERNAL_ERROR, "tuning cache: " + error);
    gemm_impl::invalidate_plans();  // memoized plans chose without this entry
    if (path) *path = cache.path();
    return Status::success();
  };
  return detail::remember(impl());
}

}  // namespace tessera
