#include "gemm_problem.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "check.hpp"
#include "json.hpp"
#include "run_common.hpp"

namespace tessera_cli {

using tessera::DType;
using tessera::Op;

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::F32: return "f32";
  }
  return "?";
}

size_t dtype_bytes(DType t) { return t == DType::F32 ? 4 : 2; }

const char* bias_mode_name(tessera::BiasMode m) {
  switch (m) {
    case tessera::BiasMode::None: return "none";
    case tessera::BiasMode::PerRow: return "row";
    case tessera::BiasMode::PerColumn: return "col";
  }
  return "?";
}

size_t StoredMatrix::elements() const {
  return size_t((batch - 1) * batch_stride + ld * outer());
}

tessera::Matrix StoredMatrix::to_tessera(const void* ptr) const {
  tessera::Matrix m;
  m.ptr = ptr;
  m.dtype = dtype;
  m.rows = rows;
  m.cols = cols;
  m.ld = ld;
  m.layout = row_major ? tessera::Layout::RowMajor : tessera::Layout::ColMajor;
  // tessera spells "one matrix for every batch" as batch_count 1.
  m.batch_count = broadcast() ? 1 : batch;
  m.batch_stride = batch_stride;
  return m;
}

size_t GemmProblem::bias_elements() const {
  return has_bias() ? size_t((batch - 1) * bias_batch_stride + bias_length()) : 0;
}

tessera::GemmArgs GemmProblem::tessera_args(const void* a_ptr, const void* b_ptr, const void* c_ptr,
                                            const void* bias_ptr, void* d_ptr) const {
  tessera::GemmArgs args;
  args.op_a = op_a;
  args.op_b = op_b;
  args.a = a.to_tessera(a_ptr);
  args.b = b.to_tessera(b_ptr);
  args.c = d.to_tessera(has_c() ? c_ptr : nullptr);
  args.d = d.to_tessera(d_ptr);
  args.alpha = alpha;
  args.beta = beta;
  if (has_bias()) {
    args.bias = bias_ptr;
    args.bias_mode = bias_mode;
    args.bias_batch_stride = bias_batch_stride;
  }
  args.activation = activation;
  args.precision = precision;
  args.config = config;
  return args;
}

std::string GemmProblem::describe() const {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "M=%lld N=%lld K=%lld batch=%lld  %s -> %s  layout %s (D %s-major)  lda=%lld ldb=%lld ldd=%lld%s%s  "
                "alpha=%g beta=%g",
                (long long)m, (long long)n, (long long)k, (long long)batch, dtype_name(a.dtype), dtype_name(d.dtype),
                layout.c_str(), d.row_major ? "row" : "column", (long long)a.ld, (long long)b.ld, (long long)d.ld,
                a.broadcast() ? "  A broadcast" : "", b.broadcast() ? "  B broadcast" : "", alpha, beta);
  std::string out = buf;
  if (has_bias())
    out += std::string("  bias ") + (per_row_bias() ? "per row (M)" : "per column (N)") +
           (batch > 1 ? (bias_batch_stride > 0 ? ", one per batch" : ", broadcast") : "");
  if (activation != tessera::Activation::None) out += std::string("  activation ") + activation_name(activation);
  return out;
}

std::vector<OptionSpec> gemm_problem_options() {
  return {
      {"m", "M", "rows of op(A), C and D (required)"},
      {"n", "N", "columns of op(B), C and D (required)"},
      {"k", "K", "columns of op(A) = rows of op(B) (required)"},
      {"batch", "B", "batch count (default 1)"},
      {"dtype", "T", "A and B type: f16 | bf16 | tf32 | tf32x3 (fp32 operands as tf32, or 3xTF32) (default bf16)"},
      {"out-dtype", "T", "C and D type: f16 | bf16 | f32 (default: --dtype; f32 for tf32 and tf32x3)"},
      {"layout", "XY", "BLAS ops of A then B, n = as stored, t = transposed (default tn: both K-major). "
                       "Stored column-major, A is MxK for n and KxM for t; B is KxN for n and NxK for t"},
      {"d-row-major", "", "store C and D row-major (default column-major M x N)"},
      {"lda", "LD", "leading dimension of A (default packed)"},
      {"ldb", "LD", "leading dimension of B (default packed)"},
      {"ldd", "LD", "leading dimension of C and D (default packed)"},
      {"batch-stride-a", "S", "elements between batches of A (default packed)"},
      {"batch-stride-b", "S", "elements between batches of B (default packed)"},
      {"batch-stride-d", "S", "elements between batches of C and D (default packed)"},
      {"broadcast-a", "", "one A for every batch (batch stride 0)"},
      {"broadcast-b", "", "one B for every batch (batch stride 0)"},
      {"alpha", "X", "scale of op(A) op(B) (default 1)"},
      {"beta", "X", "scale of C (default 0: C is neither allocated nor read)"},
      {"bias", "MODE", "none | row | col: add a random bias vector in D's dtype, M values (row: bias[m] added to "
                       "every column) or N (col: bias[n] added to every row, like nn.Linear); one vector per batch "
                       "(default none)"},
      {"broadcast-bias", "", "one bias vector for every batch (bias batch stride 0)"},
      {"activation", "ACT", "none | relu | gelu | gelu_tanh | silu, applied last (after the bias; default none)"},
      {"config", "NAME", "tessera configuration (default: heuristic; see `tessera info`)"},
  };
}

namespace {

[[noreturn]] void bad_layout(const std::string& layout) {
  usage_error("--layout: expected two letters from {n, t} such as tn, got '" + layout + "'");
}

Op parse_op(char c, const std::string& layout) {
  switch (c) {
    case 'n': return Op::N;
    case 't': return Op::T;
  }
  bad_layout(layout);
}

// A column-major (unless `row_major`) rows x cols matrix with the leading dimension and batch
// stride from the options named `ld_opt` / `stride_opt` (packed when absent).
StoredMatrix stored(DType dtype, int64_t rows, int64_t cols, bool row_major, int64_t batch, const Options& opts,
                    const std::string& ld_opt, const std::string& stride_opt, const std::string& broadcast_opt) {
  StoredMatrix s;
  s.dtype = dtype;
  s.rows = rows;
  s.cols = cols;
  s.row_major = row_major;
  s.batch = batch;
  s.ld = opts.integer(ld_opt, s.inner());
  if (s.ld < s.inner())
    usage_error("--" + ld_opt + ": must be >= " + std::to_string(s.inner()) + " (the stored " +
                (row_major ? "columns" : "rows") + "), got " + std::to_string(s.ld));
  const bool broadcast = !broadcast_opt.empty() && opts.has(broadcast_opt);
  if (broadcast && opts.has(stride_opt)) usage_error("--" + broadcast_opt + " and --" + stride_opt + " conflict");
  s.batch_stride = broadcast ? 0 : opts.integer(stride_opt, s.ld * s.outer());
  if (s.batch_stride < 0) usage_error("--" + stride_opt + ": must be >= 0");
  return s;
}

}  // namespace

GemmProblem parse_gemm_problem(const Options& opts) {
  if (!opts.has("m") || !opts.has("n") || !opts.has("k")) usage_error("--m, --n and --k are required");
  GemmProblem p;
  p.m = positive(opts, "m", 0);
  p.n = positive(opts, "n", 0);
  p.k = positive(opts, "k", 0);
  p.batch = positive(opts, "batch", 1);

  const std::string in_name = opts.str("dtype", "bf16");
  const bool f32_in = in_name == "tf32" || in_name == "tf32x3";
  if (f32_in) p.precision = in_name == "tf32" ? tessera::Precision::TF32 : tessera::Precision::TF32x3;
  const DType in = f32_in ? DType::F32 : parse_dtype("dtype", in_name, /*allow_f32=*/false);
  const DType out = parse_dtype("out-dtype", opts.str("out-dtype", f32_in ? "f32" : in_name), /*allow_f32=*/true);

  p.layout = opts.str("layout", "tn");
  if (p.layout.size() != 2) bad_layout(p.layout);
  std::transform(p.layout.begin(), p.layout.end(), p.layout.begin(), [](unsigned char c) { return std::tolower(c); });
  p.op_a = parse_op(p.layout[0], p.layout);
  p.op_b = parse_op(p.layout[1], p.layout);

  // BLAS convention: A is M x K as stored for op n, K x M for op t (likewise B: K x N or N x K).
  const bool ta = p.op_a == Op::T, tb = p.op_b == Op::T;
  p.a = stored(in, ta ? p.k : p.m, ta ? p.m : p.k, false, p.batch, opts, "lda", "batch-stride-a", "broadcast-a");
  p.b = stored(in, tb ? p.n : p.k, tb ? p.k : p.n, false, p.batch, opts, "ldb", "batch-stride-b", "broadcast-b");
  p.d = stored(out, p.m, p.n, opts.has("d-row-major"), p.batch, opts, "ldd", "batch-stride-d", "");

  p.alpha = float(opts.real("alpha", 1.0));
  p.beta = float(opts.real("beta", 0.0));

  const std::string bias = opts.str("bias", "none");
  if (bias == "none") p.bias_mode = tessera::BiasMode::None;
  else if (bias == "row") p.bias_mode = tessera::BiasMode::PerRow;
  else if (bias == "col") p.bias_mode = tessera::BiasMode::PerColumn;
  else usage_error("--bias: expected none, row or col, got '" + bias + "'");
  if (opts.has("broadcast-bias") && !p.has_bias()) usage_error("--broadcast-bias needs --bias row or col");
  // Batched problems get a vector per batch, so that the bias batch stride is exercised.
  p.bias_batch_stride = p.has_bias() && p.batch > 1 && !opts.has("broadcast-bias") ? p.bias_length() : 0;
  const std::string act = opts.str("activation", "none");
  bool known = false;
  for (auto a : {tessera::Activation::None, tessera::Activation::Relu, tessera::Activation::Gelu,
                 tessera::Activation::GeluTanh, tessera::Activation::Silu})
    if (act == activation_name(a)) {
      p.activation = a;
      known = true;
    }
  if (!known) usage_error("--activation: expected none, relu, gelu, gelu_tanh or silu, got '" + act + "'");

  p.config = opts.str("config", "");
  return p;
}

void write_problem_json(JsonWriter& j, const GemmProblem& p) {
  j.field("m", p.m).field("n", p.n).field("k", p.k).field("batch", p.batch);
  const bool x3 = p.precision == tessera::Precision::TF32x3;
  j.field("dtype", p.a.dtype == DType::F32 ? (x3 ? "tf32x3" : "tf32") : dtype_name(p.a.dtype))
      .field("out_dtype", dtype_name(p.d.dtype));
  j.field("layout", p.layout).field("d_row_major", p.d.row_major);
  j.field("lda", p.a.ld).field("ldb", p.b.ld).field("ldd", p.d.ld);
  j.field("broadcast_a", p.a.broadcast()).field("broadcast_b", p.b.broadcast());
  j.field("alpha", double(p.alpha)).field("beta", double(p.beta));
  j.field("bias", bias_mode_name(p.bias_mode)).field("bias_batch_stride", p.bias_batch_stride);
  j.field("activation", activation_name(p.activation));
}

}  // namespace tessera_cli
