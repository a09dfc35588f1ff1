#include "gemm_buffers.hpp"

#include <algorithm>
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

}  // namespace

InputSet::InputSet(const GemmProblem& p, uint64_t seed, int set_index, cudaStream_t stream)
    : a(random_buffer(p.a, buffer_seed(seed, set_index, 0), stream)),
      b(random_buffer(p.b, buffer_seed(seed, set_index, 1), stream)),
      c(p.has_c() ? random_buffer(p.d, buffer_seed(seed, set_index, 2), stream) : DeviceBuffer()),
      bias(random_bias(p, seed, set_index, stream)) {}

size_t InputSet::bytes_needed(const GemmProblem& p) {
  return p.a.bytes() + p.b.bytes() + (p.has_c() ? p.d.bytes() : 0) + p.bias_elements() * dtype_bytes(p.d.dtype);
}

GuardedBuffer::GuardedBuffer(size_t bytes) : storage_(bytes + 2 * kGuardBytes), bytes_(bytes) {}

void GuardedBuffer::fill_guards(cudaStream_t stream) {
  char* base = storage_.as<char>();
  CLI_CUDA_CHECK(cudaMemsetAsync(base, kGuardByte, kGuardBytes, stream));
  CLI_CUDA_CHECK(cudaMemsetAsync(base + kGuardBytes + bytes_, kGuardByte, kGuardBytes, stream));
}

void GuardedBuffer::poison(cudaStream_t stream) {
  CLI_CUDA_CHECK(cudaMemsetAsync(data(), kPoisonByte, bytes_, stream));
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
