// Bank-conflict freedom of the REAL shared-memory accesses of the sm_80 kernel: the TiledCopy
// objects of Traits (gemm/sm80/kernel.cuh) partition a host tensor that holds, at every element,
// its own offset; each thread's partition then lists the smem offsets it would write (cp.async,
// GmemCopyA/B) or read (ldmatrix, make_tiled_copy_A/B of SmemCopyAtomA/B) - exactly as the kernel
// computes them. Host code only (compiled by nvcc because kernel.cuh is CUDA); no GPU needed.
//
// A 16-byte access phase is 8 threads: ldmatrix.x4 takes the 8 row addresses of one 8x8 matrix from
// threads 8j..8j+7 of a warp; 16-byte stores are served a quarter-warp (8 consecutive lanes) at a
// time. Conflict-free iff the 8 slots (byte_offset / 16) % 8 differ (see smem_layouts.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "gemm/configs.hpp"
#include "gemm/sm80/config_shape.hpp"
#include "gemm/sm80/kernel.cuh"
#include "gemm/sm80/launch.hpp"

namespace {

namespace ti = tessera::gemm_impl;
namespace sm80 = ti::sm80;
using namespace cute;

constexpr int kConfigIds[] = {
#define TESSERA_SM80_CONFIG(id, ...) id,
#include "gemm/sm80/configs.def"
#undef TESSERA_SM80_CONFIG
};
constexpr int kNumConfigs = int(sizeof(kConfigIds) / sizeof(kConfigIds[0]));

constexpr int smem_formula(int bm, int bn, int bk, int stages) {
  return std::max(stages * (bm + bn) * bk * 2, bm * (bn + 8) * 4);
}

struct Result {
  int phases = 0, conflicted = 0, worst = 0;
  std::string error;  // first structural problem or conflict
};

// Partitions `offsets` (a tensor whose element i holds i, viewed through the smem layout) with
// every thread of `tiled`, and checks each 16-byte access and each 8-thread phase.
template <bool Source, class Tiled, class Tensor_>
Result check_accesses(const Tiled& tiled, const Tensor_& offsets, int threads, bool coverage) {
  Result res;
  // per thread: the first offset of each 8-element (16-byte) vector, in partition order
  std::vector<std::vector<int>> starts(threads);
  std::vector<int> hits(size_t(cosize(offsets.layout())), 0);
  for (int tid = 0; tid < threads; ++tid) {
    auto thr = tiled.get_slice(tid);
    auto t = [&] {
      if constexpr (Source) return thr.partition_S(offsets);  // (CPY,CPY_M,CPY_K,PIPE) -> offset
      else return thr.partition_D(offsets);                    // (CPY,CPY_M,CPY_K,PIPE) -> offset
    }();
    const int cpy = int(size<0>(t));
    const int n = int(size(t));
    if (cpy % 8 != 0) {
      res.error = "copy vector of " + std::to_string(cpy) + " elements is not a multiple of 8";
      return res;
    }
    for (int i = 0; i < n; i += 8) {
      const int base = t(i);
      if (base % 8 != 0 && res.error.empty())
        res.error = "thread " + std::to_string(tid) + ": vector at " + std::to_string(base) + " not 16-byte aligned";
      for (int e = 0; e < 8; ++e) {
        if (t(i + e) != base + e && res.error.empty())
          res.error = "thread " + std::to_string(tid) + ": vector at " + std::to_string(base) + " not contiguous";
        ++hits[size_t(t(i + e))];
      }
      starts[tid].push_back(base);
    }
  }
  if (coverage)
    for (size_t i = 0; i < hits.size(); ++i)
      if (hits[i] != 1 && res.error.empty())
        res.error = "smem element " + std::to_string(i) + " written " + std::to_string(hits[i]) + " times";
  // Phases: 8 consecutive lanes, the same access index.
  for (int t0 = 0; t0 < threads; t0 += 8) {
    const size_t accesses = starts[t0].size();
    for (int i = 1; i < 8; ++i)
      if (starts[t0 + i].size() != accesses) {
        res.error = "threads of a phase make different numbers of accesses";
        return res;
      }
    for (size_t a = 0; a < accesses; ++a) {
      int count[8] = {};
      int worst = 0;
      for (int i = 0; i < 8; ++i) worst = std::max(worst, ++count[(starts[t0 + i][a] * 2 / 16) % 8]);
      ++res.phases;
      res.worst = std::max(res.worst, worst);
      if (worst > 1) {
        if (!res.conflicted && res.error.empty()) {
          res.error = "threads " + std::to_string(t0) + "..+7 access " + std::to_string(a) + ": slots";
          for (int i = 0; i < 8; ++i) res.error += " " + std::to_string((starts[t0 + i][a] * 2 / 16) % 8);
        }
        ++res.conflicted;
      }
    }
  }
  return res;
}

template <class Layout>
std::vector<int> iota_buffer(const Layout& layout) {
  std::vector<int> v(size_t(cosize(layout)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = int(i);
  return v;
}

template <int Id, int DT, bool AK, bool BK>
void check_traits() {
  using S = sm80::ConfigShape<Id>;
  using T = sm80::Traits<S::BM, S::BN, S::BK, S::Stages, S::WarpsM, S::WarpsN, DT, AK, BK>;
  const std::string what = "config " + std::to_string(Id) + (DT == ti::kF16 ? " f16" : " bf16") + " A " +
                           (AK ? "K-major" : "M-major") + " B " + (BK ? "K-major" : "N-major");
  SCOPED_TRACE(what);

  // Shared memory size: the kernel's, the table's and dispatch.cpp's agree.
  static_assert(T::kSmemBytes == smem_formula(S::BM, S::BN, S::BK, S::Stages), "kernel smem vs configs.def formula");
  const ti::Config* cfg = nullptr;
  for (const ti::Config& c : ti::configs())
    if (c.kernel == ti::Kernel::Sm80 && c.id == Id) cfg = &c;
  ASSERT_NE(cfg, nullptr);
  EXPECT_EQ(cfg->smem_bytes, T::kSmemBytes);
  EXPECT_EQ(sm80::smem_bytes(Id), T::kSmemBytes);
  EXPECT_EQ(cfg->bm, S::BM);
  EXPECT_EQ(cfg->bn, S::BN);
  EXPECT_EQ(cfg->bk, S::BK);
  EXPECT_EQ(cfg->stages, S::Stages);
  EXPECT_EQ(cfg->warps, S::WarpsM * S::WarpsN);
  EXPECT_EQ(int(cosize_v<typename T::SmemLayoutA>), S::BM * S::BK * S::Stages);
  EXPECT_EQ(int(cosize_v<typename T::SmemLayoutB>), S::BN * S::BK * S::Stages);

  auto buf_a = iota_buffer(typename T::SmemLayoutA{});
  auto buf_b = iota_buffer(typename T::SmemLayoutB{});
  Tensor sA = make_tensor(buf_a.data(), typename T::SmemLayoutA{});  // (BM,BK,PIPE) -> offset
  Tensor sB = make_tensor(buf_b.data(), typename T::SmemLayoutB{});  // (BN,BK,PIPE) -> offset
  const int threads = T::kThreads;

  // gmem -> smem cp.async stores: conflict-free, and together they fill every stage exactly once.
  typename T::GmemCopyA g2s_a;
  typename T::GmemCopyB g2s_b;
  ASSERT_EQ(int(size(g2s_a)), threads);
  for (auto [name, r] : {std::pair<const char*, Result>{"cp.async A", check_accesses<false>(g2s_a, sA, threads, true)},
                         {"cp.async B", check_accesses<false>(g2s_b, sB, threads, true)}}) {
    SCOPED_TRACE(name);
    EXPECT_GT(r.phases, 0);
    EXPECT_EQ(r.conflicted, 0);
    EXPECT_EQ(r.error, "");
  }

  // smem -> registers ldmatrix reads.
  typename T::TiledMma mma;
  ASSERT_EQ(int(size(mma)), threads);
  auto s2r_a = make_tiled_copy_A(typename T::SmemCopyAtomA{}, mma);
  auto s2r_b = make_tiled_copy_B(typename T::SmemCopyAtomB{}, mma);
  for (auto [name, r] : {std::pair<const char*, Result>{"ldmatrix A", check_accesses<true>(s2r_a, sA, threads, false)},
                         {"ldmatrix B", check_accesses<true>(s2r_b, sB, threads, false)}}) {
    SCOPED_TRACE(name);
    EXPECT_GT(r.phases, 0);
    EXPECT_EQ(r.conflicted, 0);
    EXPECT_EQ(r.error, "");
  }

  // Negative control: the same ldmatrix partitions of the unswizzled layouts conflict.
  const auto plain_a = tile_to_shape(sm80::SmemAtom<AK, S::BK>{}.layout_b(),
                                     Shape<Int<S::BM>, Int<S::BK>, Int<S::Stages>>{});
  auto buf_pa = iota_buffer(plain_a);
  const Result bad = check_accesses<true>(s2r_a, make_tensor(buf_pa.data(), plain_a), threads, false);
  EXPECT_GT(bad.conflicted, 0) << "unswizzled A should conflict";
}

template <int I>
void check_config() {
  constexpr int Id = kConfigIds[I];
  check_traits<Id, ti::kF16, true, true>();
  check_traits<Id, ti::kF16, true, false>();
  check_traits<Id, ti::kF16, false, true>();
  check_traits<Id, ti::kF16, false, false>();
  check_traits<Id, ti::kBF16, true, false>();
  check_traits<Id, ti::kBF16, false, true>();
}

template <int... I>
void check_all(std::integer_sequence<int, I...>) {
  (check_config<I>(), ...);
}

TEST(SwizzleKernel, RealCopyPartitionsOfEveryConfig) {
  ASSERT_GT(kNumConfigs, 0);
  check_all(std::make_integer_sequence<int, kNumConfigs>{});
}

}  // namespace
