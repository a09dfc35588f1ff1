// Host-side declaration of the sm_90a kernel launchers (defined in launch.cuh and explicitly
// instantiated in the generated translation units, one per config row and dtype; see CMakeLists.txt).
#pragma once
#include <cuda_runtime_api.h>

#include "gemm/kernel_params.hpp"

namespace tessera::gemm_impl::sm90 {

// How the epilogue stores D: kEpiStaged through fp32 smem sub-tiles (any D, the split-K fix-up);
// kEpiTma as 16-bit 64x64 sub-tiles stored by TMA; kEpiSmem16 as the same 16-bit sub-tiles copied
// out by the threads (D not TMA-aligned). H100, 4096^3 bf16: 778 / 766 / 592 TFLOP/s. kEpiAuto:
// the kernel's choice (Traits::epilogue_mode).
enum EpiMode : int { kEpiStaged = 0, kEpiTma = 1, kEpiSmem16 = 2, kEpiAuto = 3 };

// How one call launches (gemm/api.cpp fills it): the decomposition (gemm_impl::Decomposition) and
// its workspace (splitk_bytes for split-K, streamk_bytes for stream-K, ignored with splits > 1;
// 256-byte aligned), the L2 warm-up, and the measurement overrides.
struct Decomposition : gemm_impl::Decomposition {
  void* workspace = nullptr;
  int l2_warm = 0;                // k-tiles of the larger operand prefetched into L2 at entry (gemm_impl::l2_warm_ktiles)
  int epilogue = kEpiAuto;        // EpiMode forced where it can run (TESSERA_SM90_EPILOGUE)
  bool dependent_launch = true;   // programmatic dependent launch (TESSERA_GEMM_PDL=0 turns it off)
  bool one_tile = true;           // the one-tile kernel where it can run (TESSERA_GEMM_ONE_TILE=0 turns it off)
};

// `sm_count` sizes the persistent grid (one CTA per SM at most).
template <int Cfg, int DT, bool AKMajor, bool BKMajor>
cudaError_t launch(const GemmParams& p, int sm_count, const Decomposition& dec, cudaStream_t stream);

// Runs configuration `cfg` (an id of sm90/configs.def) for A/B dtype `dt` and the operand majors.
// Precondition: K > 0 and both operands satisfy TMA's rules (16-byte base, leading dimension and
// batch stride); gemm/api.cpp guarantees it.
cudaError_t run(int cfg, int dt, bool a_k_major, bool b_k_major, const GemmParams& p, int sm_count,
                const Decomposition& dec, cudaStream_t stream);

// Dynamic shared memory a configuration needs (bytes), for the heuristic and `tessera info`.
int smem_bytes(int cfg);

}  // namespace tessera::gemm_impl::sm90
