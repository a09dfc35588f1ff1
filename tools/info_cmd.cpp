// `tessera info`: the GPU(s), the CUDA versions and the compiled GEMM configurations. Works
// without a GPU (it then says so and still lists the configurations).
#include <cuda_runtime_api.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "args.hpp"
#include "check.hpp"
#include "commands.hpp"
#include "device_info.hpp"
#include "json.hpp"
#include "tessera/tessera.hpp"

namespace tessera_cli {
namespace {

std::vector<OptionSpec> info_options() {
  return {
      {"json", "", "print the same facts as JSON on stdout"},
      {"help", "", "show this help"},
  };
}

struct InfoFacts {
  int runtime_version = 0, driver_version = 0;
  std::vector<DeviceInfo> devices;
  std::string no_device_reason;  // set when `devices` is empty
  std::vector<tessera::ConfigInfo> configs;
};

InfoFacts gather() {
  InfoFacts f;
  // Both work without a device; a failure leaves 0, reported as "none".
  if (cudaRuntimeGetVersion(&f.runtime_version) != cudaSuccess) f.runtime_version = 0;
  if (cudaDriverGetVersion(&f.driver_version) != cudaSuccess) f.driver_version = 0;
  cudaGetLastError();
  const int n = device_count(&f.no_device_reason);
  for (int i = 0; i < n; ++i) f.devices.push_back(query_device(i));
  f.configs = tessera::gemm_configs();
  return f;
}

void print_text(const InfoFacts& f) {
  std::printf("tessera %s\n", tessera_version());
  std::printf("CUDA runtime %s, driver %s\n", cuda_version_string(f.runtime_version).c_str(),
              cuda_version_string(f.driver_version).c_str());
  if (f.devices.empty()) std::printf("no CUDA device (%s)\n", f.no_device_reason.c_str());
  for (const DeviceInfo& d : f.devices) {
    std::printf("device %d: %s\n", d.id, d.name.c_str());
    std::printf("  compute capability     %s\n", d.cc().c_str());
    std::printf("  SMs                    %d\n", d.sm_count);
    std::printf("  shared memory / block  %zu bytes (opt-in)\n", d.smem_per_block_optin);
    std::printf("  L2 cache               %zu bytes (%.1f MiB)\n", d.l2_bytes, double(d.l2_bytes) / (1 << 20));
    std::printf("  global memory          %.1f GiB\n", double(d.global_mem_bytes) / (1 << 30));
  }
  std::printf("GEMM configurations (%zu; \"+flip\" after a name marked [+flip] runs it on the flipped orientation):\n",
              f.configs.size());
  for (const tessera::ConfigInfo& c : f.configs)
    std::printf("  %s%s\n      %s\n", c.name.c_str(), c.flippable ? " [+flip]" : "", word_wrap(c.description, 6).c_str());
}

void print_json(const InfoFacts& f) {
  JsonWriter j(std::cout);
  j.begin_object();
  j.field("tessera_version", tessera_version());
  j.field("cuda_runtime", cuda_version_string(f.runtime_version));
  j.field("cuda_driver", cuda_version_string(f.driver_version));
  j.key("devices").begin_array();
  for (const DeviceInfo& d : f.devices) {
    j.begin_object();
    j.field("id", d.id).field("name", d.name).field("cc", d.cc()).field("sms", d.sm_count);
    j.field("smem_per_block_optin", d.smem_per_block_optin).field("l2_bytes", d.l2_bytes);
    j.field("global_mem_bytes", d.global_mem_bytes);
    j.end_object();
  }
  j.end_array();
  if (f.devices.empty()) j.field("no_device", f.no_device_reason);
  j.key("configs").begin_array();
  for (const tessera::ConfigInfo& c : f.configs) j.begin_object().field("name", c.name).field("description", c.description).field("flippable", c.flippable).end_object();
  j.end_array();
  j.end_object();
}

}  // namespace

void print_info_help(std::FILE* out) {
  std::fprintf(out,
               "usage: tessera info [--json]\n\n"
               "The visible GPUs (name, compute capability, SMs, opt-in shared memory per block, L2), the CUDA\n"
               "runtime and driver versions, and tessera's compiled GEMM configurations. Without a GPU it says\n"
               "\"no CUDA device\" and still lists the configurations (exit code 0).\n\n"
               "options:\n");
  print_options(out, info_options());
}

int run_info(const std::vector<std::string>& args) {
  const std::vector<OptionSpec> specs = info_options();
  const Options opts("info", specs, args);
  if (opts.has("help")) {
    print_info_help(stdout);
    return kExitOk;
  }
  const InfoFacts facts = gather();
  if (opts.has("json"))
    print_json(facts);
  else
    print_text(facts);
  return kExitOk;
}

}  // namespace tessera_cli
