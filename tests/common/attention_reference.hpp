// CPU fp64 reference of tessera_attention's semantics (include/tessera/tessera.h), header-only:
// the CPU tests check it on hand-computable cases, and the GPU tests check the fp32 GPU reference
// (tools/attention_gpu_reference.cu) against it on small shapes.
//
//   O[b, i, h, :] = sum_j softmax_j(scale * Q[b, i, h, :] . K[b, j, hk, :]) V[b, j, hk, :]
//   with hk = h / (Hq / Hkv) (GQA / MQA), scale = 1 / sqrt(D) when 0, over the keys j row i sees:
//   with i' = i + Sk - Sq (bottom-right aligned), j <= i' under `causal`, j <= i' + window_right
//   and j >= i' - window_left (each side -1 = unlimited). With softcap > 0 each scaled score s
//   becomes softcap * tanh(s / softcap) first. A row with no visible key: O = 0, LSE = -inf.
//   LSE[b, h, i] = log(sum_j exp(s_j)) (natural log) over the visible keys, s_j as softmaxed.
//
// Deliberately written independently of the GPU reference (a second, plain statement of the rules).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace tessera_test {

struct HostAttention {
  int64_t batch = 1, seqlen_q = 1, seqlen_k = 1, heads_q = 1, heads_kv = 1, head_dim = 1;
  bool causal = false;
  double scale = 0.0;  // 0 = 1 / sqrt(head_dim)
  int64_t window_left = -1, window_right = -1;  // -1 = unlimited
  double softcap = 0.0;                         // 0 = none

  double effective_scale() const { return scale > 0.0 ? scale : 1.0 / std::sqrt(double(head_dim)); }
  // Whether query row i sees key j.
  bool sees(int64_t i, int64_t j) const {
    const int64_t ip = i + seqlen_k - seqlen_q;
    if (j < 0 || j >= seqlen_k) return false;
    if (causal && j > ip) return false;
    if (window_right >= 0 && j - ip > window_right) return false;  // (differences: no overflow for any window)
    if (window_left >= 0 && ip - j > window_left) return false;
    return true;
  }
  // Number of keys query row i sees.
  int64_t visible_keys(int64_t i) const {
    int64_t n = 0;
    for (int64_t j = 0; j < seqlen_k; ++j) n += sees(i, j) ? 1 : 0;
    return n;
  }
  size_t q_elements() const { return size_t(batch * seqlen_q * heads_q * head_dim); }
  size_t kv_elements() const { return size_t(batch * seqlen_k * heads_kv * head_dim); }
  size_t lse_elements() const { return size_t(batch * heads_q * seqlen_q); }
};

// q, o: [B, Sq, Hq, D]; k, v: [B, Sk, Hkv, D]; lse: [B, Hq, Sq] (may be null). All contiguous.
inline void attention_reference_f64(const HostAttention& p, const double* q, const double* k, const double* v,
                                    double* o, double* lse) {
  const int64_t B = p.batch, Sq = p.seqlen_q, Sk = p.seqlen_k, Hq = p.heads_q, Hkv = p.heads_kv, D = p.head_dim;
  const int64_t group = Hq / Hkv;
  const double scale = p.effective_scale();
  std::vector<double> s(size_t(std::max<int64_t>(Sk, 1)));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < Hq; ++h) {
      const int64_t hk = h / group;
      for (int64_t i = 0; i < Sq; ++i) {
        const double* qi = q + ((b * Sq + i) * Hq + h) * D;
        double* oi = o + ((b * Sq + i) * Hq + h) * D;
        double* lse_i = lse ? lse + (b * Hq + h) * Sq + i : nullptr;
        if (p.visible_keys(i) == 0) {
          std::fill(oi, oi + D, 0.0);
          if (lse_i) *lse_i = -std::numeric_limits<double>::infinity();
          continue;
        }
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < Sk; ++j) {
          if (!p.sees(i, j)) continue;
          const double* kj = k + ((b * Sk + j) * Hkv + hk) * D;
          double dot = 0.0;
          for (int64_t d = 0; d < D; ++d) dot += qi[d] * kj[d];
          s[size_t(j)] = scale * dot;
          if (p.softcap > 0.0) s[size_t(j)] = p.softcap * std::tanh(s[size_t(j)] / p.softcap);
          mx = std::max(mx, s[size_t(j)]);
        }
        double sum = 0.0;
        for (int64_t j = 0; j < Sk; ++j) {
          s[size_t(j)] = p.sees(i, j) ? std::exp(s[size_t(j)] - mx) : 0.0;
          sum += s[size_t(j)];
        }
        std::fill(oi, oi + D, 0.0);
        for (int64_t j = 0; j < Sk; ++j) {
          if (!p.sees(i, j)) continue;
          const double* vj = v + ((b * Sk + j) * Hkv + hk) * D;
          const double pj = s[size_t(j)] / sum;
          for (int64_t d = 0; d < D; ++d) oi[d] += pj * vj[d];
        }
        if (lse_i) *lse_i = mx + std::log(sum);
      }
    }
}

}  // namespace tessera_test
