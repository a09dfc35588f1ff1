/* tessera C ABI: tensor-core GEMM (and, later, attention) for sm_80 / sm_90a.
 *
 * D = act(alpha * op(A) * op(B) + beta * C + bias), batched, any major, any M, N, K >= 0.
 *
 * Every entry validates its arguments first. On invalid input it returns a status other than
 * TESSERA_STATUS_SUCCESS, writes nothing, launches nothing, and tessera_last_error() (per host
 * thread) names the argument and the rule that failed.
 *
 * No C++ exception leaves an entry. A failure inside the library that C++ reports by exception
 * (out of host memory, a standard-library error) returns TESSERA_STATUS_INTERNAL_ERROR with its
 * message in tessera_last_error() ("out of host memory" for an allocation); the getters, which
 * return no status, return NULL (names, descriptions) or 0 (the count) then.
 */
#ifndef TESSERA_TESSERA_H_
#define TESSERA_TESSERA_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tessera_status_t {
  TESSERA_STATUS_SUCCESS = 0,
  TESSERA_STATUS_INVALID_ARGUMENT = 1,   /* an argument breaks a rule; nothing was done     */
  TESSERA_STATUS_NOT_SUPPORTED = 2,      /* valid, but no kernel covers it (e.g. no GPU arch) */
  TESSERA_STATUS_CUDA_ERROR = 3,         /* the CUDA runtime reported an error               */
  TESSERA_STATUS_INTERNAL_ERROR = 4
} tessera_status_t;

typedef enum tessera_dtype_t {
  TESSERA_DTYPE_F16 = 0,
  TESSERA_DTYPE_BF16 = 1,
  TESSERA_DTYPE_F32 = 2,
  TESSERA_DTYPE_S8 = 3,  /* GEMM operands: int8, products summed exactly in int32               */
  TESSERA_DTYPE_S32 = 4,  /* GEMM D of S8 operands: the int32 sums as they are                  */
  TESSERA_DTYPE_E4M3 = 5, /* GEMM operands: fp8 (4-bit exponent, 3-bit mantissa; torch.float8_e4m3fn), sm_90 */
  TESSERA_DTYPE_E5M2 = 6  /* GEMM operands: fp8 (5-bit exponent, 2-bit mantissa; torch.float8_e5m2), sm_90   */
} tessera_dtype_t;

/* How a stored matrix lies in memory. ROW_MAJOR: element (r, c) at r * ld + c. */
typedef enum tessera_layout_t {
  TESSERA_ROW_MAJOR = 0,
  TESSERA_COL_MAJOR = 1
} tessera_layout_t;

typedef enum tessera_op_t {
  TESSERA_OP_N = 0, /* use the stored matrix as it is */
  TESSERA_OP_T = 1  /* use its transpose              */
} tessera_op_t;

/* A stored (batched) matrix: rows x cols as it lies in memory, before op(). */
typedef struct tessera_matrix_t {
  const void* ptr;          /* device pointer (D's is written through a cast)                */
  tessera_dtype_t dtype;
  int64_t rows;
  int64_t cols;
  int64_t ld;               /* leading dimension, in elements                                */
  tessera_layout_t layout;
  int64_t batch_count;      /* 1 broadcasts one matrix to every batch (or batch_stride = 0)  */
  int64_t batch_stride;     /* elements between batches; 0 = broadcast (not allowed for D)   */
} tessera_matrix_t;

/* The optional bias vector of a GEMM, added to every row or to every column of D. */
typedef enum tessera_bias_mode_t {
  TESSERA_BIAS_NONE = 0,
  TESSERA_BIAS_PER_COLUMN = 1, /* a vector of N: bias[n] added to every row (nn.Linear's bias) */
  TESSERA_BIAS_PER_ROW = 2     /* a vector of M: bias[m] added to every column                 */
} tessera_bias_mode_t;

/* The element-wise activation applied last, in fp32, before D is rounded to its dtype. */
typedef enum tessera_activation_t {
  TESSERA_ACTIVATION_NONE = 0,
  TESSERA_ACTIVATION_RELU = 1,
  TESSERA_ACTIVATION_GELU = 2,      /* erf form: 0.5 x (1 + erf(x / sqrt 2)), torch's default       */
  TESSERA_ACTIVATION_GELU_TANH = 3, /* tanh approximation (torch's approximate="tanh")             */
  TESSERA_ACTIVATION_SILU = 4       /* x * sigmoid(x)                                               */
} tessera_activation_t;

/* How F32 and fp8 operands meet the tensor cores (F16 / BF16 / S8 must leave it at DEFAULT). */
typedef enum tessera_precision_t {
  TESSERA_PRECISION_DEFAULT = 0, /* F32 operands: TF32                                              */
  TESSERA_PRECISION_TF32 = 1,    /* each product of the operands rounded to tf32 (10-bit mantissa)  */
  TESSERA_PRECISION_TF32X3 = 2,  /* 3xTF32: each operand split into a tf32 high part and a tf32 low
                                    part, three products (hi hi + lo hi + hi lo): ~fp32 accuracy at
                                    3x the tensor-core work                                          */
  TESSERA_PRECISION_FP8_FAST_ACCUM = 3 /* fp8 operands: the tensor cores' own accumulation all along K
                                    (faster, less accurate at long K: torch._scaled_mm's
                                    use_fast_accum); DEFAULT adds it into fp32 sums every 128 K      */
} tessera_precision_t;

/* Scales of S8 and fp8 operands (dequantisation): D = act(alpha * scale_a * scale_b * (op(A) op(B)) +
 * beta * C + bias), the sums (int32 converted to fp32, or fp32) scaled before the rest of the epilogue. */
/* K (and N) that one block scale covers (TESSERA_SCALE_BLOCK). */
#define TESSERA_SCALE_BLOCK_K 128

typedef enum tessera_scale_mode_t {
  TESSERA_SCALE_NONE = 0,    /* no scales: scale_a and scale_b must be NULL                          */
  TESSERA_SCALE_TENSOR = 1,  /* one fp32 each: *scale_a and *scale_b                                  */
  TESSERA_SCALE_ROWWISE = 2, /* scale_a: M fp32 values, one per row of op(A) (M x 1); scale_b: N, one
                                per column of op(B) (1 x N); contiguous                                */
  TESSERA_SCALE_BLOCK = 3    /* fp8 operands only (DeepSeek-V3's recipe): scale_a (M x ceil(K/128)), one
                                per row of op(A) and 128-deep block of K; scale_b (ceil(K/128) x
                                ceil(N/128)), one per 128 x 128 block of op(B); laid out as
                                scale_a_strides / scale_b_strides say. Each block's sums are scaled
                                as they are promoted (always: the precision's fast accumulation
                                does not apply), and D must be row-major.                            */
} tessera_scale_mode_t;

/* D = act(alpha * op(A) * op(B) + beta * C + bias), computed in F32 and rounded once.
 *   op(A): M x K, op(B): K x N, C and D: M x N.
 *   C may have a null ptr when beta == 0 (then C is not read at all). C's dtype equals D's.
 *   A and B: F16, BF16 or F32 (the same; F32 as tf32 or 3xTF32, see `precision`); D: F16, BF16 or
 *   F32; accumulation in F32.
 *   A and B E4M3 or E5M2 (the same; Hopper): products summed in fp32 (the tensor cores' sums promoted
 *   every 128 K unless TESSERA_PRECISION_FP8_FAST_ACCUM), dequantised as S8's are below; D F16, BF16
 *   or F32. They read fp8 operands K-major only: others are copied K-major into the workspace.
 *   A and B S8: products summed exactly in int32. D S32 takes the sums as they are (alpha 1, beta 0,
 *   no bias, activation or scales: torch._int_mm); D F16, BF16 or F32 takes them dequantised (see
 *   tessera_scale_mode_t) through the F32 epilogue above. Scales are device pointers to fp32, 4-byte
 *   aligned, shared by every batch, read-only (they must not overlap D).
 *   bias (optional): a contiguous vector in D's dtype, N elements for TESSERA_BIAS_PER_COLUMN, M for
 *   TESSERA_BIAS_PER_ROW; batch l reads bias + l * bias_batch_stride (0 = one vector for every
 *   batch). NULL with TESSERA_BIAS_NONE; with a mode, NULL only where the vector is empty (as for a
 *   matrix); aligned to its element size; it must not overlap D (C, A and B it may).
 * The bias and activation fields come last, so a zero-initialised struct means "none" for both. */
typedef struct tessera_gemm_args_t {
  tessera_op_t op_a;
  tessera_op_t op_b;
  tessera_matrix_t a;
  tessera_matrix_t b;
  tessera_matrix_t c;
  tessera_matrix_t d;
  float alpha;
  float beta;
  /* Kernel configuration by name (see tessera_gemm_config_name); NULL or "" = heuristic.
   * "<name>+flip" runs a config that can on the flipped orientation (D^T = B A^T, D stored
   * transposed; a 16-bit D of the operands' dtype, D and C 16-byte aligned, D's contiguous extent a
   * multiple of 8).
   * The environment variable TESSERA_GEMM_CONFIG overrides the heuristic too (args win). */
  const char* config;
  const void* bias;             /* device pointer, D's dtype; NULL = no bias                     */
  tessera_bias_mode_t bias_mode;
  int64_t bias_batch_stride;    /* elements between batches' bias vectors; 0 = one vector for all batches */
  tessera_activation_t activation;
  /* SM budget (like cuBLASLt's SM count target): at most this many SMs run the GEMM's CTAs at once;
   * 0 = every SM. With a budget no CTA ever waits for another CTA (split-K folds serially, no
   * stream-K), so a GEMM stays correct and finishes beside kernels that hold the other SMs (NCCL). */
  int max_sms;
  /* F32 operands only: TF32 (the default) or TF32X3; F16 / BF16 operands need DEFAULT. */
  tessera_precision_t precision;
  /* S8 and fp8 operands only: dequantisation scales (tessera_scale_mode_t); NULL / NONE otherwise. */
  const float* scale_a;
  const float* scale_b;
  tessera_scale_mode_t scale_mode;
  /* TESSERA_SCALE_BLOCK only (zeros otherwise): the block scales' element strides, {along M, along K
   * blocks} for scale_a and {along K blocks, along N blocks} for scale_b. Each is a row- or
   * column-major matrix (one stride of the pair 1, the other at least the extent it steps over; a
   * mode of extent 1 takes any stride); {0, 0} = row-major and contiguous. */
  int64_t scale_a_strides[2];
  int64_t scale_b_strides[2];
} tessera_gemm_args_t;

/* Bytes of workspace that let every operand use the fastest path (0 if none is needed).
 * With less workspace the call still works, on a slower path where needed.
 * Workspace contract: a workspace belongs to one call at a time. Calls on one stream may share
 * one (they run in order); calls that can run concurrently (other streams, other host threads,
 * replays of a captured graph beside eager calls) need one each. */
tessera_status_t tessera_gemm_workspace_size(const tessera_gemm_args_t* args, size_t* bytes);

/* Runs the GEMM on `stream` (a cudaStream_t; NULL = the default stream). Asynchronous.
 * `workspace` is device memory of `workspace_bytes` bytes (may be NULL / 0). */
tessera_status_t tessera_gemm(const tessera_gemm_args_t* args, void* workspace,
                              size_t workspace_bytes, void* stream);

/* The configuration the heuristic (or override) would run for these args, by name ("+flip"
 * appended where it runs on the flipped orientation); static storage. */
tessera_status_t tessera_gemm_select_config(const tessera_gemm_args_t* args, const char** name);

/* Compiled-in GEMM configurations: count, and the name / description of the i-th (static storage;
 * NULL where i is out of range). */
int tessera_gemm_config_count(void);
const char* tessera_gemm_config_name(int i);
const char* tessera_gemm_config_description(int i);

/* Attention forward: O = softmax(scale * Q K^T [causal mask]) V, per (batch, query head).
 *   Q [B, Sq, Hq, D], K and V [B, Sk, Hkv, D], O [B, Sq, Hq, D]: strides for the batch, sequence
 *   and head modes (so BSHD and BHSD both work), each >= 0 and a multiple of 8 elements; the
 *   head-dim stride is 1; pointers 16-byte aligned; O disjoint from Q, K, V and LSE. F16 or BF16.
 *   Hq must be a multiple of Hkv (GQA; Hkv = 1 is MQA): query head h reads K/V head h / (Hq / Hkv).
 *   causal: query i sees keys j <= i + Sk - Sq (aligned bottom-right when Sq != Sk); a query row
 *   that sees no key gets O = 0 and LSE = -inf.
 *   lse (optional, may be NULL): fp32 [B, Hq, Sq] contiguous, natural-log log-sum-exp of the scaled scores. */
typedef struct tessera_attention_args_t {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;
  tessera_dtype_t dtype;
  int64_t batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim;
  int64_t q_stride[3];  /* elements between consecutive batch, sequence and head entries */
  int64_t k_stride[3];
  int64_t v_stride[3];
  int64_t o_stride[3];
  float softmax_scale;  /* 0 = 1 / sqrt(head_dim) */
  int causal;
  /* SM budget (0 = every SM): at most this many SMs run the call's CTAs at once; no CTA waits for
   * another, so the call finishes beside kernels that hold the other SMs. */
  int max_sms;
  /* Local attention: query i sees key j only if i' - window_left <= j <= i' + window_right, where
   * i' = i + seqlen_k - seqlen_q (bottom-right aligned, as causal); -1 = unlimited on that side.
   * causal is window_right = 0 (with both, the smaller right side wins). */
  int64_t window_left, window_right;
  /* > 0: each scaled score s becomes softcap * tanh(s / softcap) (Gemma-2); 0 = none. */
  float softcap;
} tessera_attention_args_t;

/* Runs attention on `stream` (a cudaStream_t; NULL = the default stream). Asynchronous. Without a
 * workspace: tessera_attention_with_workspace with none. */
tessera_status_t tessera_attention(const tessera_attention_args_t* args, void* stream);

/* Bytes of workspace for the call's fastest path; 0 if none is needed. Only decode-shaped calls
 * (seqlen_q <= 16) use one: it holds the partial results when the keys are split across CTAs
 * (split-KV, when batch x heads_kv cannot fill the GPU), except where a Hopper GPU combines a few
 * splits within a thread-block cluster (0 then). With less (or none) the call still works, with
 * fewer splits. Without a usable device: a bound for GPUs of up to 256 SMs. The workspace
 * contract is the GEMM's (tessera_gemm_workspace_size): one workspace per concurrently running call. */
tessera_status_t tessera_attention_workspace_size(const tessera_attention_args_t* args, size_t* bytes);

/* tessera_attention with `workspace`: device memory of `workspace_bytes` bytes, 256-byte aligned
 * (may be NULL / 0), not overlapping any operand. */
tessera_status_t tessera_attention_with_workspace(const tessera_attention_args_t* args, void* workspace,
                                                  size_t workspace_bytes, void* stream);

/* Attention of a few new query tokens (decode, speculative drafts; any seqlen_q works, the decode
 * kernels are tuned for <= 16) against a KV cache, flash-attn's flash_attn_with_kvcache:
 *   - the cache is contiguous, k_cache/v_cache [B, capacity, Hkv, D] (strides: batch, position,
 *     head), or paged, [num_pages, page_size, Hkv, D] (strides: page, position, head) with
 *     block_table int32 [B, max_pages] (rows block_table_stride apart) naming each sequence's pages;
 *     page_size a multiple of 16 (16, 32, ..., 256, ...; a page size of 1 is not supported);
 *   - cache_seqlens int32 [B] (device): tokens already cached per sequence; not changed by the call;
 *   - k_new/v_new (optional) [B, seqlen_new, Hkv, D] are written into the cache at positions
 *     cache_seqlens[b] .. + seqlen_new - 1 first, and the attention covers cache_seqlens[b] +
 *     seqlen_new keys; causal and windows align bottom-right to that count.
 * Checked only on the device (no host synchronisation): cache_seqlens[b] is clamped to
 * [0, capacity - seqlen_new] (capacity = max_pages * page_size when paged); a block_table entry
 * outside [0, num_pages) is clamped to it (reads a real page, never outside the cache). */
typedef struct tessera_kvcache_args_t {
  const void* q;
  void* k_cache;
  void* v_cache;
  void* o;
  float* lse;
  tessera_dtype_t dtype;
  int64_t batch, seqlen_q, heads_q, heads_kv, head_dim;
  int64_t q_stride[3], o_stride[3];
  int64_t k_cache_stride[3], v_cache_stride[3];
  int64_t capacity;
  const int32_t* cache_seqlens;
  const int32_t* block_table;
  int64_t block_table_stride, max_pages, num_pages, page_size;
  const void* k_new;
  const void* v_new;
  int64_t seqlen_new;
  int64_t k_new_stride[3], v_new_stride[3];
  float softmax_scale;
  int causal;
  int64_t window_left, window_right;
  float softcap;
  int max_sms;
} tessera_kvcache_args_t;

tessera_status_t tessera_attention_with_kvcache_workspace_size(const tessera_kvcache_args_t* args, size_t* bytes);
tessera_status_t tessera_attention_with_kvcache(const tessera_kvcache_args_t* args, void* workspace,
                                                size_t workspace_bytes, void* stream);

/* Attention over a batch of sequences of different lengths packed along one token dimension
 * (variable-length prefill, flash-attn's flash_attn_varlen_func):
 *   Q and O [total_q, Hq, D], K and V [total_k, Hkv, D]: strides for the token and head modes (each
 *   >= 0 and a multiple of 8 elements), head-dim stride 1, pointers 16-byte aligned, O disjoint from
 *   Q, K, V, LSE and both cu_seqlens. F16 or BF16; Hq a multiple of Hkv (GQA).
 *   cu_seqlens_q, cu_seqlens_k: int32 [batch + 1] on the device: sequence b owns the query rows
 *   cu_seqlens_q[b] .. cu_seqlens_q[b + 1] - 1 and the keys cu_seqlens_k[b] .. cu_seqlens_k[b + 1] - 1
 *   (cumulative lengths: cu[0] = 0, non-decreasing, cu[batch] <= total). They may be one array.
 *   max_seqlen_q: at least the longest query sequence (the kernels cover that many rows of each: rows
 *   of a longer one past it may be left unwritten). max_seqlen_k: the longest key sequence, for
 *   flash-attn's signature (the kernels read each sequence's own). Both >= 0.
 *   Each sequence is attended on its own: causal and windows align bottom-right to its lengths
 *   (query i sees keys j <= i + len_k - len_q, as tessera_attention_args_t with Sq = len_q, Sk =
 *   len_k); softmax_scale, causal, window_left/right, softcap and max_sms as there.
 *   A sequence with no query rows writes nothing; a query row that sees no key (no keys at all,
 *   causal with len_q > len_k, a window outside them) gets O = 0 and LSE = -inf. Rows of O and LSE
 *   outside every sequence are not written.
 *   lse (optional, may be NULL): fp32 [Hq, total_q] contiguous (flash-attn's varlen layout).
 * Checked only on the device (no host synchronisation): sequence b is read as the rows
 * [clamp(cu[b], 0, total), clamp(cu[b + 1], that, total)), so bad cu_seqlens (negative, decreasing,
 * past the total) never make a kernel read or write outside the tensors; sequences that overlap
 * that way write the rows they share more than once, each with one of their results. */
typedef struct tessera_varlen_args_t {
  const void* q;
  const void* k;
  const void* v;
  void* o;
  float* lse;
  tessera_dtype_t dtype;
  const int32_t* cu_seqlens_q;
  const int32_t* cu_seqlens_k;
  int64_t batch;  /* sequences: cu_seqlens_q and cu_seqlens_k hold batch + 1 entries */
  int64_t total_q, total_k, max_seqlen_q, max_seqlen_k;
  int64_t heads_q, heads_kv, head_dim;
  int64_t q_stride[2];  /* elements between consecutive tokens and heads */
  int64_t k_stride[2];
  int64_t v_stride[2];
  int64_t o_stride[2];
  float softmax_scale;  /* 0 = 1 / sqrt(head_dim) */
  int causal;
  int64_t window_left, window_right;
  float softcap;
  int max_sms;
} tessera_varlen_args_t;

/* Bytes of workspace for the call (0: none; the prefill kernels that run it need none today). The
 * workspace contract is the GEMM's. */
tessera_status_t tessera_attention_varlen_workspace_size(const tessera_varlen_args_t* args, size_t* bytes);
/* Runs variable-length attention on `stream`. Asynchronous; `workspace` as for
 * tessera_attention_with_workspace (may be NULL / 0). */
tessera_status_t tessera_attention_varlen(const tessera_varlen_args_t* args, void* workspace, size_t workspace_bytes,
                                          void* stream);

/* The TESSERA_* environment variables (overrides for measurements and tests, README) are read once,
 * at the first call that needs them. This re-reads them and drops the memoized launch plans, for
 * tests and tools that change the environment inside one process. Not for concurrent use with
 * other tessera calls. */
void tessera_reread_environment(void);

const char* tessera_status_string(tessera_status_t status);
/* Message of the last failed call on this host thread ("" if none). */
const char* tessera_last_error(void);
const char* tessera_version(void);

#ifdef __cplusplus
}
#endif
#endif /* TESSERA_TESSERA_H_ */
