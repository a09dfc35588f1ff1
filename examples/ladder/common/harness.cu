// The ladder's shared harness (contract: harness.hpp). Everything here is deliberately plain:
// random inputs from a hash kernel, cuBLAS as the GEMM oracle and anchor, a naive fp32 attention
// reference, CUDA-event timing with the rung and its anchor alternating, one JSON line per case.
#include "common/harness.hpp"

#include <cublas_v2.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>
#include <unistd.h>

namespace ladder {

void check_cuda(cudaError_t err, const char* what, const char* file, int line) {
  if (err == cudaSuccess) return;
  if (err == cudaErrorNoKernelImageForDevice) {  // a GPU newer than the rung's SASS: skip, not fail
    std::fprintf(stderr, "%s:%d: skipped: no kernel image for this GPU (%s)\n", file, line, what);
    std::exit(kSkip);
  }
  std::fprintf(stderr, "%s:%d: CUDA error %s (%s) in %s\n", file, line, cudaGetErrorName(err),
               cudaGetErrorString(err), what);
  std::exit(1);
}

namespace {

#define CUBLAS_OK(call) check_cublas((call), #call, __LINE__)
void check_cublas(cublasStatus_t st, const char* what, int line) {
  if (st == CUBLAS_STATUS_SUCCESS) return;
  std::fprintf(stderr, "harness.cu:%d: cuBLAS error %d in %s\n", line, static_cast<int>(st), what);
  std::exit(1);
}

// ---- command line -----------------------------------------------------------------------------
enum class Mode { kTest, kBench, kSize };
struct Args {
  Mode mode = Mode::kTest;
  std::vector<long> size;  // --size values
  int iters = 20;          // timed iterations (median); fewer for long runs
  unsigned long long seed = 0;
  bool seed_given = false;
};

void usage(const char* prog) {
  std::fprintf(stderr,
               "usage: %s --test | --bench | --size M N K (attention: B H S D [causal 0|1])\n"
               "          [--iters N] [--seed S]   (rungs may add their own flags, e.g. --variant)\n",
               prog);
}

// Unknown flags are ignored so that a rung can read its own (e.g. rung 05's --variant).
bool parse(int argc, char** argv, Args& a) {
  for (int i = 1; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "--test") {
      a.mode = Mode::kTest;
    } else if (s == "--bench") {
      a.mode = Mode::kBench;
    } else if (s == "--size") {
      a.mode = Mode::kSize;
      while (i + 1 < argc && argv[i + 1][0] != '-') a.size.push_back(std::atol(argv[++i]));
    } else if (s == "--iters" && i + 1 < argc) {
      a.iters = std::max(1, std::atoi(argv[++i]));
    } else if (s == "--seed" && i + 1 < argc) {
      a.seed = std::strtoull(argv[++i], nullptr, 0);
      a.seed_given = true;
    } else if (s == "--help" || s == "-h") {
      return false;
    }
  }
  if (!a.seed_given) {
    auto now = std::chrono::high_resolution_clock::now().time_since_epoch().count();
    a.seed = static_cast<unsigned long long>(now) ^ (static_cast<unsigned long long>(getpid()) << 32);
  }
  return true;
}

// Returns 0 when the rung can run here, kSkip (with a one-line reason) otherwise.
int device_gate(const Rung& rung) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    cudaGetLastError();
    std::fprintf(stderr, "%s: skipped: no CUDA device\n", rung.name);
    return kSkip;
  }
  int dev = 0, major = 0, minor = 0;
  LADDER_CUDA(cudaGetDevice(&dev));
  LADDER_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  LADDER_CUDA(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  int cc = major * 10 + minor;
  if (cc < rung.min_cc || (rung.exact_cc != 0 && cc != rung.exact_cc)) {
    std::fprintf(stderr, "%s: skipped: device cc %d, rung needs %s%d\n", rung.name, cc,
                 rung.exact_cc ? "exactly " : ">= ", rung.exact_cc ? rung.exact_cc : rung.min_cc);
    return kSkip;
  }
  return 0;
}

// After the rung's first launch: a GPU newer than the rung's SASS (no PTX is shipped for the
// rungs) reports "no kernel image"; that is a skip, not a failure. Any other error aborts.
int check_first_launch(const Rung& rung) {
  cudaError_t err = cudaGetLastError();
  if (err == cudaErrorNoKernelImageForDevice) {
    std::fprintf(stderr, "%s: skipped: no kernel image for this GPU\n", rung.name);
    return kSkip;
  }
  LADDER_CUDA(err);
  return 0;
}

long round_up(long x, long m) { return (x + m - 1) / m * m; }
long lcm(long a, long b) {
  long x = a, y = b;
  while (y) { long t = x % y; x = y; y = t; }
  return a / x * b;
}

// ---- device helpers ---------------------------------------------------------------------------
__device__ __forceinline__ unsigned long long mix64(unsigned long long z) {  // splitmix64 finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
__global__ void fill_f16(half* p, size_t n, unsigned long long seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    unsigned long long r = mix64(seed + 0x9e3779b97f4a7c15ull * (i + 1));
    float u = float(r >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    p[i] = __float2half(2.0f * u - 1.0f);
  }
}
__global__ void fill_s8(int8_t* p, size_t n, unsigned long long seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    unsigned long long r = mix64(seed + 0x9e3779b97f4a7c15ull * (i + 1));
    p[i] = static_cast<int8_t>(int(r % 17ull) - 8);  // [-8, 8]
  }
}

// Relative Frobenius error ||out - ref|| / ||ref|| plus a count of non-finite outputs.
struct ErrAcc { double diff2, ref2; unsigned long long bad; };
__global__ void compare_f16(const half* out, const float* ref, size_t n, ErrAcc* acc) {
  double d2 = 0, r2 = 0;
  unsigned long long bad = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    float o = __half2float(out[i]);
    double r = ref[i];
    if (!isfinite(o)) { ++bad; continue; }
    d2 += (o - r) * (o - r);
    r2 += r * r;
  }
  for (int off = 16; off > 0; off >>= 1) {
    d2 += __shfl_down_sync(0xffffffffu, d2, off);
    r2 += __shfl_down_sync(0xffffffffu, r2, off);
    bad += __shfl_down_sync(0xffffffffu, bad, off);
  }
  if ((threadIdx.x & 31) == 0) {
    atomicAdd(&acc->diff2, d2);
    atomicAdd(&acc->ref2, r2);
    atomicAdd(&acc->bad, bad);
  }
}
__global__ void compare_s32(const int32_t* out, const int32_t* ref, size_t n, ErrAcc* acc) {
  unsigned long long bad = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    bad += out[i] != ref[i];
  for (int off = 16; off > 0; off >>= 1) bad += __shfl_down_sync(0xffffffffu, bad, off);
  if ((threadIdx.x & 31) == 0) atomicAdd(&acc->bad, bad);
}

// Naive fp32 attention: one block (4 warps) per (b, h, query row). Scores for the row live in
// dynamic shared memory (S floats), then a max/sum reduction, then O = P V with threads over d.
constexpr int kRefThreads = 128;
__device__ float block_reduce(float v, bool is_max, float* scratch) {
  for (int off = 16; off > 0; off >>= 1) {
    float o = __shfl_xor_sync(0xffffffffu, v, off);
    v = is_max ? fmaxf(v, o) : v + o;
  }
  __syncthreads();  // scratch may still be read from a previous reduction
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
  __syncthreads();
  float r = scratch[0];
  for (int w = 1; w < kRefThreads / 32; ++w) r = is_max ? fmaxf(r, scratch[w]) : r + scratch[w];
  return r;
}
__global__ void attention_reference(const half* Q, const half* K, const half* V, float* O, int S, int D,
                                    bool causal, float scale) {
  extern __shared__ float p[];  // [S] scores, then probabilities
  __shared__ float scratch[kRefThreads / 32];
  const int row = blockIdx.x;                      // query row
  const size_t bh = blockIdx.y;                    // b * H + h
  const half* q = Q + (bh * S + row) * D;
  const half* k = K + bh * S * D;
  const half* v = V + bh * S * D;
  const int kv_len = causal ? row + 1 : S;         // causal: key j <= query i (S_q == S_k)
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (int j = warp; j < kv_len; j += kRefThreads / 32) {  // a warp per key: coalesced rows of K
    float s = 0.f;
    for (int d = lane; d < D; d += 32) s += __half2float(q[d]) * __half2float(k[size_t(j) * D + d]);
    for (int off = 16; off > 0; off >>= 1) s += __shfl_xor_sync(0xffffffffu, s, off);
    if (lane == 0) p[j] = s * scale;
  }
  __syncthreads();
  float m = -INFINITY;
  for (int j = threadIdx.x; j < kv_len; j += kRefThreads) m = fmaxf(m, p[j]);
  m = block_reduce(m, true, scratch);
  float l = 0.f;
  for (int j = threadIdx.x; j < kv_len; j += kRefThreads) {
    float e = __expf(p[j] - m);
    p[j] = e;
    l += e;
  }
  l = block_reduce(l, false, scratch);  // its __syncthreads also publishes p[]
  for (int d = threadIdx.x; d < D; d += kRefThreads) {
    float o = 0.f;
    for (int j = 0; j < kv_len; ++j) o += p[j] * __half2float(v[size_t(j) * D + d]);
    O[(bh * S + row) * D + d] = o / l;
  }
}

// ---- buffers and timing -----------------------------------------------------------------------
template <class T>
struct DevBuf {
  T* p = nullptr;
  size_t n = 0;
  explicit DevBuf(size_t count) : n(count) { LADDER_CUDA(cudaMalloc(&p, std::max<size_t>(1, n) * sizeof(T))); }
  ~DevBuf() { cudaFree(p); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
};

int grid_for(size_t n) { return static_cast<int>(std::min<size_t>((n + 255) / 256, 4096)); }

struct Timing { double ms, anchor_ms; };

// Warm-up, then `iters` rounds of (rung, anchor), each timed by its own event pair; medians.
// A case whose single run takes over ~200 ms gets fewer rounds (the median of 5 is still robust).
template <class F, class G>
Timing time_pair(F&& rung, G&& anchor, int iters, cudaStream_t s) {
  cudaEvent_t e0, e1;
  LADDER_CUDA(cudaEventCreate(&e0));
  LADDER_CUDA(cudaEventCreate(&e1));
  auto once = [&](auto&& f) {
    LADDER_CUDA(cudaEventRecord(e0, s));
    f();
    LADDER_CUDA(cudaEventRecord(e1, s));
    LADDER_CUDA(cudaEventSynchronize(e1));
    LADDER_CUDA(cudaGetLastError());
    float ms = 0.f;
    LADDER_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    return double(ms);
  };
  double probe = std::max(once(rung), once(anchor));  // first (cold) runs: warm-up and a probe
  int warm = probe > 50.0 ? 0 : 2;
  if (probe > 200.0) iters = std::min(iters, 5);
  for (int i = 0; i < warm; ++i) { once(rung); once(anchor); }
  std::vector<double> a, b;
  for (int i = 0; i < iters; ++i) {
    a.push_back(once(rung));
    b.push_back(once(anchor));
  }
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  LADDER_CUDA(cudaEventDestroy(e0));
  LADDER_CUDA(cudaEventDestroy(e1));
  return {a[a.size() / 2], b[b.size() / 2]};
}

// One JSON object per line; `ms` < 0 means "not timed" (--test, or a failed verification).
void emit(const Rung& rung, const char* kind, const std::vector<long>& shape, int causal, double ms,
          double tflop, const char* anchor, double anchor_ms, double rel_err, bool ok) {
  std::string sh;
  for (size_t i = 0; i < shape.size(); ++i) sh += (i ? ", " : "") + std::to_string(shape[i]);
  auto num = [](double x, double scale) {
    if (x < 0) return std::string("null");
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.6g", x * scale);
    return std::string(buf);
  };
  std::printf("{\"rung\": \"%s\", \"kind\": \"%s\", \"shape\": [%s]", rung.name, kind, sh.c_str());
  if (causal >= 0) std::printf(", \"causal\": %s", causal ? "true" : "false");
  std::printf(", \"ms\": %s, \"tflops\": %s, \"anchor\": \"%s\", \"anchor_ms\": %s, \"anchor_tflops\": %s",
              num(ms, 1).c_str(), ms > 0 ? num(tflop / ms, 1e-9).c_str() : "null", anchor,
              num(anchor_ms, 1).c_str(), anchor_ms > 0 ? num(tflop / anchor_ms, 1e-9).c_str() : "null");
  char err[64];
  std::snprintf(err, sizeof err, "%.3e", rel_err);
  std::printf(", \"rel_err\": %s, \"ok\": %s}\n", std::isfinite(rel_err) ? err : "null", ok ? "true" : "false");
  std::fflush(stdout);
}

// ---- GEMM -------------------------------------------------------------------------------------
// Row-major C[M,N] = A[M,K] * B[N,K]^T seen by column-major cuBLAS: C^T (N x M, ld N) =
// B (op T of the K x N column-major view of B, ld K) * A^T (the K x M column-major view of A, ld K).
void cublas_gemm(cublasHandle_t h, const void* A, const void* B, void* C, long M, long N, long K,
                 cudaDataType_t ab, cudaDataType_t c, cublasComputeType_t compute) {
  if (compute == CUBLAS_COMPUTE_32I) {
    const int32_t alpha = 1, beta = 0;
    CUBLAS_OK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, int(N), int(M), int(K), &alpha, B, ab, int(K), A, ab,
                           int(K), &beta, C, c, int(N), compute, CUBLAS_GEMM_DEFAULT));
  } else {
    const float alpha = 1.f, beta = 0.f;
    CUBLAS_OK(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, int(N), int(M), int(K), &alpha, B, ab, int(K), A, ab,
                           int(K), &beta, C, c, int(N), compute, CUBLAS_GEMM_DEFAULT));
  }
}

std::vector<std::vector<long>> gemm_shapes(const Args& a, const Rung& r) {
  const long m = r.m_multiple, n = r.n_multiple, k = r.k_multiple;
  if (a.mode == Mode::kTest)
    // one tile; M != N != K; a single K tile with a non-square grid; non-square with 8 K tiles;
    // a partial wave on a 132-SM H100 (143 tiles) for the persistent/stream-K rungs; a long K loop.
    return {{m, n, k},          {2 * m, 3 * n, 4 * k},   {3 * m, 2 * n, k},
            {3 * m, 2 * n, 8 * k}, {11 * m, 13 * n, 10 * k}, {3 * m, 5 * n, 64 * k}};
  if (a.mode == Mode::kBench) {
    std::vector<std::vector<long>> v;
    for (long s : {2048L, 4096L, 8192L}) v.push_back({round_up(s, m), round_up(s, n), round_up(s, k)});
    return v;
  }
  return {a.size};
}

template <class TIn, class TOut, class Launch>
int gemm_driver(int argc, char** argv, const Rung& rung, Launch launch) {
  constexpr bool kS8 = sizeof(TIn) == 1;
  Args args;
  if (!parse(argc, argv, args)) { usage(argv[0]); return 2; }
  if (args.mode == Mode::kSize && args.size.size() != 3) { usage(argv[0]); return 2; }
  if (int g = device_gate(rung)) return g;
  const char* kind = kS8 ? "gemm_s8" : "gemm_f16";
  std::vector<std::vector<long>> shapes = gemm_shapes(args, rung);
  cudaStream_t stream;
  LADDER_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cublasHandle_t handle;
  CUBLAS_OK(cublasCreate(&handle));
  CUBLAS_OK(cublasSetStream(handle, stream));
  DevBuf<ErrAcc> acc(1);
  bool all_ok = true;
  unsigned long long seed = args.seed;
  std::fprintf(stderr, "%s: seed %llu\n", rung.name, seed);
  for (const auto& sh : shapes) {
    const long M = sh[0], N = sh[1], K = sh[2];
    if (M <= 0 || N <= 0 || K <= 0 || M % rung.m_multiple || N % rung.n_multiple || K % rung.k_multiple) {
      std::fprintf(stderr, "%s: shape %ld x %ld x %ld is not a multiple of the rung's %d x %d x %d\n",
                   rung.name, M, N, K, rung.m_multiple, rung.n_multiple, rung.k_multiple);
      return 2;
    }
    DevBuf<TIn> A(M * K), B(N * K);
    DevBuf<TOut> C(M * N), C_anchor(M * N);
    DevBuf<std::conditional_t<kS8, int32_t, float>> ref(M * N);
    if constexpr (kS8) {
      fill_s8<<<grid_for(A.n), 256, 0, stream>>>(A.p, A.n, seed++);
      fill_s8<<<grid_for(B.n), 256, 0, stream>>>(B.p, B.n, seed++);
    } else {
      fill_f16<<<grid_for(A.n), 256, 0, stream>>>(A.p, A.n, seed++);
      fill_f16<<<grid_for(B.n), 256, 0, stream>>>(B.p, B.n, seed++);
    }
    LADDER_CUDA(cudaGetLastError());
    // Poison: an element the rung never writes reads as NaN (fp16) or 0x7F7F7F7F (int32).
    LADDER_CUDA(cudaMemsetAsync(C.p, kS8 ? 0x7F : 0xFF, C.n * sizeof(TOut), stream));
    if constexpr (kS8)
      cublas_gemm(handle, A.p, B.p, ref.p, M, N, K, CUDA_R_8I, CUDA_R_32I, CUBLAS_COMPUTE_32I);
    else
      cublas_gemm(handle, A.p, B.p, ref.p, M, N, K, CUDA_R_16F, CUDA_R_32F, CUBLAS_COMPUTE_32F);
    launch(A.p, B.p, C.p, int(M), int(N), int(K), stream);
    if (int g = check_first_launch(rung)) return g;
    LADDER_CUDA(cudaMemsetAsync(acc.p, 0, sizeof(ErrAcc), stream));
    if constexpr (kS8)
      compare_s32<<<grid_for(C.n), 256, 0, stream>>>(C.p, ref.p, C.n, acc.p);
    else
      compare_f16<<<grid_for(C.n), 256, 0, stream>>>(C.p, ref.p, C.n, acc.p);
    LADDER_CUDA(cudaGetLastError());
    ErrAcc h{};
    LADDER_CUDA(cudaMemcpyAsync(&h, acc.p, sizeof h, cudaMemcpyDeviceToHost, stream));
    LADDER_CUDA(cudaStreamSynchronize(stream));
    double rel = kS8 ? double(h.bad) / double(C.n) : std::sqrt(h.diff2 / std::max(h.ref2, 1e-300));
    bool ok = kS8 ? h.bad == 0 : (h.bad == 0 && rel <= 1e-2);
    if (!ok)
      std::fprintf(stderr, "%s: FAIL %ld x %ld x %ld: %s %.3e, non-finite/mismatched %llu\n", rung.name, M, N, K,
                   kS8 ? "mismatch fraction" : "rel err", rel, h.bad);
    all_ok &= ok;
    double ms = -1, anchor_ms = -1;
    if (ok && args.mode != Mode::kTest) {
      auto run_rung = [&] { launch(A.p, B.p, C.p, int(M), int(N), int(K), stream); };
      auto run_anchor = [&] {
        if constexpr (kS8)
          cublas_gemm(handle, A.p, B.p, C_anchor.p, M, N, K, CUDA_R_8I, CUDA_R_32I, CUBLAS_COMPUTE_32I);
        else
          cublas_gemm(handle, A.p, B.p, C_anchor.p, M, N, K, CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F);
      };
      Timing t = time_pair(run_rung, run_anchor, args.iters, stream);
      ms = t.ms;
      anchor_ms = t.anchor_ms;
    }
    emit(rung, kind, sh, -1, ms, 2.0 * M * N * K, "cublas", anchor_ms, rel, ok);
  }
  CUBLAS_OK(cublasDestroy(handle));
  LADDER_CUDA(cudaStreamDestroy(stream));
  return all_ok ? 0 : 1;
}

}  // namespace

int run_gemm_rung(int argc, char** argv, const Rung& rung, GemmF16Launch launch) {
  return gemm_driver<half, half>(argc, argv, rung, launch);
}
int run_gemm_rung(int argc, char** argv, const Rung& rung, GemmS8Launch launch) {
  return gemm_driver<int8_t, int32_t>(argc, argv, rung, launch);
}

// ---- attention --------------------------------------------------------------------------------
int run_attention_rung(int argc, char** argv, const Rung& rung, int head_dim, AttentionLaunch launch) {
  Args args;
  if (!parse(argc, argv, args)) { usage(argv[0]); return 2; }
  if (args.mode == Mode::kSize && args.size.size() != 4 && args.size.size() != 5) { usage(argv[0]); return 2; }
  if (int g = device_gate(rung)) return g;
  struct Case { long B, H, S, D; bool causal; };
  std::vector<Case> cases;
  const long gran = lcm(rung.m_multiple, rung.k_multiple);
  if (args.mode == Mode::kTest) {
    for (long s : {gran, 3 * gran})
      for (bool c : {false, true}) cases.push_back({2, 3, s, head_dim, c});
  } else if (args.mode == Mode::kBench) {
    for (long s : {1024L, 4096L})
      for (bool c : {false, true}) {
        long S = round_up(s, gran);
        cases.push_back({std::max(1L, 16384L / S), 16, S, head_dim, c});
      }
  } else {
    const auto& z = args.size;
    if (z.size() == 5) {
      cases.push_back({z[0], z[1], z[2], z[3], z[4] != 0});
    } else {
      cases.push_back({z[0], z[1], z[2], z[3], false});
      cases.push_back({z[0], z[1], z[2], z[3], true});
    }
  }
  cudaStream_t stream;
  LADDER_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  DevBuf<ErrAcc> acc(1);
  bool all_ok = true;
  unsigned long long seed = args.seed;
  std::fprintf(stderr, "%s: seed %llu\n", rung.name, seed);
  for (const Case& c : cases) {
    if (c.D != head_dim || c.S <= 0 || c.S % gran || c.B <= 0 || c.H <= 0) {
      std::fprintf(stderr, "%s: needs D = %d and S a multiple of %ld (got B %ld H %ld S %ld D %ld)\n", rung.name,
                   head_dim, gran, c.B, c.H, c.S, c.D);
      return 2;
    }
    const size_t n = size_t(c.B) * c.H * c.S * c.D;
    const size_t smem = size_t(c.S) * sizeof(float);
    if (smem > 48 * 1024) {
      LADDER_CUDA(cudaFuncSetAttribute(attention_reference, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    }
    DevBuf<half> Q(n), K(n), V(n), O(n);
    DevBuf<float> ref(n);
    fill_f16<<<grid_for(n), 256, 0, stream>>>(Q.p, n, seed++);
    fill_f16<<<grid_for(n), 256, 0, stream>>>(K.p, n, seed++);
    fill_f16<<<grid_for(n), 256, 0, stream>>>(V.p, n, seed++);
    LADDER_CUDA(cudaMemsetAsync(O.p, 0xFF, n * sizeof(half), stream));
    const float scale = 1.0f / std::sqrt(float(c.D));
    const dim3 ref_grid(unsigned(c.S), unsigned(c.B * c.H));
    auto run_ref = [&] {
      attention_reference<<<ref_grid, kRefThreads, smem, stream>>>(Q.p, K.p, V.p, ref.p, int(c.S), int(c.D),
                                                                  c.causal, scale);
    };
    run_ref();
    LADDER_CUDA(cudaGetLastError());
    launch(Q.p, K.p, V.p, O.p, int(c.B), int(c.H), int(c.S), int(c.D), c.causal, stream);
    if (int g = check_first_launch(rung)) return g;
    LADDER_CUDA(cudaMemsetAsync(acc.p, 0, sizeof(ErrAcc), stream));
    compare_f16<<<grid_for(n), 256, 0, stream>>>(O.p, ref.p, n, acc.p);
    ErrAcc h{};
    LADDER_CUDA(cudaMemcpyAsync(&h, acc.p, sizeof h, cudaMemcpyDeviceToHost, stream));
    LADDER_CUDA(cudaStreamSynchronize(stream));
    double rel = std::sqrt(h.diff2 / std::max(h.ref2, 1e-300));
    bool ok = h.bad == 0 && rel <= 2e-2;
    if (!ok)
      std::fprintf(stderr, "%s: FAIL B %ld H %ld S %ld D %ld causal %d: rel err %.3e, non-finite %llu\n", rung.name,
                   c.B, c.H, c.S, c.D, int(c.causal), rel, h.bad);
    all_ok &= ok;
    double ms = -1, anchor_ms = -1;
    if (ok && args.mode != Mode::kTest) {
      auto run_rung = [&] { launch(Q.p, K.p, V.p, O.p, int(c.B), int(c.H), int(c.S), int(c.D), c.causal, stream); };
      Timing t = time_pair(run_rung, run_ref, args.iters, stream);
      ms = t.ms;
      anchor_ms = t.anchor_ms;
    }
    double flop = 4.0 * c.B * c.H * double(c.S) * c.S * c.D * (c.causal ? 0.5 : 1.0);
    emit(rung, "attention", {c.B, c.H, c.S, c.D}, c.causal, ms, flop, "reference", anchor_ms, rel, ok);
  }
  LADDER_CUDA(cudaStreamDestroy(stream));
  return all_ok ? 0 : 1;
}

}  // namespace ladder
