// tessera C++ API. The same operations as the C ABI (tessera.h), with a Status that owns its
// message and defaults that read naturally from C++.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/tessera.h"

namespace tessera {

enum class DType : int {
  F16 = TESSERA_DTYPE_F16,
  BF16 = TESSERA_DTYPE_BF16,
  F32 = TESSERA_DTYPE_F32,
  S8 = TESSERA_DTYPE_S8,   // GEMM operands, summed exactly in int32
  S32 = TESSERA_DTYPE_S32,  // GEMM D of S8 operands: the int32 sums
  E4M3 = TESSERA_DTYPE_E4M3,  // GEMM operands: fp8 e4m3 (torch.float8_e4m3fn), Hopper
  E5M2 = TESSERA_DTYPE_E5M2   // GEMM operands: fp8 e5m2 (torch.float8_e5m2), Hopper
};
// Dequantisation scales of S8 and fp8 operands (tessera_scale_mode_t): none, one per tensor, per row of
// op(A) and per column of op(B), or (fp8) per 1 x 128 block of op(A) and 128 x 128 block of op(B).
enum class ScaleMode : int {
  None = TESSERA_SCALE_NONE,
  Tensor = TESSERA_SCALE_TENSOR,
  RowWise = TESSERA_SCALE_ROWWISE,
  Block = TESSERA_SCALE_BLOCK
};
// F32 operands: TF32 (Default) or 3xTF32 (~fp32 accuracy, 3x the tensor-core work); tessera_precision_t.
// fp8 operands: Default (sums promoted to fp32 every 128 K) or Fp8FastAccum (the tensor cores' own).
enum class Precision : int {
  Default = TESSERA_PRECISION_DEFAULT,
  TF32 = TESSERA_PRECISION_TF32,
  TF32x3 = TESSERA_PRECISION_TF32X3,
  Fp8FastAccum = TESSERA_PRECISION_FP8_FAST_ACCUM
};
enum class Layout : int { RowMajor = TESSERA_ROW_MAJOR, ColMajor = TESSERA_COL_MAJOR };
enum class Op : int { N = TESSERA_OP_N, T = TESSERA_OP_T };
enum class BiasMode : int {
  None = TESSERA_BIAS_NONE,
  PerColumn = TESSERA_BIAS_PER_COLUMN,  // N values, bias[n] added to every row (nn.Linear)
  PerRow = TESSERA_BIAS_PER_ROW         // M values, bias[m] added to every column
};
enum class Activation : int {
  None = TESSERA_ACTIVATION_NONE,
  Relu = TESSERA_ACTIVATION_RELU,
  Gelu = TESSERA_ACTIVATION_GELU,          // erf form (torch's default)
  GeluTanh = TESSERA_ACTIVATION_GELU_TANH,  // tanh approximation
  Silu = TESSERA_ACTIVATION_SILU
};
// "f16", "bf16", "f32", "s8", "s32", "e4m3", "e5m2" (the CLI's names); "?" for a bad value.
inline const char* dtype_name(DType t) {
  switch (t) {
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::F32: return "f32";
    case DType::S8: return "s8";
    case DType::S32: return "s32";
    case DType::E4M3: return "e4m3";
    case DType::E5M2: return "e5m2";
  }
  return "?";
}
// Bytes per element.
inline size_t dtype_bytes(DType t) {
  return t == DType::F32 || t == DType::S32 ? 4 : t == DType::S8 || t == DType::E4M3 || t == DType::E5M2 ? 1 : 2;
}
// "none", "relu", "gelu", "gelu_tanh", "silu" (the CLI's and torch's names); "?" for a bad value.
inline const char* activation_name(Activation a) {
  switch (a) {
    case Activation::None: return "none";
    case Activation::Relu: return "relu";
    case Activation::Gelu: return "gelu";
    case Activation::GeluTanh: return "gelu_tanh";
    case Activation::Silu: return "silu";
  }
  return "?";
}

struct Status {
  tessera_status_t code = TESSERA_STATUS_SUCCESS;
  std::string message;
  bool ok() const { return code == TESSERA_STATUS_SUCCESS; }
  static Status success() { return {}; }
};

// A stored (batched) matrix; see tessera_matrix_t.
struct Matrix {
  const void* ptr = nullptr;
  DType dtype = DType::F16;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t ld = 0;
  Layout layout = Layout::RowMajor;
  int64_t batch_count = 1;
  int64_t batch_stride = 0;
};

// A densely packed matrix (ld = cols for row-major, rows for column-major).
inline Matrix dense(const void* ptr, DType dtype, int64_t rows, int64_t cols,
                    Layout layout = Layout::RowMajor, int64_t batch = 1) {
  Matrix m;
  m.ptr = ptr;
  m.dtype = dtype;
  m.rows = rows;
  m.cols = cols;
  m.ld = layout == Layout::RowMajor ? cols : rows;
  m.layout = layout;
  m.batch_count = batch;
  m.batch_stride = batch > 1 ? rows * cols : 0;
  return m;
}

struct GemmArgs {
  Op op_a = Op::N;
  Op op_b = Op::N;
  Matrix a, b, c, d;
  float alpha = 1.0f;
  float beta = 0.0f;
  // "" = heuristic (or TESSERA_GEMM_CONFIG); else a name from gemm_configs(), with "+flip" appended
  // (where ConfigInfo::flippable) to run it on the flipped orientation: D^T = B A^T computed and D
  // stored transposed, for a 16-bit D of the operands' dtype, 16-byte aligned D (and C) and D's
  // contiguous extent a multiple of 8.
  std::string config;
  // Optional fused epilogue (see tessera_gemm_args_t): a contiguous bias vector in D's dtype, N
  // values per column or M per row, batch l at bias + l * bias_batch_stride (0 = shared), then the
  // activation, in fp32.
  const void* bias = nullptr;
  BiasMode bias_mode = BiasMode::None;
  int64_t bias_batch_stride = 0;
  Activation activation = Activation::None;
  // SM budget (tessera_gemm_args_t::max_sms): at most this many SMs at once, 0 = all; with a budget
  // no CTA waits for another (serial split-K fold, no stream-K), so the GEMM finishes beside kernels
  // holding the other SMs.
  int max_sms = 0;
  // F32 operands (a.dtype == b.dtype == F32): on the tensor cores as tf32 (Default, TF32) or 3xTF32;
  // F16 / BF16 operands need Default. Without the workspace gemm_workspace_size asks for, F32
  // operands that are not K-major (or not 16-byte aligned), and every 3xTF32 call, run on the CUDA
  // cores in plain fp32 instead.
  Precision precision = Precision::Default;
  // fp8 operands (E4M3 or E5M2, the same; Hopper): D F16 / BF16 / F32 gets the fp32 sums scaled as
  // below (scales optional); precision Default or Fp8FastAccum.
  // S8 operands (a.dtype == b.dtype == S8): D S32 gets the exact int32 sums (alpha 1, beta 0, no
  // bias, activation or scales); D F16 / BF16 / F32 gets alpha * scale_a * scale_b * sums (+ beta C
  // + bias, then the activation), with fp32 scales per tensor (one value each) or row-wise (M values
  // for the rows of op(A), N for the columns of op(B)), shared by every batch.
  // fp8 operands may also take block scales (ScaleMode::Block, tessera_scale_mode_t): scale_a
  // M x ceil(K/128), scale_b ceil(K/128) x ceil(N/128), at the element strides below ({0, 0}: row-major
  // and contiguous); D row-major.
  const float* scale_a = nullptr;
  const float* scale_b = nullptr;
  ScaleMode scale_mode = ScaleMode::None;
  int64_t scale_a_strides[2] = {0, 0};  // {along M, along K blocks}
  int64_t scale_b_strides[2] = {0, 0};  // {along K blocks, along N blocks}
};

// D = act(alpha * op(A) * op(B) + beta * C + bias) on `stream` (a cudaStream_t; nullptr = default
// stream). Workspace contract (tessera.h): one workspace per concurrently running call; calls on one
// stream may share one. Host side: decisions are memoized per problem signature (a launch plan per
// device, shapes, majors, alignment class, dtypes, epilogue, batch, budget), per host thread.
Status gemm(const GemmArgs& args, void* stream = nullptr, void* workspace = nullptr,
            size_t workspace_bytes = 0);
// Workspace that lets every operand take the fastest path (0 when none is needed): zero-padded
// copies of operands TMA cannot read, and on Hopper the split-K / stream-K partial tiles where the
// heuristic cuts K. With less, gemm() still runs, on a slower path where needed.
Status gemm_workspace_size(const GemmArgs& args, size_t* bytes);
// Name of the configuration that gemm() would run for these args, given the workspace that
// gemm_workspace_size() asks for (with less, unaligned problems run on simt_fallback); "+flip"
// appended where it runs on the flipped orientation (as GemmArgs::config spells it).
Status gemm_select_config(const GemmArgs& args, std::string* name);

struct ConfigInfo {
  std::string name;
  std::string description;
  bool flippable = false;  // "<name>+flip" runs it on the flipped orientation (GemmArgs::config)
};
std::vector<ConfigInfo> gemm_configs();

// ---- tuning cache (`tessera tune`) ----
// When no configuration is requested, gemm() first looks for the problem in a cache of measured
// choices: one line per (device name, compute capability, canonical M, N, K, batch, dtypes,
// operand majors), later lines win. The file is TESSERA_TUNE_CACHE (set but empty = no cache),
// else $XDG_CACHE_HOME/tessera/gemm_tune.txt, else $HOME/.cache/tessera/gemm_tune.txt; it is read
// once per process, at the first GEMM. A cached name this build does not know, or that this device
// cannot run, is ignored.
std::string gemm_tune_cache_path();  // "" when the cache is disabled
// Records `config` as the choice for problems like `args` on the current device: appends to the
// cache file (creating it and its directories) and applies to later calls in this process.
// `path` (optional) receives the file written.
Status gemm_tune_store(const GemmArgs& args, const std::string& config, std::string* path = nullptr);

// ---- attention forward (see tessera_attention_args_t for the rules) ----
struct AttentionArgs {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  float* lse = nullptr;  // optional fp32 [B, Hq, Sq]
  DType dtype = DType::BF16;
  int64_t batch = 0, seqlen_q = 0, seqlen_k = 0, heads_q = 0, heads_kv = 0, head_dim = 0;
  int64_t q_stride[3] = {0, 0, 0};  // (batch, seq, head) strides in elements
  int64_t k_stride[3] = {0, 0, 0};
  int64_t v_stride[3] = {0, 0, 0};
  int64_t o_stride[3] = {0, 0, 0};
  float softmax_scale = 0.0f;  // 0 = 1/sqrt(head_dim)
  bool causal = false;
  int max_sms = 0;  // SM budget, 0 = every SM (tessera_attention_args_t::max_sms)
  // Local attention (tessera_attention_args_t::window_left): -1 = unlimited.
  int64_t window_left = -1, window_right = -1;
  float softcap = 0.0f;  // > 0: scores s -> softcap * tanh(s / softcap) (after the scale); 0 = none
};

// Contiguous strides for a [B, S, H, D] ("bshd") or [B, H, S, D] ("bhsd") tensor.
inline void bshd_strides(int64_t s, int64_t h, int64_t d, int64_t (&st)[3]) {
  st[0] = s * h * d;
  st[1] = h * d;
  st[2] = d;
}
inline void bhsd_strides(int64_t s, int64_t h, int64_t d, int64_t (&st)[3]) {
  st[0] = h * s * d;
  st[1] = d;
  st[2] = s * d;
}

// Runs attention on `stream`. `workspace` (device memory, 256-byte aligned, or null): what
// attention_workspace_size() asks for lets decode-shaped calls (seqlen_q <= 16) split the keys
// across CTAs; with less they run with fewer splits. Workspace contract as for gemm().
Status attention(const AttentionArgs& args, void* stream = nullptr, void* workspace = nullptr,
                 size_t workspace_bytes = 0);
// Bytes of workspace for the call's fastest path (0: none needed; tessera_attention_workspace_size).
Status attention_workspace_size(const AttentionArgs& args, size_t* bytes);

// ---- attention against a KV cache (see tessera_kvcache_args_t for the rules) ----
struct KvCacheArgs {
  const void* q = nullptr;  // [B, Sq, Hq, D] (q_stride: batch, seq, head)
  void* k_cache = nullptr;  // contiguous [B, capacity, Hkv, D], or paged [num_pages, page_size, Hkv, D]
  void* v_cache = nullptr;
  void* o = nullptr;        // like q
  float* lse = nullptr;     // optional fp32 [B, Hq, Sq]
  DType dtype = DType::BF16;
  int64_t batch = 0, seqlen_q = 0, heads_q = 0, heads_kv = 0, head_dim = 0;
  int64_t q_stride[3] = {0, 0, 0}, o_stride[3] = {0, 0, 0};
  int64_t k_cache_stride[3] = {0, 0, 0}, v_cache_stride[3] = {0, 0, 0};  // (batch or page, position, head)
  int64_t capacity = 0;                    // contiguous: positions per batch (paged: unused)
  const int32_t* cache_seqlens = nullptr;  // device [B]: tokens already in the cache
  const int32_t* block_table = nullptr;    // device [B, max_pages] (paged), null: contiguous
  int64_t block_table_stride = 0, max_pages = 0, num_pages = 0, page_size = 0;
  const void* k_new = nullptr;  // optional [B, seqlen_new, Hkv, D], written at cache_seqlens[b] first
  const void* v_new = nullptr;
  int64_t seqlen_new = 0;
  int64_t k_new_stride[3] = {0, 0, 0}, v_new_stride[3] = {0, 0, 0};
  float softmax_scale = 0.0f;
  bool causal = false;
  int64_t window_left = -1, window_right = -1;
  float softcap = 0.0f;
  int max_sms = 0;
};
Status attention_with_kvcache(const KvCacheArgs& args, void* stream = nullptr, void* workspace = nullptr,
                              size_t workspace_bytes = 0);
Status attention_with_kvcache_workspace_size(const KvCacheArgs& args, size_t* bytes);

// ---- attention over packed variable-length sequences (see tessera_varlen_args_t for the rules) ----
struct VarlenArgs {
  const void* q = nullptr;  // [total_q, Hq, D] (q_stride: token, head)
  const void* k = nullptr;  // [total_k, Hkv, D]
  const void* v = nullptr;
  void* o = nullptr;        // like q
  float* lse = nullptr;     // optional fp32 [Hq, total_q]
  DType dtype = DType::BF16;
  const int32_t* cu_seqlens_q = nullptr;  // device [batch + 1]: sequence b's rows cu[b] .. cu[b + 1] - 1
  const int32_t* cu_seqlens_k = nullptr;
  int64_t batch = 0, total_q = 0, total_k = 0, max_seqlen_q = 0, max_seqlen_k = 0;
  int64_t heads_q = 0, heads_kv = 0, head_dim = 0;
  int64_t q_stride[2] = {0, 0};  // (token, head) strides in elements
  int64_t k_stride[2] = {0, 0};
  int64_t v_stride[2] = {0, 0};
  int64_t o_stride[2] = {0, 0};
  float softmax_scale = 0.0f;  // 0 = 1/sqrt(head_dim)
  bool causal = false;
  int64_t window_left = -1, window_right = -1;
  float softcap = 0.0f;
  int max_sms = 0;
};
// Contiguous (token, head) strides of a [total, H, D] tensor.
inline void packed_strides(int64_t h, int64_t d, int64_t (&st)[2]) {
  st[0] = h * d;
  st[1] = d;
}
Status attention_varlen(const VarlenArgs& args, void* stream = nullptr, void* workspace = nullptr,
                        size_t workspace_bytes = 0);
Status attention_varlen_workspace_size(const VarlenArgs& args, size_t* bytes);

// The TESSERA_* overrides are read once per process; this re-reads them and drops memoized launch
// plans (tests, tools). Not for concurrent use with other tessera calls.
void reread_environment();

// Conversions to and from the C ABI structs (used by the C ABI and the CLI). Field copies only:
// none throws but from_c(tessera_gemm_args_t), which copies the config name into a std::string
// (std::bad_alloc where no host memory is left; the C ABI turns that into a status).
tessera_matrix_t to_c(const Matrix& m) noexcept;
tessera_gemm_args_t to_c(const GemmArgs& a) noexcept;  // config pointer borrows a.config's storage
GemmArgs from_c(const tessera_gemm_args_t& a);
tessera_attention_args_t to_c(const AttentionArgs& a) noexcept;
AttentionArgs from_c(const tessera_attention_args_t& a) noexcept;
tessera_kvcache_args_t to_c(const KvCacheArgs& a) noexcept;
KvCacheArgs from_c(const tessera_kvcache_args_t& a) noexcept;
tessera_varlen_args_t to_c(const VarlenArgs& a) noexcept;
VarlenArgs from_c(const tessera_varlen_args_t& a) noexcept;

}  // namespace tessera
