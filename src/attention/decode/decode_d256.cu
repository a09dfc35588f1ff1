// The decode family at head dim 256 (both dtypes; causal is a kernel argument).
#include "attention/decode/launch.cuh"

template cudaError_t tessera::attn::decode::launch<256, false>(const DecodeParams&, bool, int64_t, int, bool, cudaStream_t);
template cudaError_t tessera::attn::decode::launch<256, true>(const DecodeParams&, bool, int64_t, int, bool, cudaStream_t);
