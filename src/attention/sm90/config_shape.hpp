// Compile-time view of the sm90 rows of attention/configs.def.
#pragma once

namespace tessera::attn::sm90 {

template <int Id>
struct ConfigShape;

#define TESSERA_ATTN_SM90_CONFIG(id, name, d, bm, bn, overlap, reason) \
  template <>                                                          \
  struct ConfigShape<id> {                                             \
    static constexpr int D = d, BM = bm, BN = bn;                      \
    static constexpr bool Overlap = overlap;                           \
  };
#include "attention/configs.def"
#undef TESSERA_ATTN_SM90_CONFIG

}  // namespace tessera::attn::sm90
