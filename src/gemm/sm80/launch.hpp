// Host-side declaration of the sm_80 kernel launchers (defined in launch.cuh and explicitly
// instantiated in the generated translation units, one per config row and dtype; see CMakeLists.txt).
#pragma once
#include <cuda_runtime_api.h>

#include "gemm/kernel_params.hpp"

namespace tessera::gemm_impl::sm80 {

template <int Cfg, int DT, bool AKMajor, bool BKMajor>
cudaError_t launch(const GemmParams& p, cudaStream_t stream);

// Runs configuration `cfg` (an id of configs.def) for A/B dtype `dt` and the operand majors.
cudaError_t run(int cfg, int dt, bool a_k_major, bool b_k_major, const GemmParams& p, cudaStream_t stream);

// Dynamic shared memory a configuration needs (bytes), for the heuristic and `tessera info`.
int smem_bytes(int cfg);

}  // namespace tessera::gemm_impl::sm80
