#include "verify.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "cublaslt_gemm.hpp"
#include "device_helpers.hpp"

namespace tessera_cli {

using tessera::DType;

double verify_tolerance(DType in, DType out, tessera::Precision precision, int64_t k) {
  if (in == DType::E4M3 || in == DType::E5M2) {
    // fp8 operands: every product is exact in fp32 and so is the reference's (cuBLASLt's fp32 GEMM of
    // the widened operands), so what differs is the order of the fp32 sums, the tensor cores' own
    // accumulation inside each 128-K promotion interval, and D's rounding (f16: 2^-11, bf16: 2^-8
    // relative at most). Chosen bounds, not measured ones: bf16 1e-2 (as for 16-bit operands), f16
    // 3e-3, f32 1e-3 with promotion. Fast accumulation keeps the tensor cores' reduced-precision sums
    // all along K (DeepSeek-V3 reports up to ~2% element error at K = 4096 on H800s), so its bound
    // grows with K: 2e-2 * sqrt(K / 4096), and at least the promoted bound.
    const double promoted = out == DType::BF16 ? 1e-2 : out == DType::F16 ? 3e-3 : 1e-3;
    if (precision != tessera::Precision::Fp8FastAccum) return promoted;
    return std::max(promoted, 2e-2 * std::sqrt(double(std::max<int64_t>(k, 1)) / 4096.0));
  }
  if (in == DType::S8) {
    // Exact sums: D's rounding (f16: 2^-11, bf16: 2^-8 relative at most) or, for f32, the epilogue's
    // few fp32 roundings and its activation's library functions.
    switch (out) {
      case DType::S32: return 0;
      case DType::BF16: return 1e-2;
      case DType::F16: return 2e-3;
      default: return 1e-5;
    }
  }
  switch (out) {
    case DType::BF16: return 1e-2;
    case DType::F16: return in == DType::F32 ? 3e-3 : 2e-3;
    case DType::F32:
      if (in == DType::F32) return precision == tessera::Precision::TF32x3 ? 1e-5 : 2e-3;  // tf32: 11-bit operands
      return in == DType::BF16 ? 1e-3 : 5e-4;
    default: break;
  }
  return 0;
}

size_t verify_device_bytes(const GemmProblem& p) {
  const size_t elements = p.d.elements();
  if (p.int8())  // int64 sums, and the fp32 reference of a dequantised D (which reads C as it is)
    return elements * sizeof(int64_t) + (p.d.dtype == DType::S32 ? 0 : elements * sizeof(float));
  if (p.fp8())  // A and B widened to fp32, and the fp32 reference (C is read as it is)
    return (p.a.elements() + p.b.elements() + elements) * sizeof(float);
  return (p.has_c() ? 2 : 1) * elements * sizeof(float);
}

namespace {

// Strides of element (row, col) of a stored matrix.
struct Strides {
  int64_t row, col;
};
Strides strides_of(const StoredMatrix& s) { return s.row_major ? Strides{s.ld, 1} : Strides{1, s.ld}; }

MatrixView view_of(const GemmProblem& p) {
  return MatrixView{p.d.rows, p.d.cols, p.d.ld, p.d.batch, p.d.batch_stride, p.d.row_major};
}

VerifyResult finish(VerifyResult r, double err_sq, double ref_sq) {
  const double err = std::sqrt(err_sq), norm = std::sqrt(ref_sq);
  r.rel_err = norm > 0 ? err / norm : err;
  return r;
}

// Fills D's guards, poisons D (an element left unwritten stays NaN, counted as non-finite), runs `run`
// (which writes D) once, and compares D with the fp32 reference `ref` (laid out as D).
VerifyResult check_against(const GemmProblem& p, GuardedBuffer& d, const std::function<void()>& run, const float* ref,
                           double tol, cudaStream_t stream) {
  d.fill_guards(stream);
  d.poison(stream);
  run();
  VerifyResult r;
  r.tol = tol;
  r.guards_ok = d.guards_intact(stream);
  const CompareSums sums = compare_to_reference(d.data(), p.d.dtype, ref, view_of(p), stream);
  r.nonfinite = sums.nonfinite;
  r = finish(r, sums.err_sq, sums.ref_sq);
  r.pass = r.rel_err <= r.tol && r.nonfinite == 0 && r.guards_ok;
  return r;
}

// int8 operands: the exact int64 sums, computed on the GPU, laid out as D.
DeviceBuffer int8_sums(const GemmProblem& p, const InputSet& inputs, cudaStream_t stream) {
  DeviceBuffer sums(p.d.elements() * sizeof(int64_t));
  int8_reference_sums(int8_operand_a(p, inputs.a.get()), int8_operand_b(p, inputs.b.get()), p.k, view_of(p),
                      sums.as<int64_t>(), stream);
  return sums;
}

// int8 operands, s32 D: the D must equal the exact sums bit for bit.
VerifyResult verify_int8_exact(const GemmProblem& p, const InputSet& inputs, GuardedBuffer& d,
                               const std::function<void()>& run_tessera, cudaStream_t stream) {
  const MatrixView view = view_of(p);
  const DeviceBuffer sums = int8_sums(p, inputs, stream);
  VerifyResult r;
  r.exact = true;
  d.fill_guards(stream);
  d.poison(stream, GuardedBuffer::kPoisonByteS32);  // an unwritten output cannot equal its sum
  run_tessera();
  r.guards_ok = d.guards_intact(stream);
  const ExactCompare c = compare_exact_s32(static_cast<const int32_t*>(d.data()), sums.as<int64_t>(), view, stream);
  r.mismatches = c.mismatches;
  if (c.mismatches)
    r.first_mismatch = "(" + std::to_string(c.first_batch) + ", " + std::to_string(c.first_row) + ", " +
                       std::to_string(c.first_col) + "): got " + std::to_string(c.first_out) + ", want " +
                       std::to_string(c.first_ref);
  r = finish(r, c.err_sq, c.ref_sq);
  r.pass = c.mismatches == 0 && r.guards_ok;
  return r;
}

// int8 operands, dequantised D: the fp32 dequantisation of exact int64 sums (C, bias and activation
// applied as for the float dtypes).
DeviceBuffer int8_reference(const GemmProblem& p, const InputSet& inputs, cudaStream_t stream) {
  const DeviceBuffer sums = int8_sums(p, inputs, stream);
  DeviceBuffer ref(p.d.elements() * sizeof(float));
  dequantised_reference(sums.as<int64_t>(), view_of(p), p.alpha, inputs.scale_a.as<float>(), inputs.scale_b.as<float>(),
                        p.scale_mode == tessera::ScaleMode::RowWise, p.beta, p.has_c() ? inputs.c.get() : nullptr,
                        p.d.dtype, ref.as<float>(), stream);
  return ref;
}

// A stored operand as the device helpers walk it (a broadcast operand once).
MatrixView operand_view(const StoredMatrix& s) {
  return MatrixView{s.rows, s.cols, s.ld, s.broadcast() ? 1 : s.batch, s.batch_stride, s.row_major};
}

// The block scales (GemmProblem's layouts) as the stored A and B meet them: op(A)(m, k) is stored at
// (m, k) for op n and (k, m) for op t and takes scale_a(m, k / 128); op(B)(k, n) is stored at (k, n)
// or (n, k) and takes scale_b(k / 128, n / 128).
BlockScales block_scales_a(const GemmProblem& p, const float* s) {
  const std::array<int64_t, 2> st = p.scale_a_strides();  // {along M, along K blocks}
  return p.op_a == tessera::Op::N ? BlockScales{s, st[0], st[1], 1, kScaleBlockK}
                                  : BlockScales{s, st[1], st[0], kScaleBlockK, 1};
}
BlockScales block_scales_b(const GemmProblem& p, const float* s) {
  const std::array<int64_t, 2> st = p.scale_b_strides();  // {along K blocks, along N blocks}
  return p.op_b == tessera::Op::N ? BlockScales{s, st[0], st[1], kScaleBlockK, kScaleBlockK}
                                  : BlockScales{s, st[1], st[0], kScaleBlockK, kScaleBlockK};
}

// fp8 operands: A and B widened to fp32 (exactly) with their layouts, block scales applied to them
// (one fp32 rounding each), cuBLASLt's fp32 GEMM of them (CUBLAS_COMPUTE_32F: fp32 products, exact
// for fp8 inputs without block scales, summed in fp32) as the sums, then alpha (* scale_a * scale_b,
// per tensor or row) * sums + beta * C in fp64 (dequantised_reference).
DeviceBuffer fp8_reference(const GemmProblem& p, const InputSet& inputs, cublasLtHandle_t lt,
                           const DeviceBuffer& lt_workspace, cudaStream_t stream) {
  GemmProblem q = p;  // the sums: same shapes, majors, leading dimensions and batch strides, fp32
  q.a.dtype = q.b.dtype = DType::F32;
  q.d.dtype = DType::F32;
  q.alpha = 1.0f;
  q.beta = 0.0f;
  q.precision = tessera::Precision::Default;
  q.scale_mode = tessera::ScaleMode::None;
  q.bias_mode = tessera::BiasMode::None;
  q.activation = tessera::Activation::None;
  DeviceBuffer a32(p.a.elements() * sizeof(float)), b32(p.b.elements() * sizeof(float));
  DeviceBuffer ref(p.d.elements() * sizeof(float));
  const bool block = p.block_scales();
  if (block) {
    convert_block_scaled_to_f32(inputs.a.get(), p.a.dtype, operand_view(p.a),
                                block_scales_a(p, inputs.scale_a.as<float>()), a32.as<float>(), stream);
    convert_block_scaled_to_f32(inputs.b.get(), p.b.dtype, operand_view(p.b),
                                block_scales_b(p, inputs.scale_b.as<float>()), b32.as<float>(), stream);
  } else {
    convert_to_f32(inputs.a.get(), p.a.dtype, a32.as<float>(), p.a.elements(), stream);
    convert_to_f32(inputs.b.get(), p.b.dtype, b32.as<float>(), p.b.elements(), stream);
  }
  {
    LtGemm sums(lt, q, DType::F32, lt_workspace.bytes(), CUBLAS_COMPUTE_32F);
    sums.run(a32.get(), b32.get(), nullptr, ref.get(), lt_workspace.get(), stream);
  }
  CLI_CUDA_CHECK(cudaStreamSynchronize(stream));
  a32.reset();
  b32.reset();
  dequantised_reference(ref.as<float>(), view_of(p), p.alpha, block ? nullptr : inputs.scale_a.as<float>(),
                        block ? nullptr : inputs.scale_b.as<float>(), p.scale_mode == tessera::ScaleMode::RowWise,
                        p.beta, p.has_c() ? inputs.c.get() : nullptr, p.d.dtype, ref.as<float>(), stream);
  return ref;
}

// Float operands: cuBLASLt's fp32-output GEMM of the same A, B and C (C widened to fp32 so that
// cuBLASLt reads exactly the values tessera reads).
DeviceBuffer float_reference(const GemmProblem& p, const InputSet& inputs, cublasLtHandle_t lt,
                             const DeviceBuffer& lt_workspace, cudaStream_t stream) {
  const size_t d_elements = p.d.elements();
  DeviceBuffer ref(d_elements * sizeof(float));
  DeviceBuffer c32;
  if (p.has_c()) {
    c32 = DeviceBuffer(d_elements * sizeof(float));
    convert_to_f32(inputs.c.get(), p.d.dtype, c32.as<float>(), d_elements, stream);
  }
  LtGemm reference(lt, p, DType::F32, lt_workspace.bytes());
  reference.run(inputs.a.get(), inputs.b.get(), c32.get(), ref.get(), lt_workspace.get(), stream);
  CLI_CUDA_CHECK(cudaStreamSynchronize(stream));  // before c32 is freed
  return ref;
}

}  // namespace

Int8Operand int8_operand_a(const GemmProblem& p, const void* a_ptr) {
  // op(A)(i, k): stored (i, k) for op n, (k, i) for op t.
  const Strides s = strides_of(p.a);
  const bool t = p.op_a == tessera::Op::T;
  return Int8Operand{static_cast<const int8_t*>(a_ptr), t ? s.col : s.row, t ? s.row : s.col,
                     p.a.broadcast() ? 0 : p.a.batch_stride};
}

Int8Operand int8_operand_b(const GemmProblem& p, const void* b_ptr) {
  // op(B)(k, j), read as row j, column k: stored (k, j) for op n, (j, k) for op t.
  const Strides s = strides_of(p.b);
  const bool t = p.op_b == tessera::Op::T;
  return Int8Operand{static_cast<const int8_t*>(b_ptr), t ? s.row : s.col, t ? s.col : s.row,
                     p.b.broadcast() ? 0 : p.b.batch_stride};
}

VerifyResult verify_gemm(const GemmProblem& p, const InputSet& inputs, GuardedBuffer& d,
                         const std::function<void()>& run_tessera, cublasLtHandle_t lt,
                         const DeviceBuffer& lt_workspace, cudaStream_t stream, const std::function<void()>& run_other,
                         VerifyResult* other) {
  if (p.int8() && p.d.dtype == DType::S32) return verify_int8_exact(p, inputs, d, run_tessera, stream);
  DeviceBuffer ref = p.int8()  ? int8_reference(p, inputs, stream)
                     : p.fp8() ? fp8_reference(p, inputs, lt, lt_workspace, stream)
                               : float_reference(p, inputs, lt, lt_workspace, stream);
  // tessera's fused epilogue, D = act(... + bias), finished on the fp32 reference.
  apply_bias_activation(ref.as<float>(), view_of(p), p.has_bias() ? inputs.bias.get() : nullptr, p.d.dtype,
                        p.per_row_bias(), p.bias_batch_stride, p.activation, stream);
  // Block scales: every 128-deep block's sums are promoted (and scaled), whatever the precision says.
  const double tol = verify_tolerance(p.a.dtype, p.d.dtype,
                                      p.block_scales() ? tessera::Precision::Default : p.precision, p.k);
  const VerifyResult r = check_against(p, d, run_tessera, ref.as<float>(), tol, stream);
  if (run_other && other) *other = check_against(p, d, run_other, ref.as<float>(), tol, stream);
  return r;
}

}  // namespace tessera_cli
