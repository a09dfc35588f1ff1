// Compile-time view of attention/configs.def.
#pragma once

namespace tessera::attn::sm80 {

template <int Id>
struct ConfigShape;

#define TESSERA_ATTN_CONFIG(id, name, d, bm, bn, warps, reason) \
  template <>                                                   \
  struct ConfigShape<id> {                                      \
    static constexpr int D = d, BM = bm, BN = bn, Warps = warps; \
  };
#include "attention/configs.def"
#undef TESSERA_ATTN_CONFIG

}  // namespace tessera::attn::sm80
