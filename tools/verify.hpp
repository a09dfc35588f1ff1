// --verify: tessera's D against a cuBLASLt fp32-output reference from the same inputs; int8 operands
// against exact int64 sums computed on the GPU (device_helpers.hpp), an s32 D equal to them bit for
// bit, a dequantised D against their fp32 dequantisation; fp8 operands against cuBLASLt's fp32 GEMM of
// the operands widened to fp32 (exact products), dequantised by the scales (block scales: applied to
// the widened operands before the GEMM).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <string>

#include "cuda_raii.hpp"
#include "device_helpers.hpp"
#include "gemm_buffers.hpp"
#include "gemm_problem.hpp"

namespace tessera_cli {

struct VerifyResult {
  double rel_err = 0;  // ||out - ref||_F / ||ref||_F over the finite outputs (absolute when ref = 0)
  double tol = 0;
  uint64_t nonfinite = 0;
  bool guards_ok = false;
  bool pass = false;
  // An s32 D (int8 operands): compared exactly (tol 0) with the int64 reference.
  bool exact = false;
  uint64_t mismatches = 0;
  std::string first_mismatch;  // "(batch, row, col): got X, want Y", "" without a mismatch
};

// Relative-error tolerance: set by the rounding of D for f16/bf16 outputs, and by the rounding of
// the inputs' products (accumulation order) for f32 outputs.
// int8 operands: exact sums, so only D's rounding (f16, bf16) or the fp32 epilogue's (f32) counts;
// 0 for an s32 D (exact). fp8 operands: D's rounding and the accumulation (promoted every 128 K:
// bf16 1e-2, f16 3e-3, f32 1e-3; fast accumulation: at least 2e-2 * sqrt(K / 4096)).
double verify_tolerance(tessera::DType in, tessera::DType out,
                        tessera::Precision precision = tessera::Precision::Default, int64_t k = 0);

// Device memory verify_gemm allocates for `p` (the reference, and C widened to fp32).
size_t verify_device_bytes(const GemmProblem& p);

// The int8 operands of `p` at a_ptr / b_ptr as the reference kernels read them: op(A) as M x K and
// op(B) as N x K (device_helpers.hpp Int8Operand).
Int8Operand int8_operand_a(const GemmProblem& p, const void* a_ptr);
Int8Operand int8_operand_b(const GemmProblem& p, const void* b_ptr);

// Computes the reference, fills D's guards, poisons D, runs `run_tessera` (which writes `d` from
// `inputs`) once, and checks the output and the guards. `lt_workspace` is cuBLASLt's workspace.
// `run_other` (optional; not for an s32 D): another GEMM that writes `d` from the same inputs (the
// --compare anchor), checked the same way against the same reference into *other.
VerifyResult verify_gemm(const GemmProblem& p, const InputSet& inputs, GuardedBuffer& d,
                         const std::function<void()>& run_tessera, cublasLtHandle_t lt,
                         const DeviceBuffer& lt_workspace, cudaStream_t stream,
                         const std::function<void()>& run_other = nullptr, VerifyResult* other = nullptr);

}  // namespace tessera_cli
