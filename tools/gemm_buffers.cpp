#include "gemm_buffers.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "device_helpers.hpp"

namespace tessera_cli {
namespace {

// A distinct, well-mixed seed per (run seed, set, operand), so that no two buffers share data.
uint64_t buffer_seed(uint64_t seed, int set_index, int operand) {
  return seed ^ (0xD1B54A32D192ED03ull * uint64_t(3 * set_index + operand + 1));
}

DeviceBuffer random_buffer(const StoredMatrix& s, uint64_t seed, cudaStream_t stream) {
  DeviceBuffer buf(s.bytes());
  fill_uniform(buf.get(), s.dtype, s.elements(), seed, stream);
  return buf;
}

// The bias vectors draw from a seed domain of their own (~seed), so that A, B and C keep the data a
// given --seed gave them before the bias existed.
DeviceBuffer random_bias(const GemmProblem& p, uint64_t seed, int set_index, cudaStream_t stream) {
  if (!p.has_bias()) return DeviceBuffer();
  DeviceBuffer buf(p.bias_elements() * dtype_bytes(p.d.dtype));
  fill_uniform(buf.get(), p.d.dtype, p.bias_elements(), buffer_seed(~seed, set_index, 0), stream);
  return buf;
}

// The int8 and fp8 scales (--scales): positive, of about 1 / (128 K^(1/4)) each for int8 and
// 1 / (4 K^(1/4)) for fp8 (0.06 at K = 256, 0.03 at 4096, 0.02 at 16384), so that scale_a * scale_b *
// sum has a standard deviation of about 1/3 for operands uniform in [-128, 127] (the sum's is
// sqrt(K) * 128^2 / sqrt(3)) or in [-4, 4] (sqrt(K) * 16 / 3). Uniform in [0.5, 1.5) of that, block
// scales in [1/8, 15/8) (a 15x range: a block scaled by its neighbour's scale is off by about half its
// value). Their own seed domain too (~seed, operands 1 and 2).
DeviceBuffer random_scales(const GemmProblem& p, int64_t length, uint64_t seed, cudaStream_t stream) {
  if (length == 0) return DeviceBuffer();
  DeviceBuffer buf(size_t(length) * sizeof(float));
  const float base = float(1.0 / ((p.fp8() ? 4.0 : 128.0) * std::pow(double(std::max<int64_t>(p.k, 1)), 0.25)));
  const float spread = p.block_scales() ? 0.875f : 0.5f;
  fill_uniform_range(buf.as<float>(), size_t(length), (1 - spread) * base, (1 + spread) * base, seed, stream);
  return buf;
}

}  // namespace

InputSet::InputSet(const GemmProblem& p, uint64_t seed, int set_index, cudaStream_t stream)
    : a(random_buffer(p.a, buffer_seed(seed, set_index, 0), stream)),
      b(random_buffer(p.b, buffer_seed(seed, set_index, 1), stream)),
      c(p.has_c() ? random_buffer(p.d, buffer_seed(seed, set_index, 2), stream) : DeviceBuffer()),
      bias(random_bias(p, seed, set_index, stream)),
      scale_a(random_scales(p, p.scale_a_length(), buffer_seed(~seed, set_index, 1), stream)),
      scale_b(random_scales(p, p.scale_b_length(), buffer_seed(~seed, set_index, 2), stream)) {}

size_t InputSet::bytes_needed(const GemmProblem& p) {
  return p.a.bytes() + p.b.bytes() + (p.has_c() ? p.d.bytes() : 0) + p.bias_elements() * dtype_bytes(p.d.dtype) +
         size_t(p.scale_a_length() + p.scale_b_length()) * sizeof(float);
}

GuardedBuffer::GuardedBuffer(size_t bytes) : storage_(bytes + 2 * kGuardBytes), bytes_(bytes) {}

void GuardedBuffer::fill_guards(cudaStream_t stream) {
  char* base = storage_.as<char>();
  CLI_CUDA_CHECK(cudaMemsetAsync(base, kGuardByte, kGuardBytes, stream));
  CLI_CUDA_CHECK(cudaMemsetAsync(base + kGuardBytes + bytes_, kGuardByte, kGuardBytes, stream));
}

void GuardedBuffer::poison(cudaStream_t stream, unsigned char byte) {
  CLI_CUDA_CHECK(cudaMemsetAsync(data(), byte, bytes_, stream));
}

bool GuardedBuffer::guards_intact(cudaStream_t stream) const {
  std::vector<unsigned char> host(2 * kGuardBytes);
  const char* base = storage_.as<char>();
  CLI_CUDA_CHECK(cudaMemcpyAsync(host.data(), base, kGuardBytes, cudaMemcpyDeviceToHost, stream));
  CLI_CUDA_CHECK(cudaMemcpyAsync(host.data() + kGuardBytes, base + kGuardBytes + bytes_, kGuardBytes,
                                 cudaMemcpyDeviceToHost, stream));
  CLI_CUDA_CHECK(cudaStreamSynchronize(stream));
  return std::all_of(host.begin(), host.end(), [](unsigned char b) { return b == kGuardByte; });
}

}  // namespace tessera_cli
