// The decode family at head dim 128 (both dtypes; causal is a kernel argument).
#include "attention/decode/launch.cuh"

template cudaError_t tessera::attn::decode::launch<128, false>(const DecodeParams&, bool, int64_t, int, bool, cudaStream_t);
template cudaError_t tessera::attn::decode::launch<128, true>(const DecodeParams&, bool, int64_t, int, bool, cudaStream_t);
