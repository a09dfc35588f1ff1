// The GEMM API's argument rules. Each failure names the argument and the rule, and happens before
// anything is launched or written.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <tuple>

#include "core/injective.hpp"
#include "core/status.hpp"
#include "gemm/configs.hpp"
#include "gemm/plan.hpp"

namespace tessera::gemm_impl {
namespace {

using detail::invalid;

bool is_fp8(DType t) { return t == DType::E4M3 || t == DType::E5M2; }
bool valid_dtype(DType t) {
  return t == DType::F16 || t == DType::BF16 || t == DType::F32 || t == DType::S8 || t == DType::S32 || is_fp8(t);
}
int64_t bytes_of(DType t) { return int64_t(dtype_bytes(t)); }

// Checked a*b+c on non-negative values; false on overflow.
bool mul_add(int64_t a, int64_t b, int64_t c, int64_t* out) {
  __int128 v = (__int128)a * b + c;
  if (v > INT64_MAX) return false;
  *out = (int64_t)v;
  return true;
}

// Memory one (batched) matrix spans, in elements: [0, span). 0 when it has no elements.
struct Extent {
  int64_t inner = 0, outer = 0, batches = 0;
  bool ok = true;
  int64_t span = 0;
};

Extent extent_of(const Matrix& m, int64_t batches) {
  Extent e;
  e.inner = m.layout == Layout::RowMajor ? m.cols : m.rows;
  e.outer = m.layout == Layout::RowMajor ? m.rows : m.cols;
  e.batches = batches;
  if (e.inner == 0 || e.outer == 0 || batches == 0) return e;
  int64_t one = 0, all = 0;
  e.ok = mul_add(e.outer - 1, m.ld, e.inner, &one) && mul_add(batches - 1, m.batch_stride, one, &all) &&
         all <= INT64_MAX / bytes_of(m.dtype);
  e.span = all;
  return e;
}

// Checks one matrix on its own. `name` is "a", "b", "c" or "d".
Status check_matrix(const char* name, const Matrix& m, int64_t batches) {
  const std::string n(name);
  if (!valid_dtype(m.dtype)) return invalid(n + ".dtype: not a tessera dtype (" + std::to_string(int(m.dtype)) + ")");
  if (m.layout != Layout::RowMajor && m.layout != Layout::ColMajor)
    return invalid(n + ".layout: must be row-major or column-major");
  if (m.rows < 0) return invalid(n + ".rows: must be >= 0 (got " + std::to_string(m.rows) + ")");
  if (m.cols < 0) return invalid(n + ".cols: must be >= 0 (got " + std::to_string(m.cols) + ")");
  if (m.batch_stride < 0)
    return invalid(n + ".batch_stride: must be >= 0 (got " + std::to_string(m.batch_stride) + ")");
  const int64_t inner = m.layout == Layout::RowMajor ? m.cols : m.rows;
  if (m.ld < std::max<int64_t>(1, inner))
    return invalid(n + ".ld: must be >= max(1, " + (m.layout == Layout::RowMajor ? "cols" : "rows") + ") = " +
                   std::to_string(std::max<int64_t>(1, inner)) + " for a " +
                   (m.layout == Layout::RowMajor ? "row" : "column") + "-major matrix (got " + std::to_string(m.ld) +
                   ")");
  const Extent e = extent_of(m, batches);
  if (!e.ok) return invalid(n + ": rows, cols, ld and batch_stride address more than 2^63 bytes");
  if (e.span > 0 && m.ptr == nullptr) return invalid(n + ".ptr: null pointer for a non-empty matrix");
  if (m.ptr && reinterpret_cast<uintptr_t>(m.ptr) % bytes_of(m.dtype) != 0)
    return invalid(n + ".ptr: not aligned to its element size (" + std::to_string(bytes_of(m.dtype)) + " bytes)");
  return Status::success();
}

bool injective(const Matrix& m, int64_t batches) {
  const int64_t inner = m.layout == Layout::RowMajor ? m.cols : m.rows;
  const int64_t outer = m.layout == Layout::RowMajor ? m.rows : m.cols;
  return detail::injective({{inner, 1}, {outer, m.ld}, {batches, m.batch_stride}});
}

bool overlaps(const Matrix& x, int64_t bx, const Matrix& y, int64_t by) {
  const Extent ex = extent_of(x, bx), ey = extent_of(y, by);
  if (ex.span == 0 || ey.span == 0) return false;
  const auto x0 = reinterpret_cast<uintptr_t>(x.ptr), y0 = reinterpret_cast<uintptr_t>(y.ptr);
  const auto x1 = x0 + uintptr_t(ex.span * bytes_of(x.dtype)), y1 = y0 + uintptr_t(ey.span * bytes_of(y.dtype));
  return x0 < y1 && y0 < x1;
}

// The bias vector as a 1 x length row-major matrix of D's dtype with its batch stride, so that the
// extent and overlap rules of the matrices apply to it unchanged.
Matrix bias_view(const GemmArgs& args, int64_t length) {
  Matrix v;
  v.ptr = args.bias;
  v.dtype = args.d.dtype;
  v.rows = 1;
  v.cols = length;
  v.ld = std::max<int64_t>(1, length);
  v.layout = Layout::RowMajor;
  v.batch_stride = args.bias_batch_stride;
  return v;
}

// Batch count a matrix takes part with: 1 (broadcast) or the problem's.
Status check_batch(const char* name, const Matrix& m, int64_t batch) {
  if (m.batch_count != 1 && m.batch_count != batch)
    return invalid(std::string(name) + ".batch_count: must be 1 (broadcast) or d.batch_count = " +
                   std::to_string(batch) + " (got " + std::to_string(m.batch_count) + ")");
  return Status::success();
}

// S8 and fp8 operands, S32 D and the dequantisation scales (tessera_scale_mode_t). The scales' memory
// is checked in validate() once M and N are known.
Status check_quantized_rules(const GemmArgs& args) {
  const bool s8 = args.a.dtype == DType::S8, scalable = s8 || is_fp8(args.a.dtype);
  if (args.a.dtype == DType::S32)
    return invalid("a.dtype: s32 is an output type (D of s8 operands); a and b may be f16, bf16, f32, s8, e4m3 or e5m2");
  if (args.d.dtype == DType::S8 || is_fp8(args.d.dtype))
    return invalid(std::string("d.dtype: ") + dtype_name(args.d.dtype) +
                   " is an operand type; D is f16, bf16 or f32 (s32 for s8 operands' exact sums)");
  if (args.d.dtype == DType::S32 && !s8)
    return invalid(std::string("d.dtype: s32 is the output of s8 operands; a and b are ") + dtype_name(args.a.dtype));
  if (args.scale_mode != ScaleMode::None && args.scale_mode != ScaleMode::Tensor &&
      args.scale_mode != ScaleMode::RowWise && args.scale_mode != ScaleMode::Block)
    return invalid("scale_mode: must be none (0), tensor (1), row-wise (2) or block (3) (got " +
                   std::to_string(int(args.scale_mode)) + ")");
  if (args.scale_mode != ScaleMode::Block) {
    if (args.scale_a_strides[0] || args.scale_a_strides[1])
      return invalid("scale_a_strides: must be {0, 0} unless scale_mode is block");
    if (args.scale_b_strides[0] || args.scale_b_strides[1])
      return invalid("scale_b_strides: must be {0, 0} unless scale_mode is block");
  } else if (!is_fp8(args.a.dtype)) {
    return invalid(std::string("scale_mode: block scales (1 x 128 of A, 128 x 128 of B) are for fp8 operands; a and "
                               "b are ") + dtype_name(args.a.dtype) + " (tensor or row-wise scales apply)");
  } else if (args.d.layout != Layout::RowMajor) {
    return invalid("d.layout: block-scaled fp8 writes a row-major D (got column-major)");
  }
  if (args.scale_mode == ScaleMode::None) {
    if (args.scale_a) return invalid("scale_a: must be null when scale_mode is none");
    if (args.scale_b) return invalid("scale_b: must be null when scale_mode is none");
  } else if (!scalable) {
    return invalid(std::string("scale_mode: scales dequantise s8 and fp8 operands; a and b are ") +
                   dtype_name(args.a.dtype));
  }
  if (args.d.dtype == DType::S32) {
    if (args.scale_mode != ScaleMode::None)
      return invalid("scale_mode: an s32 D takes the int32 sums as they are; dequantised output needs d.dtype f16, bf16 or f32");
    if (args.alpha != 1.0f) return invalid("alpha: must be 1 for an s32 D (the exact int32 sums)");
    if (args.beta != 0.0f) return invalid("beta: must be 0 for an s32 D (the exact int32 sums)");
    if (args.bias_mode != BiasMode::None) return invalid("bias_mode: an s32 D takes no bias (dequantise to f16, bf16 or f32)");
    if (args.activation != Activation::None)
      return invalid("activation: an s32 D takes none (dequantise to f16, bf16 or f32)");
  }
  return Status::success();
}

// A block-scale matrix (rows x cols fp32 at `strides`) as a Matrix, or a message naming `strides_name`.
Status block_scale_matrix(const char* strides_name, const float* ptr, int64_t rows, int64_t cols,
                          const int64_t (&strides)[2], Matrix* v) {
  const BlockScaleLayout l = block_scale_layout(rows, cols, strides);
  if (!l.ok)
    return invalid(std::string(strides_name) + ": {" + std::to_string(strides[0]) + ", " + std::to_string(strides[1]) +
                   "} is not a row- or column-major " + std::to_string(rows) + " x " + std::to_string(cols) +
                   " matrix (one stride 1, the other at least the extent it steps over; {0, 0}: row-major, "
                   "contiguous)");
  v->ptr = ptr;
  v->dtype = DType::F32;
  v->rows = rows;
  v->cols = cols;
  v->layout = l.row_major ? Layout::RowMajor : Layout::ColMajor;
  v->ld = l.ld;
  return Status::success();
}

// The scales as fp32 matrices: 1 x length vectors (lengths from the scale mode), or block scales.
Status check_scales(const GemmArgs& args, int64_t m, int64_t n, int64_t k, int64_t batch) {
  if (args.scale_mode == ScaleMode::None) return Status::success();
  if (args.scale_mode == ScaleMode::Block) {
    const int64_t kb = (k + kScaleBlockK - 1) / kScaleBlockK, nb = (n + kScaleBlockK - 1) / kScaleBlockK;
    for (auto [name, strides_name, ptr, rows, cols, strides, shape] :
         {std::tuple<const char*, const char*, const float*, int64_t, int64_t, const int64_t(&)[2], const char*>{
              "scale_a", "scale_a_strides", args.scale_a, m, kb, args.scale_a_strides, "M x ceil(K/128)"},
          {"scale_b", "scale_b_strides", args.scale_b, kb, nb, args.scale_b_strides, "ceil(K/128) x ceil(N/128)"}}) {
      Matrix v;
      if (Status s = block_scale_matrix(strides_name, ptr, rows, cols, strides, &v); !s.ok()) return s;
      const Extent e = extent_of(v, 1);
      if (!e.ok) return invalid(std::string(strides_name) + ": the scales address more than 2^63 bytes");
      if (!ptr && e.span > 0)
        return invalid(std::string(name) + ": null pointer with scale_mode block (" + shape + " = " +
                       std::to_string(rows) + " x " + std::to_string(cols) + " values)");
      if (reinterpret_cast<uintptr_t>(ptr) % 4 != 0) return invalid(std::string(name) + ": not aligned to 4 bytes (fp32)");
      if (overlaps(args.d, batch, v, 1)) return invalid(std::string(name) + ": overlaps d in memory");
    }
    return Status::success();
  }
  const bool rows = args.scale_mode == ScaleMode::RowWise;
  for (auto [name, ptr, length, extent] :
       {std::tuple<const char*, const float*, int64_t, const char*>{"scale_a", args.scale_a, rows ? m : 1, "M"},
        {"scale_b", args.scale_b, rows ? n : 1, "N"}}) {
    if (!ptr && length > 0)
      return invalid(std::string(name) + ": null pointer with scale_mode " +
                     (rows ? std::string("row-wise (") + extent + " = " + std::to_string(length) + " values)"
                           : std::string("tensor (one value)")));
    if (reinterpret_cast<uintptr_t>(ptr) % 4 != 0) return invalid(std::string(name) + ": not aligned to 4 bytes (fp32)");
    Matrix v;
    v.ptr = ptr;
    v.dtype = DType::F32;
    v.rows = 1;
    v.cols = length;
    v.ld = std::max<int64_t>(1, length);
    if (overlaps(args.d, batch, v, 1)) return invalid(std::string(name) + ": overlaps d in memory");
  }
  return Status::success();
}

}  // namespace

Status validate(const GemmArgs& args) {
  if (args.op_a != Op::N && args.op_a != Op::T) return invalid("op_a: must be N or T");
  if (args.op_b != Op::N && args.op_b != Op::T) return invalid("op_b: must be N or T");
  if (args.bias_mode != BiasMode::None && args.bias_mode != BiasMode::PerColumn && args.bias_mode != BiasMode::PerRow)
    return invalid("bias_mode: must be none (0), per-column (1) or per-row (2) (got " +
                   std::to_string(int(args.bias_mode)) + ")");
  if (args.activation != Activation::None && args.activation != Activation::Relu &&
      args.activation != Activation::Gelu && args.activation != Activation::GeluTanh &&
      args.activation != Activation::Silu)
    return invalid("activation: must be none (0), relu (1), gelu (2), gelu_tanh (3) or silu (4) (got " +
                   std::to_string(int(args.activation)) + ")");

  const int64_t batch = args.d.batch_count;
  if (batch < 0) return invalid("d.batch_count: must be >= 0 (got " + std::to_string(batch) + ")");
  const bool use_c = args.beta != 0.0f;

  // Batch participation, then each matrix on its own.
  for (auto [name, m] : {std::pair<const char*, const Matrix*>{"a", &args.a}, {"b", &args.b}}) {
    if (Status s = check_batch(name, *m, batch); !s.ok()) return s;
  }
  if (use_c)
    if (Status s = check_batch("c", args.c, batch); !s.ok()) return s;
  auto eff_batches = [&](const Matrix& m) { return m.batch_count == 1 ? std::min<int64_t>(batch, 1) : batch; };
  if (Status s = check_matrix("a", args.a, eff_batches(args.a)); !s.ok()) return s;
  if (Status s = check_matrix("b", args.b, eff_batches(args.b)); !s.ok()) return s;
  if (use_c)
    if (Status s = check_matrix("c", args.c, eff_batches(args.c)); !s.ok()) return s;
  if (Status s = check_matrix("d", args.d, batch); !s.ok()) return s;

  // Types.
  if (args.b.dtype != args.a.dtype)
    return invalid(std::string("b.dtype: must equal a.dtype (") + dtype_name(args.a.dtype) + "), got " +
                   dtype_name(args.b.dtype));
  if (args.precision != Precision::Default && args.precision != Precision::TF32 &&
      args.precision != Precision::TF32x3 && args.precision != Precision::Fp8FastAccum)
    return invalid("precision: must be default (0), tf32 (1), tf32x3 (2) or fp8 fast accumulation (3) (got " +
                   std::to_string(int(args.precision)) + ")");
  if ((args.precision == Precision::TF32 || args.precision == Precision::TF32x3) && args.a.dtype != DType::F32)
    return invalid(std::string("precision: tf32 and tf32x3 apply to f32 operands; a and b are ") +
                   dtype_name(args.a.dtype) + " (leave precision at default)");
  if (args.precision == Precision::Fp8FastAccum && !is_fp8(args.a.dtype))
    return invalid(std::string("precision: fp8 fast accumulation applies to e4m3 / e5m2 operands; a and b are ") +
                   dtype_name(args.a.dtype) + " (leave precision at default)");
  if (use_c && args.c.dtype != args.d.dtype)
    return invalid(std::string("c.dtype: must equal d.dtype (") + dtype_name(args.d.dtype) + "), got " +
                   dtype_name(args.c.dtype));
  if (Status s = check_quantized_rules(args); !s.ok()) return s;

  // Shapes: op(A) is M x K, op(B) is K x N, C and D are M x N.
  const int64_t m = args.op_a == Op::N ? args.a.rows : args.a.cols;
  const int64_t ka = args.op_a == Op::N ? args.a.cols : args.a.rows;
  const int64_t kb = args.op_b == Op::N ? args.b.rows : args.b.cols;
  const int64_t n = args.op_b == Op::N ? args.b.cols : args.b.rows;
  if (ka != kb)
    return invalid("b: op(B) has " + std::to_string(kb) + " rows but op(A) has " + std::to_string(ka) +
                   " columns (K must agree)");
  if (args.d.rows != m || args.d.cols != n)
    return invalid("d: must be " + std::to_string(m) + " x " + std::to_string(n) + " (M x N), got " +
                   std::to_string(args.d.rows) + " x " + std::to_string(args.d.cols));
  if (use_c && (args.c.rows != m || args.c.cols != n))
    return invalid("c: must be " + std::to_string(m) + " x " + std::to_string(n) + " (M x N) when beta != 0, got " +
                   std::to_string(args.c.rows) + " x " + std::to_string(args.c.cols));
  // Kernels index tiles with 32-bit coordinates; the last tile may reach up to 1024 past the
  // edge, so the extents stop 1024 short of 2^31.
  constexpr int64_t kMaxExtent = INT_MAX - 1024;
  if (m > kMaxExtent || n > kMaxExtent || ka > kMaxExtent || batch > INT_MAX)
    return invalid("M, N and K must each be <= 2^31 - 1025 and the batch count < 2^31 (got M=" + std::to_string(m) +
                   " N=" + std::to_string(n) + " K=" + std::to_string(ka) + " batch=" + std::to_string(batch) + ")");

  // D's batches must not overlap (each output element written once), and D must not overlap
  // A or B; C may be D itself (in place) but must not partially overlap it.
  if (!injective(args.d, batch))
    return invalid("d.batch_stride: batches of D overlap (stride " + std::to_string(args.d.batch_stride) +
                   " with ld " + std::to_string(args.d.ld) + "); each batch needs its own memory");
  if (overlaps(args.d, batch, args.a, eff_batches(args.a))) return invalid("d: overlaps a in memory");
  if (overlaps(args.d, batch, args.b, eff_batches(args.b))) return invalid("d: overlaps b in memory");
  if (use_c) {
    const bool same = args.c.ptr == args.d.ptr && args.c.ld == args.d.ld && args.c.layout == args.d.layout &&
                      (args.c.batch_stride == args.d.batch_stride || batch <= 1) &&
                      args.c.batch_count == args.d.batch_count;
    if (!same && overlaps(args.d, batch, args.c, eff_batches(args.c)))
      return invalid("c: overlaps d in memory without being the same matrix (in-place C == D is allowed)");
  }

  // Bias: a vector in D's dtype (like C), N values per column or M per row, read while D is
  // written, so it must not overlap D. Without a mode the pointer must be null: a bias passed
  // with bias_mode left at none would otherwise be silently ignored.
  if (args.bias_mode == BiasMode::None) {
    if (args.bias) return invalid("bias: must be null when bias_mode is none (set bias_mode to per-column or per-row)");
  } else {
    const bool per_column = args.bias_mode == BiasMode::PerColumn;
    const int64_t length = per_column ? n : m;
    if (args.bias_batch_stride < 0)
      return invalid("bias_batch_stride: must be >= 0 (got " + std::to_string(args.bias_batch_stride) + ")");
    const int64_t bias_batches = args.bias_batch_stride > 0 ? batch : std::min<int64_t>(batch, 1);
    const Matrix v = bias_view(args, length);
    const Extent e = extent_of(v, bias_batches);
    if (!e.ok) return invalid("bias: its length and bias_batch_stride address more than 2^63 bytes");
    if (e.span > 0 && !args.bias)
      return invalid(std::string("bias: null pointer with bias_mode ") +
                     (per_column ? "per-column (N = " : "per-row (M = ") + std::to_string(length) + " values)");
    if (args.bias && reinterpret_cast<uintptr_t>(args.bias) % bytes_of(args.d.dtype) != 0)
      return invalid("bias: not aligned to its element size (" + std::to_string(bytes_of(args.d.dtype)) +
                     " bytes; the bias has d.dtype)");
    if (overlaps(args.d, batch, v, bias_batches)) return invalid("bias: overlaps d in memory");
  }

  if (Status s = check_scales(args, m, n, ka, batch); !s.ok()) return s;

  if (args.max_sms < 0)
    return invalid("max_sms: must be >= 0 (0 = every SM), got " + std::to_string(args.max_sms));
  if (!args.config.empty() && !find_config_choice(args.config).config)
    return invalid("config: " + spelling_error(args.config));
  return Status::success();
}

}  // namespace tessera::gemm_impl
