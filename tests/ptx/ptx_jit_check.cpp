// The sm80 kernel families and the CUDA-core fallback as a GPU newer than their SASS runs them: from
// their compute_80 PTX, JIT-compiled by the driver. Run with CUDA_FORCE_PTX_JIT=1 (and
// TESSERA_ATTN_ARCH=80 on Hopper): the driver then ignores all SASS, so the sm_90a kernels (which
// have no PTX) and cuBLAS cannot load, and the GPU test suite cannot run; this checks against CPU
// references instead. Every sm80 GEMM config, the skinny kernel and the fallback on small ragged
// problems, and attention d = 64 / 128 (causal, GQA). Exit 0 when all match (or there is no GPU,
// with a message), 1 otherwise.
#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "common/attention_reference.hpp"
#include "tessera/tessera.hpp"

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  if (!ok) ++failures;
}

std::vector<__nv_bfloat16> random_bf16(size_t n, std::mt19937& rng, std::vector<double>* values) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<__nv_bfloat16> v(n);
  values->resize(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = __float2bfloat16(u(rng));
    (*values)[i] = double(__bfloat162float(v[i]));
  }
  return v;
}

template <class T>
T* to_device(const std::vector<T>& h) {
  T* d = nullptr;
  if (cudaMalloc(reinterpret_cast<void**>(&d), h.size() * sizeof(T)) != cudaSuccess) return nullptr;
  cudaMemcpy(d, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice);
  return d;
}

double rel_err(const std::vector<float>& got, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = double(got[i]) - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
  }
  return std::isfinite(num) ? std::sqrt(num / (den > 0 ? den : 1)) : 1e9;
}

// D (M x N, row-major fp32) = A (M x K row-major) * B^T (B stored N x K row-major: both K-major).
void check_gemm(const std::string& config, int64_t m, int64_t n, int64_t k, std::mt19937& rng) {
  std::vector<double> a, b;
  auto ha = random_bf16(size_t(m * k), rng, &a);
  auto hb = random_bf16(size_t(n * k), rng, &b);
  std::vector<double> ref(size_t(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p) ref[i * n + j] += a[i * k + p] * b[j * k + p];
  auto* da = to_device(ha);
  auto* db = to_device(hb);
  auto* dd = to_device(std::vector<float>(size_t(m * n), std::nanf("")));  // poisoned
  tessera::GemmArgs g;
  g.a = tessera::dense(da, tessera::DType::BF16, m, k);
  g.b = tessera::dense(db, tessera::DType::BF16, n, k);
  g.op_b = tessera::Op::T;
  g.d = tessera::dense(dd, tessera::DType::F32, m, n);
  g.config = config;
  size_t ws_bytes = 0;
  tessera::Status s = tessera::gemm_workspace_size(g, &ws_bytes);
  void* ws = nullptr;
  if (s.ok() && ws_bytes) cudaMalloc(&ws, ws_bytes);
  if (s.ok()) s = tessera::gemm(g, nullptr, ws, ws_bytes);
  const cudaError_t e = cudaDeviceSynchronize();
  std::vector<float> got(size_t(m * n));
  cudaMemcpy(got.data(), dd, got.size() * sizeof(float), cudaMemcpyDeviceToHost);
  const double err = rel_err(got, ref);
  expect(s.ok() && e == cudaSuccess && err < 1e-5,
         "gemm " + config + " " + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + ": " +
             (s.ok() ? "" : s.message + " ") + (e == cudaSuccess ? "" : std::string(cudaGetErrorString(e)) + " ") +
             "rel err " + std::to_string(err));
  cudaFree(da), cudaFree(db), cudaFree(dd), cudaFree(ws);
}

void check_attention(int64_t d, bool causal, std::mt19937& rng) {
  tessera_test::HostAttention p;
  p.batch = 2, p.seqlen_q = 133, p.seqlen_k = 200, p.heads_q = 4, p.heads_kv = 2, p.head_dim = d, p.causal = causal;
  std::vector<double> q, k, v;
  auto hq = random_bf16(p.q_elements(), rng, &q);
  auto hk = random_bf16(p.kv_elements(), rng, &k);
  auto hv = random_bf16(p.kv_elements(), rng, &v);
  std::vector<double> ref(p.q_elements()), lse(p.lse_elements());
  tessera_test::attention_reference_f64(p, q.data(), k.data(), v.data(), ref.data(), lse.data());
  auto *dq = to_device(hq), *dk = to_device(hk), *dv = to_device(hv);
  auto* dout = to_device(std::vector<__nv_bfloat16>(p.q_elements(), __float2bfloat16(std::nanf(""))));
  tessera::AttentionArgs a;
  a.q = dq, a.k = dk, a.v = dv, a.o = dout;
  a.dtype = tessera::DType::BF16;
  a.batch = p.batch, a.seqlen_q = p.seqlen_q, a.seqlen_k = p.seqlen_k, a.heads_q = p.heads_q;
  a.heads_kv = p.heads_kv, a.head_dim = d, a.causal = causal;
  tessera::bshd_strides(p.seqlen_q, p.heads_q, d, a.q_stride);
  tessera::bshd_strides(p.seqlen_k, p.heads_kv, d, a.k_stride);
  tessera::bshd_strides(p.seqlen_k, p.heads_kv, d, a.v_stride);
  tessera::bshd_strides(p.seqlen_q, p.heads_q, d, a.o_stride);
  const tessera::Status s = tessera::attention(a, nullptr);
  const cudaError_t e = cudaDeviceSynchronize();
  std::vector<__nv_bfloat16> out(p.q_elements());
  cudaMemcpy(out.data(), dout, out.size() * 2, cudaMemcpyDeviceToHost);
  std::vector<float> got(out.size());
  for (size_t i = 0; i < out.size(); ++i) got[i] = __bfloat162float(out[i]);
  const double err = rel_err(got, ref);
  expect(s.ok() && e == cudaSuccess && err < 1e-2, "attention d" + std::to_string(d) + (causal ? " causal" : "") +
                                                       ": " + (s.ok() ? "" : s.message + " ") + "rel err " +
                                                       std::to_string(err));
  cudaFree(dq), cudaFree(dk), cudaFree(dv), cudaFree(dout);
}

}  // namespace

int main() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::printf("ptx_jit_check: no CUDA device, nothing checked\n");
    return 0;
  }
  std::mt19937 rng(12345);
  for (const tessera::ConfigInfo& c : tessera::gemm_configs()) {
    if (c.name.rfind("sm90_", 0) == 0) continue;  // sm_90a SASS only: no PTX to JIT
    if (c.name.rfind("skinny_", 0) != 0) check_gemm(c.name, 200, 136, 72, rng);  // (skinny: a side <= 64)
    check_gemm(c.name, 7, 333, 1000, rng);
  }
  for (int64_t d : {64, 128})
    for (bool causal : {false, true}) check_attention(d, causal, rng);
  std::printf("ptx_jit_check: %d failure(s)\n", failures);
  return failures ? 1 : 0;
}
