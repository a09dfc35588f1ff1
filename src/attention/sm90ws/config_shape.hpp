// Compile-time view of the sm90 warp-specialised rows of attention/configs.def.
#pragma once

namespace tessera::attn::sm90ws {

template <int Id>
struct ConfigShape;

#define TESSERA_ATTN_SM90WS_CONFIG(id, name, d, bm, bn, stages, reason) \
  template <>                                                            \
  struct ConfigShape<id> {                                               \
    static constexpr int D = d, BM = bm, BN = bn, Stages = stages;       \
  };
#include "attention/configs.def"
#undef TESSERA_ATTN_SM90WS_CONFIG

}  // namespace tessera::attn::sm90ws
