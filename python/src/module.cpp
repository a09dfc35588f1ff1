// tessera._C: the nanobind binding of the C++ API (include/tessera/tessera.hpp).
//
// Everything here takes plain integers: device pointers, sizes, strides, dtype/layout codes and a
// cudaStream_t as an int. The library validates every argument before it touches memory or the
// device, so argument errors can be exercised without a GPU. Failures raise:
//   TESSERA_STATUS_INVALID_ARGUMENT -> ValueError
//   TESSERA_STATUS_NOT_SUPPORTED    -> NotImplementedError
//   CUDA / internal errors          -> RuntimeError
// each carrying the library's message (which names the argument and the rule).
// The PyTorch layer (python/tessera/_torch.py) builds these arguments from tensors.
#include <nanobind/nanobind.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "binding.hpp"
#include "tessera/tessera.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace tessera_python {
void bind_eager(nb::module_& m);    // eager.cpp: the tensor entries
void bind_kvcache(nb::module_& m);  // kvcache.cpp: attention_with_kvcache
void bind_varlen(nb::module_& m);   // varlen.cpp: attention_varlen

// Raises the Python exception for a failed status (with the GIL held).
void check(const tessera::Status& s) {
  if (s.ok()) return;
  PyObject* type = PyExc_RuntimeError;
  if (s.code == TESSERA_STATUS_INVALID_ARGUMENT) type = PyExc_ValueError;
  else if (s.code == TESSERA_STATUS_NOT_SUPPORTED) type = PyExc_NotImplementedError;
  const std::string msg = s.message.empty() ? tessera_status_string(s.code) : s.message;
  PyErr_SetString(type, msg.c_str());
  throw nb::python_error();
}
}  // namespace tessera_python

namespace {
using tessera_python::check;

using tessera_python::as_ptr;

tessera::Matrix make_matrix(uintptr_t ptr, int dtype, int64_t rows, int64_t cols, int64_t ld, int layout,
                            int64_t batch_count, int64_t batch_stride) {
  tessera::Matrix m;
  m.ptr = as_ptr<const void>(ptr);
  m.dtype = tessera::DType(dtype);  // out-of-range codes are rejected by the library's validation
  m.rows = rows;
  m.cols = cols;
  m.ld = ld;
  m.layout = tessera::Layout(layout);
  m.batch_count = batch_count;
  m.batch_stride = batch_stride;
  return m;
}

// The optional fused epilogue of a GEMM call (bias pointer, bias mode code, bias batch stride,
// activation code), as the Python keywords give it.
struct Epilogue {
  uintptr_t bias = 0;
  int bias_mode = TESSERA_BIAS_NONE;
  int64_t bias_batch_stride = 0;
  int activation = TESSERA_ACTIVATION_NONE;
};

// The dequantisation scales of s8 and fp8 operands: fp32 device pointers (0 = none), a SCALE_* code and,
// for SCALE_BLOCK, the scale matrices' element strides.
using Strides = std::array<int64_t, 2>;
struct Scales {
  uintptr_t a = 0;
  uintptr_t b = 0;
  int mode = TESSERA_SCALE_NONE;
  Strides a_strides{}, b_strides{};
};

tessera::GemmArgs make_gemm_args(const tessera::Matrix& a, const tessera::Matrix& b, const tessera::Matrix& d,
                                 const tessera::Matrix* c, float alpha, float beta, int op_a, int op_b,
                                 const std::string& config, const Epilogue& epi, int max_sms = 0, int precision = 0,
                                 const Scales& scales = {}) {
  tessera::GemmArgs g;
  g.a = a;
  g.b = b;
  g.d = d;
  if (c) g.c = *c;
  g.alpha = alpha;
  g.beta = beta;
  g.op_a = tessera::Op(op_a);
  g.op_b = tessera::Op(op_b);
  g.config = config;
  g.bias = as_ptr<const void>(epi.bias);
  g.bias_mode = tessera::BiasMode(epi.bias_mode);  // out-of-range codes are rejected by validation
  g.bias_batch_stride = epi.bias_batch_stride;
  g.activation = tessera::Activation(epi.activation);
  g.max_sms = max_sms;
  g.precision = tessera::Precision(precision);  // out-of-range codes are rejected by validation
  g.scale_a = as_ptr<const float>(scales.a);
  g.scale_b = as_ptr<const float>(scales.b);
  g.scale_mode = tessera::ScaleMode(scales.mode);  // out-of-range codes are rejected by validation
  for (int i = 0; i < 2; ++i) g.scale_a_strides[i] = scales.a_strides[i], g.scale_b_strides[i] = scales.b_strides[i];
  return g;
}

std::string matrix_repr(const tessera::Matrix& m) {
  return "Matrix(ptr=" + std::to_string(reinterpret_cast<uintptr_t>(m.ptr)) +
         ", dtype=" + std::to_string(int(m.dtype)) + ", rows=" + std::to_string(m.rows) +
         ", cols=" + std::to_string(m.cols) + ", ld=" + std::to_string(m.ld) +
         ", layout=" + std::to_string(int(m.layout)) + ", batch_count=" + std::to_string(m.batch_count) +
         ", batch_stride=" + std::to_string(m.batch_stride) + ")";
}

}  // namespace

NB_MODULE(_C, m) {
  m.doc() = "tessera's C++ API on plain integers (device pointers, sizes, strides, dtype codes, streams).";

  // ---- constants (the C ABI's codes) ----
  m.attr("F16") = int(TESSERA_DTYPE_F16);
  m.attr("BF16") = int(TESSERA_DTYPE_BF16);
  m.attr("F32") = int(TESSERA_DTYPE_F32);
  m.attr("S8") = int(TESSERA_DTYPE_S8);
  m.attr("S32") = int(TESSERA_DTYPE_S32);
  m.attr("E4M3") = int(TESSERA_DTYPE_E4M3);
  m.attr("E5M2") = int(TESSERA_DTYPE_E5M2);
  m.attr("ROW_MAJOR") = int(TESSERA_ROW_MAJOR);
  m.attr("COL_MAJOR") = int(TESSERA_COL_MAJOR);
  m.attr("OP_N") = int(TESSERA_OP_N);
  m.attr("OP_T") = int(TESSERA_OP_T);
  m.attr("BIAS_NONE") = int(TESSERA_BIAS_NONE);
  m.attr("BIAS_PER_COLUMN") = int(TESSERA_BIAS_PER_COLUMN);
  m.attr("BIAS_PER_ROW") = int(TESSERA_BIAS_PER_ROW);
  m.attr("ACTIVATION_NONE") = int(TESSERA_ACTIVATION_NONE);
  m.attr("ACTIVATION_RELU") = int(TESSERA_ACTIVATION_RELU);
  m.attr("ACTIVATION_GELU") = int(TESSERA_ACTIVATION_GELU);
  m.attr("ACTIVATION_GELU_TANH") = int(TESSERA_ACTIVATION_GELU_TANH);
  m.attr("ACTIVATION_SILU") = int(TESSERA_ACTIVATION_SILU);
  m.attr("PRECISION_DEFAULT") = int(TESSERA_PRECISION_DEFAULT);
  m.attr("PRECISION_TF32") = int(TESSERA_PRECISION_TF32);
  m.attr("PRECISION_TF32X3") = int(TESSERA_PRECISION_TF32X3);
  m.attr("PRECISION_FP8_FAST_ACCUM") = int(TESSERA_PRECISION_FP8_FAST_ACCUM);
  m.attr("SCALE_NONE") = int(TESSERA_SCALE_NONE);
  m.attr("SCALE_TENSOR") = int(TESSERA_SCALE_TENSOR);
  m.attr("SCALE_ROWWISE") = int(TESSERA_SCALE_ROWWISE);
  m.attr("SCALE_BLOCK") = int(TESSERA_SCALE_BLOCK);
  m.attr("SCALE_BLOCK_K") = int(TESSERA_SCALE_BLOCK_K);
  m.attr("STATUS_SUCCESS") = int(TESSERA_STATUS_SUCCESS);
  m.attr("STATUS_INVALID_ARGUMENT") = int(TESSERA_STATUS_INVALID_ARGUMENT);
  m.attr("STATUS_NOT_SUPPORTED") = int(TESSERA_STATUS_NOT_SUPPORTED);
  m.attr("STATUS_CUDA_ERROR") = int(TESSERA_STATUS_CUDA_ERROR);
  m.attr("STATUS_INTERNAL_ERROR") = int(TESSERA_STATUS_INTERNAL_ERROR);
  m.attr("__version__") = tessera_version();

  m.def("version", [] { return std::string(tessera_version()); }, "The library's version string.");
  m.def("reread_environment", &tessera::reread_environment,
        "Re-reads the TESSERA_* environment variables (read once per process otherwise) and drops the\n"
        "memoized launch plans; for tests and tools.");
  tessera_python::bind_eager(m);
  tessera_python::bind_kvcache(m);
  tessera_python::bind_varlen(m);
  m.def(
      "status_string", [](int code) { return std::string(tessera_status_string(tessera_status_t(code))); },
      "code"_a, "A short name for a status code (e.g. 1 -> 'invalid argument').");
  m.def(
      "last_error", [] { return std::string(tessera_last_error()); },
      "Message of the last failed tessera call on this thread ('' if the last call succeeded).");
  m.def(
      "configs",
      [] {
        std::vector<std::pair<std::string, std::string>> out;
        for (const tessera::ConfigInfo& c : tessera::gemm_configs()) out.emplace_back(c.name, c.description);
        return out;
      },
      "The compiled-in GEMM configurations as (name, description) pairs.");

  // ---- GEMM ----
  nb::class_<tessera::Matrix>(m, "Matrix",
                              "A stored (batched) matrix: rows x cols as it lies in memory (see tessera_matrix_t).")
      .def(
          "__init__",
          [](tessera::Matrix* self, uintptr_t ptr, int dtype, int64_t rows, int64_t cols, int64_t ld, int layout,
             int64_t batch_count, int64_t batch_stride) {
            new (self) tessera::Matrix(make_matrix(ptr, dtype, rows, cols, ld, layout, batch_count, batch_stride));
          },
          "ptr"_a, "dtype"_a, "rows"_a, "cols"_a, "ld"_a, "layout"_a = int(TESSERA_ROW_MAJOR), "batch_count"_a = 1,
          "batch_stride"_a = 0)
      .def_prop_rw(
          "ptr", [](const tessera::Matrix& x) { return reinterpret_cast<uintptr_t>(x.ptr); },
          [](tessera::Matrix& x, uintptr_t p) { x.ptr = as_ptr<const void>(p); })
      .def_prop_rw(
          "dtype", [](const tessera::Matrix& x) { return int(x.dtype); },
          [](tessera::Matrix& x, int v) { x.dtype = tessera::DType(v); })
      .def_prop_rw(
          "layout", [](const tessera::Matrix& x) { return int(x.layout); },
          [](tessera::Matrix& x, int v) { x.layout = tessera::Layout(v); })
      .def_rw("rows", &tessera::Matrix::rows)
      .def_rw("cols", &tessera::Matrix::cols)
      .def_rw("ld", &tessera::Matrix::ld)
      .def_rw("batch_count", &tessera::Matrix::batch_count)
      .def_rw("batch_stride", &tessera::Matrix::batch_stride)
      .def("__repr__", &matrix_repr);

  m.def(
      "gemm",
      [](const tessera::Matrix& a, const tessera::Matrix& b, const tessera::Matrix& d, const tessera::Matrix* c,
         float alpha, float beta, int op_a, int op_b, uintptr_t workspace, size_t workspace_bytes, uintptr_t stream,
         const std::string& config, uintptr_t bias, int bias_mode, int64_t bias_batch_stride, int activation,
         int max_sms, int precision, uintptr_t scale_a, uintptr_t scale_b, int scale_mode, Strides scale_a_strides,
         Strides scale_b_strides) {
        const tessera::GemmArgs g = make_gemm_args(a, b, d, c, alpha, beta, op_a, op_b, config,
                                                   Epilogue{bias, bias_mode, bias_batch_stride, activation}, max_sms,
                                                   precision, Scales{scale_a, scale_b, scale_mode, scale_a_strides, scale_b_strides});
        tessera::Status s;
        {
          nb::gil_scoped_release release;
          s = tessera::gemm(g, as_ptr<void>(stream), as_ptr<void>(workspace), workspace_bytes);
        }
        check(s);
      },
      "a"_a, "b"_a, "d"_a, "c"_a.none() = nb::none(), "alpha"_a = 1.0f, "beta"_a = 0.0f,
      "op_a"_a = int(TESSERA_OP_N), "op_b"_a = int(TESSERA_OP_N), "workspace"_a = 0, "workspace_bytes"_a = 0,
      "stream"_a = 0, "config"_a = "", "bias"_a = 0, "bias_mode"_a = int(TESSERA_BIAS_NONE),
      "bias_batch_stride"_a = 0, "activation"_a = int(TESSERA_ACTIVATION_NONE), "max_sms"_a = 0,
      "precision"_a = int(TESSERA_PRECISION_DEFAULT), "scale_a"_a = 0, "scale_b"_a = 0,
      "scale_mode"_a = int(TESSERA_SCALE_NONE), "scale_a_strides"_a = Strides{}, "scale_b_strides"_a = Strides{},
      "D = act(alpha * op(A) * op(B) + beta * C + bias) on `stream` (a cudaStream_t as an int; 0 = default\n"
      "stream). bias: a device pointer in D's dtype (0 = none) with bias_mode BIAS_PER_COLUMN (N values) or\n"
      "BIAS_PER_ROW (M values), batch l at bias + l * bias_batch_stride; activation: an ACTIVATION_* code.\n"
      "precision: a PRECISION_* code (F32 operands: TF32 or TF32X3; E4M3 / E5M2 operands: FP8_FAST_ACCUM).\n"
      "S8 operands: D S32 takes the exact int32 sums (alpha 1, beta 0, no bias, activation or scales); D\n"
      "F16/BF16/F32 takes alpha * scale_a * scale_b * sums (+ beta C + bias, then the activation) with\n"
      "scale_a, scale_b fp32 device pointers (0 = none) and scale_mode SCALE_TENSOR (one value each) or\n"
      "SCALE_ROWWISE (M values for the rows of op(A), N for the columns of op(B)), shared by every batch.\n"
      "E4M3 / E5M2 operands (the same type; sm_90 only, NotImplementedError elsewhere): D F16/BF16/F32 takes\n"
      "the fp32 sums, scaled as S8's (scales optional: SCALE_NONE gives the plain sums), or SCALE_BLOCK:\n"
      "scale_a M x ceil(K/128), scale_b ceil(K/128) x ceil(N/128), at scale_a_strides / scale_b_strides\n"
      "(elements; (0, 0) = row-major contiguous), D row-major.\n"
      "Asynchronous. Arguments are validated before anything is launched or written.");

  m.def(
      "gemm_workspace_size",
      [](const tessera::Matrix& a, const tessera::Matrix& b, const tessera::Matrix& d, const tessera::Matrix* c,
         float alpha, float beta, int op_a, int op_b, const std::string& config, uintptr_t bias, int bias_mode,
         int64_t bias_batch_stride, int activation, int precision, uintptr_t scale_a, uintptr_t scale_b,
         int scale_mode, Strides scale_a_strides, Strides scale_b_strides) {
        size_t bytes = 0;
        check(tessera::gemm_workspace_size(make_gemm_args(a, b, d, c, alpha, beta, op_a, op_b, config,
                                                          Epilogue{bias, bias_mode, bias_batch_stride, activation}, 0, precision,
                                                          Scales{scale_a, scale_b, scale_mode, scale_a_strides, scale_b_strides}),
                                           &bytes));
        return bytes;
      },
      "a"_a, "b"_a, "d"_a, "c"_a.none() = nb::none(), "alpha"_a = 1.0f, "beta"_a = 0.0f,
      "op_a"_a = int(TESSERA_OP_N), "op_b"_a = int(TESSERA_OP_N), "config"_a = "", "bias"_a = 0,
      "bias_mode"_a = int(TESSERA_BIAS_NONE), "bias_batch_stride"_a = 0, "activation"_a = int(TESSERA_ACTIVATION_NONE),
      "precision"_a = int(TESSERA_PRECISION_DEFAULT), "scale_a"_a = 0, "scale_b"_a = 0,
      "scale_mode"_a = int(TESSERA_SCALE_NONE), "scale_a_strides"_a = Strides{}, "scale_b_strides"_a = Strides{},
      "Validates the GEMM arguments and returns the workspace bytes that let every operand take the\n"
      "fastest path on the current device (0 when none is needed; without a device, a bound for any).");

  m.def(
      "gemm_select_config",
      [](const tessera::Matrix& a, const tessera::Matrix& b, const tessera::Matrix& d, const tessera::Matrix* c,
         float alpha, float beta, int op_a, int op_b, const std::string& config, uintptr_t bias, int bias_mode,
         int64_t bias_batch_stride, int activation, int precision, uintptr_t scale_a, uintptr_t scale_b,
         int scale_mode, Strides scale_a_strides, Strides scale_b_strides) {
        std::string name;
        check(tessera::gemm_select_config(make_gemm_args(a, b, d, c, alpha, beta, op_a, op_b, config,
                                                         Epilogue{bias, bias_mode, bias_batch_stride, activation}, 0, precision,
                                                         Scales{scale_a, scale_b, scale_mode, scale_a_strides, scale_b_strides}),
                                          &name));
        return name;
      },
      "a"_a, "b"_a, "d"_a, "c"_a.none() = nb::none(), "alpha"_a = 1.0f, "beta"_a = 0.0f,
      "op_a"_a = int(TESSERA_OP_N), "op_b"_a = int(TESSERA_OP_N), "config"_a = "", "bias"_a = 0,
      "bias_mode"_a = int(TESSERA_BIAS_NONE), "bias_batch_stride"_a = 0, "activation"_a = int(TESSERA_ACTIVATION_NONE),
      "precision"_a = int(TESSERA_PRECISION_DEFAULT), "scale_a"_a = 0, "scale_b"_a = 0,
      "scale_mode"_a = int(TESSERA_SCALE_NONE), "scale_a_strides"_a = Strides{}, "scale_b_strides"_a = Strides{},
      "Name of the configuration gemm() would run on the current device.");

  // ---- attention forward ----
  auto attention_args = [](uintptr_t q, uintptr_t k, uintptr_t v, uintptr_t o, int dtype, int64_t batch,
                           int64_t seqlen_q, int64_t seqlen_k, int64_t heads_q, int64_t heads_kv, int64_t head_dim,
                           std::array<int64_t, 3> q_stride, std::array<int64_t, 3> k_stride,
                           std::array<int64_t, 3> v_stride, std::array<int64_t, 3> o_stride, uintptr_t lse,
                           float softmax_scale, bool causal, int max_sms, int64_t window_left, int64_t window_right,
                           float softcap) {
    tessera::AttentionArgs a;
    a.q = as_ptr<const void>(q);
    a.k = as_ptr<const void>(k);
    a.v = as_ptr<const void>(v);
    a.o = as_ptr<void>(o);
    a.lse = as_ptr<float>(lse);
    a.dtype = tessera::DType(dtype);
    a.batch = batch;
    a.seqlen_q = seqlen_q;
    a.seqlen_k = seqlen_k;
    a.heads_q = heads_q;
    a.heads_kv = heads_kv;
    a.head_dim = head_dim;
    for (int i = 0; i < 3; ++i) {
      a.q_stride[i] = q_stride[i];
      a.k_stride[i] = k_stride[i];
      a.v_stride[i] = v_stride[i];
      a.o_stride[i] = o_stride[i];
    }
    a.softmax_scale = softmax_scale;
    a.causal = causal;
    a.max_sms = max_sms;
    a.window_left = window_left;
    a.window_right = window_right;
    a.softcap = softcap;
    return a;
  };
  m.def(
      "attention",
      [attention_args](uintptr_t q, uintptr_t k, uintptr_t v, uintptr_t o, int dtype, int64_t batch, int64_t seqlen_q,
                       int64_t seqlen_k, int64_t heads_q, int64_t heads_kv, int64_t head_dim,
                       std::array<int64_t, 3> q_stride, std::array<int64_t, 3> k_stride,
                       std::array<int64_t, 3> v_stride, std::array<int64_t, 3> o_stride, uintptr_t lse,
                       float softmax_scale, bool causal, uintptr_t stream, int max_sms, uintptr_t workspace,
                       size_t workspace_bytes, int64_t window_left, int64_t window_right, float softcap) {
        const tessera::AttentionArgs a = attention_args(q, k, v, o, dtype, batch, seqlen_q, seqlen_k, heads_q, heads_kv,
                                                        head_dim, q_stride, k_stride, v_stride, o_stride, lse,
                                                        softmax_scale, causal, max_sms, window_left, window_right,
                                                        softcap);
        tessera::Status s;
        {
          nb::gil_scoped_release release;
          s = tessera::attention(a, as_ptr<void>(stream), as_ptr<void>(workspace), workspace_bytes);
        }
        check(s);
      },
      "q"_a, "k"_a, "v"_a, "o"_a, "dtype"_a, "batch"_a, "seqlen_q"_a, "seqlen_k"_a, "heads_q"_a, "heads_kv"_a,
      "head_dim"_a, "q_stride"_a, "k_stride"_a, "v_stride"_a, "o_stride"_a, "lse"_a = 0, "softmax_scale"_a = 0.0f,
      "causal"_a = false, "stream"_a = 0, "max_sms"_a = 0, "workspace"_a = 0, "workspace_bytes"_a = 0,
      "window_left"_a = -1, "window_right"_a = -1, "softcap"_a = 0.0f,
      "O = softmax(scale * Q K^T [causal]) V. Q/O [B, Sq, Hq, D], K/V [B, Sk, Hkv, D] with (batch, seq, head)\n"
      "strides in elements (head-dim stride 1); lse: optional fp32 [B, Hq, Sq] pointer (0 = none);\n"
      "softmax_scale 0 = 1/sqrt(head_dim). workspace: attention_workspace_size() bytes (decode shapes\n"
      "split the keys with it). window_left/window_right: local attention, query i sees keys\n"
      "i' - window_left <= j <= i' + window_right with i' = i + Sk - Sq (-1: that side unlimited);\n"
      "softcap > 0: scaled scores s -> softcap * tanh(s / softcap). Asynchronous on `stream`.");
  m.def(
      "attention_workspace_size",
      [attention_args](uintptr_t q, uintptr_t k, uintptr_t v, uintptr_t o, int dtype, int64_t batch, int64_t seqlen_q,
                       int64_t seqlen_k, int64_t heads_q, int64_t heads_kv, int64_t head_dim,
                       std::array<int64_t, 3> q_stride, std::array<int64_t, 3> k_stride,
                       std::array<int64_t, 3> v_stride, std::array<int64_t, 3> o_stride, uintptr_t lse,
                       float softmax_scale, bool causal, int max_sms, int64_t window_left, int64_t window_right,
                       float softcap) {
        size_t bytes = 0;
        check(tessera::attention_workspace_size(
            attention_args(q, k, v, o, dtype, batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, q_stride,
                           k_stride, v_stride, o_stride, lse, softmax_scale, causal, max_sms, window_left,
                           window_right, softcap),
            &bytes));
        return bytes;
      },
      "q"_a, "k"_a, "v"_a, "o"_a, "dtype"_a, "batch"_a, "seqlen_q"_a, "seqlen_k"_a, "heads_q"_a, "heads_kv"_a,
      "head_dim"_a, "q_stride"_a, "k_stride"_a, "v_stride"_a, "o_stride"_a, "lse"_a = 0, "softmax_scale"_a = 0.0f,
      "causal"_a = false, "max_sms"_a = 0, "window_left"_a = -1, "window_right"_a = -1, "softcap"_a = 0.0f,
      "Bytes of workspace attention() can use for these args (0: none).");
}
