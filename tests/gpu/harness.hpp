// The GPU test harness: one GEMM case = fresh random operands on the device, D poisoned (0xFF = NaN)
// inside guard bands, tessera run, cuBLAS (fp32 accumulate, fp32 output) as the oracle, and a host
// comparison in fp64:
//   rel_err = ||D - ref||_F / max(||ref||_F, 1e-3)   with ref = act(alpha * op(A) op(B) + beta * C + bias)
//   (the bias and the activation applied on the host in fp64),
// plus: no NaN/Inf in D, guard bands and D's padding (bytes between rows/batches) untouched.
// (The 1e-3 floor only matters for 1x1-sized results whose value happens to be tiny, where an
// f16 subnormal's absolute rounding would otherwise read as a large relative error; for fp8 operands
// the floor is half the norm D has on average, as the tensor cores' error scales with the products.)
// S8 operands (uniform integers in [-128, 127]): the oracle is the exact int64 sums from a plain GPU
// kernel (gpu_helpers.hpp int8_gemm_reference) instead of cuBLAS; an S32 D must equal them exactly
// (D poisoned with 0x80 bytes, a value no sum reaches), a float D must match
// act(alpha * scale_a[i] * scale_b[j] * sum + beta * C + bias) in fp64 within the tolerance.
// E4M3 / E5M2 operands (values in [-4, 4] as the type holds them): the oracle is their fp64 sums from a
// plain GPU kernel (gpu_helpers.hpp fp8_gemm_reference), dequantised like S8's into a float D; with
// block scales (ScaleMode::Block) the sums of each 128-deep K block scaled by the block's two scales
// (gpu_helpers.hpp fp8_block_gemm_reference), and the tolerance that of promoted sums whatever the
// precision (block scaling always promotes).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gpu_helpers.hpp"
#include "tessera/tessera.h"
#include "tessera/tessera.hpp"

namespace tessera_test {

// True when a CUDA device of compute capability 8.0+ is usable; otherwise `why` says why (it
// always starts with "no CUDA device", the ctest skip marker).
bool device_ok(std::string* why);

// Seed for a case: std::random_device, or TESSERA_TEST_SEED (decimal) to replay a failure.
uint64_t fresh_seed();

using tessera::dtype_bytes;  // tessera.hpp's, as the harness's own
using tessera::dtype_name;

// Tolerance on rel_err for (A/B dtype, D dtype, precision of fp32 and fp8 operands, K: fp8 fast
// accumulation's bound grows with it); 0 for an S32 D (exact).
double tolerance(tessera::DType ab, tessera::DType d, tessera::Precision precision = tessera::Precision::Default,
                 int64_t k = 0);

// How one matrix of a case is stored.
struct MatSpec {
  tessera::Layout layout = tessera::Layout::ColMajor;
  int64_t ld_pad = 0;        // ld = max(1, packed ld) + ld_pad
  bool batched = true;       // false: batch_count 1 (broadcast)
  bool stride_zero = false;  // batch_count = batch with batch_stride 0 (broadcast by stride)
  int64_t stride_pad = 0;    // batch_stride = packed + stride_pad
  int64_t elem_offset = 0;   // base pointer offset in elements (misaligned operands)
  int64_t ld_abs = 0;        // > 0: this ld instead (e.g. interleaved batches: ld = batch * cols)
  int64_t stride_abs = -1;   // >= 0: this batch stride instead (batched matrices only)
};

enum class Workspace { Full, None, TooSmall };

struct Case {
  std::string config;  // "" = heuristic
  tessera::DType ab = tessera::DType::F16;
  tessera::DType dt = tessera::DType::F32;
  tessera::Op op_a = tessera::Op::N, op_b = tessera::Op::N;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  MatSpec a, b, c, d;  // a/b default to column-major (BLAS); set c/d layouts explicitly
  float alpha = 1.0f, beta = 0.0f;
  // Fused epilogue: a random bias vector in D's dtype (M values per row or N per column), stored
  // like a 1 x length matrix described by bias_spec (layout ignored; batched = one vector per batch
  // with stride length + stride_pad, else one for every batch; elem_offset misaligns it), then
  // the activation.
  tessera::BiasMode bias = tessera::BiasMode::None;
  MatSpec bias_spec;
  tessera::Activation activation = tessera::Activation::None;
  // fp32 operands: tf32 or 3xTF32; fp8 operands: Default (promoted every 128 K) or Fp8FastAccum.
  tessera::Precision precision = tessera::Precision::Default;
  // S8 and fp8 operands: dequantisation scales, random positive fp32 values of about 1 / (128 K^(1/4))
  // (S8) or 1 / (4 K^(1/4)) (fp8) (so a dequantised D is of order 1), one each (Tensor) or M and N
  // (RowWise), in allocations of their own starting scale_offset floats in (a 4-byte but not 16-byte
  // aligned pointer when odd).
  tessera::ScaleMode scale_mode = tessera::ScaleMode::None;
  int64_t scale_offset = 0;
  // Block scales (ScaleMode::Block, fp8 operands): scale_a M x ceil(K/128) and scale_b ceil(K/128) x
  // ceil(N/128), at these element strides (GemmArgs::scale_a_strides / scale_b_strides, {0, 0} = row-major
  // and contiguous; non-negative here). Each value base * 2^u with u uniform in [-4, 2] (base as for fp8
  // above; so that a scale taken from the wrong block shows), in an allocation of its own starting
  // scale_offset floats in, every float of it that is not an element NaN (so that a read of one shows);
  // an empty matrix (K = 0, or M or N = 0) is passed as a null pointer. The strides are passed as they
  // are whatever the mode (a case may give them to a mode that must refuse them).
  int64_t scale_a_strides[2] = {0, 0};
  int64_t scale_b_strides[2] = {0, 0};
  bool in_place = false;  // C is D (beta != 0)
  Workspace workspace = Workspace::Full;
  cudaStream_t stream = nullptr;
  bool capture_graph = false;  // capture the tessera call into a CUDA graph on `stream` and replay it
  bool use_c_abi = false;      // call tessera_gemm instead of tessera::gemm
  bool repeat_bitwise = false;  // run again on the same inputs (D restored): the bits must not change
  // Expected status; for anything but SUCCESS, D (and its guards) must be byte-for-byte untouched.
  tessera_status_t expect = TESSERA_STATUS_SUCCESS;
  std::string expect_message;  // substring of the status message when expect != SUCCESS
};

struct Outcome {
  uint64_t seed = 0;
  tessera::Status status;
  double rel_err = 0.0;
  double tol = 0.0;
  size_t workspace_bytes = 0;
  int64_t mismatches = 0;  // S32 D: outputs that differ from the exact sums
  std::string problems;  // everything that went wrong, "" when the case passed
  bool passed() const { return problems.empty(); }
};

// The workspace gemm_workspace_size asks for this case (0: every operand takes the fast path as is).
size_t workspace_needed(const Case& c);

// Runs one case (synchronously: the stream is synchronised before returning).
Outcome run_case(const Case& c);

// One line per group: cases, failures, max rel_err and its tolerance.
void record(const std::string& suite, const std::string& group, const Case& c, const Outcome& o);
void print_summary(const std::string& suite);

// The general form of record(), for any suite: whether the case passed, whether it produced an
// error measurement (`err` against the bound `tol`), and an optional second metric `err2` (>= 0)
// whose maximum the summary line also shows.
void record_result(const std::string& suite, const std::string& group, bool passed, bool measured, double err,
                   double tol, double err2 = -1.0);
// Names in `suite`'s summary lines (default: "rel err", "tol", no second metric).
void set_summary_labels(const std::string& suite, const std::string& err, const std::string& tol,
                        const std::string& err2 = "");

// The value of one stored f16 / bf16 / f32 / s8 / s32 / e4m3 / e5m2 element (host memory).
double host_value(const void* p, tessera::DType t);

// The bytes of a device buffer (synchronises `s`); a CUDA error is appended to *problems.
std::vector<uint8_t> to_host(const DeviceBuffer& b, cudaStream_t s, std::string* problems);

std::string describe(const Case& c);

}  // namespace tessera_test
