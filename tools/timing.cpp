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

std::vector<TimingResult> time_interleaved(const std::vector<Launch>& launches, const TimingConfig& config,
                                           cudaStream_t stream) {
  const size_t n = launches.size();
  const int samples = std::max(1, config.samples);
  const int per_sample = std::max(1, config.launches_per_sample);
  std::vector<int64_t> index(n, 0);  // each launcher's own count (input-set rotation)
  for (int w = 0; w < config.warmup_samples; ++w)
    for (size_t l = 0; l < n; ++l)
      for (int i = 0; i < per_sample; ++i) launches[l](index[l]++);

  // Everything is enqueued before the first synchronisation, so the GPU runs the samples back to
  // back and no sample waits for the host.
  std::vector<std::vector<Event>> start(n), stop(n);
  for (size_t l = 0; l < n; ++l) start[l].resize(samples), stop[l].resize(samples);
  std::vector<double> host_us(n, 0.0);
  for (int s = 0; s < samples; ++s) {
    for (size_t l = 0; l < n; ++l) {
      const auto host_begin = std::chrono::steady_clock::now();
      CLI_CUDA_CHECK(cudaEventRecord(start[l][s].get(), stream));
      for (int i = 0; i < per_sample; ++i) launches[l](index[l]++);
      CLI_CUDA_CHECK(cudaEventRecord(stop[l][s].get(), stream));
      host_us[l] += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - host_begin).count();
    }
  }
  CLI_CUDA_CHECK(cudaStreamSynchronize(stream));

  std::vector<TimingResult> results(n);
  for (size_t l = 0; l < n; ++l) {
    std::vector<double> per_launch_ms(samples);
    for (int s = 0; s < samples; ++s) {
      float ms = 0;
      CLI_CUDA_CHECK(cudaEventElapsedTime(&ms, start[l][s].get(), stop[l][s].get()));
      per_launch_ms[s] = double(ms) / per_sample;
    }
    TimingResult& r = results[l];
    r.median_ms = median_of(per_launch_ms);
    r.min_ms = *std::min_element(per_launch_ms.begin(), per_launch_ms.end());
    r.samples = samples;
    r.launches_per_sample = per_sample;
    r.host_us_per_launch = host_us[l] / (double(samples) * per_sample);
  }
  return results;
}

TimingResult time_launches(const Launch& launch, const TimingConfig& config, cudaStream_t stream) {
  return time_interleaved({launch}, config, stream)[0];
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
