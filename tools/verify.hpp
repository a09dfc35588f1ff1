// --verify: tessera's D against a cuBLASLt fp32-output reference from the same inputs.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>

#include "cuda_raii.hpp"
#include "gemm_buffers.hpp"
#include "gemm_problem.hpp"

namespace tessera_cli {

struct VerifyResult {
  double rel_err = 0;  // ||out - ref||_F / ||ref||_F over the finite outputs (absolute when ref = 0)
  double tol = 0;
  uint64_t nonfinite = 0;
  bool guards_ok = false;
  bool pass = false;
};

// Relative-error tolerance: set by the rounding of D for f16/bf16 outputs, and by the rounding of
// the inputs' products (accumulation order) for f32 outputs.
double verify_tolerance(tessera::DType in, tessera::DType out,
                        tessera::Precision precision = tessera::Precision::Default);

// Computes the reference, fills D's guards, poisons D, runs `run_tessera` (which writes `d` from
// `inputs`) once, and checks the output and the guards. `lt_workspace` is cuBLASLt's workspace.
VerifyResult verify_gemm(const GemmProblem& p, const InputSet& inputs, GuardedBuffer& d,
                         const std::function<void()>& run_tessera, cublasLtHandle_t lt,
                         const DeviceBuffer& lt_workspace, cudaStream_t stream);

}  // namespace tessera_cli
