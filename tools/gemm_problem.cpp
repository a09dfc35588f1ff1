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

bool is_fp8(DType t) { return t == DType::E4M3 || t == DType::E5M2; }

const char* precision_name(tessera::Precision p) {
  switch (p) {
    case tessera::Precision::Default: return "default";
    case tessera::Precision::TF32: return "tf32";
    case tessera::Precision::TF32x3: return "tf32x3";
    case tessera::Precision::Fp8FastAccum: return "fp8_fast_accum";
  }
  return "?";
}

const char* bias_mode_name(tessera::BiasMode m) {
  switch (m) {
    case tessera::BiasMode::None: return "none";
    case tessera::BiasMode::PerRow: return "row";
    case tessera::BiasMode::PerColumn: return "col";
  }
  return "?";
}

const char* scale_mode_name(tessera::ScaleMode m) {
  switch (m) {
    case tessera::ScaleMode::None: return "none";
    case tessera::ScaleMode::Tensor: return "tensor";
    case tessera::ScaleMode::RowWise: return "row";
    case tessera::ScaleMode::Block: return "block";
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

int64_t GemmProblem::scale_a_length() const {
  switch (scale_mode) {
    case tessera::ScaleMode::None: return 0;
    case tessera::ScaleMode::Tensor: return 1;
    case tessera::ScaleMode::RowWise: return m;
    case tessera::ScaleMode::Block: return m * k_blocks();
  }
  return 0;
}

int64_t GemmProblem::scale_b_length() const {
  switch (scale_mode) {
    case tessera::ScaleMode::None: return 0;
    case tessera::ScaleMode::Tensor: return 1;
    case tessera::ScaleMode::RowWise: return n;
    case tessera::ScaleMode::Block: return scale_b_ld() * n_blocks();
  }
  return 0;
}

tessera::GemmArgs GemmProblem::tessera_args(const void* a_ptr, const void* b_ptr, const void* c_ptr,
                                            const void* bias_ptr, void* d_ptr, const float* scale_a,
                                            const float* scale_b) const {
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
  if (has_scales()) {
    args.scale_a = scale_a;
    args.scale_b = scale_b;
    args.scale_mode = scale_mode;
    if (block_scales()) {
      const std::array<int64_t, 2> sa = scale_a_strides(), sb = scale_b_strides();
      std::copy(sa.begin(), sa.end(), args.scale_a_strides);
      std::copy(sb.begin(), sb.end(), args.scale_b_strides);
    }
  }
  args.config = config;
  return args;
}

std::string GemmProblem::describe() const {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "M=%lld N=%lld K=%lld batch=%lld  %s -> %s  layout %s (D %s-major)  lda=%lld ldb=%lld ldd=%lld%s%s  "
                "alpha=%g beta=%g",
                (long long)m, (long long)n, (long long)k, (long long)batch, int8() ? "int8" : dtype_name(a.dtype),
                dtype_name(d.dtype),
                layout.c_str(), d.row_major ? "row" : "column", (long long)a.ld, (long long)b.ld, (long long)d.ld,
                a.broadcast() ? "  A broadcast" : "", b.broadcast() ? "  B broadcast" : "", alpha, beta);
  std::string out = buf;
  if (has_bias())
    out += std::string("  bias ") + (per_row_bias() ? "per row (M)" : "per column (N)") +
           (batch > 1 ? (bias_batch_stride > 0 ? ", one per batch" : ", broadcast") : "");
  if (activation != tessera::Activation::None) out += std::string("  activation ") + activation_name(activation);
  if (scale_mode == tessera::ScaleMode::Tensor) out += "  scales per tensor (one fp32 each)";
  if (scale_mode == tessera::ScaleMode::RowWise) out += "  scales row-wise (M + N fp32)";
  if (block_scales())
    out += "  scales per block (fp32, M x " + std::to_string(k_blocks()) + " column-major for 1 x 128 of op(A), " +
           std::to_string(k_blocks()) + " x " + std::to_string(n_blocks()) + " column-major (ld " +
           std::to_string(scale_b_ld()) + ") for 128 x 128 of op(B))  each block's sums scaled as they are promoted "
           "to fp32" + (fast_accum() ? " (--fast-accum changes nothing)" : "");
  else if (fp8())
    out += fast_accum() ? "  fast accumulation (the tensor cores' own sums)"
                        : "  sums promoted to fp32 every 128 K (default precision)";
  return out;
}

std::vector<OptionSpec> gemm_problem_options() {
  return {
      {"m", "M", "rows of op(A), C and D (required)"},
      {"n", "N", "columns of op(B), C and D (required)"},
      {"k", "K", "columns of op(A) = rows of op(B) (required)"},
      {"batch", "B", "batch count (default 1)"},
      {"dtype", "T", "A and B type: f16 | bf16 | tf32 | tf32x3 (fp32 operands as tf32, or 3xTF32) | int8 (s8 "
                     "operands, uniform in [-128, 127], summed exactly in int32) | e4m3 | e5m2 (fp8 operands, "
                     "Hopper: random values in [-4, 4] as the fp8 type holds them, summed in fp32) (default bf16)"},
      {"out-dtype", "T", "C and D type: f16 | bf16 | f32, or s32 for int8 (the exact int32 sums; alpha 1, beta 0, "
                         "no bias, activation or scales) (default: --dtype; f32 for tf32 and tf32x3; for int8 s32, "
                         "bf16 with --scales; bf16 for e4m3 and e5m2, which take f16, bf16 or f32)"},
      {"scales", "MODE", "int8, e4m3 and e5m2 only: none | tensor | row | block: dequantise D = alpha * scale_a * "
                         "scale_b * sums (+ beta C + bias, activation) with random positive fp32 scales, one each "
                         "(tensor) or M for the rows of op(A) and N for the columns of op(B) (row); block (e4m3 and "
                         "e5m2 with --d-row-major; DeepSeek-V3's recipe): D = alpha * sum over 128-deep K blocks kb of "
                         "scale_a[m, kb] * scale_b[kb, n / 128] * the block's sums, scale_a M x ceil(K/128) and "
                         "scale_b ceil(K/128) x ceil(N/128), spread over [1/8, 15/8) of their mean so that a wrong "
                         "block shows; needs a float --out-dtype (default none for int8, tensor for e4m3 and e5m2)"},
      {"fast-accum", "", "e4m3 and e5m2 only: Precision::Fp8FastAccum, the tensor cores' own accumulation all along "
                         "K (faster, less accurate at long K; torch._scaled_mm's use_fast_accum); default: the sums "
                         "promoted to fp32 every 128 K (always so with --scales block)"},
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
  const bool int8_in = in_name == "int8" || in_name == "s8" || in_name == "i8";
  const bool e4m3_in = in_name == "e4m3" || in_name == "fp8_e4m3" || in_name == "float8_e4m3fn";
  const bool e5m2_in = in_name == "e5m2" || in_name == "fp8_e5m2" || in_name == "float8_e5m2";
  const bool fp8_in = e4m3_in || e5m2_in;
  if (f32_in) p.precision = in_name == "tf32" ? tessera::Precision::TF32 : tessera::Precision::TF32x3;
  if (!f32_in && !int8_in && !fp8_in && in_name != "f16" && in_name != "fp16" && in_name != "half" &&
      in_name != "bf16")
    usage_error("--dtype: unknown type '" + in_name + "' (expected f16 | bf16 | tf32 | tf32x3 | int8 | e4m3 | e5m2)");
  const DType in = f32_in    ? DType::F32
                   : int8_in ? DType::S8
                   : e4m3_in ? DType::E4M3
                   : e5m2_in ? DType::E5M2
                             : parse_dtype("dtype", in_name, /*allow_f32=*/false);
  if (opts.has("fast-accum")) {
    if (!fp8_in) usage_error("--fast-accum: the fp8 accumulation mode applies to --dtype e4m3 and e5m2 only");
    p.precision = tessera::Precision::Fp8FastAccum;
  }

  const std::string scales = opts.str("scales", fp8_in ? "tensor" : "none");
  if (scales == "none") p.scale_mode = tessera::ScaleMode::None;
  else if (scales == "tensor") p.scale_mode = tessera::ScaleMode::Tensor;
  else if (scales == "row") p.scale_mode = tessera::ScaleMode::RowWise;
  else if (scales == "block") p.scale_mode = tessera::ScaleMode::Block;
  else usage_error("--scales: expected none, tensor, row or block, got '" + scales + "'");
  if (p.has_scales() && !int8_in && !fp8_in)
    usage_error("--scales: dequantisation scales apply to --dtype int8, e4m3 and e5m2 only");
  if (p.block_scales() && !fp8_in) usage_error("--scales block: block scales apply to --dtype e4m3 and e5m2 only");
  if (p.block_scales() && !opts.has("d-row-major"))
    usage_error("--scales block: tessera writes a block-scaled D row-major; add --d-row-major");

  const std::string out_name =
      opts.str("out-dtype", f32_in ? "f32" : int8_in ? (p.has_scales() ? "bf16" : "s32") : fp8_in ? "bf16" : in_name);
  if (fp8_in && (out_name == "s32" || out_name == "int32" || out_name == "i32" || out_name == "e4m3" ||
                 out_name == "e5m2" || out_name == "int8" || out_name == "s8"))
    usage_error("--out-dtype: fp8 operands take a bf16, f16 or f32 D (got '" + out_name + "')");
  const bool s32_out = out_name == "s32" || out_name == "int32" || out_name == "i32";
  if (s32_out && !int8_in) usage_error("--out-dtype s32: the int32 output of --dtype int8 only");
  if (int8_in && !s32_out && out_name != "f16" && out_name != "fp16" && out_name != "half" && out_name != "bf16" &&
      out_name != "f32" && out_name != "fp32" && out_name != "float")
    usage_error("--out-dtype: unknown type '" + out_name + "' (expected s32 | f16 | bf16 | f32 for --dtype int8)");
  const DType out = s32_out ? DType::S32 : parse_dtype("out-dtype", out_name, /*allow_f32=*/true);
  if (s32_out && p.has_scales())
    usage_error("--out-dtype s32 takes the int32 sums as they are: --scales " + scales +
                " needs --out-dtype bf16, f16 or f32");

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
  if (s32_out) {  // tessera's rule for an s32 D (the exact sums, torch._int_mm), said in the CLI's terms
    if (p.alpha != 1.0f) usage_error("--alpha: must be 1 with --out-dtype s32 (dequantise to bf16, f16 or f32)");
    if (p.beta != 0.0f) usage_error("--beta: must be 0 with --out-dtype s32 (dequantise to bf16, f16 or f32)");
    if (p.has_bias()) usage_error("--bias: none with --out-dtype s32 (dequantise to bf16, f16 or f32)");
    if (p.activation != tessera::Activation::None)
      usage_error("--activation: none with --out-dtype s32 (dequantise to bf16, f16 or f32)");
  }

  p.config = opts.str("config", "");
  return p;
}

void write_problem_json(JsonWriter& j, const GemmProblem& p) {
  j.field("m", p.m).field("n", p.n).field("k", p.k).field("batch", p.batch);
  const bool x3 = p.precision == tessera::Precision::TF32x3;
  j.field("dtype", p.a.dtype == DType::F32 ? (x3 ? "tf32x3" : "tf32") : p.int8() ? "int8" : dtype_name(p.a.dtype))
      .field("out_dtype", dtype_name(p.d.dtype));
  // Precision::* as its name ("default", "tf32", "tf32x3", "fp8_fast_accum"); fast_accum: fp8 operands
  // summed by the tensor cores all along K (false: promoted to fp32 every 128 K; false for other dtypes).
  j.field("precision", precision_name(p.precision)).field("fast_accum", p.fast_accum());
  j.field("layout", p.layout).field("d_row_major", p.d.row_major);
  j.field("lda", p.a.ld).field("ldb", p.b.ld).field("ldd", p.d.ld);
  j.field("broadcast_a", p.a.broadcast()).field("broadcast_b", p.b.broadcast());
  j.field("alpha", double(p.alpha)).field("beta", double(p.beta));
  j.field("bias", bias_mode_name(p.bias_mode)).field("bias_batch_stride", p.bias_batch_stride);
  j.field("activation", activation_name(p.activation));
  j.field("scales", scale_mode_name(p.scale_mode));
  // The *_tflops fields hold 2*M*N*K*batch per second / 1e12: integer operations (TOPS) for int8.
  j.field("throughput_unit", p.throughput_unit());
}

}  // namespace tessera_cli
