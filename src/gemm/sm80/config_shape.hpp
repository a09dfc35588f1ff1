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

// Whether row `id` also compiles a tf32 variant (configs.def TESSERA_SM80_TF32): the one list that the
// dispatch table and the heuristic's Config::tf32 read.
constexpr bool has_tf32(int id) {
  constexpr int rows[] = {
#define TESSERA_SM80_CONFIG(...)
#define TESSERA_SM80_TF32(row, reason) row,
#include "gemm/sm80/configs.def"
#undef TESSERA_SM80_TF32
#undef TESSERA_SM80_CONFIG
      -1};
  for (int r : rows)
    if (r == id) return true;
  return false;
}

// Whether row `id` also compiles an s8 variant (configs.def TESSERA_SM80_S8).
constexpr bool has_s8(int id) {
  constexpr int rows[] = {
#define TESSERA_SM80_CONFIG(...)
#define TESSERA_SM80_S8(row, reason) row,
#include "gemm/sm80/configs.def"
#undef TESSERA_SM80_S8
#undef TESSERA_SM80_CONFIG
      -1};
  for (int r : rows)
    if (r == id) return true;
  return false;
}

}  // namespace tessera::gemm_impl::sm80
