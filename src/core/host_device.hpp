// TESSERA_HD: a function that host code (and the CPU tests) and device code both call, inlined.
#pragma once

#if defined(__CUDACC__)
#define TESSERA_HD __host__ __device__ __forceinline__
#else
#define TESSERA_HD inline
#endif
