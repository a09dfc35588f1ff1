// Compile-time view of sm90/configs.def: ConfigShape<id> holds one row's tile numbers.
#pragma once

namespace tessera::gemm_impl::sm90 {

template <int Id>
struct ConfigShape;

#define TESSERA_SM90_CONFIG(id, name, bm, bn, bk, stages, cluster_m, cluster_n, throughput, reason) \
  template <>                                                                            \
  struct ConfigShape<id> {                                                               \
    static constexpr int BM = bm, BN = bn, BK = bk, Stages = stages;                     \
    static constexpr int ClusterM = cluster_m, ClusterN = cluster_n;                     \
  };
#include "gemm/sm90/configs.def"
#undef TESSERA_SM90_CONFIG

// Dynamic shared memory of a configuration, in plain C++ for the host table: the A and B rings,
// the fp32 epilogue staging (64 x 40 per consumer warpgroup), the full/empty barriers and the
// split-K flag, rounded to
// the 1024-byte alignment of the storage struct. launch.cuh checks it against sizeof(SharedStorage).
constexpr int smem_bytes_for(int bm, int bn, int bk, int stages) {
  const int bytes = stages * (bm + bn) * bk * 2 + (bm / 64) * 64 * 40 * 4 + stages * 16 + 4;
  return (bytes + 1023) / 1024 * 1024;
}

}  // namespace tessera::gemm_impl::sm90
