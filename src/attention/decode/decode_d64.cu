// The decode family at head dim 64 (both dtypes; causal is a kernel argument).
#include "attention/decode/launch.cuh"

template cudaError_t tessera::attn::decode::launch<64, false>(const DecodeParams&, bool, int64_t, int, bool, cudaStream_t);
template cudaError_t tessera::attn::decode::launch<64, true>(const DecodeParams&, bool, int64_t, int, bool, cudaStream_t);
