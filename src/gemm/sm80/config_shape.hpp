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

// The rows configs.def also compiles for other operand types (TESSERA_SM80_TF32 / _S8, one
// variant each): the one list that the dispatch table and the heuristic's Config flags read.
enum RowVariant : int { kTf32Rows, kS8Rows };
struct VariantRow {
  int id;
  RowVariant variant;
};
constexpr VariantRow kVariantRows[] = {
#define TESSERA_SM80_CONFIG(...)
#define TESSERA_SM80_TF32(row, reason) {row, kTf32Rows},
#define TESSERA_SM80_S8(row, reason) {row, kS8Rows},
#include "gemm/sm80/configs.def"
#undef TESSERA_SM80_TF32
#undef TESSERA_SM80_S8
#undef TESSERA_SM80_CONFIG
};
constexpr bool has_variant(int id, RowVariant v) {
  for (const VariantRow& r : kVariantRows)
    if (r.id == id && r.variant == v) return true;
  return false;
}
constexpr bool has_tf32(int id) { return has_variant(id, kTf32Rows); }  // fp32 operands as tf32
constexpr bool has_s8(int id) { return has_variant(id, kS8Rows); }      // s8 operands

}  // namespace tessera::gemm_impl::sm80
