// Whether a strided layout maps distinct coordinates to distinct offsets (an output written
// through it gets each element once). Sorting modes by stride, each stride must step over
// everything the smaller modes reach: exact for the row/column/batch/head layouts we accept.
#pragma once
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <vector>

namespace tessera::detail {

struct Mode {
  int64_t size, stride;
};

inline bool injective(std::initializer_list<Mode> modes_in) {
  std::vector<Mode> modes(modes_in);
  std::sort(modes.begin(), modes.end(), [](Mode x, Mode y) { return x.stride < y.stride; });
  __int128 reach = 0;  // largest offset the modes so far can reach
  for (const Mode& m : modes) {
    if (m.size <= 1) continue;
    if (m.stride <= reach) return false;
    reach += (__int128)m.stride * (m.size - 1);
  }
  return true;
}

}  // namespace tessera::detail
