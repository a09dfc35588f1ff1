// Compile-time shape of one warp-specialised Hopper attention kernel: tiles, shared-memory layouts,
// the two WGMMAs, the TMA descriptor types and the shared storage (FlashAttention-3's structure).
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>

#include "attention/params.hpp"
#include "attention/sm90ws/launch.hpp"
#include "attention/sm90ws/scheduler.cuh"

namespace tessera::attn::sm90ws {

using namespace cute;

template <int D_, int BM_, int BN_, int Stages_, bool BF16, bool Causal_>
struct Traits {
  static constexpr int D = D_, BM = BM_, BN = BN_, Stages = Stages_;
  static constexpr bool Causal = Causal_;
  using Element = std::conditional_t<BF16, cute::bfloat16_t, cute::half_t>;

  // Warpgroup 0 produces (one thread issues every TMA); BM / 64 consumer warpgroups own 64 query
  // rows each, so a row's softmax stays inside one warpgroup (quad shuffles only).
  static constexpr int kConsumers = BM / 64;
  static constexpr int kConsumerThreads = 128 * kConsumers, kThreads = 128 + kConsumerThreads;
  // setmaxnreg: the producer keeps what its warp's loop needs, the consumers take the rest. The
  // registers only move within what the CTA was launched with (kThreads x the launch's per-thread
  // count, a multiple of 8): a request beyond that never completes, a hang rather than an error.
  // D = 96's zeroing loop (12 chunks a row, not a divisor of the warp) needs 32 in the producer.
  static constexpr int kProducerRegs = kConsumers == 2 && D != 96 ? 24 : 32;
  static constexpr int kConsumerRegs = kConsumers == 2 ? (D != 96 ? 240 : 232) : 160;
  static constexpr int kLaunchRegs = (65536 / kThreads) / 8 * 8;
  static_assert(128 * kProducerRegs + kConsumerThreads * kConsumerRegs <= kThreads * kLaunchRegs,
                "setmaxnreg: the roles' registers exceed the CTA's allocation");
  // Two consumers take turns on the tensor core (FA3's ping-pong): one's GEMMs run while the
  // other's softmax does.
  static constexpr bool kPingPong = kConsumers == 2;

  // Q, K and V rows are D long and contiguous: K-major for both operands of S = Q K^T. 128-byte
  // swizzle rows (64 elements) where D allows, 64-byte ones (32 elements) for D = 96.
  static_assert(D % 32 == 0 && D <= 256, "head_dim: a multiple of 32, at most 256");
  using Atom = std::conditional_t<D % 64 == 0, GMMA::Layout_K_SW128_Atom<Element>, GMMA::Layout_K_SW64_Atom<Element>>;
  using SmemLayoutQ = decltype(tile_to_shape(Atom{}, Shape<Int<BM>, Int<D>>{}));                  // (BM,D)
  using SmemLayoutKV = decltype(tile_to_shape(Atom{}, Shape<Int<BN>, Int<D>, Int<Stages>>{}));    // (BN,D,PIPE)
  // Element offset of the c-th 16-byte chunk of some permutation of row r's chunks in a K/V
  // stage: all of a row's chunks over c = 0 .. D/8 - 1, the order aside. The swizzle only permutes
  // the chunks inside each row's 128-byte (64-byte at D = 96) segments, so whole segments need only
  // the unswizzled layout; evaluated as a function, the swizzled layout would not match the
  // pointer-swizzled tensor that TMA and WGMMA address. (CPU test: Sm90WsLayout.)
  static constexpr int kSegment = D % 64 == 0 ? 64 : 32;  // elements per swizzle segment
  CUTE_HOST_DEVICE static int kv_chunk(int r, int c, int stage) {
    const int seg = c * 8 / kSegment * kSegment;
    return int(SmemLayoutKV{}.layout_b()(r, seg, stage)) + (c * 8 - seg);
  }
  // V seen as the B operand of P V, (D, BN): the same bytes, D contiguous = MN-major.
  using SmemLayoutVt = decltype(composition(
      SmemLayoutKV{}, make_ordered_layout(Shape<Int<D>, Int<BN>, Int<Stages>>{}, Step<_2, _1, _3>{})));  // (D,BN,PIPE)

  using Consumers = Layout<Shape<Int<kConsumers>, _1, _1>>;  // warpgroups tiled along M
  using TiledMmaS = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<_64, Int<BN>, Int<D>>, GMMA::Major::K, GMMA::Major::K>(),
      Consumers{}));
  using TiledMmaO = decltype(make_tiled_mma(
      GMMA::rs_op_selector<Element, Element, float, Shape<_64, Int<D>, Int<BN>>, GMMA::Major::K, GMMA::Major::MN>(),
      Consumers{}));

  // Host: the TMA descriptor of one [batch, seq, head, D] operand as (seq, D, head, batch), boxes of
  // (Rows, D). A size-1 mode gets a nominal 16-byte stride (TMA wants multiples of 16 bytes).
  template <int Rows, class SmemLayout>
  static auto make_tma(const void* ptr, int seq, int heads, int batch, const int64_t* stride) {
    auto st = [](int64_t s, int extent) { return extent > 1 ? s : int64_t(8); };
    Tensor g = make_tensor(make_gmem_ptr(static_cast<const Element*>(ptr)), make_shape(seq, D, heads, batch),
                           make_stride(st(stride[1], seq), _1{}, st(stride[2], heads), st(stride[0], batch)));
    return make_tma_copy(SM90_TMA_LOAD{}, g, SmemLayout{}, Shape<Int<Rows>, Int<D>>{}, Int<1>{});
  }
  static auto make_tma_q(const AttnParams& p) {
    return make_tma<BM, SmemLayoutQ>(p.q, p.seqlen_q, p.heads_q, tma_batches(p), p.q_stride);
  }
  static auto make_tma_k(const AttnParams& p) {
    return make_tma<BN, decltype(SmemLayoutKV{}(_, _, 0))>(p.k, p.seqlen_k, p.heads_kv, tma_batches(p), p.k_stride);
  }
  static auto make_tma_v(const AttnParams& p) {
    return make_tma<BN, decltype(SmemLayoutKV{}(_, _, 0))>(p.v, p.seqlen_k, p.heads_kv, tma_batches(p), p.v_stride);
  }
  using TmaQ = decltype(make_tma_q(AttnParams{}));
  using TmaK = decltype(make_tma_k(AttnParams{}));
  using TmaV = decltype(make_tma_v(AttnParams{}));

  static constexpr uint32_t kQBytes = BM * D * sizeof(Element), kKVBytes = BN * D * sizeof(Element);

  // O leaves through its own buffer where it fits beside Q and the rings (so the next block's Q can
  // load while this one's O is stored), else through Q's (d = 256).
  static constexpr int kQKVBytes = (BM + 2 * Stages * BN) * D * int(sizeof(Element));
  static constexpr bool kSeparateO = kQKVBytes + BM * D * int(sizeof(Element)) + 1024 <= 227 * 1024;
  struct SharedStorage {
    alignas(1024) Element q[cosize_v<SmemLayoutQ>];
    alignas(1024) Element k[cosize_v<SmemLayoutKV>];
    alignas(1024) Element v[cosize_v<SmemLayoutKV>];
    alignas(1024) Element o[kSeparateO ? cosize_v<SmemLayoutQ> : 8];
    uint64_t q_full, q_empty, v_tail;
    uint64_t k_full[Stages], k_empty[Stages];
    uint64_t v_full[Stages], v_empty[Stages];
    TicketRing tickets;  // the dynamic walk's next blocks (scheduler.cuh)
  };
  static constexpr int kSmemBytes = int(sizeof(SharedStorage));
  static_assert(BM % 64 == 0 && BN % 16 == 0 && BN <= 256, "tile vs WGMMA");
};

// Everything a launch passes: the plain parameters and the three TMA descriptors (grid constants).
template <class T>
struct KernelParams {
  AttnParams p;
  typename T::TmaQ tma_q;
  typename T::TmaK tma_k;
  typename T::TmaV tma_v;
  int walk = 0;                // how CTAs take blocks (launch.hpp: Walk)
  unsigned* tickets = nullptr;  // kDynamic: this launch's counters (tickets.hpp)
};

}  // namespace tessera::attn::sm90ws
