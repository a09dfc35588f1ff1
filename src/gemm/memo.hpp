// A few recent results of a pure host function, per thread. The heuristic's cost model runs a few
// hundred evaluations per call (every config, every split count, the stream-K variant, and the
// workspace bound over three GPU sizes), a large part of a small gemm() call's host time, and
// back-to-back small GEMMs are host-bound.
// Real workloads repeat shapes, so remembering the last few answers removes that cost; a thread's
// own cache needs no lock.
#pragma once

#include <array>

namespace tessera::gemm_impl {

template <class Key, class Value, int N = 8>
class Memo {
 public:
  // The value for `key`, computed by `compute()` only when it is not among the last N keys.
  template <class Compute>
  Value get(const Key& key, Compute&& compute) {
    for (int i = 0; i < size_; ++i)
      if (keys_[i] == key) return values_[i];
    const Value v = compute();
    keys_[next_] = key;
    values_[next_] = v;
    next_ = (next_ + 1) % N;
    if (size_ < N) ++size_;
    return v;
  }

 private:
  std::array<Key, N> keys_{};
  std::array<Value, N> values_{};
  int size_ = 0, next_ = 0;
};

}  // namespace tessera::gemm_impl
