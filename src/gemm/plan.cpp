// Canonicalisation: the kernels compute a row-major D. A column-major D is computed as its
// transpose, D^T = op(B)^T op(A)^T, which swaps the roles of A and B (and of M and N) and is
// exact. Each operand's major then follows from its storage layout and op.
#include <algorithm>
#include <cstdint>

#include "gemm/plan.hpp"

#include "gemm/configs.hpp"

namespace tessera::gemm_impl {
namespace {

// The API's activation code reaches the kernels unchanged (EpilogueParams::activation).
static_assert(int(Activation::None) == kActNone && int(Activation::Relu) == kActRelu &&
                  int(Activation::Gelu) == kActGelu && int(Activation::GeluTanh) == kActGeluTanh &&
                  int(Activation::Silu) == kActSilu,
              "tessera_activation_t and ActivationTag must agree");

int tag_of(DType t) {
  switch (t) {
    case DType::F16: return kF16;
    case DType::BF16: return kBF16;
    case DType::S8: return kS8;
    case DType::S32: return kS32;
    case DType::E4M3: return kE4M3;
    case DType::E5M2: return kE5M2;
    default: return kF32;
  }
}
int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// op(X) as an (outer-extent x K) operand: `rows_are_k` says whether op(X)'s rows are the K mode
// (true for B, whose op(B) is K x N).
OperandPlan operand(const Matrix& x, Op op, bool rows_are_k, int64_t batch, bool split3) {
  // op(X) is row-major when exactly one of (stored row-major, transposed) holds.
  const bool op_row_major = (x.layout == Layout::RowMajor) != (op == Op::T);
  const int64_t op_rows = op == Op::N ? x.rows : x.cols;
  const int64_t op_cols = op == Op::N ? x.cols : x.rows;
  OperandPlan p;
  p.ptr = x.ptr;
  p.ld = x.ld;
  p.rows = rows_are_k ? op_cols : op_rows;
  p.k = rows_are_k ? op_rows : op_cols;
  // A row-major op(A) (M x K) has K contiguous; a row-major op(B) (K x N) has N contiguous.
  p.k_major = rows_are_k ? !op_row_major : op_row_major;
  const bool broadcast = x.batch_count == 1 || x.batch_stride == 0 || batch <= 1;
  p.batch_stride = broadcast ? 0 : x.batch_stride;
  p.padded_batches = broadcast ? 1 : batch;
  p.f32 = x.dtype == DType::F32;
  p.b8 = x.dtype == DType::S8 || x.dtype == DType::E4M3 || x.dtype == DType::E5M2;

  const int64_t elem = p.f32 ? 4 : p.b8 ? 1 : 2;
  const int64_t vec = 16 / elem;  // elements per 16 bytes
  const int64_t contiguous = p.k_major ? p.k : p.rows;
  const int64_t outer = p.k_major ? p.rows : p.k;
  const bool base_ok = reinterpret_cast<uintptr_t>(x.ptr) % 16 == 0;
  p.aligned = p.k == 0 || (base_ok && p.ld % vec == 0 && contiguous % vec == 0 &&
                           (broadcast || p.batch_stride % vec == 0) && (!p.copies_k_major() || (p.k_major && !split3)));
  if (p.copies_k_major()) {  // copied K-major: rows of segments x padded_k
    p.padded_k = round_up(p.k, vec);
    p.padded_ld = (split3 ? 3 : 1) * p.padded_k;
    p.pad_bytes = p.aligned ? 0 : size_t(round_up(p.padded_ld * p.rows * p.padded_batches * elem, 256));
  } else {
    p.padded_ld = round_up(contiguous, 8);
    p.pad_bytes = p.aligned ? 0 : size_t(round_up(p.padded_ld * outer * p.padded_batches * 2, 256));
  }
  return p;
}

}  // namespace

static_assert(kScaleBlockK == TESSERA_SCALE_BLOCK_K, "the kernels' k-tile per block scale is the API's block");

BlockScaleLayout block_scale_layout(int64_t rows, int64_t cols, const int64_t (&strides)[2]) {
  BlockScaleLayout l;
  if (strides[0] == 0 && strides[1] == 0) return {true, true, std::max<int64_t>(1, cols)};
  // Row-major: unit steps along a row (or a single column), rows ld >= cols apart (or a single row).
  if (strides[1] == 1 || cols <= 1) {
    const int64_t ld = rows > 1 ? strides[0] : std::max<int64_t>(1, cols);
    if (ld >= std::max<int64_t>(1, cols)) return {true, true, ld};
  }
  if (strides[0] == 1 || rows <= 1) {
    const int64_t ld = cols > 1 ? strides[1] : std::max<int64_t>(1, rows);
    if (ld >= std::max<int64_t>(1, rows)) return {true, false, ld};
  }
  return l;
}

GemmPlan make_plan(const GemmArgs& args, bool flip) {
  GemmPlan plan;
  const int64_t batch = args.d.batch_count;
  const int64_t m = args.op_a == Op::N ? args.a.rows : args.a.cols;
  const int64_t n = args.op_b == Op::N ? args.b.cols : args.b.rows;
  plan.empty = m == 0 || n == 0 || batch == 0;
  plan.ab_dtype = tag_of(args.a.dtype);

  const bool split3 = args.a.dtype == DType::F32 && args.precision == Precision::TF32x3;
  OperandPlan a = operand(args.a, args.op_a, false, batch, split3);  // M x K
  OperandPlan b = operand(args.b, args.op_b, true, batch, split3);   // N x K
  plan.swapped = (args.d.layout == Layout::ColMajor) != flip;
  if (plan.swapped) std::swap(a, b);
  if (split3) a.split = kSplitA, b.split = kSplitB;  // by canonical role: the three products pair up
  plan.kernel_k = split3 ? 3 * a.padded_k : a.k;
  // Block scales apply per 128-deep K block as the sums are promoted, whatever the precision.
  const bool block = args.scale_mode == ScaleMode::Block;
  plan.promote = split3 || (is_fp8(plan.ab_dtype) && (args.precision != Precision::Fp8FastAccum || block));
  plan.a = a;
  plan.b = b;
  plan.splitk_bytes = plan.empty ? 0 : splitk_workspace_bound(a.rows, b.rows, a.k, batch);
  plan.workspace_bytes = a.pad_bytes + b.pad_bytes + plan.splitk_bytes;

  GemmParams& p = plan.params;
  p.m = int(a.rows);
  p.n = int(b.rows);
  p.k = int(a.k);
  p.batch = int(batch);
  p.a = a.ptr;
  p.lda = a.ld;
  p.batch_stride_a = a.batch_stride;
  p.b = b.ptr;
  p.ldb = b.ld;
  p.batch_stride_b = b.batch_stride;

  EpilogueParams& e = p.epi;
  const int d_bytes = args.d.dtype == DType::F32 || args.d.dtype == DType::S32 ? 4 : 2;
  const int per16 = 16 / d_bytes;
  e.d = const_cast<void*>(args.d.ptr);
  e.ldd = args.d.ld;
  e.batch_stride_d = batch > 1 ? args.d.batch_stride : 0;
  e.d_dtype = tag_of(args.d.dtype);
  e.d_vec = reinterpret_cast<uintptr_t>(args.d.ptr) % 16 == 0 && e.ldd % per16 == 0 && e.batch_stride_d % per16 == 0;
  // D's contiguous extent (the same in either orientation) in whole 16-byte chunks: the TMA store's rule.
  const int64_t d_contiguous = args.d.layout == Layout::RowMajor ? args.d.cols : args.d.rows;
  const bool whole_chunks = d_contiguous % per16 == 0;
  e.d_tma = e.d_vec && whole_chunks;
  e.d_col_major = flip;
  // The flip's conditions (GemmPlan::flip_ok); C is checked below.
  plan.flip_ok = args.d.dtype == args.a.dtype && args.a.dtype != DType::F32 && e.d_tma;
  e.alpha = args.alpha;
  e.beta = args.beta;
  if (args.beta != 0.0f) {
    const Matrix& c = args.c;
    e.c = c.ptr;
    // C(m, n) of the canonical (possibly transposed) problem.
    const bool c_row_major = (c.layout == Layout::RowMajor) != plan.swapped;
    e.c_stride_m = c_row_major ? c.ld : 1;
    e.c_stride_n = c_row_major ? 1 : c.ld;
    e.batch_stride_c = (c.batch_count == 1 || batch <= 1) ? 0 : c.batch_stride;
    const bool c_aligned = reinterpret_cast<uintptr_t>(c.ptr) % 16 == 0 && c.ld % per16 == 0 &&
                           e.batch_stride_c % per16 == 0;
    e.c_vec = e.c_stride_n == 1 && c_aligned;
    e.c_tma = (flip ? e.c_stride_m == 1 : e.c_stride_n == 1) && c_aligned && whole_chunks;
    plan.flip_ok = plan.flip_ok && c.layout == args.d.layout && c_aligned;
  }
  if (args.bias_mode != BiasMode::None && args.bias) {
    // The user's per-column bias (indexed by D's column n) follows n through the swap: it is
    // indexed by the canonical row when the kernels compute D^T.
    const bool along_canonical_n = (args.bias_mode == BiasMode::PerColumn) != plan.swapped;
    e.bias = args.bias;
    e.bias_stride_m = along_canonical_n ? 0 : 1;
    e.bias_stride_n = along_canonical_n ? 1 : 0;
    e.batch_stride_bias = batch > 1 ? args.bias_batch_stride : 0;
    e.bias_vec = along_canonical_n && reinterpret_cast<uintptr_t>(args.bias) % 16 == 0 &&
                 e.batch_stride_bias % per16 == 0;
  }
  e.activation = int(args.activation);
  if (block) {  // validate keeps D row-major and flip_ok keeps fp8 unflipped: never swapped
    const int64_t kb = (a.k + kScaleBlockK - 1) / kScaleBlockK, nb = (b.rows + kScaleBlockK - 1) / kScaleBlockK;
    const BlockScaleLayout la = block_scale_layout(a.rows, kb, args.scale_a_strides);
    const BlockScaleLayout lb = block_scale_layout(kb, nb, args.scale_b_strides);
    GemmParams::BlockScales& s = p.block;
    s.row = args.scale_a;
    s.col = args.scale_b;
    s.row_stride_m = la.row_major ? la.ld : 1;
    s.row_stride_k = la.row_major ? 1 : la.ld;
    s.col_stride_k = lb.row_major ? lb.ld : 1;
    s.col_stride_n = lb.row_major ? 1 : lb.ld;
  } else if (args.scale_mode != ScaleMode::None) {  // the caller's scale_a follows op(A)'s rows through the swap
    p.scale_m = plan.swapped ? args.scale_b : args.scale_a;
    p.scale_n = plan.swapped ? args.scale_a : args.scale_b;
    p.scale_step = args.scale_mode == ScaleMode::RowWise ? 1 : 0;
  }
  return plan;
}

}  // namespace tessera::gemm_impl
