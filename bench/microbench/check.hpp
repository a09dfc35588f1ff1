// Error checks for the microbenchmarks: any failure ends the run with the failing expression.
#pragma once
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

inline void check_cuda(cudaError_t e, const char* expr) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "%s: %s\n", expr, cudaGetErrorString(e));
  std::exit(1);
}

// A library status enum whose success is 0 (cuBLAS, cuBLASLt, the driver API).
template <class Status>
void check_status(Status s, const char* expr) {
  if (int(s) == 0) return;
  std::fprintf(stderr, "%s: status %d\n", expr, int(s));
  std::exit(1);
}

#define CHECK(x) check_cuda((x), #x)
#define CHECK_STATUS(x) check_status((x), #x)
