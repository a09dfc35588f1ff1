#include "harness.hpp"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <tuple>
#include <vector>

#include "gpu_helpers.hpp"

namespace tessera_test {
namespace {

using tessera::DType;
using tessera::Layout;
using tessera::Matrix;
using tessera::Op;

constexpr size_t kGuard = kGuardBytes;  // bytes before and after D, inside D's allocation
constexpr uint8_t kPoison = kPoisonByte;  // NaN in f16, bf16 and f32
// An S32 D's poison: 0x80808080 = -2139062144, which no int8 GEMM of K < 130558 sums to (0xFF bytes
// would read as -1, a common sum).
constexpr uint8_t kPoisonS32 = 0x80;

// A matrix of a case, placed in its own allocation: [front bytes][span elements][back bytes].
struct Placed {
  Matrix m;
  int64_t inner = 0, outer = 0;
  int64_t stored = 0;  // batches in memory
  int64_t span = 0;    // elements from m.ptr
  size_t front = 0, back = 0;
  DeviceBuffer buf;
  size_t es() const { return dtype_bytes(m.dtype); }
  size_t alloc_bytes() const { return front + size_t(span) * es() + back; }
  int64_t batch_stride_used() const { return stored > 1 ? m.batch_stride : 0; }
  // Offset in elements (from m.ptr) of stored element (r, c) of batch l.
  int64_t offset(int64_t l, int64_t r, int64_t c) const {
    const int64_t bo = (m.batch_count == 1) ? 0 : l * m.batch_stride;
    return bo + (m.layout == Layout::RowMajor ? r * m.ld + c : r + c * m.ld);
  }
};

void place(Placed& p, const MatSpec& s, DType dt, int64_t rows, int64_t cols, int64_t batch, bool is_d, size_t guard) {
  Matrix& m = p.m;
  m.dtype = dt;
  m.rows = rows;
  m.cols = cols;
  m.layout = s.layout;
  p.inner = s.layout == Layout::RowMajor ? cols : rows;
  p.outer = s.layout == Layout::RowMajor ? rows : cols;
  m.ld = s.ld_abs > 0 ? s.ld_abs : std::max<int64_t>(1, p.inner) + s.ld_pad;
  const int64_t one = p.inner > 0 && p.outer > 0 ? (p.outer - 1) * m.ld + p.inner : 0;
  if (is_d) {
    m.batch_count = batch;
    m.batch_stride = batch > 1 ? (s.stride_abs >= 0 ? s.stride_abs : one + s.stride_pad) : 0;
    p.stored = batch;
  } else if (!s.batched || batch <= 1) {
    m.batch_count = 1;
    m.batch_stride = 0;
    p.stored = batch > 0 ? 1 : 0;
  } else if (s.stride_zero) {
    m.batch_count = batch;
    m.batch_stride = 0;
    p.stored = 1;
  } else {
    m.batch_count = batch;
    m.batch_stride = s.stride_abs >= 0 ? s.stride_abs : one + s.stride_pad;
    p.stored = batch;
  }
  p.span = (one == 0 || p.stored == 0) ? 0 : (p.stored - 1) * p.batch_stride_used() + one;
  p.front = guard + size_t(s.elem_offset) * dtype_bytes(dt);
  p.back = guard;
}

bool has_bias(const Case& c) { return c.bias != tessera::BiasMode::None; }

void place_all(const Case& c, Placed& A, Placed& B, Placed& C, Placed& D, Placed& Bias) {
  place(A, c.a, c.ab, c.op_a == Op::N ? c.m : c.k, c.op_a == Op::N ? c.k : c.m, c.batch, false, 0);
  place(B, c.b, c.ab, c.op_b == Op::N ? c.k : c.n, c.op_b == Op::N ? c.n : c.k, c.batch, false, 0);
  place(D, c.d, c.dt, c.m, c.n, c.batch, true, kGuard);
  if (c.beta != 0.0f && !c.in_place) place(C, c.c, c.dt, c.m, c.n, c.batch, false, 0);
  if (has_bias(c)) {
    // A 1 x length row-major "matrix": its batch stride is the bias batch stride.
    MatSpec s = c.bias_spec;
    s.layout = Layout::RowMajor;
    place(Bias, s, c.dt, 1, c.bias == tessera::BiasMode::PerRow ? c.m : c.n, c.batch, false, 0);
  }
}

tessera::GemmArgs make_args(const Case& c, const Placed& A, const Placed& B, const Placed& C, const Placed& D,
                            const Placed& Bias, const float* scale_a = nullptr, const float* scale_b = nullptr) {
  tessera::GemmArgs g;
  g.op_a = c.op_a;
  g.op_b = c.op_b;
  g.a = A.m;
  g.b = B.m;
  g.d = D.m;
  if (c.in_place) g.c = D.m;
  else if (c.beta != 0.0f) g.c = C.m;  // else: no C at all (null), which beta == 0 allows
  g.alpha = c.alpha;
  g.beta = c.beta;
  g.config = c.config;
  if (has_bias(c)) {
    g.bias = Bias.m.ptr;
    g.bias_mode = c.bias;
    g.bias_batch_stride = Bias.m.batch_count == 1 ? 0 : Bias.m.batch_stride;
  }
  g.activation = c.activation;
  g.precision = c.precision;
  if (c.scale_mode != tessera::ScaleMode::None) {
    g.scale_a = scale_a;
    g.scale_b = scale_b;
    g.scale_mode = c.scale_mode;
  }
  for (int i = 0; i < 2; ++i) {
    g.scale_a_strides[i] = c.scale_a_strides[i];
    g.scale_b_strides[i] = c.scale_b_strides[i];
  }
  return g;
}

// K per block scale (tessera_scale_mode_t block).
constexpr int64_t kScaleBlock = 128;

// One block-scale matrix of a case: rows x cols fp32 at element strides {along rows, along cols} ({0, 0}
// resolved to row-major and contiguous), the elements within `span` floats of the pointer.
struct BlockScaleGeometry {
  int64_t rows = 0, cols = 0, s0 = 0, s1 = 0, span = 0;
};
BlockScaleGeometry block_scale_geometry(int64_t rows, int64_t cols, const int64_t (&strides)[2]) {
  BlockScaleGeometry g;
  g.rows = std::max<int64_t>(rows, 0);
  g.cols = std::max<int64_t>(cols, 0);
  const bool packed = strides[0] == 0 && strides[1] == 0;
  g.s0 = packed ? std::max<int64_t>(g.cols, 1) : strides[0];
  g.s1 = packed ? 1 : strides[1];
  // A mode of extent 1 contributes nothing, whatever its stride.
  g.span = g.rows == 0 || g.cols == 0 ? 0 : (g.rows - 1) * g.s0 + (g.cols - 1) * g.s1 + 1;
  return g;
}
BlockScaleGeometry block_scale_a_geometry(const Case& c) {
  return block_scale_geometry(c.m, (c.k + kScaleBlock - 1) / kScaleBlock, c.scale_a_strides);
}
BlockScaleGeometry block_scale_b_geometry(const Case& c) {
  return block_scale_geometry((c.k + kScaleBlock - 1) / kScaleBlock, (c.n + kScaleBlock - 1) / kScaleBlock,
                              c.scale_b_strides);
}

// The activations as tessera defines them (tessera_activation_t), in fp64.
double activate(tessera::Activation act, double x) {
  switch (act) {
    case tessera::Activation::Relu: return x > 0.0 ? x : 0.0;
    case tessera::Activation::Gelu: return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    case tessera::Activation::GeluTanh:
      return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));  // sqrt(2 / pi)
    case tessera::Activation::Silu: return x / (1.0 + std::exp(-x));
    case tessera::Activation::None: break;
  }
  return x;
}

float half_to_float(uint16_t h) {
  const int s = (h >> 15) & 1, e = (h >> 10) & 0x1F, f = h & 0x3FF;
  float v;
  if (e == 0) v = std::ldexp(float(f), -24);
  else if (e == 31) v = f ? NAN : INFINITY;
  else v = std::ldexp(float(f + 1024), e - 25);
  return s ? -v : v;
}

float bf16_to_float(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float v;
  std::memcpy(&v, &u, 4);
  return v;
}

double load(const uint8_t* p, DType t) {
  if (t == DType::F32) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  if (t == DType::S32) {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  if (t == DType::S8) return double(int8_t(*p));
  if (t == DType::E4M3) {  // s eeee mmm, bias 7, no infinities, S.1111.111 NaN
    const int s = *p >> 7, e = (*p >> 3) & 0xF, f = *p & 7;
    if (e == 15 && f == 7) return NAN;
    const double v = e == 0 ? std::ldexp(double(f), -9) : std::ldexp(double(f + 8), e - 10);
    return s ? -v : v;
  }
  if (t == DType::E5M2) {  // s eeeee mm, bias 15, IEEE-like (the top byte of an f16)
    return half_to_float(uint16_t(uint16_t(*p) << 8));
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return t == DType::F16 ? half_to_float(h) : bf16_to_float(h);
}

cudaDataType_t cuda_type(DType t) {
  return t == DType::F16 ? CUDA_R_16F : t == DType::BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

// cuBLAS sees column-major storage: a row-major matrix is its transpose.
cublasOperation_t blas_op(const Matrix& m, Op op) {
  const bool t = (m.layout == Layout::ColMajor) == (op == Op::T);
  return t ? CUBLAS_OP_T : CUBLAS_OP_N;
}

cublasHandle_t blas() {
  static cublasHandle_t h = [] {
    cublasHandle_t x = nullptr;
    if (cublasCreate(&x) != CUBLAS_STATUS_SUCCESS) x = nullptr;
    return x;
  }();
  return h;
}

std::string spec_string(const char* name, const Placed& p, const MatSpec& s) {
  std::ostringstream o;
  o << name << "(" << (p.m.layout == Layout::RowMajor ? "row" : "col") << " " << p.m.rows << "x" << p.m.cols
    << " ld=" << p.m.ld << " bc=" << p.m.batch_count << " bs=" << p.m.batch_stride;
  if (s.elem_offset) o << " off=" << s.elem_offset;
  o << ")";
  return o.str();
}

struct Group {
  int cases = 0, failed = 0;
  double max_err = 0.0, tol_at_max = 0.0, worst_ratio = 0.0, max_err2 = -1.0;
};
struct Labels {
  std::string err = "rel err", tol = "tol", err2;
};
std::mutex g_mu;
std::map<std::string, std::map<std::string, Group>> g_stats;
std::map<std::string, Labels> g_labels;

}  // namespace

bool device_ok(std::string* why) {
  static std::string reason = [] {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      cudaGetLastError();
      return std::string("no CUDA device (") + cudaGetErrorString(e) + ")";
    }
    if (n == 0) return std::string("no CUDA device");
    int dev = 0, major = 0, minor = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
    if (major < 8)
      return "no CUDA device of compute capability 8.0+ (device " + std::to_string(dev) + " is sm_" +
             std::to_string(major * 10 + minor) + ")";
    if (!blas()) return std::string("no CUDA device usable by cuBLAS (cublasCreate failed)");
    return std::string();
  }();
  if (why) *why = reason;
  return reason.empty();
}

uint64_t fresh_seed() {
  if (const char* env = std::getenv("TESSERA_TEST_SEED"); env && *env) return std::strtoull(env, nullptr, 10);
  static std::random_device rd;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  return (uint64_t(rd()) << 32) ^ uint64_t(rd());
}


double tolerance(DType ab, DType d, tessera::Precision precision, int64_t k) {
  // fp8 operands: exact products (the oracle's sums are exact too), so D's rounding and the library's
  // accumulation count: fp32 sums of the tensor cores' partial sums promoted every 128 K (their own
  // accumulation keeps fewer bits than fp32), or with Fp8FastAccum the tensor cores' sums all along K,
  // whose error grows with K (DeepSeek-V3 reports ~2% element error at K = 4096 on H800s; the bound is
  // on the relative Frobenius error). Chosen bounds, not measured ones: bf16 1e-2, f16 3e-3, f32 1e-3
  // promoted; fast: at least 2e-2 * sqrt(K / 4096). The CUDA-core fallback sums in plain fp32.
  if (ab == DType::E4M3 || ab == DType::E5M2) {
    const double promoted = d == DType::BF16 ? 1e-2 : d == DType::F16 ? 3e-3 : 1e-3;
    if (precision != tessera::Precision::Fp8FastAccum) return promoted;
    return std::max(promoted, 2e-2 * std::sqrt(double(std::max<int64_t>(k, 1)) / 4096.0));
  }
  // s8 operands: exact int32 sums, so only D's rounding counts (f16: 2^-11, bf16: 2^-8 at most), and
  // for an f32 D the epilogue's few fp32 roundings (sum -> float, the scales, alpha, C, bias) and the
  // activation's library functions. An s32 D is compared exactly.
  if (ab == DType::S8) return d == DType::S32 ? 0.0 : d == DType::BF16 ? 1e-2 : d == DType::F16 ? 2e-3 : 1e-5;
  if (d == DType::BF16) return 1e-2;
  if (d == DType::F16) return ab == DType::F32 ? 3e-3 : 2e-3;
  // fp32 operands: tf32 rounds each operand to 11 significant bits (up to 2^-11 each, 2^-10 per
  // product), which an activation's slope can multiply ~4x on a one-term sum (gelu near -2); 3xTF32
  // is the fp32-class bar. The oracle is cuBLAS in fp32.
  if (ab == DType::F32) return precision == tessera::Precision::TF32x3 ? 1e-5 : 5e-3;
  return ab == DType::BF16 ? 1e-3 : 5e-4;
}

std::string describe(const Case& c) {
  std::ostringstream o;
  o << "config=" << (c.config.empty() ? "<heuristic>" : c.config) << " " << dtype_name(c.ab) << "->"
    << dtype_name(c.dt) << " op_a=" << (c.op_a == Op::N ? "N" : "T") << " op_b=" << (c.op_b == Op::N ? "N" : "T")
    << " M=" << c.m << " N=" << c.n << " K=" << c.k << " batch=" << c.batch << " alpha=" << c.alpha
    << " beta=" << c.beta << (c.in_place ? " in-place" : "")
    << " workspace=" << (c.workspace == Workspace::Full ? "full" : c.workspace == Workspace::None ? "none" : "too-small")
    << (c.stream ? " stream" : "") << (c.capture_graph ? " graph" : "") << (c.use_c_abi ? " C-ABI" : "");
  if (has_bias(c))
    o << " bias=" << (c.bias == tessera::BiasMode::PerRow ? "per-row" : "per-column")
      << (c.batch > 1 ? (c.bias_spec.batched && !c.bias_spec.stride_zero ? "(batched)" : "(broadcast)") : "")
      << (c.bias_spec.elem_offset ? "+" + std::to_string(c.bias_spec.elem_offset) : std::string());
  if (c.activation != tessera::Activation::None) o << " activation=" << tessera::activation_name(c.activation);
  if (c.precision != tessera::Precision::Default)
    o << " precision="
      << (c.precision == tessera::Precision::TF32     ? "tf32"
          : c.precision == tessera::Precision::TF32x3 ? "tf32x3"
          : c.precision == tessera::Precision::Fp8FastAccum ? "fp8-fast-accum"
                                                            : "?");
  if (c.scale_mode != tessera::ScaleMode::None)
    o << " scales="
      << (c.scale_mode == tessera::ScaleMode::Tensor    ? "tensor"
          : c.scale_mode == tessera::ScaleMode::RowWise ? "row-wise"
          : c.scale_mode == tessera::ScaleMode::Block   ? "block"
                                                        : "?")
      << (c.scale_offset ? "+" + std::to_string(c.scale_offset) : std::string());
  if (c.scale_a_strides[0] || c.scale_a_strides[1] || c.scale_b_strides[0] || c.scale_b_strides[1])
    o << " scale_a_strides={" << c.scale_a_strides[0] << "," << c.scale_a_strides[1] << "} scale_b_strides={"
      << c.scale_b_strides[0] << "," << c.scale_b_strides[1] << "}";
  return o.str();
}

size_t workspace_needed(const Case& c) {
  Placed A, B, C, D, Bias;
  place_all(c, A, B, C, D, Bias);
  // Fake, 256-byte aligned, far apart allocations: only the alignment of the offsets matters.
  int i = 1;
  for (Placed* p : {&A, &B, &C, &D, &Bias}) p->m.ptr = reinterpret_cast<const char*>(uintptr_t(i++) << 40) + p->front;
  const float* sa = reinterpret_cast<const float*>(uintptr_t(6) << 40) + c.scale_offset;
  const float* sb = reinterpret_cast<const float*>(uintptr_t(7) << 40) + c.scale_offset;
  size_t bytes = 0;
  if (!tessera::gemm_workspace_size(make_args(c, A, B, C, D, Bias, sa, sb), &bytes).ok()) return 0;
  return bytes;
}

Outcome run_case(const Case& c) {
  Outcome out;
  out.seed = fresh_seed();
  const bool block = c.scale_mode == tessera::ScaleMode::Block;
  // Block scales always promote the sums (tessera_scale_mode_t): the promoted bound, whatever the precision.
  out.tol = tolerance(c.ab, c.dt, block ? tessera::Precision::Default : c.precision, c.k);
  std::string& problems = out.problems;
  auto fail_cuda = [&](const char* what, cudaError_t e) {
    problems += std::string(what) + ": " + cudaGetErrorString(e) + "; ";
    cudaGetLastError();
  };
#define TT_CUDA(expr)                 \
  do {                                \
    cudaError_t e_ = (expr);          \
    if (e_ != cudaSuccess) {          \
      fail_cuda(#expr, e_);           \
      return out;                     \
    }                                 \
  } while (0)

  cudaGetLastError();
  const cudaStream_t s = c.stream;
  const bool use_c = c.beta != 0.0f;

  // ---- operands -------------------------------------------------------------------------------
  Placed A, B, C, D, Bias;
  place_all(c, A, B, C, D, Bias);
  std::vector<Placed*> used = {&A, &B, &D};
  if (use_c && !c.in_place) used.push_back(&C);
  if (has_bias(c)) used.push_back(&Bias);
  for (Placed* p : used) {
    TT_CUDA(p->buf.alloc(p->alloc_bytes()));
    p->m.ptr = p->buf.c() + p->front;
    // Everything not an element (ld / batch padding, misalignment gaps) is NaN (s8: -1; e4m3 and
    // e5m2: NaN too): a read of it would show in the result.
    TT_CUDA(cudaMemsetAsync(p->buf.p, p == &D && c.dt == DType::S32 ? kPoisonS32 : kPoison, p->alloc_bytes(), s));
  }
  // The s8 / fp8 scales, drawn on the host (the oracle reads the same floats).
  const bool s8 = c.ab == DType::S8;
  const bool fp8 = c.ab == DType::E4M3 || c.ab == DType::E5M2;
  const bool row_wise = c.scale_mode == tessera::ScaleMode::RowWise;
  std::vector<float> scale_a_host, scale_b_host;
  DeviceBuffer scale_a_buf, scale_b_buf;
  const float* scale_a = nullptr;
  const float* scale_b = nullptr;
  BlockScaleGeometry block_a, block_b;
  if (block) {
    // Block scales, laid out at the case's strides among NaN floats (a read of a non-element shows in D);
    // base * 2^u, u uniform in [-4, 2]: blocks' scales apart by up to 64x, so a wrong block index shows.
    std::mt19937_64 rng(mix_seed(out.seed ^ 0xB10C5CA1E));
    std::uniform_real_distribution<double> expo(-4.0, 2.0);
    const double base = 1.0 / ((s8 ? 128.0 : 4.0) * std::pow(double(std::max<int64_t>(c.k, 1)), 0.25));
    block_a = block_scale_a_geometry(c);
    block_b = block_scale_b_geometry(c);
    for (auto [geo, host, buf, ptr] :
         {std::tuple<const BlockScaleGeometry*, std::vector<float>*, DeviceBuffer*, const float**>{
              &block_a, &scale_a_host, &scale_a_buf, &scale_a},
          {&block_b, &scale_b_host, &scale_b_buf, &scale_b}}) {
      if (geo->s0 < 0 || geo->s1 < 0) {
        problems += "harness: negative block-scale strides are not supported; ";
        return out;
      }
      if (geo->span <= 0) continue;  // no elements: a null pointer, which an empty matrix allows
      host->assign(size_t(geo->span + c.scale_offset), std::numeric_limits<float>::quiet_NaN());
      float* at = host->data() + c.scale_offset;
      for (int64_t r = 0; r < geo->rows; ++r)
        for (int64_t q = 0; q < geo->cols; ++q) at[r * geo->s0 + q * geo->s1] = float(base * std::exp2(expo(rng)));
      TT_CUDA(buf->alloc(host->size() * sizeof(float)));
      TT_CUDA(cudaMemcpyAsync(buf->p, host->data(), host->size() * sizeof(float), cudaMemcpyHostToDevice, s));
      *ptr = reinterpret_cast<const float*>(buf->p) + c.scale_offset;
    }
  } else if (c.scale_mode != tessera::ScaleMode::None) {
    std::mt19937_64 rng(mix_seed(out.seed ^ 0x5CA1E5));
    std::uniform_real_distribution<double> unit(0.5, 1.5);
    // S8 sums have a standard deviation of sqrt(K) * 128^2 / sqrt(3), fp8 ones (values in [-4, 4])
    // sqrt(K) * 16 / 3: scales of these sizes make D's about 1/3.
    const double base = 1.0 / ((fp8 ? 4.0 : 128.0) * std::pow(double(std::max<int64_t>(c.k, 1)), 0.25));
    for (auto [host, buf, ptr, length] :
         {std::tuple<std::vector<float>*, DeviceBuffer*, const float**, int64_t>{&scale_a_host, &scale_a_buf, &scale_a,
                                                                                 row_wise ? c.m : 1},
          {&scale_b_host, &scale_b_buf, &scale_b, row_wise ? c.n : 1}}) {
      host->resize(size_t(std::max<int64_t>(length, 0)));
      for (float& x : *host) x = float(base * unit(rng));
      TT_CUDA(buf->alloc(size_t(length + c.scale_offset) * sizeof(float)));
      *ptr = reinterpret_cast<const float*>(buf->p) + c.scale_offset;
      if (length > 0)
        TT_CUDA(cudaMemcpyAsync(const_cast<float*>(*ptr), host->data(), host->size() * sizeof(float),
                                cudaMemcpyHostToDevice, s));
    }
  }
  const uint64_t sa = mix_seed(out.seed ^ 0xA), sb = mix_seed(out.seed ^ 0xB), sc = mix_seed(out.seed ^ 0xC);
  TT_CUDA(fill_uniform(const_cast<void*>(A.m.ptr), c.ab, A.stored, A.outer, A.inner, A.m.ld, A.batch_stride_used(), sa, s));
  TT_CUDA(fill_uniform(const_cast<void*>(B.m.ptr), c.ab, B.stored, B.outer, B.inner, B.m.ld, B.batch_stride_used(), sb, s));
  if (use_c && !c.in_place)
    TT_CUDA(fill_uniform(const_cast<void*>(C.m.ptr), c.dt, C.stored, C.outer, C.inner, C.m.ld, C.batch_stride_used(), sc, s));
  if (c.in_place)
    TT_CUDA(fill_uniform(const_cast<void*>(D.m.ptr), c.dt, D.stored, D.outer, D.inner, D.m.ld, D.batch_stride_used(), sc, s));
  if (has_bias(c))
    TT_CUDA(fill_uniform(const_cast<void*>(Bias.m.ptr), c.dt, Bias.stored, Bias.outer, Bias.inner, Bias.m.ld,
                         Bias.batch_stride_used(), mix_seed(out.seed ^ 0xE), s));
  TT_CUDA(fill_guard(D.buf.p, kGuard, uint32_t(out.seed), s));
  TT_CUDA(fill_guard(D.buf.c() + D.alloc_bytes() - kGuard, kGuard, uint32_t(out.seed >> 32), s));
  std::vector<uint8_t> before = to_host(D.buf, s, &problems);
  std::vector<uint8_t> c_host;
  if (use_c && !c.in_place) c_host = to_host(C.buf, s, &problems);
  std::vector<uint8_t> bias_host;
  if (has_bias(c)) bias_host = to_host(Bias.buf, s, &problems);
  if (!problems.empty()) return out;

  // ---- tessera --------------------------------------------------------------------------------
  const tessera::GemmArgs g = make_args(c, A, B, C, D, Bias, scale_a, scale_b);

  size_t need = 0;
  const tessera::Status ws_status = tessera::gemm_workspace_size(g, &need);
  if (c.expect == TESSERA_STATUS_SUCCESS && !ws_status.ok()) {
    problems += "gemm_workspace_size: " + ws_status.message + "; ";
    return out;
  }
  DeviceBuffer ws;
  size_t ws_bytes = 0;
  if (c.workspace == Workspace::Full) ws_bytes = need;
  else if (c.workspace == Workspace::TooSmall) ws_bytes = need > 256 ? need - 256 : 0;
  if (ws_bytes) {  // poisoned: nothing may count on a workspace that starts zeroed
    TT_CUDA(ws.alloc(ws_bytes));
    TT_CUDA(cudaMemset(ws.p, 0xA5, ws_bytes));
  }
  out.workspace_bytes = ws_bytes;

  auto call = [&]() -> tessera::Status {
    if (!c.use_c_abi) return tessera::gemm(g, s, ws.p, ws_bytes);
    const tessera_gemm_args_t ca = tessera::to_c(g);
    tessera::Status r;
    r.code = tessera_gemm(&ca, ws.p, ws_bytes, s);
    r.message = tessera_last_error();
    return r;
  };
  out.status = call_on_stream(s, c.capture_graph, call, &problems);
  if (!problems.empty()) return out;
  TT_CUDA(cudaStreamSynchronize(s));
  TT_CUDA(cudaGetLastError());
  const std::vector<uint8_t> after = to_host(D.buf, s, &problems);
  if (!problems.empty()) return out;

  if (c.expect != TESSERA_STATUS_SUCCESS) {
    if (out.status.code != c.expect)
      problems += "expected status " + std::string(tessera_status_string(c.expect)) + ", got " +
                  tessera_status_string(out.status.code) + " (" + out.status.message + "); ";
    if (!c.expect_message.empty() && out.status.message.find(c.expect_message) == std::string::npos)
      problems += "message \"" + out.status.message + "\" does not mention \"" + c.expect_message + "\"; ";
    if (after != before) problems += "a failing call modified D or its guard bands; ";
    return out;
  }
  if (!out.status.ok()) {
    problems += std::string("tessera returned ") + tessera_status_string(out.status.code) + ": " + out.status.message +
                "; ";
    return out;
  }
  if (c.repeat_bitwise) {  // split-K / stream-K sum partials in a fixed order: timing must not show
    TT_CUDA(cudaMemcpyAsync(D.buf.p, before.data(), before.size(), cudaMemcpyHostToDevice, s));
    const tessera::Status again = call_on_stream(s, c.capture_graph, call, &problems);
    if (!problems.empty()) return out;
    TT_CUDA(cudaStreamSynchronize(s));
    if (!again.ok()) problems += "second run: " + again.message + "; ";
    else if (to_host(D.buf, s, &problems) != after) problems += "a second run on the same inputs changed bits of D; ";
    if (!problems.empty()) return out;
  }

  // ---- oracle ---------------------------------------------------------------------------------
  const int64_t M = c.m, N = c.n, K = c.k, L = c.batch;
  const size_t count = size_t(std::max<int64_t>(M * N * L, 0));
  std::vector<float> ref(s8 || fp8 ? 0 : count, 0.0f);
  std::vector<int64_t> sums(s8 ? count : 0, 0);  // s8: the exact sums, laid out as ref
  std::vector<double> fsums(fp8 ? count : 0, 0.0);  // fp8: the fp64 sums, laid out as ref
  if ((s8 || fp8) && count > 0 && K > 0) {
    // op(A)(i, k) and op(B)(k, j) as (row stride, column stride) of the stored matrices.
    auto strides = [](const Placed& p) {
      return p.m.layout == Layout::RowMajor ? std::pair<int64_t, int64_t>{p.m.ld, 1}
                                            : std::pair<int64_t, int64_t>{1, p.m.ld};
    };
    const auto [a_sr, a_sc] = strides(A);
    const auto [b_sr, b_sc] = strides(B);
    const bool ta = c.op_a == Op::T, tb = c.op_b == Op::T;
    DeviceBuffer r;
    TT_CUDA(r.alloc(count * 8));  // int64 or fp64 sums
    if (block)
      TT_CUDA(fp8_block_gemm_reference(c.ab, A.m.ptr, ta ? a_sc : a_sr, ta ? a_sr : a_sc, A.batch_stride_used(),
                                       B.m.ptr, tb ? b_sr : b_sc, tb ? b_sc : b_sr, B.batch_stride_used(), scale_a,
                                       block_a.s0, block_a.s1, scale_b, block_b.s0, block_b.s1, M, N, K, L,
                                       static_cast<double*>(r.p), s));
    else if (s8)
      TT_CUDA(int8_gemm_reference(static_cast<const int8_t*>(A.m.ptr), ta ? a_sc : a_sr, ta ? a_sr : a_sc,
                                  A.batch_stride_used(), static_cast<const int8_t*>(B.m.ptr), tb ? b_sr : b_sc,
                                  tb ? b_sc : b_sr, B.batch_stride_used(), M, N, K, L, static_cast<int64_t*>(r.p), s));
    else
      TT_CUDA(fp8_gemm_reference(c.ab, A.m.ptr, ta ? a_sc : a_sr, ta ? a_sr : a_sc, A.batch_stride_used(), B.m.ptr,
                                 tb ? b_sr : b_sc, tb ? b_sc : b_sr, B.batch_stride_used(), M, N, K, L,
                                 static_cast<double*>(r.p), s));
    TT_CUDA(cudaMemcpyAsync(s8 ? static_cast<void*>(sums.data()) : static_cast<void*>(fsums.data()), r.p, count * 8,
                            cudaMemcpyDeviceToHost, s));
    TT_CUDA(cudaStreamSynchronize(s));
  }
  if (!s8 && !fp8 && count > 0 && K > 0) {
    DeviceBuffer r;
    TT_CUDA(r.alloc(count * sizeof(float)));
    cublasHandle_t h = blas();
    if (!h) {
      problems += "cublasCreate failed; ";
      return out;
    }
    cublasSetStream(h, s);
    const float one = 1.0f, zero = 0.0f;
    const cublasStatus_t st = cublasGemmStridedBatchedEx(
        h, blas_op(A.m, c.op_a), blas_op(B.m, c.op_b), int(M), int(N), int(K), &one, A.m.ptr, cuda_type(c.ab),
        int(A.m.ld), A.batch_stride_used(), B.m.ptr, cuda_type(c.ab), int(B.m.ld), B.batch_stride_used(), &zero, r.p,
        CUDA_R_32F, int(M), M * N, int(L), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) {
      problems += "cuBLAS reference failed (status " + std::to_string(int(st)) + "); ";
      return out;
    }
    TT_CUDA(cudaMemcpyAsync(ref.data(), r.p, count * sizeof(float), cudaMemcpyDeviceToHost, s));
    TT_CUDA(cudaStreamSynchronize(s));
  }

  // ---- comparison ----------------------------------------------------------------------------------
  const size_t es = D.es();
  const bool exact = c.dt == DType::S32;
  std::vector<uint8_t> is_elem(after.size(), 0);
  double num = 0.0, den = 0.0;
  // fp8 (not block-scaled): the tensor cores add a k-tile's products with fewer bits than fp32, an
  // error the size of the products, not of their sum, so a D of a few elements whose sums happen to
  // cancel would read as a large relative error: the denominator is at least half the norm that D
  // has on average for the tests' operands (uniform in [-4, 4]: E[x^2] = 16/3; K products each).
  double expected = 0.0;
  // Every type: alpha * AB and beta * C may cancel in a D of a few elements (the 1x1x1 cases), and each
  // term carries its own rounding (tf32 operands: ~1e-3 of the product), so the denominator is at least
  // half the terms' norm. A wrong or missing term still reads as an error of its own size.
  double terms = 0.0;
  int64_t nonfinite = 0, mismatches = 0;
  std::string first_bad;
  for (int64_t l = 0; l < L; ++l)
    for (int64_t j = 0; j < N; ++j)
      for (int64_t i = 0; i < M; ++i) {
        const size_t at = D.front + size_t(D.offset(l, i, j)) * es;
        std::memset(&is_elem[at], 1, es);
        const size_t at_ref = size_t(l * M * N + i + j * M);
        if (exact) {  // the int32 sums, bit for bit
          int32_t got;
          std::memcpy(&got, &after[at], 4);
          const int64_t want = sums[at_ref];
          if (got != want && !mismatches++)
            first_bad = "(" + std::to_string(l) + "," + std::to_string(i) + "," + std::to_string(j) + "): got " +
                        std::to_string(got) + (got == int32_t(0x80808080) ? " (the poison: unwritten)" : "") +
                        ", want " + std::to_string(want);
          num += (double(got) - double(want)) * (double(got) - double(want));
          den += double(want) * double(want);
          continue;
        }
        const double got = load(&after[at], c.dt);
        const double scales = (scale_a ? double(scale_a_host[row_wise ? i : 0]) : 1.0) *
                              (scale_b ? double(scale_b_host[row_wise ? j : 0]) : 1.0);
        // (Block scales are in fsums already: fp8_block_gemm_reference scales each block's sum.)
        const double product = block        ? fsums[at_ref]
                               : s8 || fp8 ? (s8 ? double(sums[at_ref]) : fsums[at_ref]) * scales
                                           : double(ref[at_ref]);
        double want = double(c.alpha) * product;
        terms += want * want;
        if (fp8 && !block) {
          const double f = double(c.alpha) * scales * (16.0 / 3.0);
          expected += f * f * double(K);
        }
        if (use_c) {
          const double cv = c.in_place ? load(&before[at], c.dt)
                                       : load(&c_host[C.front + size_t(C.offset(l, i, j)) * es], c.dt);
          want += double(c.beta) * cv;
          terms += double(c.beta) * cv * double(c.beta) * cv;
        }
        if (has_bias(c)) {
          const int64_t at_bias = Bias.offset(l, 0, c.bias == tessera::BiasMode::PerRow ? i : j);
          want += load(&bias_host[Bias.front + size_t(at_bias) * es], c.dt);
        }
        want = activate(c.activation, want);
        if (!std::isfinite(got)) {
          if (!nonfinite++)
            first_bad = "(" + std::to_string(l) + "," + std::to_string(i) + "," + std::to_string(j) + ")";
          continue;
        }
        num += (got - want) * (got - want);
        den += want * want;
      }
  out.rel_err = std::sqrt(num) / std::max({std::sqrt(den), 0.5 * std::sqrt(terms), 0.5 * std::sqrt(expected), 1e-3});
  out.mismatches = mismatches;
  if (nonfinite)
    problems += std::to_string(nonfinite) + " NaN/Inf outputs (unwritten or wrong), first at (batch,row,col) " +
                first_bad + "; ";
  if (mismatches)
    problems += std::to_string(mismatches) + " of " + std::to_string(M * N * L) +
                " int32 outputs differ from the exact sums, first at (batch,row,col) " + first_bad + "; ";
  if (!exact && !(out.rel_err <= out.tol)) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "relative error %.3e above tolerance %.1e; ", out.rel_err, out.tol);
    problems += buf;
  }
  size_t guard_hits = 0, pad_hits = 0, first_hit = SIZE_MAX;
  for (size_t b = 0; b < after.size(); ++b)
    if (!is_elem[b] && after[b] != before[b]) {
      const bool guard = b < kGuard || b >= after.size() - kGuard;
      (guard ? guard_hits : pad_hits)++;
      first_hit = std::min(first_hit, b);
    }
  if (guard_hits)
    problems += std::to_string(guard_hits) + " guard-band bytes overwritten (first at byte " +
                std::to_string(long(first_hit) - long(D.front)) + " relative to D); ";
  if (pad_hits) problems += std::to_string(pad_hits) + " bytes of D's padding (between rows/batches) overwritten; ";
  if (!problems.empty())
    problems += "[" + spec_string("A", A, c.a) + " " + spec_string("B", B, c.b) + " " +
                (use_c && !c.in_place ? spec_string("C", C, c.c) + " " : "") +
                (has_bias(c) ? spec_string("bias", Bias, c.bias_spec) + " " : "") + spec_string("D", D, c.d) +
                " workspace " + std::to_string(ws_bytes) + " of " + std::to_string(need) + "]";
  return out;
#undef TT_CUDA
}

void record(const std::string& suite, const std::string& group, const Case&, const Outcome& o) {
  record_result(suite, group, o.passed(), o.status.ok(), o.rel_err, o.tol);
}

void record_result(const std::string& suite, const std::string& group, bool passed, bool measured, double err,
                   double tol, double err2) {
  std::lock_guard<std::mutex> lock(g_mu);
  Group& g = g_stats[suite][group];
  ++g.cases;
  if (!passed) ++g.failed;
  if (measured && tol > 0) {
    if (err > g.max_err) {
      g.max_err = err;
      g.tol_at_max = tol;
    }
    g.worst_ratio = std::max(g.worst_ratio, err / tol);
    if (err2 >= 0) g.max_err2 = std::max(g.max_err2, err2);
  }
}

void set_summary_labels(const std::string& suite, const std::string& err, const std::string& tol,
                        const std::string& err2) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_labels[suite] = Labels{err, tol, err2};
}

void print_summary(const std::string& suite) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_stats.find(suite);
  if (it == g_stats.end()) return;
  const Labels labels = g_labels.count(suite) ? g_labels[suite] : Labels{};
  for (const auto& [group, g] : it->second) {
    std::printf("[ summary  ] %s | %-40s %5d cases, %3d failed, max %s %.2e (%s %.0e), worst err/%s %.3f",
                suite.c_str(), group.c_str(), g.cases, g.failed, labels.err.c_str(), g.max_err, labels.tol.c_str(),
                g.tol_at_max, labels.tol.c_str(), g.worst_ratio);
    if (!labels.err2.empty() && g.max_err2 >= 0) std::printf(", max %s %.1e", labels.err2.c_str(), g.max_err2);
    std::printf("\n");
  }
  std::fflush(stdout);
}

double host_value(const void* p, DType t) { return load(static_cast<const uint8_t*>(p), t); }

std::vector<uint8_t> to_host(const DeviceBuffer& b, cudaStream_t s, std::string* problems) {
  std::vector<uint8_t> h(b.bytes);
  if (b.bytes) {
    cudaError_t e = cudaMemcpyAsync(h.data(), b.p, b.bytes, cudaMemcpyDeviceToHost, s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);
    if (e != cudaSuccess) *problems += std::string("copy to host: ") + cudaGetErrorString(e) + "; ";
  }
  return h;
}

}  // namespace tessera_test
