// The decode family at head dim 64 (both dtypes; causal and windows are kernel arguments). Its wide
// CTAs are compiled beside it (decode_d64_wide.cu).
#include "attention/decode/launch.cuh"

namespace tessera::attn::decode {
extern template cudaError_t launch_decode<Traits<64, false, 1, kWideWarps>>(const DecodeParams&, int64_t, int, bool,
                                                                            cudaStream_t);
extern template cudaError_t launch_decode<Traits<64, true, 1, kWideWarps>>(const DecodeParams&, int64_t, int, bool,
                                                                           cudaStream_t);
}  // namespace tessera::attn::decode

template cudaError_t tessera::attn::decode::launch<64, false>(const DecodeParams&, int64_t, int, bool, cudaStream_t);
template cudaError_t tessera::attn::decode::launch<64, true>(const DecodeParams&, int64_t, int, bool, cudaStream_t);
