// Definition of the sm_90a launcher; included only by the generated instantiation files.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <random>

#include "gemm/launch_batched.hpp"
#include "gemm/schedule.hpp"
#include "gemm/sm90/config_shape.hpp"
#include "gemm/sm90/kernel.cuh"
#include "gemm/sm90/launch.hpp"

namespace tessera::gemm_impl::sm90 {

template <int Cfg, int DT, bool AKMajor, bool BKMajor, bool OneTile = false, bool BlockScales = false>
using TraitsOf = Traits<ConfigShape<Cfg>::BM, ConfigShape<Cfg>::BN, ConfigShape<Cfg>::BK, ConfigShape<Cfg>::Stages,
                        ConfigShape<Cfg>::ClusterM, ConfigShape<Cfg>::ClusterN, ConfigShape<Cfg>::Pingpong, DT, AKMajor,
                        BKMajor, OneTile, BlockScales>;
// The row's one-tile kernel (config_shape.hpp), which runs only the TMA-store epilogue of a 16-bit D
// of the operands' type: none for tf32 and s8 rows.
template <int Cfg, int DT>
constexpr bool has_one_tile() {
  return (DT == kF16 || DT == kBF16) && supports_one_tile(ConfigShape<Cfg>::BM, ConfigShape<Cfg>::BN, ConfigShape<Cfg>::Pingpong);
}
template <class X>
struct TypeTag {
  using type = X;
};

// A's and B's TMA loads fill L2 in 256-byte lines rather than the 128 bytes that CuTe's
// make_tma_copy encodes (fixed there), when the operand's rows start on 256-byte boundaries: a
// K-major box reads 128 bytes of each of its rows, and with 256-byte promotion a miss also brings
// the row's next k-tile, so DRAM serves longer runs (DRAM-bound decode shapes gain; compute-bound
// ones are unchanged). With rows off the 256-byte grid each fill straddles lines the tile does not
// use, which slows it, so those keep 128. The descriptor is opaque: the bits that differ between
// the two promotions are learnt once from the driver's own encoder (a probe tensor encoded both
// ways) and set to their 256-byte values in ours; if the probe cannot be encoded nothing changes.
struct L2Promotion256 {
  std::array<uint8_t, 128> mask{};  // the bits where 128- and 256-byte promotion differ
  std::array<uint8_t, 128> bits{};  // their 256-byte values
};
inline const L2Promotion256& l2_promotion_256() {
  static const L2Promotion256 field = [] {
    L2Promotion256 f;
    alignas(64) CUtensorMap d128{}, d256{};
    static_assert(sizeof(CUtensorMap) == 128 && sizeof(cute::TmaDescriptor) == 128, "TMA descriptor size");
    cuuint64_t dims[2] = {64, 64}, strides[1] = {128};
    cuuint32_t box[2] = {64, 64}, element_strides[2] = {1, 1};
    for (auto [desc, promotion] : {std::pair{&d128, CU_TENSOR_MAP_L2_PROMOTION_L2_128B},
                                   std::pair{&d256, CU_TENSOR_MAP_L2_PROMOTION_L2_256B}}) {
      if (cutlass::call_cuTensorMapEncodeTiled(desc, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, reinterpret_cast<void*>(1 << 20),
                                               dims, strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                               CU_TENSOR_MAP_SWIZZLE_128B, promotion,
                                               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
        return L2Promotion256{};  // empty mask: descriptors stay as CuTe made them
    }
    const auto* a = reinterpret_cast<const uint8_t*>(&d128);
    const auto* b = reinterpret_cast<const uint8_t*>(&d256);
    for (int i = 0; i < 128; ++i) f.mask[i] = a[i] ^ b[i], f.bits[i] = b[i] & f.mask[i];
    return f;
  }();
  return field;
}
// Sets the promotion field to 256 bytes (whatever CuTe encoded there: 128 in CUTLASS 4.2's
// copy_traits_sm90_tma.hpp), for a TMA load of rows `ld` elements apart.
template <class Tma>
void promote_l2_256(Tma& tma, const void* ptr, int64_t ld, int64_t batch_stride, int elem_bytes) {
  if (reinterpret_cast<uintptr_t>(ptr) % 256 != 0 || ld * elem_bytes % 256 != 0 || batch_stride * elem_bytes % 256 != 0)
    return;
  auto* d = reinterpret_cast<uint8_t*>(const_cast<cute::TmaDescriptor*>(tma.get_tma_descriptor()));
  const L2Promotion256& f = l2_promotion_256();
  for (int i = 0; i < 128; ++i) d[i] = uint8_t((d[i] & ~f.mask[i]) | f.bits[i]);
}

// A split-K launch's fold epoch (KernelParams::fold_epoch): a process-wide 64-bit sequence from a
// random start, never 0, so that no launch meets its own value in flags an earlier launch or
// another process left in the same memory.
inline unsigned long long next_fold_epoch() {
  static std::atomic<unsigned long long> epoch{[] {
    std::random_device rd;
    return (static_cast<unsigned long long>(rd()) << 32 ^ rd()) ^
           static_cast<unsigned long long>(std::chrono::steady_clock::now().time_since_epoch().count());
  }()};
  unsigned long long e;
  do e = epoch.fetch_add(1, std::memory_order_relaxed) + 1;
  while (e == 0);
  return e;
}

// Per device, once (a context attribute): the dynamic shared-memory limit of the row's kernels, and
// how many of its clusters fit at once (GPCs may leave SMs a cluster cannot use).
template <int Cfg, int DT, bool AKMajor, bool BKMajor, bool BlockScales>
int prepare(int sm_count) {
  using T = TraitsOf<Cfg, DT, AKMajor, BKMajor, false, BlockScales>;
  using S = ConfigShape<Cfg>;
  static_assert(T::kSmemBytes == smem_bytes_for(S::BM, S::BN, S::BK, S::Stages, S::Pingpong), "host smem formula is stale");
  constexpr bool kHasOneTile = has_one_tile<Cfg, DT>();
  using T1 = TraitsOf<Cfg, DT, AKMajor, BKMajor, kHasOneTile, BlockScales>;
  static_assert(T1::kSmemBytes == T::kSmemBytes, "the one-tile kernel shares the general kernel's shared memory");
  static std::atomic<unsigned long long> configured{0};
  static std::atomic<int> max_clusters[64];
  int dev = 0;
  if (cudaError_t e = cudaGetDevice(&dev); e != cudaSuccess) return -int(e);
  const unsigned long long bit = 1ull << (dev & 63);
  if (configured.load(std::memory_order_acquire) & bit) return max_clusters[dev & 63].load(std::memory_order_relaxed);
  auto* kernel = &gemm_kernel<T>;
  if (cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, T::kSmemBytes);
      e != cudaSuccess)
    return -int(e);
  if constexpr (kHasOneTile) {
    if (cudaError_t e = cudaFuncSetAttribute(&gemm_kernel<T1>, cudaFuncAttributeMaxDynamicSharedMemorySize, T1::kSmemBytes);
        e != cudaSuccess)
      return -int(e);
  }
  int clusters = sm_count / T::kCluster;
  if constexpr (T::kCluster > 1) {
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr = {};
    attr.id = cudaLaunchAttributeClusterDimension;
    attr.val.clusterDim.x = T::kCluster;
    attr.val.clusterDim.y = attr.val.clusterDim.z = 1;
    cfg.gridDim = dim3(unsigned(sm_count / T::kCluster * T::kCluster));
    cfg.blockDim = dim3(T::kThreads);
    cfg.dynamicSmemBytes = T::kSmemBytes;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    if (cudaError_t e = cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg); e != cudaSuccess) return -int(e);
    if (clusters < 1) return -int(cudaErrorLaunchOutOfResources);
  }
  max_clusters[dev & 63].store(clusters, std::memory_order_relaxed);
  configured.fetch_or(bit, std::memory_order_acq_rel);
  return clusters;
}

// Carries out the plan's Launch (gemm/launch_plan.cpp decided every choice; prepare() ran).
template <int Cfg, int DT, bool AKMajor, bool BKMajor, bool BlockScales>
cudaError_t launch(const GemmParams& p, const Launch& l, cudaStream_t stream) {
  using T = TraitsOf<Cfg, DT, AKMajor, BKMajor, false, BlockScales>;
  using S = ConfigShape<Cfg>;
  constexpr bool kHasOneTile = has_one_tile<Cfg, DT>();
  using T1 = TraitsOf<Cfg, DT, AKMajor, BKMajor, kHasOneTile, BlockScales>;
  constexpr TileShape kShape{S::BM, S::BN, T::BK, S::ClusterM, S::ClusterN};  // T::BK: the dtype's k-tile

  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attrs[2] = {};
  attrs[0].id = cudaLaunchAttributeClusterDimension;
  attrs[0].val.clusterDim.x = T::kCluster;  // 1-D: the kernel reads its rank as along M or N
  attrs[0].val.clusterDim.y = 1;
  attrs[0].val.clusterDim.z = 1;
  // Programmatic dependent launch: after a kernel that allows it (this one does, kernel.cuh), this
  // grid launches early and overlaps its launch and set-up with that kernel's tail; its CTAs wait
  // for the kernel's completion before touching global memory.
  attrs[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attrs[1].val.programmaticStreamSerializationAllowed = 1;
  cfg.blockDim = dim3(T::kThreads);
  cfg.dynamicSmemBytes = T::kSmemBytes;
  cfg.stream = stream;
  cfg.attrs = attrs;
  cfg.numAttrs = l.dependent_launch ? 2 : 1;

  return launch_batched(p, DT, [&](const GemmParams& q) {
    Grid g;
    grid_of(kShape, q.m, q.n, q.k, q.batch, l.splits, l.stream_k, l.clusters, &g);  // the plan checked it
    auto go = [&](auto kernel_tag) {
      using TT = typename decltype(kernel_tag)::type;
      KernelParams<TT> kp{q,  TT::make_tma_a(q), TT::make_tma_b(q), {}, {}, {}, {}, l.epi_mode, g.sched, nullptr, nullptr, nullptr,
                         nullptr, int(g.tiles_m), int(g.tiles_n), make_raster(int(g.tiles_mc), int(g.tiles_nc)), 0, 0,
                         0, nullptr, 0, TT::kPromote && l.promote};
      if constexpr (TT::kL2Warm) (q.m > q.n ? kp.prefetch_a : kp.prefetch_b) = l.l2_warm;  // the weights
      promote_l2_256(kp.tma_a, q.a, q.lda, q.batch_stride_a, sizeof(typename TT::Element));
      promote_l2_256(kp.tma_b, q.b, q.ldb, q.batch_stride_b, sizeof(typename TT::Element));
      if (kp.epi_mode == kEpiTma) {
        const bool col = q.epi.d_col_major, with_c = q.epi.beta != 0.0f;
        if (col) kp.tma_dt = TT::make_tma_dt(q);
        else kp.tma_d = TT::make_tma_d(q);
        if (with_c && col) kp.tma_ct = TT::make_tma_ct(q);
        if (with_c && !col) kp.tma_c = TT::make_tma_c(q);
      }
      if (l.splits > 1) {
        // Layout of gemm_impl::splitk_bytes: partial tiles, then the ranges' sign-in (KernelParams::
        // fold_parallel and fold_epoch): flags raised to this launch's epoch, nothing to clear, or a
        // counter per tile, zeroed here (a caller's workspace arrives with anything in it).
        kp.partials = static_cast<float*>(l.workspace);
        void* const sync = kp.partials + g.tiles * l.splits * T::BM * T::BN;
        kp.fold_parallel = l.fold_parallel;
        cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;  // a graph replays one epoch
        if (cudaError_t e = cudaStreamIsCapturing(stream, &capture); e != cudaSuccess) return e;
        if (kp.fold_parallel && capture == cudaStreamCaptureStatusNone) {
          kp.fold_flags = static_cast<unsigned long long*>(sync);
          kp.fold_epoch = next_fold_epoch();
        } else {
          kp.counters = static_cast<unsigned*>(sync);
          if (cudaError_t e = cudaMemsetAsync(kp.counters, 0, g.tiles * sizeof(unsigned), stream); e != cudaSuccess)
            return e;
        }
      } else if (g.sched.sk_units > 0) {
        // One partial tile per CTA of the grid, then one flag per CTA: within gemm_impl::streamk_bytes,
        // which sizes both for one CTA per SM.
        const long long slots = g.workers * T::kCluster;
        kp.sk_partials = static_cast<float*>(l.workspace);
        kp.sk_flags = reinterpret_cast<int*>(kp.sk_partials + slots * T::BM * T::BN);
        if (cudaError_t e = cudaMemsetAsync(kp.sk_flags, 0, slots * sizeof(int), stream); e != cudaSuccess) return e;
      }
      cfg.gridDim = TT::kOneTile ? dim3(unsigned(g.tiles_nc * T::kCluster), unsigned(g.tiles_mc), unsigned(q.batch))
                                 : dim3(unsigned(g.workers * T::kCluster));
      return cudaLaunchKernelEx(&cfg, &gemm_kernel<TT>, kp);
    };
    if constexpr (kHasOneTile) {
      if (l.one_tile) return go(TypeTag<T1>{});
    }
    return go(TypeTag<T>{});
  });
}

}  // namespace tessera::gemm_impl::sm90
