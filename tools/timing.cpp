#include "timing.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "check.hpp"
#include "cuda_raii.hpp"

namespace tessera_cli {
namespace {

constexpr double kBatchedSampleTargetMs = 1.0;
constexpr int kMaxLaunchesPerSample = 1000;

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

TimingResult time_launches(const Launch& launch, const TimingConfig& config, cudaStream_t stream) {
  const int samples = std::max(1, config.samples);
  const int per_sample = std::max(1, config.launches_per_sample);
  int64_t index = 0;
  for (int64_t i = 0; i < int64_t(config.warmup_samples) * per_sample; ++i) launch(index++);

  // Everything is enqueued before the first synchronisation, so the GPU runs the samples back to
  // back and no sample waits for the host.
  std::vector<Event> start(samples), stop(samples);
  const auto host_begin = std::chrono::steady_clock::now();
  for (int s = 0; s < samples; ++s) {
    CLI_CUDA_CHECK(cudaEventRecord(start[s].get(), stream));
    for (int i = 0; i < per_sample; ++i) launch(index++);
    CLI_CUDA_CHECK(cudaEventRecord(stop[s].get(), stream));
  }
  const double host_us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - host_begin).count();
  CLI_CUDA_CHECK(cudaStreamSynchronize(stream));

  std::vector<double> per_launch_ms(samples);
  for (int s = 0; s < samples; ++s) {
    float ms = 0;
    CLI_CUDA_CHECK(cudaEventElapsedTime(&ms, start[s].get(), stop[s].get()));
    per_launch_ms[s] = double(ms) / per_sample;
  }
  TimingResult r;
  r.median_ms = median_of(per_launch_ms);
  r.min_ms = *std::min_element(per_launch_ms.begin(), per_launch_ms.end());
  r.samples = samples;
  r.launches_per_sample = per_sample;
  r.host_us_per_launch = host_us / (double(samples) * per_sample);
  return r;
}

double estimate_launch_ms(const Launch& launch, cudaStream_t stream) {
  return time_launches(launch, TimingConfig{/*warmup_samples=*/1, /*samples=*/3, /*launches_per_sample=*/1}, stream)
      .median_ms;
}

int launches_per_sample_for(double single_ms) {
  if (single_ms >= kSmallProblemMs) return 1;
  const double n = std::ceil(kBatchedSampleTargetMs / std::max(single_ms, 1e-4));
  return int(std::min<double>(n, kMaxLaunchesPerSample));
}

std::string timing_mode_description(int launches_per_sample) {
  if (launches_per_sample <= 1) return "single launch per event pair";
  return "batched: " + std::to_string(launches_per_sample) + " back-to-back launches per event pair";
}

}  // namespace tessera_cli
