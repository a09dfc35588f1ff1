// GPU timing with CUDA events: warm-up, then the median of many samples. Each sample is one event
// pair around `launches_per_sample` back-to-back launches; for problems that run in a few
// microseconds, one launch per pair would measure launch overhead rather than the kernel.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tessera_cli {

// Enqueues one launch; `index` counts launches from 0 so the caller can rotate input sets.
using Launch = std::function<void(int64_t index)>;

struct TimingConfig {
  int warmup_samples = 5;
  int samples = 20;
  int launches_per_sample = 1;
};

struct TimingResult {
  double median_ms = 0;  // per launch
  double min_ms = 0;     // per launch
  int samples = 0;
  int launches_per_sample = 1;
  // Host wall time per launch while the samples were enqueued: when it approaches median_ms, the
  // GPU waited for the host (the library's per-call CPU cost, not its kernel, set the pace).
  double host_us_per_launch = 0;
};

// Below this single-launch time a problem counts as small and is timed in batches.
constexpr double kSmallProblemMs = 0.050;

TimingResult time_launches(const Launch& launch, const TimingConfig& config, cudaStream_t stream);

// Several launchers timed alike, their samples interleaved (warm-up and sample s of each in turn),
// so that all of them see the same clock and power history. Timed one after the other, two
// libraries saw different parts of a power-capped H100's clock swing (1185-1440 MHz in ~300 ms
// steps at the 700 W cap): 16384x28672x4096 read 0.89-0.93x from 20 samples each, 0.997x from 300.
std::vector<TimingResult> time_interleaved(const std::vector<Launch>& launches, const TimingConfig& config,
                                           cudaStream_t stream);

// Rough time of one launch (median of a few single-launch samples after one warm-up launch).
double estimate_launch_ms(const Launch& launch, cudaStream_t stream);

// Launches per event pair for a problem whose single launch takes `single_ms`: 1 for problems of at
// least kSmallProblemMs, otherwise enough for about 1 ms of work per sample.
int launches_per_sample_for(double single_ms);

// "single launch per event pair" or "batched: N back-to-back launches per event pair".
std::string timing_mode_description(int launches_per_sample);

}  // namespace tessera_cli
