// Device memory of a GEMM run: the input sets (A, B and C, filled with random data) and the
// output D surrounded by guard bands.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "cuda_raii.hpp"
#include "gemm_problem.hpp"

namespace tessera_cli {

// One set of inputs. Several are rotated while timing so that small problems are not served from L2.
struct InputSet {
  DeviceBuffer a, b, c;  // c is empty when beta == 0
  DeviceBuffer bias;     // D's dtype, GemmProblem::bias_elements(); empty without --bias
  // int8 and fp8 with --scales: fp32, GemmProblem::scale_a_length() / scale_b_length() positive
  // values of about 1 / (128 K^(1/4)) (int8) or 1 / (4 K^(1/4)) (fp8) (times [0.5, 1.5), block scales
  // [1/8, 15/8)), so that a dequantised D is of order 1 like the float dtypes' (C and bias in [-1, 1)
  // matter as much); block scales laid out as GemmProblem says; empty otherwise.
  DeviceBuffer scale_a, scale_b;

  // Allocates and fills with values uniform in [-1, 1) (int8 operands: integers in [-128, 127]; fp8
  // operands: values in [-4, 4) as the fp8 type rounds them); `seed` and `set_index` pick the data.
  InputSet(const GemmProblem& p, uint64_t seed, int set_index, cudaStream_t stream);

  static size_t bytes_needed(const GemmProblem& p);  // A + B (+ C) (+ bias) (+ scales)
};

// D with `kGuardBytes` of a known byte pattern before and after it: a write out of bounds, in
// either direction, changes the pattern.
class GuardedBuffer {
 public:
  static constexpr size_t kGuardBytes = 4096;  // also keeps data() 256-byte aligned, like cudaMalloc
  static constexpr unsigned char kGuardByte = 0xA5;
  static constexpr unsigned char kPoisonByte = 0xFF;  // NaN in f16, bf16 and f32
  // An s32 D: 0x80808080 = -2139062144, which no int8 GEMM of K < 130558 sums to (0xFF.. would be -1).
  static constexpr unsigned char kPoisonByteS32 = 0x80;

  explicit GuardedBuffer(size_t bytes);
  void* data() const { return static_cast<char*>(storage_.get()) + kGuardBytes; }
  size_t bytes() const { return bytes_; }

  void fill_guards(cudaStream_t stream);  // writes the guard pattern
  void poison(cudaStream_t stream, unsigned char byte = kPoisonByte);  // fills D itself with `byte`
  bool guards_intact(cudaStream_t stream) const;  // synchronises the stream

 private:
  DeviceBuffer storage_;
  size_t bytes_;
};

}  // namespace tessera_cli
