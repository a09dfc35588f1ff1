// Compile-time view of configs.def: ConfigShape<id> holds one row's tile numbers.
#pragma once

namespace tessera::gemm_impl::sm80 {

template <int Id>
struct ConfigShape;

#define TESSERA_SM80_CONFIG(id, name, bm, bn, bk, stages, wm, wn, reason) \
  template <>                                                             \
  struct ConfigShape<id> {                                                \
    static constexpr int BM = bm, BN = bn, BK = bk, Stages = stages;      \
    static constexpr int WarpsM = wm, WarpsN = wn;                        \
  };
#include "gemm/sm80/configs.def"
#undef TESSERA_SM80_CONFIG

}  // namespace tessera::gemm_impl::sm80
