// Device helpers of the GPU tests (defined in gpu_helpers.cu): random operands from a counter-based
// device RNG, and byte patterns for guard bands. Plain host declarations: the test sources are C++.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "tessera/tessera.hpp"

namespace tessera_test {

#if defined(__CUDACC__)
#define TT_HD __host__ __device__
#else
#define TT_HD
#endif

constexpr size_t kGuardBytes = 4096;  // guard band before and after an output, inside its allocation
constexpr uint8_t kPoisonByte = 0xFF;  // NaN in f16, bf16 and f32

// A device allocation, freed on scope exit.
struct DeviceBuffer {
  void* p = nullptr;
  size_t bytes = 0;
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (p) cudaFree(p);
  }
  cudaError_t alloc(size_t n) {
    bytes = n;
    return cudaMalloc(&p, n ? n : 1);
  }
  char* c() const { return static_cast<char*>(p); }
};

// SplitMix64 finaliser: derives independent seeds (per operand) from a case's seed.
inline uint64_t mix_seed(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Byte i of a guard band (the same on host and device). Never 0xFF, the poison byte.
inline TT_HD uint8_t guard_byte(uint64_t i, uint32_t salt) {
  uint32_t x = uint32_t(i) * 2654435761u ^ (uint32_t(i >> 32) * 40503u) ^ salt;
  x ^= x >> 15;
  x *= 2246822519u;
  x ^= x >> 13;
  const uint8_t b = uint8_t(x);
  return b == 0xFF ? uint8_t(0x5A) : b;
}

// Uniform in (-1, 1), never exactly 0 (before rounding to dtype, which keeps it non-zero too: the
// smallest magnitude is 2^-24, an f16 subnormal), from a hash of (seed, index).
inline TT_HD float uniform_value(uint64_t seed, uint64_t index) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (index + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  const int32_t x = int32_t(z & 0xFFFFFF);         // 24 random bits
  return float(2 * x + 1 - (1 << 24)) / float(1 << 24);  // odd numerator: never 0
}

// An int8 operand's value for uniform_value u in (-1, 1): floor(128 u), uniform in [-128, 127].
inline TT_HD int8_t int8_value(float u) {
  const float x = 128.0f * u;
  const int f = int(x) - (x < float(int(x)) ? 1 : 0);  // floor
  return int8_t(f < -128 ? -128 : f > 127 ? 127 : f);
}

// An fp8 operand's value for uniform_value u in (-1, 1): kFp8Range * u rounded to the fp8 type (to
// nearest; gpu_helpers.cu), so in [-4, 4] and exactly what the GEMM reads.
constexpr float kFp8Range = 4.0f;

// Fills the elements of a batched strided matrix (batches x outer x inner, element (l, o, i) at
// l * batch_stride + o * ld + i) with uniform_value(seed, linear element index) (S8: int8_value of
// it; E4M3 / E5M2: kFp8Range times it, rounded to the type). Other bytes are left as they are. S32 is
// not an operand type: cudaErrorInvalidValue.
cudaError_t fill_uniform(void* base, tessera::DType dtype, int64_t batches, int64_t outer, int64_t inner, int64_t ld,
                         int64_t batch_stride, uint64_t seed, cudaStream_t stream);

// Fills the elements of a 4-D strided tensor (dims[0] x dims[1] x dims[2] x dims[3], element
// (a, b, c, d) at a * strides[0] + b * strides[1] + c * strides[2] + d * strides[3]) with
// uniform_value(seed, linear element index). Other bytes are left as they are. Strides must not
// make two elements share an address (or the value written there is whichever thread wins).
cudaError_t fill_uniform_4d(void* base, tessera::DType dtype, const int64_t (&dims)[4], const int64_t (&strides)[4],
                            uint64_t seed, cudaStream_t stream);

// The exact int8 GEMM of a case: sums[(l * n + j) * m + i] = sum_k op(A)(i, k) op(B)(k, j) in int64,
// with op(A)(i, k) at a + l * a_bs + i * a_si + k * a_sk and op(B)(k, j) at b + l * b_bs + j * b_sj +
// k * b_sk (a batch stride of 0 broadcasts). A plain kernel, one output per thread: an oracle
// independent of the library's kernels and of cuBLAS, exact at any K.
cudaError_t int8_gemm_reference(const int8_t* a, int64_t a_si, int64_t a_sk, int64_t a_bs, const int8_t* b,
                                int64_t b_sj, int64_t b_sk, int64_t b_bs, int64_t m, int64_t n, int64_t k,
                                int64_t batch, int64_t* sums, cudaStream_t stream);

// The fp8 GEMM of a case (`dtype` E4M3 or E5M2, A and B alike), laid out and strided as
// int8_gemm_reference's (strides in elements, which are bytes): sums[(l * n + j) * m + i] =
// sum_k op(A)(i, k) op(B)(k, j) in fp64. The operands' values converted exactly, their products exact,
// and the sums exact too for the values the tests draw (|x| <= 4: every product a multiple of 2^-32
// below 2^4, so K < 2^13 of them stay within fp64's 53 bits). One output per thread, like the int8
// oracle: independent of the library's kernels.
cudaError_t fp8_gemm_reference(tessera::DType dtype, const void* a, int64_t a_si, int64_t a_sk, int64_t a_bs,
                               const void* b, int64_t b_sj, int64_t b_sk, int64_t b_bs, int64_t m, int64_t n,
                               int64_t k, int64_t batch, double* sums, cudaStream_t stream);

// The block-scaled fp8 GEMM of a case (tessera_scale_mode_t block: DeepSeek-V3's recipe), operands
// laid out as fp8_gemm_reference's: sums[(l * n + j) * m + i] = sum over the 128-deep K blocks kb of
// scale_a[i * sa_sm + kb * sa_sk] * scale_b[kb * sb_sk + (j / 128) * sb_sn] * (the block's sum of
// op(A)(i, k) op(B)(k, j), k in [128 kb, min(128 kb + 128, K))), in fp64: each block's sum exact (128
// products of the tests' values), the scales fp32 read from device memory where the strides (in
// elements, both given: no {0, 0} shorthand here) say, one rounding per block. One output per thread:
// independent of the library's kernels and of its reading of the strides.
cudaError_t fp8_block_gemm_reference(tessera::DType dtype, const void* a, int64_t a_si, int64_t a_sk, int64_t a_bs,
                                     const void* b, int64_t b_sj, int64_t b_sk, int64_t b_bs, const float* scale_a,
                                     int64_t sa_sm, int64_t sa_sk, const float* scale_b, int64_t sb_sk, int64_t sb_sn,
                                     int64_t m, int64_t n, int64_t k, int64_t batch, double* sums,
                                     cudaStream_t stream);

// bytes[i] = guard_byte(i, salt).
cudaError_t fill_guard(void* p, size_t bytes, uint32_t salt, cudaStream_t stream);

// Runs `call` (one tessera call on stream s) directly, or captured into a CUDA graph and replayed
// (capture fails if tessera leaves the caller's stream or makes a synchronous call). Failures of
// the CUDA calls around it are appended to *problems as "what: error; "; returns call()'s status.
tessera::Status call_on_stream(cudaStream_t s, bool capture_graph, const std::function<tessera::Status()>& call,
                               std::string* problems);

}  // namespace tessera_test
