// The GEMM problem the `gemm` command runs, in BLAS (column-major) terms, and its translation to
// tessera::GemmArgs. cuBLASLt (cublaslt_gemm.hpp) reads the same description, so both libraries
// see exactly the same operands.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "args.hpp"
#include "tessera/tessera.hpp"

namespace tessera_cli {

using tessera::dtype_bytes;  // tessera.hpp's, as the tools' own
using tessera::dtype_name;
const char* bias_mode_name(tessera::BiasMode m);     // "none", "row", "col" (the --bias values)
const char* scale_mode_name(tessera::ScaleMode m);   // "none", "tensor", "row", "block" (the --scales values)
const char* precision_name(tessera::Precision p);    // "default", "tf32", "tf32x3", "fp8_fast_accum"
bool is_fp8(tessera::DType t);                        // E4M3 or E5M2
constexpr int64_t kScaleBlockK = TESSERA_SCALE_BLOCK_K;  // K (and N) per block scale (ScaleMode::Block)

// A (batched) matrix as the CLI stores it.
struct StoredMatrix {
  tessera::DType dtype = tessera::DType::F16;
  int64_t rows = 0, cols = 0;  // as stored, before op()
  bool row_major = false;
  int64_t ld = 0;
  int64_t batch = 1;         // the problem's batch count
  int64_t batch_stride = 0;  // elements; 0 = one matrix broadcast to every batch

  int64_t inner() const { return row_major ? cols : rows; }  // the contiguous extent
  int64_t outer() const { return row_major ? rows : cols; }
  bool broadcast() const { return batch > 1 && batch_stride == 0; }
  size_t elements() const;  // allocation size: (batch - 1) * batch_stride + ld * outer
  size_t bytes() const { return elements() * dtype_bytes(dtype); }
  tessera::Matrix to_tessera(const void* ptr) const;
};

struct GemmProblem {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  tessera::Op op_a = tessera::Op::N, op_b = tessera::Op::N;
  StoredMatrix a, b, d;  // C has D's shape, layout and dtype (and is read only when beta != 0)
  float alpha = 1.0f, beta = 0.0f;
  // Fused epilogue: a bias vector in D's dtype (M values per row or N per column), one per batch
  // (packed, bias_batch_stride = its length) unless broadcast (stride 0), then the activation.
  tessera::BiasMode bias_mode = tessera::BiasMode::None;
  int64_t bias_batch_stride = 0;
  tessera::Activation activation = tessera::Activation::None;
  // fp32 operands (--dtype tf32 | tf32x3); fp8 operands: Default (sums promoted to fp32 every 128 K)
  // or Fp8FastAccum (--fast-accum: the tensor cores' own accumulation).
  tessera::Precision precision = tessera::Precision::Default;
  // int8 and fp8 operands (--dtype int8 | e4m3 | e5m2): dequantisation scales (--scales), random
  // positive fp32 values, one each (tensor) or M for the rows of op(A) and N for the columns of op(B)
  // (row-wise); fp8 operands also block scales (below).
  tessera::ScaleMode scale_mode = tessera::ScaleMode::None;
  std::string config;  // "" = tessera's heuristic
  std::string layout;  // "tn", "nt", ...: op_a then op_b

  bool has_c() const { return beta != 0.0f; }
  bool has_bias() const { return bias_mode != tessera::BiasMode::None; }
  bool per_row_bias() const { return bias_mode == tessera::BiasMode::PerRow; }
  int64_t bias_length() const { return per_row_bias() ? m : n; }
  size_t bias_elements() const;  // allocation size: (batch - 1) * bias_batch_stride + bias_length(); 0 without
  bool int8() const { return a.dtype == tessera::DType::S8; }
  bool fp8() const { return is_fp8(a.dtype); }  // E4M3 or E5M2 operands (A and B alike)
  bool fast_accum() const { return precision == tessera::Precision::Fp8FastAccum; }
  bool has_scales() const { return scale_mode != tessera::ScaleMode::None; }
  bool block_scales() const { return scale_mode == tessera::ScaleMode::Block; }
  // Block scales (--scales block, fp8 operands, row-major D): scale_a M x ceil(K/128), one per row of
  // op(A) and 128-deep block of K; scale_b ceil(K/128) x ceil(N/128), one per 128 x 128 block of op(B).
  // The one place that lays them out: as cuBLASLt's VEC128_32F (scale_a) and BLK128x128_32F (scale_b)
  // read them for the K-major ("TN") fp8 GEMM it runs for a row-major D (cublaslt_gemm.hpp: its A slot
  // then holds op(B), its B slot op(A); CUDALibrarySamples' cuBLASLt helpers size them
  // ceil(inner / 128) * outer and round_up(ceil(inner / 128), 4) * ceil(outer / 128), and
  // torch._scaled_mm checks these strides), and tessera reads the same storage at these strides:
  //   scale_a column-major, M apart ("outer-dim-major"): (m, kb) at m + kb * M;
  //   scale_b column-major, its leading dimension ceil(K/128) rounded up to a multiple of 4:
  //   (kb, nb) at kb + nb * round_up(ceil(K/128), 4).
  int64_t k_blocks() const { return (k + kScaleBlockK - 1) / kScaleBlockK; }
  int64_t n_blocks() const { return (n + kScaleBlockK - 1) / kScaleBlockK; }
  int64_t scale_b_ld() const { return (k_blocks() + 3) / 4 * 4; }
  std::array<int64_t, 2> scale_a_strides() const { return {1, m}; }             // {along M, along K blocks}
  std::array<int64_t, 2> scale_b_strides() const { return {1, scale_b_ld()}; }  // {along K blocks, along N blocks}
  // Elements of the scale buffers (0 without scales): row-wise M and N; block the matrices above (with
  // scale_b's padding); else one value each.
  int64_t scale_a_length() const;
  int64_t scale_b_length() const;
  // 2*M*N*K*batch: floating-point operations, or for int8 operands integer operations (reported as
  // TOPS in the fields that say TFLOP/s elsewhere; throughput_unit() names the unit). fp8: FLOPs.
  double flops() const { return 2.0 * double(m) * double(n) * double(k) * double(batch); }
  const char* throughput_unit() const { return int8() ? "TOPS" : "TFLOP/s"; }
  tessera::GemmArgs tessera_args(const void* a_ptr, const void* b_ptr, const void* c_ptr, const void* bias_ptr,
                                 void* d_ptr, const float* scale_a = nullptr, const float* scale_b = nullptr) const;
  std::string describe() const;  // one line for the human-readable report
};

class JsonWriter;
// The problem's fields (shape, dtypes, layout, leading dimensions, broadcast, alpha, beta, bias,
// activation, scales, precision, the unit of the throughput fields) as members of the JSON object being
// written: the same keys in `gemm --json` and `tune --json`.
void write_problem_json(JsonWriter& j, const GemmProblem& p);

// The options that describe a problem (shared by the parser and `tessera gemm --help`).
std::vector<OptionSpec> gemm_problem_options();

// Builds the problem from parsed options; throws a usage error on an invalid combination.
GemmProblem parse_gemm_problem(const Options& opts);

}  // namespace tessera_cli
