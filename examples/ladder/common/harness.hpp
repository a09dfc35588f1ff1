// The ladder's shared harness: every rung is a small standalone program whose main() hands its
// launch function to one of the run_*_rung entries below. The harness owns everything that is not
// the lesson: inputs, the oracle, timing, the anchor from the same process, the output format.
//
//   ladder_<rung> --test    small shapes; verify against the oracle; exit 0 pass, 1 fail,
//                           77 skip (no GPU, or the GPU lacks the rung's architecture)
//   ladder_<rung> --bench   verify, then time the rung and its anchor on each benchmark size;
//                           one JSON object per size on stdout (fields below)
//   ladder_<rung> --size M N K [--iters I]   one problem, verify + time (attention: B H S D)
//
// JSON line: {"rung": "<name>", "kind": "gemm_f16"|"gemm_s8"|"attention", "shape": [..],
//             "ms": t, "tflops": x, "anchor": "cublas"|"reference", "anchor_ms": t,
//             "anchor_tflops": x, "rel_err": e, "ok": true}
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace ladder {

// Exit code ctest reads as "skipped" (SKIP_RETURN_CODE in examples/ladder/CMakeLists.txt).
constexpr int kSkip = 77;

struct Rung {
  const char* name;  // folder name, e.g. "03_multistage"
  int min_cc;        // lowest compute capability the kernel runs on: 80, or 90 for sm_90a rungs
  int exact_cc;      // 0, or the one cc the SASS runs on (90 for sm_90a)
  // Shape granularity the rung requires (its tile); the harness only builds shapes that are
  // multiples of these. Attention: m_multiple = query block, k_multiple = key block.
  int m_multiple, n_multiple, k_multiple;
};

// C = A * B^T, fp16 in, fp32 accumulate, fp16 out. All row-major with tight leading dimensions:
// A is M x K, B is N x K (both K-major, the "TN" GEMM of the notes), C is M x N.
using GemmF16Launch = void (*)(const half* A, const half* B, half* C, int M, int N, int K,
                               cudaStream_t stream);
// C = A * B^T, int8 in, int32 out (exact). Same layouts as above.
using GemmS8Launch = void (*)(const int8_t* A, const int8_t* B, int32_t* C, int M, int N, int K,
                              cudaStream_t stream);
// O = softmax(scale * Q K^T [causal]) V per (batch, head); Q, K, V, O are [B, H, S, D] fp16,
// contiguous; scale = 1/sqrt(D). lse may be null.
using AttentionLaunch = void (*)(const half* Q, const half* K, const half* V, half* O, int B, int H,
                                 int S, int D, bool causal, cudaStream_t stream);

// Oracle: cuBLAS (cublasGemmEx, fp32 compute) for both GEMM kinds, relative Frobenius error
// <= 1e-2 for fp16 and exact equality for int8. Anchor timed: cuBLAS on the same inputs.
int run_gemm_rung(int argc, char** argv, const Rung& rung, GemmF16Launch launch);
int run_gemm_rung(int argc, char** argv, const Rung& rung, GemmS8Launch launch);
// Oracle: a naive fp32 GPU reference in the harness (relative error <= 2e-2). The anchor in the
// JSON is that reference's time; the ladder runner adds torch SDPA from the same run.
// head_dim: the one D the rung is compiled for.
int run_attention_rung(int argc, char** argv, const Rung& rung, int head_dim, AttentionLaunch launch);

// For rungs that need it: abort with the file/line on a CUDA error.
void check_cuda(cudaError_t err, const char* what, const char* file, int line);
#define LADDER_CUDA(call) ::ladder::check_cuda((call), #call, __FILE__, __LINE__)

}  // namespace ladder
