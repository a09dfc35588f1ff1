// Error handling for the CLI: every failure becomes a CliError carrying the process exit code, so
// that each command can be written straight-line and main() decides what to print and return.
#pragma once

#include <cublas_api.h>
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

#include "tessera/tessera.hpp"

namespace tessera_cli {

// Process exit codes (listed in `tessera --help`; bench/gemm_suite.py relies on them).
enum ExitCode : int {
  kExitOk = 0,
  kExitVerifyFailed = 1,  // --verify found a wrong result, non-finite output or a touched guard band
  kExitTesseraError = 2,  // a tessera call returned a non-success Status
  kExitNoDevice = 3,      // no CUDA device visible
  kExitCudaError = 4,     // CUDA runtime / cuBLAS failure, or not enough device memory
  kExitUsage = 64,        // bad command line (BSD sysexits EX_USAGE)
};

class CliError : public std::runtime_error {
 public:
  CliError(int code, const std::string& message) : std::runtime_error(message), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

[[noreturn]] inline void usage_error(const std::string& message) { throw CliError(kExitUsage, message); }

inline void check_cuda(cudaError_t e, const char* expr, const char* file, int line) {
  if (e == cudaSuccess) return;
  throw CliError(kExitCudaError, std::string(file) + ":" + std::to_string(line) + ": " + expr + " failed: " +
                                     cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")");
}

inline void check_cublas(cublasStatus_t s, const char* expr, const char* file, int line) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  throw CliError(kExitCudaError, std::string(file) + ":" + std::to_string(line) + ": " + expr + " failed: " +
                                     cublasGetStatusString(s));
}

// `what` names the tessera entry point; the Status message names the argument and rule.
inline void check_tessera(const tessera::Status& s, const char* what) {
  if (s.ok()) return;
  throw CliError(kExitTesseraError, std::string(what) + ": " + tessera_status_string(s.code) + ": " + s.message);
}

}  // namespace tessera_cli

#define CLI_CUDA_CHECK(expr) ::tessera_cli::check_cuda((expr), #expr, __FILE__, __LINE__)
#define CLI_CUBLAS_CHECK(expr) ::tessera_cli::check_cublas((expr), #expr, __FILE__, __LINE__)
