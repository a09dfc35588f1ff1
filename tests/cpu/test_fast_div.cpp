// Division by a launch constant (core/fast_div.hpp) against `/`.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "core/fast_div.hpp"

using tessera::FastDiv;

namespace {

// n near every multiple of d up to `limit`, n's extremes and a random sample.
void check_divisor(int d, std::mt19937& rng) {
  const FastDiv f(d);
  ASSERT_EQ(f.d, d);
  std::vector<int> ns = {0, 1, d - 1, d, d + 1, INT32_MAX, INT32_MAX - 1, INT32_MAX / 2, INT32_MAX - d};
  for (int64_t q : {int64_t(1), int64_t(2), int64_t(3), int64_t(INT32_MAX / d), int64_t(INT32_MAX / d) - 1})
    for (int64_t delta : {-1, 0, 1}) ns.push_back(int(std::clamp<int64_t>(q * d + delta, 0, INT32_MAX)));
  std::uniform_int_distribution<int> any(0, INT32_MAX);
  for (int i = 0; i < 64; ++i) ns.push_back(any(rng));
  for (int n : ns) {
    if (n < 0) continue;
    ASSERT_EQ(f.div(n), n / d) << n << " / " << d;
  }
}

TEST(FastDiv, MatchesDivisionForSmallDivisorsOverEveryNumeratorUpTo4096) {
  for (int d = 1; d <= 300; ++d) {
    const FastDiv f(d);
    for (int n = 0; n < 4096; ++n) ASSERT_EQ(f.div(n), n / d) << n << " / " << d;
  }
}

TEST(FastDiv, MatchesDivisionAtTheEdgesOfTheRange) {
  std::mt19937 rng(12345);
  for (int d = 1; d <= 5000; ++d) check_divisor(d, rng);
  for (int shift = 12; shift < 31; ++shift)
    for (int64_t d : {(int64_t(1) << shift) - 1, int64_t(1) << shift, (int64_t(1) << shift) + 1})
      check_divisor(int(d), rng);
  check_divisor(INT32_MAX, rng);
  std::uniform_int_distribution<int> any(1, INT32_MAX);
  for (int i = 0; i < 2000; ++i) check_divisor(any(rng), rng);
}

TEST(FastDiv, ANonPositiveDivisorBecomesOne) {
  EXPECT_EQ(FastDiv(0).d, 1);
  EXPECT_EQ(FastDiv(0).div(77), 77);
  EXPECT_EQ(FastDiv().div(INT32_MAX), INT32_MAX);
}

}  // namespace
