// Ceiling of the sm_80 path on the GPU at hand: how fast can mma.sync.m16n8k16 (bf16 in, fp32
// accumulate) issue when nothing else runs? Each warp keeps 8 independent accumulator chains in
// registers; no memory traffic. The GEMM kernel's mainloop cannot beat this number.
// Build: nvcc -O3 -gencode=arch=compute_80,code=sm_90 (or sm_80) mma_sync_peak.cu -o mma_sync_peak
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "check.hpp"

constexpr int kChains = 8;

__global__ void mma_loop(float* out, int iters, unsigned seed) {
  unsigned a[4], b[2];
  for (int i = 0; i < 4; ++i) a[i] = seed * (threadIdx.x + 1 + i) | 0x3c003c00u;
  for (int i = 0; i < 2; ++i) b[i] = seed * (threadIdx.x + 7 + i) | 0x3c003c00u;
  float c[kChains][4] = {};
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int j = 0; j < kChains; ++j)
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
          "{%0,%1,%2,%3};\n"
          : "+f"(c[j][0]), "+f"(c[j][1]), "+f"(c[j][2]), "+f"(c[j][3])
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
  float s = 0;
  for (int j = 0; j < kChains; ++j) s += c[j][0] + c[j][1] + c[j][2] + c[j][3];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

int main() {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const int threads = 256, blocks = sms * 4, iters = 4096;
  float* out;
  CHECK(cudaMalloc(&out, sizeof(float) * threads * blocks));
  cudaEvent_t t0, t1;
  CHECK(cudaEventCreate(&t0));
  CHECK(cudaEventCreate(&t1));
  mma_loop<<<blocks, threads>>>(out, iters, 3u);  // warm-up
  CHECK(cudaGetLastError());
  float best = 1e30f;
  for (int rep = 0; rep < 5; ++rep) {
    CHECK(cudaEventRecord(t0));
    mma_loop<<<blocks, threads>>>(out, iters, 5u + rep);
    CHECK(cudaEventRecord(t1));
    CHECK(cudaEventSynchronize(t1));
    float ms;
    CHECK(cudaEventElapsedTime(&ms, t0, t1));
    if (ms < best) best = ms;
  }
  const double flops = 2.0 * 16 * 8 * 16 * double(kChains) * iters * (threads / 32) * blocks;
  std::printf("mma_sync_peak: %s, %d SMs: mma.sync m16n8k16 bf16->f32 %.1f TFLOP/s (best of 5, %.3f ms)\n",
              prop.name, sms, flops / best / 1e9, best);
  CHECK(cudaFree(out));
  return 0;
}
