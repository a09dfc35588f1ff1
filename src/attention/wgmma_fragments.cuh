// Views of a WGMMA accumulator fragment that the softmax and the P V GEMM need (both Hopper families).
#pragma once

#include <cute/tensor.hpp>

namespace tessera::attn {

using namespace cute;

// Accumulator fragment ((2 cols, 2 rows, N/8), MMA_M, MMA_N) viewed as (rows, cols): a thread's
// values of one query row sit in one row of the view.
template <class Layout>
CUTE_HOST_DEVICE constexpr auto rowcol(Layout l) {
  static_assert(rank_v<decltype(get<0>(l))> == 3, "WGMMA accumulator layout");
  return make_layout(make_layout(get<0, 1>(l), get<1>(l)), make_layout(get<0, 0>(l), get<0, 2>(l), get<2>(l)));
}

// The same fragment re-read as the register A operand of a k16 WGMMA, ((2,2,2), MMA_M, N/16):
// two adjacent n8 column groups of the accumulator hold exactly one k16 A fragment, in A's order.
template <class Layout>
CUTE_HOST_DEVICE constexpr auto acc_as_a(Layout l) {
  auto v = logical_divide(get<0>(l), Shape<Underscore, Underscore, _2>{});  // (2, 2, (2, N/16))
  return make_layout(make_layout(get<0>(v), get<1>(v), get<2, 0>(v)), get<1>(l),
                     coalesce(make_layout(get<2, 1>(v), get<2>(l))));
}

}  // namespace tessera::attn
