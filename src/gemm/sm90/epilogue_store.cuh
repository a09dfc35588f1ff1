// The Hopper GEMM's 16-bit epilogue (seed 003), for 16-bit operands' D and fp8 operands' bf16 D:
// each consumer warpgroup converts its 64 x BN rows to D's type in swizzled 64 x kStoreN sub-tiles
// of its staging buffer (a column-major D: transposed kStoreNT x 64 ones, by stmatrix.trans) and
// one thread stores each by TMA, which clips the ragged edges; the previous tile's last stores
// drain under this tile's mainloop. beta * C arrives by TMA in the sub-tile D then leaves from.
// EpiMode kEpiDirect writes the same sub-tiles with 16-byte stores instead (a D that TMA cannot
// describe).
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>

#include "gemm/epilogue/epilogue.cuh"
#include "gemm/sm90/launch.hpp"
#include "gemm/sm90/mainloop.cuh"
#include "gemm/sm90/params.cuh"

namespace tessera::gemm_impl::sm90 {

// Two fp32 values rounded to a 16-bit pair, `lo` in the low half (one cvt; going through an
// Element[2] array and a pointer cast left an 8-byte stack frame in the 128x128 kernel).
template <class Element>
CUTE_DEVICE uint32_t pack_pair(float lo, float hi) {
  uint32_t r;
  if constexpr (std::is_same_v<Element, cute::bfloat16_t>) asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  else asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// act() of 8 values rounded to 4 16-bit pairs (lo.x|lo.y, lo.z|lo.w, hi.x|hi.y, hi.z|hi.w), out of line
// (epilogue.cuh, activate_out_of_line): one call per two 8-column chunks of the TMA-store epilogue.
template <class Element>
static __device__ __noinline__ uint4 activate8_packed_out_of_line(int act, float4 lo, float4 hi) {
  activate_all(act, lo, hi);
  return make_uint4(pack_pair<Element>(lo.x, lo.y), pack_pair<Element>(lo.z, lo.w), pack_pair<Element>(hi.x, hi.y),
                    pack_pair<Element>(hi.z, hi.w));
}

// A 16-bit pair (as pack_pair lays it out: `lo` in the low half) -> two fp32 values.
template <class Element>
CUTE_DEVICE float2 unpack_pair(uint32_t pair) {
  if constexpr (std::is_same_v<Element, cute::bfloat16_t>) return make_float2(__uint_as_float(pair << 16), __uint_as_float(pair & 0xffff0000u));
  else return __half22float2(*reinterpret_cast<const __half2*>(&pair));
}

// D leaves by TMA store (EpiMode kEpiTma; always in the one-tile kernel). Evaluated where used: the
// mode is re-read from the parameters rather than held across the mainloop.
template <class T>
CUTE_DEVICE bool stores_by_tma(KernelParams<T> const& p) {
  return T::kOneTile || p.epi_mode == kEpiTma;
}

// One tile's 16-bit epilogue for one consumer warpgroup. Per 64 x kStoreN sub-tile, in buffer
// sub % kEpiBuffers: wait until the TMA store that last read that buffer is done (with two buffers
// the previous sub-tile's store runs while this one is written), write the fragment as 16-bit
// pairs, make the writes visible to the async proxy, and let one thread issue the store. A
// column-major D (d_col_major) goes the same way through transposed kStoreNT x 64 sub-tiles
// (T::SmemLayoutDT) and D^T's TMA descriptor.
template <class T>
struct Store16 {
  using Element = typename T::DElement;
  static constexpr int BN = T::BN, kSubElems = 64 * T::kStoreN;

  KernelParams<T> const& p;
  typename T::SharedStorage& smem;
  ConsumerThread<T> const& me;
  const TileCoord& c;
  const EpilogueParams& e;
  bool with_c;         // beta * C (only on the TMA path: epilogue_mode)
  bool extras;         // bias, activation or C: the slower of fill's two copies
  int row_in_wg, m_base;
  const Element* bias;  // bias (D's type here), this batch's
  bool bias_per_col;
  float bias_row[2] = {0.0f, 0.0f};  // a per-row bias: this thread's two rows
  // fp8 operands: alpha times this thread's two rows' factors (the tensor scales' product for both
  // rows, or the row-wise ones), and the per-column factors (null: tensor scales or none).
  float scale_row[2] = {0.0f, 0.0f};
  const float* scale_col = nullptr;

  // Bias and activation: the bias values are loaded together up front (one dependent load per
  // element would serialise their latency), the activation a call per 8 values.
  __device__ __forceinline__ Store16(KernelParams<T> const& p_, typename T::SharedStorage& smem_,
                                     ConsumerThread<T> const& me_, const TileCoord& c_)
      : p(p_), smem(smem_), me(me_), c(c_), e(p_.g.epi) {
    with_c = !T::kOneTile && e.beta != 0.0f;
    row_in_wg = 16 * me.wg_warp() + me.lane / 4;
    m_base = c.m * T::BM + me.wg_row0();
    if constexpr (T::kFp8) {
      const GemmParams& g = p.g;
      if (g.scale_m && g.scale_step) {
        scale_col = g.scale_n;
        CUTE_UNROLL
        for (int h = 0; h < 2; ++h) {
          const int m = m_base + row_in_wg + 8 * h;
          scale_row[h] = m < g.m ? e.alpha * g.scale_m[m] : 0.0f;
        }
      } else {
        scale_row[0] = scale_row[1] = g.scale_m ? e.alpha * g.scale_m[0] * g.scale_n[0] : e.alpha;
      }
    }
    extras = !T::kOneTile && (has_bias_or_activation(e) || with_c);
    bias = T::kOneTile ? nullptr : static_cast<const Element*>(e.bias);
    if (bias) bias += c.l * e.batch_stride_bias;
    bias_per_col = bias && e.bias_stride_n != 0;
    if (bias && !bias_per_col) {
      CUTE_UNROLL
      for (int h = 0; h < 2; ++h) {
        const int m = m_base + row_in_wg + 8 * h;
        if (m < p.g.m) bias_row[h] = float(bias[int64_t(m) * e.bias_stride_m]);
      }
    }
  }

  // Sub-tile `sub`'s buffer: (64,kStoreN) swizzled 16-bit, the same bytes as the transposed
  // (kStoreNT,64) one (several of them only where kStoreNT is kStoreN: the same buffers), and as a
  // 32-bit shared address (T::store_offset, T::store_offset_t).
  __device__ __forceinline__ Element* buffer_ptr(int sub) const {
    return reinterpret_cast<Element*>(me.epi()) + (sub % T::kEpiBuffers) * kSubElems;
  }
  __device__ __forceinline__ auto buffer(int sub) const { return make_tensor(make_smem_ptr(buffer_ptr(sub)), typename T::SmemLayoutD{}); }
  __device__ __forceinline__ auto buffer_t(int sub) const { return make_tensor(make_smem_ptr(buffer_ptr(sub)), typename T::SmemLayoutDT{}); }
  __device__ __forceinline__ uint32_t buffer_addr(int sub) const {
    return cute::cast_smem_ptr_to_uint(me.epi()) + uint32_t((sub % T::kEpiBuffers) * kSubElems * sizeof(Element));
  }

  // The whole tile: row-major, or D^T's sub-tiles where the kernel flips and D is column-major.
  template <class Acc>
  __device__ __forceinline__ void run(Acc& acc, uint32_t& c_phase) {
    if constexpr (T::kFlip) {
      if (e.d_col_major) store_tile(acc, c_phase, cute::true_type{});
      else store_tile(acc, c_phase, cute::false_type{});
    } else {
      store_tile(acc, c_phase, cute::false_type{});
    }
  }

  template <class Acc, class ColC>
  __device__ __forceinline__ void store_tile(Acc& acc, uint32_t& c_phase, ColC) {
    constexpr bool kCol = ColC::value;
    constexpr int kSub = kCol ? T::kStoreNT : T::kStoreN;
    const GemmParams& g = p.g;
    TESSERA_SM90_PROBE_EPI(0)
    CUTE_UNROLL
    for (int sub = 0; sub < BN / kSub; ++sub) {
      if (stores_by_tma(p) && me.wtid() == 0) {
        if (sub == 0) tma_store_wait<0>();  // a tile may end on either buffer: all of them free
        else tma_store_wait<T::kEpiBuffers - 1>();
      }
      cutlass::arch::NamedBarrier::arrive_and_wait(128, me.epi_barrier());  // the buffer is free
      TESSERA_SM90_PROBE_EPI(1 + 2 * sub)
      const int mb = m_base / 64, nb = (c.n * BN) / kSub + sub;  // the sub-tile's coordinates
      if (with_c) {
        load_c<kCol>(sub, mb, nb, c_phase);
      }
      if (extras) fill(acc, sub, cute::true_type{}, ColC{});
      else fill(acc, sub, cute::false_type{}, ColC{});
      if (stores_by_tma(p)) {
        tma_store_fence();
        cutlass::arch::NamedBarrier::arrive_and_wait(128, me.epi_barrier());
        TESSERA_SM90_PROBE_EPI(2 + 2 * sub)
        if (me.wtid() == 0 && m_base < g.m && c.n * BN + sub * kSub < g.n) {  // boxes wholly outside D: none
          if constexpr (kCol) {
            Tensor mDT = p.tma_dt.get_tma_tensor(make_shape(g.n, g.m, g.batch));  // (N,M,L)
            Tensor tDgDT = p.tma_dt.get_slice(0).partition_D(
                local_tile(mDT, Shape<Int<T::kStoreNT>, _64>{}, make_coord(_, _, _)));  // (TMA,1,1,n,m,l)
            copy(p.tma_dt, p.tma_dt.get_slice(0).partition_S(buffer_t(sub)), tDgDT(_, _, _, nb, mb, c.l));
          } else {
            Tensor mD = p.tma_d.get_tma_tensor(make_shape(g.m, g.n, g.batch));  // (M,N,L)
            Tensor tDgD = p.tma_d.get_slice(0).partition_D(
                local_tile(mD, Shape<_64, Int<T::kStoreN>>{}, make_coord(_, _, _)));  // (TMA,1,1,m,n,l)
            copy(p.tma_d, p.tma_d.get_slice(0).partition_S(buffer(sub)), tDgD(_, _, _, mb, nb, c.l));
          }
          tma_store_arrive();
        }
        if (sub < 2) { TESSERA_SM90_PROBE_EPI(13 + sub) }
      } else if constexpr (!kCol) {
        cutlass::arch::NamedBarrier::arrive_and_wait(128, me.epi_barrier());
        store_direct(sub);
      }
    }
  }

  // C's sub-tile (mb, nb) by TMA into the buffer D's sub-tile then leaves from; waits until it has
  // landed (a box past D's edge loads zeros and still counts its bytes).
  template <bool kCol>
  __device__ __forceinline__ void load_c(int sub, int mb, int nb, uint32_t& c_phase) {
    constexpr int kSub = kCol ? T::kStoreNT : T::kStoreN;
    const GemmParams& g = p.g;
    uint64_t* const landed = &smem.c_full[me.warp_group() - 1];
    if (me.wtid() == 0) {
      FullBarrier::arrive_and_expect_tx(landed, uint32_t(64 * kSub * sizeof(Element)));
      const int lc = e.batch_stride_c ? g.batch : 1, lcl = e.batch_stride_c ? c.l : 0;
      if constexpr (kCol) {
        Tensor gCT = local_tile(p.tma_ct.get_tma_tensor(make_shape(g.n, g.m, lc)), Shape<Int<kSub>, _64>{},
                                make_coord(_, _, _));  // (kStoreNT,64,n,m,l)
        copy(p.tma_ct.with(*landed), p.tma_ct.get_slice(0).partition_S(gCT)(_, _, _, nb, mb, lcl),
             p.tma_ct.get_slice(0).partition_D(buffer_t(sub)));
      } else {
        Tensor gC = local_tile(p.tma_c.get_tma_tensor(make_shape(g.m, g.n, lc)), Shape<_64, Int<T::kStoreN>>{},
                               make_coord(_, _, _));  // (64,kStoreN,m,n,l)
        copy(p.tma_c.with(*landed), p.tma_c.get_slice(0).partition_S(gC)(_, _, _, mb, nb, lcl),
             p.tma_c.get_slice(0).partition_D(buffer(sub)));
      }
    }
    FullBarrier::wait(landed, c_phase);
    c_phase ^= 1;
  }

  // EpiMode kEpiDirect: the row-major sub-tile from the buffer to D, 64 rows x kStoreN / 8 chunks
  // of 16 bytes; consecutive threads write one row's chunks.
  __device__ __forceinline__ void store_direct(int sub) const {
    const GemmParams& g = p.g;
    Element* const d = static_cast<Element*>(e.d) + c.l * e.batch_stride_d;
    CUTE_UNROLL
    for (int it = 0; it < 64 * (T::kStoreN / 8) / 128; ++it) {
      const int idx = it * 128 + me.wtid(), r = idx / (T::kStoreN / 8), q = idx % (T::kStoreN / 8);
      const int m = m_base + r, n = c.n * BN + sub * T::kStoreN + 8 * q;
      if (m >= g.m || n >= g.n) continue;
      uint4 chunk;
      asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(chunk.x), "=r"(chunk.y), "=r"(chunk.z), "=r"(chunk.w)
                   : "r"(buffer_addr(sub) + T::store_offset(r, 8 * q))
                   : "memory");
      Element* const dst = d + int64_t(m) * e.ldd + n;
      if (n + 8 <= g.n && e.d_vec) {
        *reinterpret_cast<uint4*>(dst) = chunk;
      } else {
        const Element* const v = reinterpret_cast<const Element*>(&chunk);
        CUTE_UNROLL
        for (int i = 0; i < 8; ++i)
          if (n + i < g.n) dst[i] = v[i];
      }
    }
  }

  // Each thread's fragment -> 16-bit pairs in the swizzled sub-tile. Two copies, so that the common
  // one (no bias, no activation) stays a multiply and a convert per element. kCol: the transposed
  // sub-tile (kSub = kStoreNT columns), else a row-major one (kStoreN).
  template <class Acc, class WithExtras, class ColC>
  __device__ __forceinline__ void fill(Acc& acc, int sub, WithExtras, ColC) const {
    constexpr bool kExtras = WithExtras::value, kCol = ColC::value;
    constexpr int kSub = kCol ? T::kStoreNT : T::kStoreN;
    const int lane = me.lane;
    // Row-major sub-tile: this thread's first pair (row_in_wg, 2 * (lane % 4)). Its other pairs
    // lie at jj * 8 columns (the swizzled 16-byte chunk: XOR jj << 4 on a 1024-byte-aligned
    // buffer) and 8 rows further (+ 8 rows, the same swizzle): one LOP3 per two stores, and no
    // per-pair addresses for the compiler to hoist (they spilled the 128x128 kernel at 168 regs).
    const uint32_t sD = buffer_addr(sub) + T::store_offset(row_in_wg, 2 * (lane % 4));
    auto pair_addr = [&](int jj, int h) { return (sD ^ (jj << 4)) + h * T::kStoreRowBytes * 8; };
    // Transposed sub-tile: stmatrix / ldmatrix .x4.trans move this warp's 8 x 8 blocks (chunk jj + q,
    // rows + 8h) as matrix 2q + h; lane l addresses row l % 8 of matrix l / 8, i.e. D's column
    // 8 (jj + q) + l % 8, rows 16 wg_warp + 8h ... + 7 (16 bytes). Chunk pair jj is jj * 1024 on.
    const uint32_t sT =
        buffer_addr(sub) + T::store_offset_t(16 * me.wg_warp() + 8 * ((lane / 8) % 2), 8 * (lane / 16) + lane % 8);
    // A per-column bias: this thread's 2 * kSub / 8 columns, loaded up front (see the constructor);
    // three warpgroups (152 registers) load each chunk pair's four in the loop below (all of them up
    // front spilled the 192x192 tile).
    float bias_col[kSub / 8][2] = {};
    // fp8 row-wise scales: the columns' factors (1 without them), up front, or per chunk pair where
    // registers are short (three warpgroups; 128 accumulators of a 128x256 tile: up front spilled).
    constexpr bool kScalesPerPair = T::kConsumers == 3 || BN >= 256;
    float scale_c[kSub / 8][2];
    CUTE_UNROLL
    for (int jj = 0; jj < kSub / 8; ++jj) scale_c[jj][0] = scale_c[jj][1] = 1.0f;
    if constexpr (T::kFp8 && !kScalesPerPair) {
      if (scale_col) {
        CUTE_UNROLL
        for (int jj = 0; jj < kSub / 8; ++jj) {
          CUTE_UNROLL
          for (int cc = 0; cc < 2; ++cc) {
            const int n = c.n * BN + sub * kSub + 8 * jj + 2 * (lane % 4) + cc;
            if (n < p.g.n) scale_c[jj][cc] = scale_col[n];
          }
        }
      }
    }
    if constexpr (kExtras && T::kConsumers < 3) {
      if (bias_per_col) {
        CUTE_UNROLL
        for (int jj = 0; jj < kSub / 8; ++jj) {
          CUTE_UNROLL
          for (int cc = 0; cc < 2; ++cc) {
            const int n = c.n * BN + sub * kSub + 8 * jj + 2 * (lane % 4) + cc;
            if (n < p.g.n) bias_col[jj][cc] = float(bias[int64_t(n) * e.bias_stride_n]);
          }
        }
      }
    }
    // Two 8-column chunks at a time: this thread's 8 values of them (2 chunks x 2 rows x 2 columns).
    CUTE_UNROLL
    for (int jj = 0; jj < kSub / 8; jj += 2) {
      // C's pairs where D's go (the sub-tile's TMA load has landed): transposed, all four by one
      // ldmatrix up front; row-major, one load per pair where it is added (four live registers
      // spilled the three-warpgroup tiles).
      uint32_t cpk[2][2] = {};  // [chunk][h]
      if constexpr (kExtras) {
        if (with_c && kCol)
          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                       : "=r"(cpk[0][0]), "=r"(cpk[0][1]), "=r"(cpk[1][0]), "=r"(cpk[1][1])
                       : "r"(sT + jj * 1024)
                       : "memory");
      }
      if constexpr (T::kFp8 && kScalesPerPair) {
        if (scale_col) {
          CUTE_UNROLL
          for (int q = 0; q < 2; ++q) {
            CUTE_UNROLL
            for (int cc = 0; cc < 2; ++cc) {
              const int n = c.n * BN + sub * kSub + 8 * (jj + q) + 2 * (lane % 4) + cc;
              if (n < p.g.n) scale_c[jj + q][cc] = scale_col[n];
            }
          }
        }
      }
      if constexpr (kExtras && T::kConsumers == 3) {
        if (bias_per_col) {
          CUTE_UNROLL
          for (int q = 0; q < 2; ++q) {
            CUTE_UNROLL
            for (int cc = 0; cc < 2; ++cc) {
              const int n = c.n * BN + sub * kSub + 8 * (jj + q) + 2 * (lane % 4) + cc;
              if (n < p.g.n) bias_col[jj + q][cc] = float(bias[int64_t(n) * e.bias_stride_n]);
            }
          }
        }
      }
      float v[2][2][2];  // [chunk][h][cc]: columns 8 * (jj + chunk) + cc, rows +0 / +8
      CUTE_UNROLL
      for (int q = 0; q < 2; ++q) {
        const int j = sub * (kSub / 8) + jj + q;
        CUTE_UNROLL
        for (int h = 0; h < 2; ++h) {
          CUTE_UNROLL
          for (int cc = 0; cc < 2; ++cc) {
            if constexpr (T::kFp8) v[q][h][cc] = scale_row[h] * scale_c[jj + q][cc] * acc(4 * j + 2 * h + cc);
            else v[q][h][cc] = e.alpha * acc(4 * j + 2 * h + cc);
            if constexpr (kExtras) v[q][h][cc] += bias_row[h] + bias_col[jj + q][cc];
          }
          if constexpr (kExtras) {
            if (with_c) {
              uint32_t cp = cpk[q][h];
              if (!kCol) asm volatile("ld.shared.b32 %0, [%1];" : "=r"(cp) : "r"(pair_addr(jj + q, h)) : "memory");
              const float2 cf = unpack_pair<Element>(cp);
              v[q][h][0] += e.beta * cf.x, v[q][h][1] += e.beta * cf.y;
            }
          }
        }
      }
      uint32_t packed[2][2];  // [chunk][h]
      if (kExtras && e.activation != kActNone && T::kConsumers == 3) {
        // One value a call: three warpgroups' 152 registers spilled 12 bytes with more values
        // across one call.
        CUTE_UNROLL
        for (int q = 0; q < 2; ++q)
          CUTE_UNROLL
          for (int h = 0; h < 2; ++h)
            packed[q][h] = pack_pair<Element>(activate_out_of_line(e.activation, v[q][h][0]),
                                              activate_out_of_line(e.activation, v[q][h][1]));
      } else if (kExtras && e.activation != kActNone) {
        const uint4 a = activate8_packed_out_of_line<Element>(
            e.activation, make_float4(v[0][0][0], v[0][0][1], v[0][1][0], v[0][1][1]),
            make_float4(v[1][0][0], v[1][0][1], v[1][1][0], v[1][1][1]));
        packed[0][0] = a.x, packed[0][1] = a.y, packed[1][0] = a.z, packed[1][1] = a.w;
      } else {
        CUTE_UNROLL
        for (int q = 0; q < 2; ++q)
          CUTE_UNROLL
          for (int h = 0; h < 2; ++h) packed[q][h] = pack_pair<Element>(v[q][h][0], v[q][h][1]);
      }
      if constexpr (kCol) {
        asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};"
                     ::"r"(sT + jj * 1024), "r"(packed[0][0]), "r"(packed[0][1]), "r"(packed[1][0]), "r"(packed[1][1])
                     : "memory");
      } else {
        CUTE_UNROLL
        for (int q = 0; q < 2; ++q)
          CUTE_UNROLL
          for (int h = 0; h < 2; ++h)
            asm volatile("st.shared.b32 [%0], %1;" ::"r"(pair_addr(jj + q, h)), "r"(packed[q][h]) : "memory");
      }
    }
  }
};

}  // namespace tessera::gemm_impl::sm90
