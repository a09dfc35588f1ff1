// Division by a launch constant as one multiply-high, an add and a shift (Granlund and Montgomery's
// round-up multiplier), made once on the host. The GPU has no integer divider: `n / d` by a value it
// only knows at run time is a ~20-instruction dependent chain (I2F, MUFU.RCP, fix-ups), which the
// persistent GEMM's walk and raster paid on the critical path into every tile.
// Exact for 0 <= n < 2^31 and 1 <= d < 2^31 (tests/cpu/test_fast_div.cpp checks it against `/`).
#pragma once

#include <cstdint>

#include "core/host_device.hpp"

namespace tessera {

struct FastDiv {
  int d = 1;         // the divisor
  unsigned mul = 1;  // floor(2^32 (2^shift - d) / d) + 1
  int shift = 0;     // ceil(log2(d))

  FastDiv() = default;
  explicit FastDiv(int divisor) : d(divisor < 1 ? 1 : divisor) {
    while ((int64_t(1) << shift) < d) ++shift;
    mul = unsigned(((uint64_t(1) << 32) * ((uint64_t(1) << shift) - uint64_t(d))) / uint64_t(d) + 1);
  }

  // n / d: with n < 2^31 the sum stays under 2^32.
  TESSERA_HD int div(int n) const {
#if defined(__CUDA_ARCH__)
    const unsigned hi = __umulhi(unsigned(n), mul);
#else
    const unsigned hi = unsigned((uint64_t(unsigned(n)) * mul) >> 32);
#endif
    return int((hi + unsigned(n)) >> shift);
  }
};

}  // namespace tessera
