#include "verify.hpp"

#include <cmath>

#include "cublaslt_gemm.hpp"
#include "device_helpers.hpp"

namespace tessera_cli {

using tessera::DType;

double verify_tolerance(DType in, DType out, tessera::Precision precision) {
  switch (out) {
    case DType::BF16: return 1e-2;
    case DType::F16: return in == DType::F32 ? 3e-3 : 2e-3;
    case DType::F32:
      if (in == DType::F32) return precision == tessera::Precision::TF32x3 ? 1e-5 : 2e-3;  // tf32: 11-bit operands
      return in == DType::BF16 ? 1e-3 : 5e-4;
  }
  return 0;
}

VerifyResult verify_gemm(const GemmProblem& p, const InputSet& inputs, GuardedBuffer& d,
                         const std::function<void()>& run_tessera, cublasLtHandle_t lt,
                         const DeviceBuffer& lt_workspace, cudaStream_t stream) {
  // Reference: fp32 D with D's layout, from the same A, B and C (C widened to fp32 so that
  // cuBLASLt reads exactly the values tessera reads).
  const size_t d_elements = p.d.elements();
  DeviceBuffer ref(d_elements * sizeof(float));
  DeviceBuffer c32;
  if (p.has_c()) {
    c32 = DeviceBuffer(d_elements * sizeof(float));
    convert_to_f32(inputs.c.get(), p.d.dtype, c32.as<float>(), d_elements, stream);
  }
  LtGemm reference(lt, p, DType::F32, lt_workspace.bytes());
  reference.run(inputs.a.get(), inputs.b.get(), c32.get(), ref.get(), lt_workspace.get(), stream);
  // tessera's fused epilogue, D = act(alpha * AB + beta * C + bias), finished on the fp32 reference.
  const MatrixView view{p.d.rows, p.d.cols, p.d.ld, p.d.batch, p.d.batch_stride, p.d.row_major};
  apply_bias_activation(ref.as<float>(), view, p.has_bias() ? inputs.bias.get() : nullptr, p.d.dtype,
                        p.per_row_bias(), p.bias_batch_stride, p.activation, stream);

  // Poisoned D: an element tessera fails to write stays NaN and is counted as non-finite.
  d.fill_guards(stream);
  d.poison(stream);
  run_tessera();

  VerifyResult r;
  r.guards_ok = d.guards_intact(stream);
  const CompareSums sums = compare_to_reference(d.data(), p.d.dtype, ref.as<float>(), view, stream);
  const double err = std::sqrt(sums.err_sq), norm = std::sqrt(sums.ref_sq);
  r.rel_err = norm > 0 ? err / norm : err;
  r.tol = verify_tolerance(p.a.dtype, p.d.dtype, p.precision);
  r.nonfinite = sums.nonfinite;
  r.pass = r.rel_err <= r.tol && r.nonfinite == 0 && r.guards_ok;
  return r;
}

}  // namespace tessera_cli
