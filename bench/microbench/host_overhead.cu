// Host cost per call: where do the microseconds of a small GEMM go before the GPU sees it?
// Small problems (1024^3 runs ~4 us of GPU work) are timed as back-to-back launches, and when the
// host needs longer per call than the GPU, the host is what is measured. This times, on the host,
// each piece of a tessera::gemm call and a cuBLASLt call of the same problem:
//   - the driver entry-point lookup CuTe's make_tma_copy does before each cuTensorMapEncodeTiled,
//   - cuTensorMapEncodeTiled itself (through a cached pointer),
//   - cudaLaunchKernelEx of an empty kernel, with and without a cluster dimension,
//   - tessera::gemm_select_config (validate + plan + heuristic), tessera::gemm, cublasLtMatmul.
//   - back-to-back tessera::gemm on each kind of stream (created non-blocking / blocking, the
//     legacy default stream, per-thread default) with programmatic dependent launch on and off:
//     host time per call and GPU time per call (events), to see what PDL costs where.
// Build: nvcc -O3 -std=c++17 -arch=sm_90a host_overhead.cu -Iinclude -Lbuild -ltessera -lcublasLt -o host_overhead
// Run:   LD_LIBRARY_PATH=build ./host_overhead [M N K]   (bf16, tn, column-major D)
#include <cublasLt.h>
#include <cuda.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>

#include "check.hpp"
#include "tessera/tessera.hpp"

__global__ void empty_kernel() {}
// The size of an sm90 GEMM launch's parameters (TMA descriptors and the plain ones).
struct BigParams {
  alignas(64) unsigned char bytes[1024];
};
__global__ void empty_kernel_params(const __grid_constant__ BigParams p) {}

// Median over `rounds` of the host time per call of `n` calls; the stream is drained between
// rounds so that a full launch queue never makes the host wait for the GPU.
double host_us(const std::function<void()>& call, cudaStream_t stream, int n = 200, int rounds = 9) {
  double best[32];
  for (int r = 0; r < rounds; ++r) {
    CHECK(cudaStreamSynchronize(stream));
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) call();
    const auto t1 = std::chrono::steady_clock::now();
    best[r] = std::chrono::duration<double, std::micro>(t1 - t0).count() / n;
  }
  CHECK(cudaStreamSynchronize(stream));
  std::sort(best, best + rounds);
  return best[rounds / 2];
}

int main(int argc, char** argv) {
  const int64_t m = argc > 3 ? std::atoll(argv[1]) : 1024, n = argc > 3 ? std::atoll(argv[2]) : 1024,
                k = argc > 3 ? std::atoll(argv[3]) : 1024;
  cudaStream_t stream;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  void *a, *b, *d, *ws;
  CHECK(cudaMalloc(&a, m * k * 2));
  CHECK(cudaMalloc(&b, n * k * 2));
  CHECK(cudaMalloc(&d, m * n * 2));
  CHECK(cudaMemset(a, 0, m * k * 2));
  CHECK(cudaMemset(b, 0, n * k * 2));
  const size_t ws_bytes = size_t(32) << 20;
  CHECK(cudaMalloc(&ws, ws_bytes));
  std::printf("problem %lld x %lld x %lld bf16 tn (host microseconds per call, median of 9 rounds of 200)\n",
              (long long)m, (long long)n, (long long)k);

  // The lookup CuTe's TMA wrapper does per descriptor, and the encode through a cached pointer.
  void* pfn = nullptr;
  cudaDriverEntryPointQueryResult q;
  const double lookup = host_us(
      [&] { CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &pfn, 12000, cudaEnableDefault, &q)); },
      stream);
  auto encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(pfn);
  CUtensorMap map;
  const cuuint64_t dims[2] = {cuuint64_t(k), cuuint64_t(m)};
  const cuuint64_t strides[1] = {cuuint64_t(k * 2)};
  const cuuint32_t box[2] = {64, 128}, elem[2] = {1, 1};
  const double enc = host_us(
      [&] {
        CUresult r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, a, dims, strides, box, elem,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
        if (r != CUDA_SUCCESS) std::exit(2);
      },
      stream);
  std::printf("driver entry-point lookup         %7.2f\n", lookup);
  std::printf("cuTensorMapEncodeTiled (cached)   %7.2f\n", enc);

  // Launch cost: an empty kernel on a persistent-sized grid.
  int sms = 0, dev = 0;
  CHECK(cudaGetDevice(&dev));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const int smem = 200 * 1024;
  CHECK(cudaFuncSetAttribute(empty_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  for (int cluster : {1, 2}) {
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr = {};
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = cluster;
    attr.val.clusterDim.y = attr.val.clusterDim.z = 1;
    cfg.gridDim = dim3(sms / 2 * 2);
    cfg.blockDim = dim3(384);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cfg.attrs = &attr;
    cfg.numAttrs = cluster > 1 ? 1 : 0;
    const double t = host_us([&] { CHECK(cudaLaunchKernelEx(&cfg, empty_kernel)); }, stream);
    std::printf("cudaLaunchKernelEx, cluster %d     %7.2f\n", cluster, t);
  }
  const double plain = host_us([&] { empty_kernel<<<sms, 384, smem, stream>>>(); }, stream);
  std::printf("<<<>>> launch                     %7.2f\n", plain);
  // The same with 1 KB of parameters, through the runtime and through the driver (the kernel's
  // CUfunction looked up once): what part of a launch is the runtime's, what part the parameters'.
  {
    BigParams big{};
    CHECK(cudaFuncSetAttribute(empty_kernel_params, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(sms);
    cfg.blockDim = dim3(384);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    const double rt = host_us([&] { CHECK(cudaLaunchKernelEx(&cfg, empty_kernel_params, big)); }, stream);
    std::printf("cudaLaunchKernelEx, 1 KB params   %7.2f\n", rt);
    cudaFunction_t fn = nullptr;
    CHECK(cudaGetFuncBySymbol(&fn, reinterpret_cast<const void*>(empty_kernel_params)));
    void* cu_launch = nullptr;
    CHECK(cudaGetDriverEntryPointByVersion("cuLaunchKernelEx", &cu_launch, 12000, cudaEnableDefault, &q));
    auto launch_ex = reinterpret_cast<PFN_cuLaunchKernelEx_v11060>(cu_launch);
    CUlaunchConfig dcfg = {};
    dcfg.gridDimX = unsigned(sms), dcfg.gridDimY = dcfg.gridDimZ = 1;
    dcfg.blockDimX = 384, dcfg.blockDimY = dcfg.blockDimZ = 1;
    dcfg.sharedMemBytes = unsigned(smem);
    dcfg.hStream = stream;
    void* args[] = {&big};
    const double drv = host_us(
        [&] {
          if (launch_ex(&dcfg, reinterpret_cast<CUfunction>(fn), args, nullptr) != CUDA_SUCCESS) std::exit(3);
        },
        stream);
    std::printf("cuLaunchKernelEx, 1 KB params     %7.2f\n", drv);
  }
  const double getdev = host_us([&] { CHECK(cudaGetDevice(&dev)); }, stream);
  std::printf("cudaGetDevice                     %7.2f\n", getdev);

  // tessera: D (M x N, column-major) = A^T B with A stored K x M and B K x N, column-major.
  tessera::GemmArgs args;
  args.op_a = tessera::Op::T;
  args.op_b = tessera::Op::N;
  args.a = tessera::dense(a, tessera::DType::BF16, k, m, tessera::Layout::ColMajor);
  args.b = tessera::dense(b, tessera::DType::BF16, k, n, tessera::Layout::ColMajor);
  args.d = tessera::dense(d, tessera::DType::BF16, m, n, tessera::Layout::ColMajor);
  args.c = tessera::dense(nullptr, tessera::DType::BF16, m, n, tessera::Layout::ColMajor);
  std::string name;
  if (tessera::Status s = tessera::gemm_select_config(args, &name); !s.ok()) {
    std::fprintf(stderr, "gemm_select_config: %s\n", s.message.c_str());
    return 1;
  }
  size_t need = 0;
  (void)tessera::gemm_workspace_size(args, &need);
  const double sel = host_us([&] { (void)tessera::gemm_select_config(args, &name); }, stream);
  const double call = host_us(
      [&] {
        if (!tessera::gemm(args, stream, ws, ws_bytes).ok()) std::exit(3);
      },
      stream);
  std::printf("tessera::gemm_select_config       %7.2f   (%s)\n", sel, name.c_str());
  std::printf("tessera::gemm                     %7.2f   (workspace asked %zu bytes)\n", call, need);

  // cuBLASLt with the algorithm chosen once, as the benchmark's anchor does.
  cublasLtHandle_t lt;
  CHECK_STATUS(cublasLtCreate(&lt));
  cublasLtMatmulDesc_t op;
  CHECK_STATUS(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  CHECK_STATUS(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  CHECK_STATUS(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  cublasLtMatrixLayout_t la, lb, ld;
  CHECK_STATUS(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, k, m, k));
  CHECK_STATUS(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, k, n, k));
  CHECK_STATUS(cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, m, n, m));
  cublasLtMatmulPreference_t pref;
  CHECK_STATUS(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t max_ws = ws_bytes;
  CHECK_STATUS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_ws, sizeof max_ws));
  cublasLtMatmulHeuristicResult_t res{};
  int got = 0;
  CHECK_STATUS(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ld, ld, pref, 1, &res, &got));
  const float alpha = 1.f, beta = 0.f;
  const double lt_us = host_us(
      [&] {
        CHECK_STATUS(cublasLtMatmul(lt, op, &alpha, a, la, b, lb, &beta, d, ld, d, ld, &res.algo, ws, ws_bytes, stream));
      },
      stream);
  std::printf("cublasLtMatmul                    %7.2f\n", lt_us);

  // GPU time per call of each, back to back (events around 200 launches), for the ratio's context.
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  auto gpu_us = [&](const std::function<void()>& f) {
    for (int i = 0; i < 20; ++i) f();
    CHECK(cudaEventRecord(e0, stream));
    for (int i = 0; i < 200; ++i) f();
    CHECK(cudaEventRecord(e1, stream));
    CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    return ms * 1000.0 / 200;
  };
  std::printf("events per call, tessera::gemm    %7.2f\n", gpu_us([&] { (void)tessera::gemm(args, stream, ws, ws_bytes); }));
  std::printf("events per call, cublasLtMatmul   %7.2f\n", gpu_us([&] {
                CHECK_STATUS(cublasLtMatmul(lt, op, &alpha, a, la, b, lb, &beta, d, ld, d, ld, &res.algo, ws, ws_bytes,
                                        stream));
              }));
  std::printf("events per call, empty <<<>>>     %7.2f\n", gpu_us([&] { empty_kernel<<<sms, 384, smem, stream>>>(); }));

  // PDL by stream kind: 20 back-to-back calls between two events (as a Python loop sees them) and
  // the host time per call. TESSERA_GEMM_PDL is read once per process: reread after each change.
  cudaStream_t blocking;
  CHECK(cudaStreamCreate(&blocking));
  const std::pair<const char*, cudaStream_t> kinds[] = {
      {"non-blocking", stream}, {"blocking", blocking}, {"legacy (0)", nullptr}, {"per-thread", cudaStreamPerThread}};
  std::printf("\nback-to-back tessera::gemm, 20 calls: host us/call, GPU us/call (events)\n");
  for (const char* pdl : {"1", "0"}) {
    setenv("TESSERA_GEMM_PDL", pdl, 1);
    tessera::reread_environment();
    for (const auto& [name, s] : kinds) {
      auto call = [&, s = s] {
        if (!tessera::gemm(args, s, ws, ws_bytes).ok()) std::exit(3);
      };
      for (int i = 0; i < 20; ++i) call();
      CHECK(cudaDeviceSynchronize());
      double host[9], gpu[9];
      for (int r = 0; r < 9; ++r) {
        CHECK(cudaEventRecord(e0, s));
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < 20; ++i) call();
        const auto t1 = std::chrono::steady_clock::now();
        CHECK(cudaEventRecord(e1, s));
        CHECK(cudaEventSynchronize(e1));
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        host[r] = std::chrono::duration<double, std::micro>(t1 - t0).count() / 20;
        gpu[r] = ms * 1000.0 / 20;
      }
      std::sort(host, host + 9);
      std::sort(gpu, gpu + 9);
      std::printf("PDL=%s %-13s host %7.2f  gpu %7.2f\n", pdl, name, host[4], gpu[4]);
    }
  }
  unsetenv("TESSERA_GEMM_PDL");
  tessera::reread_environment();
  return 0;
}
