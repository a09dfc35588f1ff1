// The decode family at head dim 128 (both dtypes; causal and windows are kernel arguments).
#include "attention/decode/launch.cuh"

template cudaError_t tessera::attn::decode::launch<128, false>(const DecodeParams&, int64_t, int, bool, cudaStream_t);
template cudaError_t tessera::attn::decode::launch<128, true>(const DecodeParams&, int64_t, int, bool, cudaStream_t);
