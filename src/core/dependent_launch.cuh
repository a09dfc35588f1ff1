// Programmatic dependent launch, device side (the launchers set
// cudaLaunchAttributeProgrammaticStreamSerialization, on cc 9.x only): a CTA lets the stream's next
// kernel launch now, so that its CTAs take SMs as this grid's CTAs exit and run their set-up under
// this grid's tail; each CTA in turn waits for the previous kernel's completion (and its memory)
// before its first global-memory access. Without a dependent launch both are no-ops. Compiled for an
// older architecture (the sm_80 families' PTX) they are nothing, and the launchers never ask for a
// dependent launch there.
#pragma once

namespace tessera {

__device__ __forceinline__ void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void wait_for_prior_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

}  // namespace tessera
