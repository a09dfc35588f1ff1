// Shared-memory layout atoms of the sm_80 mainloop, with the swizzles derived as in seed 000.
// Only CuTe's layout algebra is needed here, so the CPU tests include this file and compute the
// bank of every ldmatrix / cp.async access of a phase.
//
// Bank model: 32 banks x 4 bytes; a 16-byte access covers 4 banks, so a 128-byte line holds 8
// "16-byte slots", and 8 threads whose 16-byte accesses fall in 8 different slots are
// conflict-free (ldmatrix reads 8 rows of 16 bytes per phase; cp.async writes 16 bytes/thread).
//
// Swizzle<B, M, S> XORs the B bits above bit M+S of the element offset into the B bits above
// bit M. M = 3 keeps 8 contiguous 2-byte elements (one 16-byte vector) together.
#pragma once

#include <cute/layout.hpp>
#include <cute/swizzle.hpp>
#include <cute/swizzle_layout.hpp>

namespace tessera::gemm_impl::sm80 {

// K-major operand (rows of BK elements, K contiguous).
//  BK = 32: a row is 64 B (4 slots), two rows share a 128-byte line. The 8 rows an ldmatrix phase
//    reads sit at (row & 1) * 4 + slot; XOR-ing the slot with row bits 1..2 (Swizzle<2,3,3>:
//    offset bits 6..7 = row bits 1..2 into bits 3..4) makes the 8 slots distinct.
//  BK = 64: a row is 128 B (8 slots); XOR the slot with row bits 0..2: Swizzle<3,3,3>.
// MN-major operand (64 MN-contiguous elements x 8 k): each k-row is one 128-byte line and
//   ldmatrix.trans reads the same slot of 8 consecutive k-rows: Swizzle<3,3,3> XORs slot with k.
// tf32 (4-byte elements) gets the same bytes: a 16-byte slot holds 4 elements (M = 2), so
// Swizzle<B, 2, 3> XORs the same slot bits with the same row bits as Swizzle<B, 3, 3> does for 16-bit;
// s8 (16 elements a slot, M = 4) likewise with Swizzle<B, 4, 3>.
// BK below counts 16-bit elements (configs.def), BK * 2 / ElemBytes of the operand's own.
template <bool KMajor, int BK, int ElemBytes = 2>
struct SmemAtomSelector;

template <>
struct SmemAtomSelector<true, 32> {
  using type = decltype(cute::composition(cute::Swizzle<2, 3, 3>{},
                                          cute::Layout<cute::Shape<cute::_8, cute::_32>, cute::Stride<cute::_32, cute::_1>>{}));
};
template <>
struct SmemAtomSelector<true, 64> {
  using type = decltype(cute::composition(cute::Swizzle<3, 3, 3>{},
                                          cute::Layout<cute::Shape<cute::_8, cute::_64>, cute::Stride<cute::_64, cute::_1>>{}));
};
template <int BK>
struct SmemAtomSelector<false, BK> {
  using type = decltype(cute::composition(cute::Swizzle<3, 3, 3>{},
                                          cute::Layout<cute::Shape<cute::_64, cute::_8>, cute::Stride<cute::_1, cute::_64>>{}));
};
template <>
struct SmemAtomSelector<true, 32, 4> {  // 64-byte rows of 16 tf32
  using type = decltype(cute::composition(cute::Swizzle<2, 2, 3>{},
                                          cute::Layout<cute::Shape<cute::_8, cute::_16>, cute::Stride<cute::_16, cute::_1>>{}));
};
template <>
struct SmemAtomSelector<true, 64, 4> {  // 128-byte rows of 32 tf32
  using type = decltype(cute::composition(cute::Swizzle<3, 2, 3>{},
                                          cute::Layout<cute::Shape<cute::_8, cute::_32>, cute::Stride<cute::_32, cute::_1>>{}));
};

template <>
struct SmemAtomSelector<true, 32, 1> {  // 64-byte rows of 64 s8
  using type = decltype(cute::composition(cute::Swizzle<2, 4, 3>{},
                                          cute::Layout<cute::Shape<cute::_8, cute::_64>, cute::Stride<cute::_64, cute::_1>>{}));
};
template <>
struct SmemAtomSelector<true, 64, 1> {  // 128-byte rows of 128 s8
  using type = decltype(cute::composition(cute::Swizzle<3, 4, 3>{},
                                          cute::Layout<cute::Shape<cute::_8, cute::_128>, cute::Stride<cute::_128, cute::_1>>{}));
};

template <bool KMajor, int BK, int ElemBytes = 2>
using SmemAtom = typename SmemAtomSelector<KMajor, BK, ElemBytes>::type;

}  // namespace tessera::gemm_impl::sm80
