// The decode family's wide CTAs at head dim 64 (decode.hpp: kWideWarps), both dtypes.
#include "attention/decode/launch.cuh"

namespace tessera::attn::decode {
template cudaError_t launch_decode<Traits<64, false, 1, kWideWarps>>(const DecodeParams&, int64_t, int, bool,
                                                                     cudaStream_t);
template cudaError_t launch_decode<Traits<64, true, 1, kWideWarps>>(const DecodeParams&, int64_t, int, bool,
                                                                    cudaStream_t);
}  // namespace tessera::attn::decode
