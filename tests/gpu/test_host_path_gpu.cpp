// tessera in a user's process (issue 24): host threads and streams at once, the first call of a
// shape inside CUDA-graph capture, operands past 2^31 elements, an SM budget beside a kernel that
// holds the other SMs, the environment read once, and tuning-cache paths that are not regular
// files. Every result is checked against the usual oracles (cuBLAS for GEMM, the fp32 reference for
// attention) on fresh random inputs, with outputs poisoned (NaN) between guard bands. Every test
// skips with "no CUDA device" without a usable sm_80+ GPU.
//
// Replay a failure: the message prints the seed; TESSERA_TEST_SEED=<seed> gives every job that seed.
#include <gtest/gtest.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <future>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "attention_gpu_reference.hpp"
#include "gpu_helpers.hpp"
#include "harness.hpp"
#include "tessera/tessera.h"
#include "tessera/tessera.hpp"

namespace {

namespace tt = tessera_test;
using tessera::DType;
using tessera::Layout;
using Clock = std::chrono::steady_clock;

constexpr size_t kGuard = tt::kGuardBytes;
constexpr int64_t kTwoPow31 = int64_t(1) << 31;

// ---- small helpers ---------------------------------------------------------------------------------

bool cuda_ok(cudaError_t e, const char* what, std::string* problems) {
  if (e == cudaSuccess) return true;
  *problems += std::string(what) + ": " + cudaGetErrorString(e) + "; ";
  cudaGetLastError();
  return false;
}

// In a function returning its problems as a string: return them when a CUDA call fails.
#define HP_CUDA(expr)                                      \
  do {                                                     \
    std::string problem_;                                  \
    if (!cuda_ok((expr), #expr, &problem_)) return problem_; \
  } while (0)

std::string status_text(const tessera::Status& s) {
  return std::string(tessera_status_string(s.code)) + " (" + s.message + ")";
}

// A cuBLAS handle for one host thread (a handle whose stream is set must not be shared by threads).
class Blas {
 public:
  Blas() = default;
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;
  ~Blas() {
    if (h_) cublasDestroy(h_);
  }
  cublasHandle_t get() {
    if (!h_ && cublasCreate(&h_) != CUBLAS_STATUS_SUCCESS) h_ = nullptr;
    return h_;
  }

 private:
  cublasHandle_t h_ = nullptr;
};

// A non-blocking stream: nothing on the legacy default stream orders it behind other work.
struct Stream {
  cudaStream_t s = nullptr;
  Stream() {
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) s = nullptr;
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() {
    if (s) cudaStreamDestroy(s);
  }
};

int sm_count() {
  int dev = 0, n = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev);
  return n;
}

size_t free_device_bytes() {
  size_t free_bytes = 0, total = 0;
  if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) return 0;
  return free_bytes;
}

size_t guard_damage(const uint8_t* band, uint32_t salt) {
  size_t bad = 0;
  for (size_t i = 0; i < kGuard; ++i) bad += band[i] != tt::guard_byte(i, salt);
  return bad;
}

// An output in its own allocation: [guard band][bytes][guard band].
struct GuardedOutput {
  tt::DeviceBuffer buf;
  size_t bytes = 0;
  uint32_t salt_front = 0, salt_back = 0;

  cudaError_t alloc(size_t n) {
    bytes = n;
    return buf.alloc(n + 2 * kGuard);
  }
  char* data() const { return buf.c() + kGuard; }
  // Every byte NaN, then guard bands of a pattern derived from `seed`.
  cudaError_t poison(uint64_t seed, cudaStream_t s) {
    salt_front = uint32_t(seed);
    salt_back = uint32_t(seed >> 32);
    cudaError_t e = cudaMemsetAsync(buf.p, tt::kPoisonByte, buf.bytes, s);
    if (e == cudaSuccess) e = tt::fill_guard(buf.p, kGuard, salt_front, s);
    if (e == cudaSuccess) e = tt::fill_guard(data() + bytes, kGuard, salt_back, s);
    return e;
  }
  std::string guard_problems(const uint8_t* front, const uint8_t* back, const char* what) const {
    const size_t bad = guard_damage(front, salt_front) + guard_damage(back, salt_back);
    return bad ? std::to_string(bad) + " guard-band bytes around " + what + " overwritten; " : std::string();
  }
  // Copies only the guard bands (the output may be gigabytes); synchronises s.
  std::string check_guards(cudaStream_t s, const char* what) const {
    std::vector<uint8_t> front(kGuard), back(kGuard);
    HP_CUDA(cudaMemcpyAsync(front.data(), buf.p, kGuard, cudaMemcpyDeviceToHost, s));
    HP_CUDA(cudaMemcpyAsync(back.data(), data() + bytes, kGuard, cudaMemcpyDeviceToHost, s));
    HP_CUDA(cudaStreamSynchronize(s));
    return guard_problems(front.data(), back.data(), what);
  }
};

// ---- jobs: one tessera call with its buffers and its oracle ---------------------------------------

// The steps are separate so that a test can put them where it needs them: all set-up before the
// threads start, the launch inside a graph capture or beside the hog kernel, the check later.
// Methods returning std::string return what went wrong ("" when nothing did).
class Job {
 public:
  virtual ~Job() = default;
  virtual std::string setup(cudaStream_t s) = 0;  // allocations; non-elements of the inputs poisoned
  // New random inputs written into the same buffers (a captured graph reads them) and the oracle's
  // answer for them.
  virtual std::string refill(cudaStream_t s, Blas& blas) = 0;
  virtual std::string poison(cudaStream_t s) = 0;  // outputs NaN between fresh guard bands
  virtual tessera::Status launch(cudaStream_t s) = 0;
  virtual std::string check(cudaStream_t s) = 0;  // synchronises s, compares with the oracle
  // The output allocations byte for byte, guard bands included (for "nothing written").
  virtual std::vector<uint8_t> output_bytes(cudaStream_t s, std::string* problems) = 0;
  virtual size_t device_bytes() const = 0;  // what setup() allocates (before the workspace)
  const std::string& name() const { return name_; }
  std::string describe() const { return name_ + " (seed " + std::to_string(seed_) + ")"; }

 protected:
  std::string name_;
  uint64_t seed_ = 0;
  uint64_t poisons_ = 0;
};

// ---- GEMM against cuBLAS ---------------------------------------------------------------------------

struct GemmSpec {
  std::string name;
  DType ab = DType::BF16, dt = DType::BF16;
  int64_t m = 0, n = 0, k = 0, batch = 1;
  // A is M x K, B is K x N (op N); the default is "tn": both operands K-major, D row-major.
  Layout a_layout = Layout::RowMajor, b_layout = Layout::ColMajor, d_layout = Layout::RowMajor;
  int64_t a_batch_stride = -1;  // >= 0: A's batch stride in elements instead of the packed one
  float alpha = 1.0f;
  int max_sms = 0;
  bool needs_workspace = false;  // the job covers the padding of unaligned operands: it must ask for a workspace
};

GemmSpec gemm_spec(const std::string& name, DType ab, DType dt, int64_t m, int64_t n, int64_t k, int64_t batch = 1) {
  return GemmSpec{name, ab, dt, m, n, k, batch};  // the other fields keep their defaults
}

// A stored operand; `span` elements from its first one to one past its last.
struct Operand {
  tessera::Matrix m;
  int64_t inner = 0, outer = 0, span = 0;
  tt::DeviceBuffer buf;

  void place(DType t, int64_t rows, int64_t cols, Layout layout, int64_t batch, int64_t stride) {
    m.dtype = t;
    m.rows = rows;
    m.cols = cols;
    m.layout = layout;
    inner = layout == Layout::RowMajor ? cols : rows;
    outer = layout == Layout::RowMajor ? rows : cols;
    m.ld = inner;
    const int64_t one = (outer - 1) * m.ld + inner;
    m.batch_count = batch;
    m.batch_stride = batch > 1 ? (stride >= 0 ? stride : one) : 0;
    span = (batch - 1) * m.batch_stride + one;
  }
  size_t bytes() const { return size_t(span) * tt::dtype_bytes(m.dtype); }
};

// cuBLAS sees column-major storage: a row-major operand is its transpose.
cublasOperation_t blas_op(const tessera::Matrix& m) {
  return m.layout == Layout::RowMajor ? CUBLAS_OP_T : CUBLAS_OP_N;
}
cudaDataType_t blas_type(DType t) { return t == DType::F16 ? CUDA_R_16F : t == DType::BF16 ? CUDA_R_16BF : CUDA_R_32F; }

class GemmJob : public Job {
 public:
  explicit GemmJob(const GemmSpec& spec) : spec_(spec) {
    name_ = spec.name;
    a_.place(spec.ab, spec.m, spec.k, spec.a_layout, spec.batch, spec.a_batch_stride);
    b_.place(spec.ab, spec.k, spec.n, spec.b_layout, spec.batch, -1);
  }
  tessera::GemmArgs& args() { return args_; }
  int64_t largest_operand_span() const { return std::max(a_.span, b_.span); }
  size_t device_bytes() const override {
    return a_.bytes() + b_.bytes() + outputs() * (tt::dtype_bytes(spec_.dt) + sizeof(float)) + 2 * kGuard;
  }

  std::string setup(cudaStream_t s) override {
    for (Operand* op : {&a_, &b_}) {
      HP_CUDA(op->buf.alloc(op->bytes()));
      // Bytes that are not elements (batch-stride gaps) stay NaN: reading one shows in D.
      HP_CUDA(cudaMemsetAsync(op->buf.p, tt::kPoisonByte, op->bytes(), s));
      op->m.ptr = op->buf.p;
    }
    HP_CUDA(d_.alloc(outputs() * tt::dtype_bytes(spec_.dt)));
    HP_CUDA(ref_.alloc(outputs() * sizeof(float)));
    args_.a = a_.m;
    args_.b = b_.m;
    args_.d = tessera::dense(d_.data(), spec_.dt, spec_.m, spec_.n, spec_.d_layout, spec_.batch);
    args_.alpha = spec_.alpha;
    args_.max_sms = spec_.max_sms;
    const tessera::Status st = tessera::gemm_workspace_size(args_, &ws_bytes_);
    if (!st.ok()) return "gemm_workspace_size: " + status_text(st) + "; ";
    if (spec_.needs_workspace && ws_bytes_ == 0) return "the case should need a padding workspace but asks for none; ";
    if (ws_bytes_) {
      HP_CUDA(ws_.alloc(ws_bytes_));
      HP_CUDA(cudaMemsetAsync(ws_.p, 0xA5, ws_bytes_, s));  // nothing may count on a zeroed workspace
    }
    HP_CUDA(cudaStreamSynchronize(s));
    return "";
  }

  std::string refill(cudaStream_t s, Blas& blas) override {
    seed_ = tt::fresh_seed();
    for (Operand* op : {&a_, &b_})
      HP_CUDA(tt::fill_uniform(op->buf.p, op->m.dtype, op->m.batch_count, op->outer, op->inner, op->m.ld,
                               op->m.batch_stride, tt::mix_seed(seed_ ^ (op == &a_ ? 0xAu : 0xBu)), s));
    cublasHandle_t h = blas.get();
    if (!h) return "cublasCreate failed; ";
    cublasSetStream(h, s);
    const float one = 1.0f, zero = 0.0f;
    const int64_t M = spec_.m, N = spec_.n, K = spec_.k;
    const cublasStatus_t st = cublasGemmStridedBatchedEx(
        h, blas_op(a_.m), blas_op(b_.m), int(M), int(N), int(K), &one, a_.m.ptr, blas_type(spec_.ab), int(a_.m.ld),
        a_.m.batch_stride, b_.m.ptr, blas_type(spec_.ab), int(b_.m.ld), b_.m.batch_stride, &zero, ref_.p, CUDA_R_32F,
        int(M), M * N, int(spec_.batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) return "cuBLAS reference failed (status " + std::to_string(int(st)) + "); ";
    ref_host_.resize(outputs());
    HP_CUDA(cudaMemcpyAsync(ref_host_.data(), ref_.p, outputs() * sizeof(float), cudaMemcpyDeviceToHost, s));
    HP_CUDA(cudaStreamSynchronize(s));
    return "";
  }

  std::string poison(cudaStream_t s) override {
    HP_CUDA(d_.poison(tt::mix_seed(seed_ + ++poisons_), s));
    return "";
  }

  tessera::Status launch(cudaStream_t s) override { return tessera::gemm(args_, s, ws_.p, ws_bytes_); }

  // rel_err = ||D - alpha * ref||_F / max(||alpha * ref||_F, 1e-3) within the harness's tolerance, no
  // NaN/Inf (an unwritten element stays NaN), guard bands intact. D is dense: every other byte is an element.
  std::string check(cudaStream_t s) override {
    std::string p;
    const std::vector<uint8_t> h = tt::to_host(d_.buf, s, &p);
    if (!p.empty()) return p;
    p += d_.guard_problems(h.data(), h.data() + kGuard + d_.bytes, "D");
    const int64_t M = spec_.m, N = spec_.n;
    const size_t es = tt::dtype_bytes(spec_.dt);
    const bool row_major = spec_.d_layout == Layout::RowMajor;
    double num = 0.0, den = 0.0;
    int64_t nonfinite = 0;
    for (int64_t l = 0; l < spec_.batch; ++l)
      for (int64_t j = 0; j < N; ++j)
        for (int64_t i = 0; i < M; ++i) {
          const int64_t at = l * M * N + (row_major ? i * N + j : i + j * M);
          const double got = tt::host_value(&h[kGuard + size_t(at) * es], spec_.dt);
          const double want = double(spec_.alpha) * ref_host_[size_t(l * M * N + i + j * M)];
          if (!std::isfinite(got)) {
            ++nonfinite;
            continue;
          }
          num += (got - want) * (got - want);
          den += want * want;
        }
    if (nonfinite) p += std::to_string(nonfinite) + " NaN/Inf elements of D (unwritten or wrong); ";
    const double rel_err = std::sqrt(num) / std::max(std::sqrt(den), 1e-3), tol = tt::tolerance(spec_.ab, spec_.dt);
    if (!(rel_err <= tol)) {
      char buf[128];
      std::snprintf(buf, sizeof buf, "relative error %.3e above tolerance %.1e; ", rel_err, tol);
      p += buf;
    }
    return p;
  }

  std::vector<uint8_t> output_bytes(cudaStream_t s, std::string* problems) override {
    return tt::to_host(d_.buf, s, problems);
  }

 private:
  size_t outputs() const { return size_t(spec_.m * spec_.n * spec_.batch); }

  GemmSpec spec_;
  Operand a_, b_;
  GuardedOutput d_;
  tt::DeviceBuffer ref_, ws_;
  size_t ws_bytes_ = 0;
  std::vector<float> ref_host_;
  tessera::GemmArgs args_;
};

// ---- attention against the fp32 reference ------------------------------------------------------------

struct AttnSpec {
  std::string name;
  DType dtype = DType::BF16;
  int64_t batch = 1, sq = 1, sk = 1, hq = 1, hkv = 1, d = 128;
  bool causal = false;
  bool bhsd = false;  // else bshd
  int max_sms = 0;
  // Batch ranges {first, count} that the reference checks (it is naive: all of a huge batch would
  // take minutes); empty = every batch.
  std::vector<std::pair<int64_t, int64_t>> checked;
};

AttnSpec attn_spec(const std::string& name, DType dt, int64_t batch, int64_t sq, int64_t sk, int64_t hq, int64_t hkv,
                   int64_t d, bool causal, bool bhsd = false) {
  return AttnSpec{name, dt, batch, sq, sk, hq, hkv, d, causal, bhsd};  // the other fields keep their defaults
}

class AttnJob : public Job {
 public:
  explicit AttnJob(const AttnSpec& spec) : spec_(spec) {
    name_ = spec.name;
    if (spec_.checked.empty()) spec_.checked.push_back({0, spec_.batch});
  }
  tessera::AttentionArgs& args() { return args_; }
  int64_t q_elements() const { return spec_.batch * spec_.sq * spec_.hq * spec_.d; }
  size_t device_bytes() const override {
    const size_t es = tt::dtype_bytes(spec_.dtype);
    const size_t kv = size_t(spec_.batch * spec_.sk * spec_.hkv * spec_.d);
    size_t refs = 0;
    for (const auto& range : spec_.checked)
      refs += size_t(range.second * spec_.sq * spec_.hq) * (2 * spec_.d + 1) * sizeof(float);
    return (2 * size_t(q_elements()) + 2 * kv) * es + lse_count() * sizeof(float) + refs + 4 * kGuard;
  }

  std::string setup(cudaStream_t s) override {
    const size_t es = tt::dtype_bytes(spec_.dtype);
    auto strides = [&](int64_t seq, int64_t heads, int64_t (&st)[3]) {
      if (spec_.bhsd)
        tessera::bhsd_strides(seq, heads, spec_.d, st);
      else
        tessera::bshd_strides(seq, heads, spec_.d, st);
    };
    HP_CUDA(q_.alloc(size_t(q_elements()) * es));
    HP_CUDA(k_.alloc(size_t(spec_.batch * spec_.sk * spec_.hkv * spec_.d) * es));
    HP_CUDA(v_.alloc(k_.bytes));
    HP_CUDA(o_.alloc(q_.bytes));
    HP_CUDA(lse_.alloc(lse_count() * sizeof(float)));
    args_.q = q_.p;
    args_.k = k_.p;
    args_.v = v_.p;
    args_.o = o_.data();
    args_.lse = reinterpret_cast<float*>(lse_.data());
    args_.dtype = spec_.dtype;
    args_.batch = spec_.batch;
    args_.seqlen_q = spec_.sq;
    args_.seqlen_k = spec_.sk;
    args_.heads_q = spec_.hq;
    args_.heads_kv = spec_.hkv;
    args_.head_dim = spec_.d;
    strides(spec_.sq, spec_.hq, args_.q_stride);
    strides(spec_.sk, spec_.hkv, args_.k_stride);
    strides(spec_.sk, spec_.hkv, args_.v_stride);
    strides(spec_.sq, spec_.hq, args_.o_stride);
    args_.causal = spec_.causal;
    args_.max_sms = spec_.max_sms;
    for (const auto& range : spec_.checked) {
      refs_.push_back(std::make_unique<Reference>());
      const size_t rows = size_t(range.second * spec_.sq * spec_.hq);
      HP_CUDA(refs_.back()->o32.alloc(rows * size_t(spec_.d) * sizeof(float)));
      HP_CUDA(refs_.back()->olow.alloc(rows * size_t(spec_.d) * sizeof(float)));
      HP_CUDA(refs_.back()->lse32.alloc(rows * sizeof(float)));
    }
    HP_CUDA(cudaStreamSynchronize(s));
    return "";
  }

  std::string refill(cudaStream_t s, Blas&) override {
    seed_ = tt::fresh_seed();
    const tt::DeviceBuffer* tensors[3] = {&q_, &k_, &v_};
    const int64_t* strides[3] = {args_.q_stride, args_.k_stride, args_.v_stride};
    for (int t = 0; t < 3; ++t) {
      const int64_t seq = t == 0 ? spec_.sq : spec_.sk, heads = t == 0 ? spec_.hq : spec_.hkv;
      const int64_t dims[4] = {spec_.batch, seq, heads, spec_.d};
      const int64_t st[4] = {strides[t][0], strides[t][1], strides[t][2], 1};
      HP_CUDA(tt::fill_uniform_4d(tensors[t]->p, spec_.dtype, dims, st, tt::mix_seed(seed_ ^ uint64_t(0xA77 + t)), s));
    }
    for (size_t r = 0; r < refs_.size(); ++r) {
      const tessera::AttentionArgs a = slice(spec_.checked[r]);
      HP_CUDA(tessera_ref::attention_reference(a, static_cast<float*>(refs_[r]->o32.p),
                                               static_cast<float*>(refs_[r]->olow.p),
                                               static_cast<float*>(refs_[r]->lse32.p), s));
    }
    HP_CUDA(cudaStreamSynchronize(s));
    return "";
  }

  std::string poison(cudaStream_t s) override {
    const uint64_t salt = tt::mix_seed(seed_ + ++poisons_);
    HP_CUDA(o_.poison(salt, s));
    HP_CUDA(lse_.poison(tt::mix_seed(salt), s));
    return "";
  }

  tessera::Status launch(cudaStream_t s) override { return tessera::attention(args_, s); }

  std::string check(cudaStream_t s) override {
    std::string p;
    for (size_t r = 0; r < refs_.size(); ++r) {
      const auto& range = spec_.checked[r];
      tessera_ref::AttentionErrors err;
      HP_CUDA(tessera_ref::attention_compare(slice(range), static_cast<const float*>(refs_[r]->o32.p),
                                             static_cast<const float*>(refs_[r]->olow.p),
                                             static_cast<const float*>(refs_[r]->lse32.p), &err, s));
      std::string why;
      if (!tessera_ref::attention_check(err, spec_.dtype, &why))
        p += "batches " + std::to_string(range.first) + ".." + std::to_string(range.first + range.second - 1) +
             ": " + why;
    }
    p += o_.check_guards(s, "O");
    p += lse_.check_guards(s, "LSE");
    return p;
  }

  std::vector<uint8_t> output_bytes(cudaStream_t s, std::string* problems) override {
    std::vector<uint8_t> bytes = tt::to_host(o_.buf, s, problems);
    const std::vector<uint8_t> lse = tt::to_host(lse_.buf, s, problems);
    bytes.insert(bytes.end(), lse.begin(), lse.end());
    return bytes;
  }

 private:
  struct Reference {
    tt::DeviceBuffer o32, olow, lse32;
  };
  size_t lse_count() const { return size_t(spec_.batch * spec_.hq * spec_.sq); }
  // The problem restricted to batches [first, first + count): pointers moved, batch count cut.
  tessera::AttentionArgs slice(const std::pair<int64_t, int64_t>& range) const {
    const size_t es = tt::dtype_bytes(spec_.dtype);
    const int64_t b = range.first;
    tessera::AttentionArgs a = args_;
    a.q = static_cast<const char*>(args_.q) + size_t(b * args_.q_stride[0]) * es;
    a.k = static_cast<const char*>(args_.k) + size_t(b * args_.k_stride[0]) * es;
    a.v = static_cast<const char*>(args_.v) + size_t(b * args_.v_stride[0]) * es;
    a.o = static_cast<char*>(args_.o) + size_t(b * args_.o_stride[0]) * es;
    a.lse = args_.lse + b * spec_.hq * spec_.sq;
    a.batch = range.second;
    return a;
  }

  AttnSpec spec_;
  tt::DeviceBuffer q_, k_, v_;
  GuardedOutput o_, lse_;
  std::vector<std::unique_ptr<Reference>> refs_;
  tessera::AttentionArgs args_;
};

using Jobs = std::vector<std::unique_ptr<Job>>;

void add(Jobs& jobs, const GemmSpec& s) { jobs.push_back(std::make_unique<GemmJob>(s)); }
void add(Jobs& jobs, const AttnSpec& s) { jobs.push_back(std::make_unique<AttnJob>(s)); }

// Set-up, inputs, poison, launch, check: one synchronous run.
std::string run_once(Job& job, cudaStream_t s, Blas& blas) {
  std::string p = job.setup(s);
  if (p.empty()) p = job.refill(s, blas);
  if (p.empty()) p = job.poison(s);
  if (!p.empty()) return p;
  const tessera::Status st = job.launch(s);
  if (!st.ok()) return "tessera returned " + status_text(st) + "; ";
  return job.check(s);
}

// A refused call: INVALID_ARGUMENT naming `needle`, and not a byte of the outputs written.
void expect_refused_without_writing(Job& job, cudaStream_t s, const char* needle) {
  std::string p;
  const std::vector<uint8_t> before = job.output_bytes(s, &p);
  ASSERT_EQ(p, "");
  const tessera::Status st = job.launch(s);
  EXPECT_EQ(st.code, TESSERA_STATUS_INVALID_ARGUMENT) << job.describe() << ": " << status_text(st);
  EXPECT_NE(st.message.find(needle), std::string::npos) << job.describe() << ": " << st.message;
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_TRUE(job.output_bytes(s, &p) == before) << job.describe() << ": a refused call wrote its output";
  EXPECT_EQ(p, "");
}

class HostPath : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (!tt::device_ok(&why)) GTEST_SKIP() << why;
  }
};

// ===================================================================================================
// 1. Host threads, each with its own stream and workspace, calling at once.
// ===================================================================================================

// Lets every thread go once all have arrived, so that their first calls collide (std::latch is C++20).
class StartGate {
 public:
  explicit StartGate(int count) : left_(count) {}
  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mu_);
    if (--left_ == 0)
      cv_.notify_all();
    else
      cv_.wait(lock, [&] { return left_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int left_;
};

// One thread's part: set-up on its own stream, then `iterations` checked calls, new inputs every
// `refill_every`; stops at the first problem.
std::string run_thread(Job& job, StartGate& gate, int iterations, int refill_every) {
  Stream stream;
  Blas blas;
  std::string p = stream.s ? job.setup(stream.s) : std::string("cudaStreamCreateWithFlags failed; ");
  gate.arrive_and_wait();  // also on failure: the others wait for this thread
  for (int it = 0; p.empty() && it < iterations; ++it) {
    if (it % refill_every == 0) p += job.refill(stream.s, blas);
    if (p.empty()) p += job.poison(stream.s);
    if (!p.empty()) break;
    const tessera::Status st = job.launch(stream.s);
    p = st.ok() ? job.check(stream.s) : "tessera returned " + status_text(st) + "; ";
    if (!p.empty()) p = "iteration " + std::to_string(it) + ": " + p;
  }
  return p;
}

void run_concurrently(Jobs& jobs, int iterations, int refill_every) {
  StartGate gate(int(jobs.size()));
  std::vector<std::string> problems(jobs.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < jobs.size(); ++i)
    threads.emplace_back([&, i] { problems[i] = run_thread(*jobs[i], gate, iterations, refill_every); });
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < jobs.size(); ++i) EXPECT_EQ(problems[i], "") << jobs[i]->describe();
}

TEST_F(HostPath, ConcurrentThreadsStreams) {
  Jobs jobs;
  add(jobs, gemm_spec("decode 16x4096x4096 bf16 (split-K)", DType::BF16, DType::BF16, 16, 4096, 4096));
  {
    // Rows of 1001 f16 values (2002 bytes) are not 16-byte aligned: both operands go through the
    // padding workspace.
    GemmSpec s = gemm_spec("unaligned 1000x999x1001 f16", DType::F16, DType::F16, 1000, 999, 1001);
    s.needs_workspace = true;
    add(jobs, s);
  }
  {
    GemmSpec s = gemm_spec("batched 4 x 384x256x512 bf16->f32, nt, D col-major", DType::BF16, DType::F32, 384, 256,
                           512, 4);
    s.a_layout = Layout::ColMajor;
    s.b_layout = Layout::RowMajor;
    s.d_layout = Layout::ColMajor;
    add(jobs, s);
  }
  {
    GemmSpec s = gemm_spec("1536x1024x2048 f16->f32, nn, alpha 0.5", DType::F16, DType::F32, 1536, 1024, 2048);
    s.b_layout = Layout::RowMajor;
    s.alpha = 0.5f;
    add(jobs, s);
  }
  add(jobs, gemm_spec("2048^3 bf16", DType::BF16, DType::BF16, 2048, 2048, 2048));
  add(jobs, attn_spec("attention d128 causal GQA 16/4 bf16", DType::BF16, 2, 1024, 1024, 16, 4, 128, true));
  add(jobs, attn_spec("attention d64 MQA 8/1 f16 bhsd 333x2049", DType::F16, 2, 333, 2049, 8, 1, 64, false, true));
  add(jobs, attn_spec("attention d256 causal bf16", DType::BF16, 1, 512, 512, 8, 8, 256, true));
  run_concurrently(jobs, 20, 5);
}

// Eight threads on one shape, each with its own buffers and workspace: after the first calls every
// call finds its plan remembered, while the other threads do the same.
TEST_F(HostPath, ConcurrentThreadsSharedShape) {
  Jobs jobs;
  for (int i = 0; i < 8; ++i)
    add(jobs, gemm_spec("128x4096x4096 bf16, thread " + std::to_string(i), DType::BF16, DType::BF16, 128, 4096, 4096));
  run_concurrently(jobs, 20, 5);
}

// ===================================================================================================
// 2. The first call of a shape inside a graph capture (cudaStreamCaptureModeGlobal: an unsafe call
//    such as cudaMalloc or a synchronisation, from tessera's lazy set-up, breaks the capture).
// ===================================================================================================

struct Graph {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ~Graph() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
  }
};

TEST_F(HostPath, FirstCallInsideGraphCapture) {
  // Sizes no other test uses, so that this capture holds the shape's first gemm() / attention().
  Jobs jobs;
  add(jobs, gemm_spec("136x2056x1032 bf16", DType::BF16, DType::BF16, 136, 2056, 1032));
  add(jobs, gemm_spec("decode 24x2824x11264 bf16->f32 (split-K)", DType::BF16, DType::F32, 24, 2824, 11264));
  {
    GemmSpec s = gemm_spec("unaligned 333x517x1037 f16", DType::F16, DType::F16, 333, 517, 1037);
    s.needs_workspace = true;
    add(jobs, s);
  }
  {
    GemmSpec s = gemm_spec("batched 5 x 264x392x776 f16->f32, nt", DType::F16, DType::F32, 264, 392, 776, 5);
    s.a_layout = Layout::ColMajor;
    s.b_layout = Layout::RowMajor;
    s.d_layout = Layout::ColMajor;
    add(jobs, s);
  }
  add(jobs, attn_spec("attention d128 causal GQA 12/4 bf16 1031x1543", DType::BF16, 3, 1031, 1543, 12, 4, 128, true));

  Stream stream;
  ASSERT_NE(stream.s, nullptr);
  const cudaStream_t s = stream.s;
  Blas blas;
  for (const std::unique_ptr<Job>& job : jobs) {
    SCOPED_TRACE(job->name());
    ASSERT_EQ(job->setup(s), "");
    ASSERT_EQ(job->refill(s, blas), "");
    Graph g;
    ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    const tessera::Status st = job->launch(s);
    const cudaError_t end = cudaStreamEndCapture(s, &g.graph);
    cudaGetLastError();
    ASSERT_EQ(end, cudaSuccess) << cudaGetErrorString(end)
                                << ": the capture broke (a call that capture forbids, or work on another stream); "
                                << "tessera returned " << status_text(st);
    ASSERT_TRUE(st.ok()) << status_text(st);
    ASSERT_EQ(cudaGraphInstantiate(&g.exec, g.graph, 0), cudaSuccess);
    for (int replay = 0; replay < 2; ++replay) {
      ASSERT_EQ(job->refill(s, blas), "");
      ASSERT_EQ(job->poison(s), "");
      ASSERT_EQ(cudaGraphLaunch(g.exec, s), cudaSuccess);
      EXPECT_EQ(job->check(s), "") << "replay " << replay << " of " << job->describe();
    }
  }
}

// ===================================================================================================
// 3. Operands of more than 2^31 elements: offsets must be 64-bit.
// ===================================================================================================

constexpr size_t kMemoryMargin = size_t(1) << 30;  // workspace, cuBLAS, the CUDA context's growth

TEST_F(HostPath, Index64Gemm) {
  std::vector<GemmSpec> specs;
  // 65600 x 32768 = 2^31 + 2^21 elements.
  specs.push_back(gemm_spec("A row-major 65600x32768, bf16->f32", DType::BF16, DType::F32, 65600, 256, 32768));
  specs.push_back(gemm_spec("A column-major 65600x32768, bf16->f32", DType::BF16, DType::F32, 65600, 256, 32768));
  specs.back().a_layout = Layout::ColMajor;
  // The weights past 2^31 elements on a decode shape (the orientation the heuristic may flip).
  specs.push_back(gemm_spec("B 32768x65600, decode M = 64, bf16", DType::BF16, DType::BF16, 64, 65600, 32768));
  // Batch 2 of A starts 2^31 + 1024 elements in; the gaps between batches are NaN.
  specs.push_back(gemm_spec("A batch stride 2^30 + 512, 3 x 512x1024x1024 f16", DType::F16, DType::F16, 512, 1024,
                            1024, 3));
  specs.back().a_batch_stride = (int64_t(1) << 30) + 512;

  Stream stream;
  ASSERT_NE(stream.s, nullptr);
  Blas blas;
  int ran = 0;
  std::string skipped;
  for (const GemmSpec& spec : specs) {
    SCOPED_TRACE(spec.name);
    GemmJob job(spec);  // one at a time: each holds over 4 GB
    ASSERT_GT(job.largest_operand_span(), kTwoPow31);
    const size_t need = job.device_bytes() + kMemoryMargin, have = free_device_bytes();
    if (have < need) {
      skipped += spec.name + " (needs " + std::to_string(need >> 20) + " MiB, " + std::to_string(have >> 20) +
                 " MiB free); ";
      continue;
    }
    ++ran;
    EXPECT_EQ(run_once(job, stream.s, blas), "") << job.describe();
  }
  if (ran == 0) GTEST_SKIP() << "too little free device memory: " << skipped;
  if (!skipped.empty()) std::printf("[ skipped  ] too little free device memory: %s\n", skipped.c_str());
}

TEST_F(HostPath, Index64Attention) {
  // [1026, 1024, 16, 128] = 2^31 + 2^22 elements in each of Q, K, V and O; batches 1024 and 1025
  // lie wholly past 2^31 elements. The reference checks the first, a middle and the last batches.
  AttnSpec spec = attn_spec("attention bshd 1026 x 1024 x 16 x 128 bf16", DType::BF16, 1026, 1024, 1024, 16, 16,
                            128, false);
  spec.checked = {{0, 2}, {513, 1}, {1024, 2}};
  AttnJob job(spec);
  ASSERT_GT(job.q_elements(), kTwoPow31);
  const size_t need = job.device_bytes() + kMemoryMargin, have = free_device_bytes();
  if (have < need)
    GTEST_SKIP() << "too little free device memory: needs " << (need >> 20) << " MiB, " << (have >> 20)
                 << " MiB free";
  Stream stream;
  ASSERT_NE(stream.s, nullptr);
  Blas blas;
  EXPECT_EQ(run_once(job, stream.s, blas), "") << job.describe();
}

// ===================================================================================================
// 4. An SM budget (max_sms) beside a kernel that holds the other SMs, as NCCL does.
// ===================================================================================================

// The hog: CTA i sets ready[i] (host-mapped) once resident, then spins until *stop (host-mapped) is
// set or timeout_ns pass on the global timer, so that a failing test cannot hold the GPU forever.
// PTX loaded at run time because this file is compiled by the host compiler.
constexpr const char* kHogPtx = R"PTX(
.version 7.0
.target sm_80
.address_size 64

.visible .entry tessera_test_hog(
	.param .u64 ready_param,
	.param .u64 stop_param,
	.param .u64 timeout_param
)
{
	.reg .pred 	%p<3>;
	.reg .b32 	%r<4>;
	.reg .b64 	%rd<8>;

	ld.param.u64 	%rd1, [ready_param];
	ld.param.u64 	%rd2, [stop_param];
	ld.param.u64 	%rd3, [timeout_param];
	cvta.to.global.u64 	%rd1, %rd1;
	cvta.to.global.u64 	%rd2, %rd2;
	mov.u32 	%r1, %ctaid.x;
	mul.wide.u32 	%rd4, %r1, 4;
	add.s64 	%rd4, %rd1, %rd4;
	mov.u32 	%r2, 1;
	st.volatile.global.u32 	[%rd4], %r2;
	membar.sys;
	mov.u64 	%rd5, %globaltimer;
SPIN:
	ld.volatile.global.u32 	%r3, [%rd2];
	setp.ne.u32 	%p1, %r3, 0;
	@%p1 bra 	DONE;
	nanosleep.u32 	1000;
	mov.u64 	%rd6, %globaltimer;
	sub.s64 	%rd7, %rd6, %rd5;
	setp.lt.u64 	%p2, %rd7, %rd3;
	@%p2 bra 	SPIN;
DONE:
	ret;
}
)PTX";

// Holds `ctas` SMs: one CTA per SM, because each asks for all the shared memory a CTA may have, so
// no other CTA that uses shared memory (every tessera kernel) fits beside it. Stopped (and waited
// for) on destruction, so that an early return leaves the GPU free.
class Hog {
 public:
  Hog() = default;
  Hog(const Hog&) = delete;
  Hog& operator=(const Hog&) = delete;
  ~Hog() {
    stop();
    if (flags_) cudaFreeHost(const_cast<uint32_t*>(flags_));
    if (lib_) cudaLibraryUnload(lib_);
  }

  std::string start(int ctas, cudaStream_t s) {
    ctas_ = ctas;
    stream_ = s;
    HP_CUDA(cudaLibraryLoadData(&lib_, kHogPtx, nullptr, nullptr, 0, nullptr, nullptr, 0));
    cudaKernel_t kernel = nullptr;
    HP_CUDA(cudaLibraryGetKernel(&kernel, lib_, "tessera_test_hog"));
    const void* fn = reinterpret_cast<const void*>(kernel);
    int dev = 0, smem = 0;
    HP_CUDA(cudaGetDevice(&dev));
    HP_CUDA(cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    HP_CUDA(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    void* host = nullptr;
    HP_CUDA(cudaHostAlloc(&host, size_t(ctas + 1) * sizeof(uint32_t), cudaHostAllocMapped));
    flags_ = static_cast<volatile uint32_t*>(host);
    for (int i = 0; i <= ctas; ++i) flags_[i] = 0;
    void* ready = nullptr;
    HP_CUDA(cudaHostGetDevicePointer(&ready, host, 0));
    void* stop_flag = static_cast<uint32_t*>(ready) + ctas;
    unsigned long long timeout_ns = 20ull * 1000 * 1000 * 1000;
    void* params[] = {&ready, &stop_flag, &timeout_ns};
    HP_CUDA(cudaLaunchKernel(fn, dim3(unsigned(ctas)), dim3(1), params, size_t(smem), s));
    launched_ = true;
    return "";
  }
  // True once every CTA has reported itself resident, false after `limit`.
  bool wait_resident(std::chrono::seconds limit) const {
    const auto until = Clock::now() + limit;
    while (Clock::now() < until) {
      int ready = 0;
      for (int i = 0; i < ctas_; ++i) ready += flags_[i] != 0;
      if (ready == ctas_) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
  }
  bool running() const { return launched_ && cudaStreamQuery(stream_) == cudaErrorNotReady; }
  void stop() {
    if (!launched_) return;
    flags_[ctas_] = 1;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    cudaStreamSynchronize(stream_);
    launched_ = false;
  }

 private:
  cudaLibrary_t lib_ = nullptr;
  volatile uint32_t* flags_ = nullptr;
  int ctas_ = 0;
  cudaStream_t stream_ = nullptr;
  bool launched_ = false;
};

TEST_F(HostPath, SmBudget) {
  const int sms = sm_count();
  const int held = sms / 2, budget = sms - held;
  Jobs jobs;
  for (GemmSpec s : {gemm_spec("128x4096x8192 bf16 (split-K, parallel fold without a budget)", DType::BF16,
                               DType::BF16, 128, 4096, 8192),
                     gemm_spec("64x2048x16384 bf16->f32 (split-K)", DType::BF16, DType::F32, 64, 2048, 16384),
                     gemm_spec("1024x6144x4096 bf16 (stream-K without a budget on an H100)", DType::BF16, DType::BF16,
                               1024, 6144, 4096),
                     gemm_spec("4096^3 bf16 (persistent)", DType::BF16, DType::BF16, 4096, 4096, 4096)}) {
    s.max_sms = budget;
    add(jobs, s);
  }
  AttnSpec a = attn_spec("attention d128 causal GQA 16/8 bf16 2048", DType::BF16, 4, 2048, 2048, 16, 8, 128, true);
  a.max_sms = budget;
  add(jobs, a);

  // Declared before the hog, so destroyed after it has stopped: cudaFree waits for the device.
  Stream s1, s2;
  ASSERT_NE(s1.s, nullptr);
  ASSERT_NE(s2.s, nullptr);
  Blas blas;
  // Each call once alone, checked: its kernels are loaded before the hog runs (loading a module
  // can wait for the device, which the hog keeps busy).
  for (const std::unique_ptr<Job>& job : jobs) ASSERT_EQ(run_once(*job, s2.s, blas), "") << job->describe();
  for (const std::unique_ptr<Job>& job : jobs) {
    ASSERT_EQ(job->refill(s2.s, blas), "") << job->describe();
    ASSERT_EQ(job->poison(s2.s), "") << job->describe();
  }
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // an idle device: every hog CTA finds its SM

  Hog hog;
  ASSERT_EQ(hog.start(held, s1.s), "");
  ASSERT_TRUE(hog.wait_resident(std::chrono::seconds(10))) << "the " << held << " hog CTAs never all ran at once";
  std::vector<tessera::Status> statuses;
  for (const std::unique_ptr<Job>& job : jobs) statuses.push_back(job->launch(s2.s));
  cudaError_t done = cudaErrorNotReady;
  for (const auto until = Clock::now() + std::chrono::seconds(10); Clock::now() < until;) {
    done = cudaStreamQuery(s2.s);
    if (done != cudaErrorNotReady) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const bool hog_still_running = hog.running();
  hog.stop();
  EXPECT_EQ(done, cudaSuccess) << "with max_sms = " << budget << " of " << sms
                               << " SMs, the calls did not finish within 10 s while the hog held the other "
                               << held << " (" << cudaGetErrorString(done)
                               << "): a CTA waits for one that cannot become resident";
  EXPECT_TRUE(hog_still_running) << "the hog ended (its timeout) before the calls finished: they did not run beside it";
  ASSERT_EQ(cudaStreamSynchronize(s2.s), cudaSuccess);
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_TRUE(statuses[i].ok()) << jobs[i]->describe() << ": " << status_text(statuses[i]);
    if (statuses[i].ok()) {
      EXPECT_EQ(jobs[i]->check(s2.s), "") << jobs[i]->describe();
    }
  }
}

// max_sms = 1 (one SM does it all) and above the SM count (= every SM).
TEST_F(HostPath, SmBudgetExtremes) {
  const int sms = sm_count();
  Stream stream;
  ASSERT_NE(stream.s, nullptr);
  Blas blas;
  for (int budget : {1, 2 * sms + 7}) {
    SCOPED_TRACE("max_sms = " + std::to_string(budget));
    Jobs jobs;
    for (GemmSpec s : {gemm_spec("16x1024x8192 bf16 (split-K)", DType::BF16, DType::BF16, 16, 1024, 8192),
                       gemm_spec("512x512x2048 f16->f32", DType::F16, DType::F32, 512, 512, 2048)}) {
      s.max_sms = budget;
      add(jobs, s);
    }
    AttnSpec a = attn_spec("attention d64 causal bf16", DType::BF16, 1, 512, 512, 2, 2, 64, true);
    a.max_sms = budget;
    add(jobs, a);
    for (const std::unique_ptr<Job>& job : jobs) EXPECT_EQ(run_once(*job, stream.s, blas), "") << job->describe();
  }
}

TEST_F(HostPath, SmBudgetNegativeIsRejected) {
  Stream stream;
  ASSERT_NE(stream.s, nullptr);
  const cudaStream_t s = stream.s;
  Blas blas;
  GemmJob gemm(gemm_spec("256x192x320 bf16", DType::BF16, DType::BF16, 256, 192, 320));
  AttnJob attn(attn_spec("attention d128 bf16", DType::BF16, 2, 128, 128, 4, 2, 128, false));
  for (Job* job : std::initializer_list<Job*>{&gemm, &attn}) {
    ASSERT_EQ(job->setup(s), "");
    ASSERT_EQ(job->refill(s, blas), "");
    ASSERT_EQ(job->poison(s), "");
  }
  gemm.args().max_sms = -1;
  attn.args().max_sms = -1;
  expect_refused_without_writing(gemm, s, "max_sms");
  expect_refused_without_writing(attn, s, "max_sms");
  // The C ABI carries the field too.
  const tessera_gemm_args_t cg = tessera::to_c(gemm.args());
  ASSERT_EQ(cg.max_sms, -1);
  EXPECT_EQ(tessera_gemm(&cg, nullptr, 0, s), TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tessera_last_error()).find("max_sms"), std::string::npos) << tessera_last_error();
  const tessera_attention_args_t ca = tessera::to_c(attn.args());
  ASSERT_EQ(ca.max_sms, -1);
  EXPECT_EQ(tessera_attention(&ca, s), TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tessera_last_error()).find("max_sms"), std::string::npos) << tessera_last_error();
}

// ===================================================================================================
// 5, 6. The environment: read once; re-read on request. Every change is undone on scope exit.
// ===================================================================================================

// Saves the variables (and unsets them if asked); on scope exit, assertion failures included,
// restores the saved values and re-reads the environment. Saved, not just unset: the binary sets
// TESSERA_TUNE_CACHE="" (tune_cache_off.cpp), and unsetting it would let later tests read the
// user's tuning cache.
class EnvScope {
 public:
  EnvScope(std::initializer_list<const char*> names, bool unset_now) {
    for (const char* name : names) {
      const char* value = std::getenv(name);
      saved_.emplace_back(name, value ? std::optional<std::string>(value) : std::nullopt);
      if (unset_now) unsetenv(name);
    }
    if (unset_now) tessera::reread_environment();
  }
  EnvScope(const EnvScope&) = delete;
  EnvScope& operator=(const EnvScope&) = delete;
  ~EnvScope() {
    for (const auto& [name, value] : saved_) {
      if (value)
        setenv(name.c_str(), value->c_str(), 1);
      else
        unsetenv(name.c_str());
    }
    tessera::reread_environment();
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

std::string selected_config(const tessera::GemmArgs& args) {
  std::string name;
  const tessera::Status st = tessera::gemm_select_config(args, &name);
  return st.ok() ? name : "<" + status_text(st) + ">";
}

TEST_F(HostPath, EnvironmentReadOnce) {
  EnvScope env({"TESSERA_GEMM_CONFIG", "TESSERA_GEMM_SPLITS"}, true);
  Stream stream;
  ASSERT_NE(stream.s, nullptr);
  const cudaStream_t s = stream.s;
  Blas blas;
  GemmJob job(gemm_spec("384x256x512 bf16", DType::BF16, DType::BF16, 384, 256, 512));
  ASSERT_EQ(run_once(job, s, blas), "") << job.describe();
  const std::string heuristic = selected_config(job.args());

  // A tensor-core config this device runs on this problem, other than the heuristic's.
  std::string forced;
  for (const tessera::ConfigInfo& c : tessera::gemm_configs()) {
    if (c.name == heuristic || (c.name.rfind("sm90_", 0) != 0 && c.name.rfind("sm80_", 0) != 0)) continue;
    tessera::GemmArgs g = job.args();
    g.config = c.name;
    if (selected_config(g) == c.name) {
      forced = c.name;
      break;
    }
  }
  ASSERT_NE(forced, "") << "no tensor-core config other than " << heuristic << " runs here";

  auto run_checked = [&](const char* when) {
    EXPECT_EQ(job.poison(s), "");
    const tessera::Status st = job.launch(s);
    EXPECT_TRUE(st.ok()) << when << ": " << status_text(st);
    if (st.ok()) {
      EXPECT_EQ(job.check(s), "") << when << ": " << job.describe();
    }
  };

  setenv("TESSERA_GEMM_CONFIG", forced.c_str(), 1);
  EXPECT_EQ(selected_config(job.args()), heuristic) << "TESSERA_GEMM_CONFIG was read again without reread_environment()";
  run_checked("TESSERA_GEMM_CONFIG set, not re-read");
  tessera::reread_environment();
  EXPECT_EQ(selected_config(job.args()), forced);
  run_checked("TESSERA_GEMM_CONFIG re-read");
  unsetenv("TESSERA_GEMM_CONFIG");
  EXPECT_EQ(selected_config(job.args()), forced) << "the unset was seen without reread_environment()";
  tessera::reread_environment();
  EXPECT_EQ(selected_config(job.args()), heuristic);

  // A malformed override: ignored until re-read (it was read at the last call), then refused by name.
  setenv("TESSERA_GEMM_SPLITS", "abc", 1);
  run_checked("TESSERA_GEMM_SPLITS=abc, not re-read");
  tessera::reread_environment();
  ASSERT_EQ(job.poison(s), "");
  expect_refused_without_writing(job, s, "TESSERA_GEMM_SPLITS");
}

TEST_F(HostPath, TuneCacheSpecialFiles) {
  EnvScope env({"TESSERA_TUNE_CACHE"}, false);
  std::string dir_template = (std::filesystem::temp_directory_path() / "tessera_tune_XXXXXX").string();
  ASSERT_NE(mkdtemp(dir_template.data()), nullptr) << std::strerror(errno);
  const std::filesystem::path dir(dir_template);
  struct RemoveDir {
    std::filesystem::path path;
    ~RemoveDir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } remove_dir{dir};
  const std::string fifo = (dir / "fifo").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  ASSERT_TRUE(std::filesystem::create_directory(dir / "a_directory"));

  Stream stream;
  ASSERT_NE(stream.s, nullptr);
  const cudaStream_t s = stream.s;
  Blas blas;
  // Aligned, on the tensor-core path: the call consults the cache.
  GemmJob job(gemm_spec("512x768x1024 bf16", DType::BF16, DType::BF16, 512, 768, 1024));
  ASSERT_EQ(job.setup(s), "");
  ASSERT_EQ(job.refill(s, blas), "");

  const std::pair<const char*, std::string> targets[] = {
      {"a FIFO without a writer", fifo},
      {"a directory", (dir / "a_directory").string()},
      {"a directory that does not exist", (dir / "missing" / "dir").string() + "/"}};
  for (const auto& [what, path] : targets) {
    SCOPED_TRACE(std::string("TESSERA_TUNE_CACHE = ") + what);
    setenv("TESSERA_TUNE_CACHE", path.c_str(), 1);
    ASSERT_EQ(job.poison(s), "");
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    // On another thread, so that a call that blocks (opening a FIFO waits for a writer) fails the
    // test instead of hanging it; the re-read too, in case it opens the file itself.
    std::future<tessera::Status> call = std::async(std::launch::async, [&] {
      tessera::reread_environment();
      return job.launch(s);
    });
    if (call.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
      ADD_FAILURE() << "gemm() did not return within 10 s";
      // A writer opening the FIFO releases a reader blocked in open(); it then reads end-of-file.
      for (const auto until = Clock::now() + std::chrono::seconds(10);
           Clock::now() < until && call.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready;) {
        const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
        if (fd >= 0) ::close(fd);
      }
    }
    const tessera::Status st = call.get();
    ASSERT_TRUE(st.ok()) << status_text(st);
    EXPECT_EQ(job.check(s), "") << job.describe();
    EXPECT_EQ(tessera::gemm_tune_cache_path(), path) << "reread_environment() did not re-read TESSERA_TUNE_CACHE";
  }
}

// ===================================================================================================
// Decode calls with key splits, back to back on one stream and from a CUDA graph: the splits are
// combined in the decode kernel by whichever CTA of a row tile finishes last (arrival counters in a
// launch slot, left zeroed for the next launch) and each call is a dependent launch of the one before.
// Every call writes its own poisoned outputs; all must be bit-identical to the first (the combine runs
// in split order), and within one rounding of the combine kernel's (TESSERA_ATTN_DYNAMIC=0).
// ===================================================================================================

struct DecodeProblem {
  int64_t batch, sq, sk, hq, hkv, d;
  tt::DeviceBuffer q, k, v;
  tessera::AttentionArgs args(void* o, float* lse) const {
    tessera::AttentionArgs a;
    a.q = q.p;
    a.k = k.p;
    a.v = v.p;
    a.o = o;
    a.lse = lse;
    a.batch = batch;
    a.seqlen_q = sq;
    a.seqlen_k = sk;
    a.heads_q = hq;
    a.heads_kv = hkv;
    a.head_dim = d;
    tessera::bshd_strides(sq, hq, d, a.q_stride);
    tessera::bshd_strides(sk, hkv, d, a.k_stride);
    tessera::bshd_strides(sk, hkv, d, a.v_stride);
    tessera::bshd_strides(sq, hq, d, a.o_stride);
    return a;
  }
  size_t o_elems() const { return size_t(batch * sq * hq * d); }
  size_t lse_elems() const { return size_t(batch * sq * hq); }
};

TEST_F(HostPath, DecodeSplitsBackToBack) {
  // Packed rows per (batch, KV head) 4 and 8 (the fused combine's reach), many splits each.
  DecodeProblem probs[2] = {{2, 1, 9000, 32, 8, 128, {}, {}, {}}, {3, 2, 5003, 16, 4, 64, {}, {}, {}}};
  constexpr int kCalls = 24;  // per problem, interleaved
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  size_t ws_bytes = 0;
  uint64_t seed = 11;
  for (DecodeProblem& pr : probs) {
    for (tt::DeviceBuffer* b : {&pr.q, &pr.k, &pr.v}) {
      const int64_t n = b == &pr.q ? pr.batch * pr.sq * pr.hq * pr.d : pr.batch * pr.sk * pr.hkv * pr.d;
      ASSERT_EQ(b->alloc(size_t(n) * 2), cudaSuccess);
      ASSERT_EQ(tt::fill_uniform(b->p, DType::BF16, 1, 1, n, n, 0, seed++, s), cudaSuccess);
    }
    size_t bytes = 0;
    tt::DeviceBuffer o_any;  // the size query validates o too
    ASSERT_EQ(o_any.alloc(pr.o_elems() * 2), cudaSuccess);
    const tessera::Status st = tessera::attention_workspace_size(pr.args(o_any.p, nullptr), &bytes);
    ASSERT_TRUE(st.ok()) << status_text(st);
    ASSERT_GT(bytes, 0u) << "no key splits: the test needs a decode call that splits its keys";
    ws_bytes = std::max(ws_bytes, bytes);
  }
  tt::DeviceBuffer ws;
  ASSERT_EQ(ws.alloc(ws_bytes), cudaSuccess);
  // Outputs: [problem][call] O (bf16) and LSE (fp32); call kCalls is the combine kernel's.
  tt::DeviceBuffer o[2], lse[2];
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(o[i].alloc((kCalls + 1) * probs[i].o_elems() * 2), cudaSuccess);
    ASSERT_EQ(lse[i].alloc((kCalls + 1) * probs[i].lse_elems() * 4), cudaSuccess);
  }
  auto out = [&](int i, int call) { return o[i].c() + call * probs[i].o_elems() * 2; };
  auto lse_out = [&](int i, int call) { return reinterpret_cast<float*>(lse[i].c() + call * probs[i].lse_elems() * 4); };
  auto poison = [&] {
    for (int i = 0; i < 2; ++i) {
      ASSERT_EQ(cudaMemsetAsync(o[i].p, 0xFF, o[i].bytes, s), cudaSuccess);
      ASSERT_EQ(cudaMemsetAsync(lse[i].p, 0xFF, lse[i].bytes, s), cudaSuccess);
    }
  };
  auto calls = [&](int first, int count) {
    for (int c = first; c < first + count; ++c)
      for (int i = 0; i < 2; ++i) {
        const tessera::Status st = tessera::attention(probs[i].args(out(i, c), lse_out(i, c)), s, ws.p, ws_bytes);
        ASSERT_TRUE(st.ok()) << status_text(st);
      }
  };
  auto check = [&](const char* what) {
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    for (int i = 0; i < 2; ++i) {
      SCOPED_TRACE(std::string(what) + ", problem " + std::to_string(i));
      std::vector<uint16_t> h_o((kCalls + 1) * probs[i].o_elems());
      std::vector<float> h_lse((kCalls + 1) * probs[i].lse_elems());
      ASSERT_EQ(cudaMemcpy(h_o.data(), o[i].p, o[i].bytes, cudaMemcpyDeviceToHost), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(h_lse.data(), lse[i].p, lse[i].bytes, cudaMemcpyDeviceToHost), cudaSuccess);
      const size_t n = probs[i].o_elems(), nl = probs[i].lse_elems();
      int bad = 0;
      for (size_t e = 0; e < n && bad < 5; ++e) {
        const float first = float(tt::host_value(&h_o[e], DType::BF16)), kernel = float(tt::host_value(&h_o[kCalls * n + e], DType::BF16));
        if (!(std::fabs(first - kernel) <= 8e-3f * std::fabs(kernel) + 1e-6f))
          ADD_FAILURE() << "O[" << e << "]: fused " << first << ", combine kernel " << kernel, ++bad;
        for (int c = 1; c < kCalls && bad < 5; ++c)
          if (h_o[c * n + e] != h_o[e]) ADD_FAILURE() << "call " << c << " O[" << e << "] differs from call 0", ++bad;
      }
      for (size_t e = 0; e < nl && bad < 5; ++e) {
        if (!(std::fabs(h_lse[e] - h_lse[kCalls * nl + e]) <= 1e-5f * std::fabs(h_lse[kCalls * nl + e]) + 1e-6f))
          ADD_FAILURE() << "LSE[" << e << "]: fused " << h_lse[e] << ", combine kernel " << h_lse[kCalls * nl + e], ++bad;
        for (int c = 1; c < kCalls && bad < 5; ++c)
          if (std::memcmp(&h_lse[c * nl + e], &h_lse[e], 4) != 0) ADD_FAILURE() << "call " << c << " LSE[" << e << "] differs", ++bad;
      }
    }
  };

  poison();
  {
    EnvScope env({"TESSERA_ATTN_DYNAMIC"}, false);
    setenv("TESSERA_ATTN_DYNAMIC", "0", 1);
    tessera::reread_environment();
    calls(kCalls, 1);
  }
  calls(0, kCalls);
  check("back to back");

  // The same calls from a graph (each captured launch has a slot of its own), replayed three times,
  // poisoned before each replay.
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  calls(0, kCalls);
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int replay = 0; replay < 3; ++replay) {
    for (int i = 0; i < 2; ++i) {  // the combine kernel's results (the last call) stay
      ASSERT_EQ(cudaMemsetAsync(o[i].p, 0xFF, kCalls * probs[i].o_elems() * 2, s), cudaSuccess);
      ASSERT_EQ(cudaMemsetAsync(lse[i].p, 0xFF, kCalls * probs[i].lse_elems() * 4, s), cudaSuccess);
    }
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    check(("graph replay " + std::to_string(replay)).c_str());
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
}

}  // namespace

// ===================================================================================================
// A kernel launched as a programmatic dependent launch must wait for the previous kernel before it
// reads that kernel's output: the sm90 GEMM lets the next kernel launch as soon as it starts. Here an
// sm90 GEMM writes H (poisoned before it) and the next call on the stream reads it at once: a skinny
// GEMM (16 rows of H times a weight; a dependent launch) and a decode attention call (H as its
// queries; attention/entry.hpp kDecodeDependentLaunch). Each chained result must equal the same call
// run after a synchronize, bit for bit, on every repetition.
// ===================================================================================================

namespace {

// x (rows x k) @ w^T, bf16, row-major D; `config` forces the kernel ("" = heuristic).
tessera::GemmArgs linear(const void* x, const void* w, void* d, int64_t rows, int64_t n, int64_t k,
                         const char* config = "") {
  tessera::GemmArgs g;
  g.a = tessera::dense(x, DType::BF16, rows, k);
  g.b = tessera::dense(w, DType::BF16, k, n, Layout::ColMajor);  // W (n x k) row-major: op(B) = W^T, K x N
  g.d = tessera::dense(d, DType::BF16, rows, n);
  g.config = config;
  return g;
}

TEST_F(HostPath, DependentLaunchWaitsForTheProducer) {
  constexpr int64_t kRows = 64, kK = 8192, kH = 4096;  // H = X W1^T: 64 x 4096, a long-K sm90 GEMM
  constexpr int64_t kSkinnyRows = 16, kN2 = 2048;      // Y = H[:16] W2^T: the skinny kernel
  constexpr int64_t kHeads = 32, kHeadDim = 128, kKeys = 4096;  // H as 64 x 32 heads of 128 queries
  static_assert(kHeads * kHeadDim == kH, "H's rows are the queries of one decode step");
  Stream stream;
  ASSERT_NE(stream.s, nullptr);
  tt::DeviceBuffer x, w1, w2, h, y, kv, o;
  ASSERT_EQ(x.alloc(kRows * kK * 2), cudaSuccess);
  ASSERT_EQ(w1.alloc(kH * kK * 2), cudaSuccess);
  ASSERT_EQ(w2.alloc(kN2 * kH * 2), cudaSuccess);
  ASSERT_EQ(h.alloc(kRows * kH * 2), cudaSuccess);
  ASSERT_EQ(y.alloc(2 * kSkinnyRows * kN2 * 2), cudaSuccess);       // chained, then after a synchronize
  ASSERT_EQ(kv.alloc(kRows * kKeys * 8 * kHeadDim * 2), cudaSuccess);  // K and V: 8 KV heads
  ASSERT_EQ(o.alloc(2 * kRows * kH * 2), cudaSuccess);
  uint64_t seed = 77;
  for (auto [b, n] : {std::pair{&x, kRows * kK}, {&w1, kH * kK}, {&w2, kN2 * kH}, {&kv, kRows * kKeys * 8 * kHeadDim}})
    ASSERT_EQ(tt::fill_uniform(b->p, DType::BF16, 1, 1, n, n, 0, seed++, stream.s), cudaSuccess);
  const int64_t kv_half = kRows * kKeys * 4 * kHeadDim;  // K then V, 4 KV heads each
  tessera::AttentionArgs att;
  att.q = h.p;
  att.k = kv.p;
  att.v = kv.c() + kv_half * 2;
  att.batch = kRows;
  att.seqlen_q = 1;
  att.seqlen_k = kKeys;
  att.heads_q = kHeads;
  att.heads_kv = 4;
  att.head_dim = kHeadDim;
  tessera::bshd_strides(1, kHeads, kHeadDim, att.q_stride);
  tessera::bshd_strides(kKeys, 4, kHeadDim, att.k_stride);
  tessera::bshd_strides(kKeys, 4, kHeadDim, att.v_stride);
  tessera::bshd_strides(1, kHeads, kHeadDim, att.o_stride);

  const tessera::GemmArgs produce = linear(x.p, w1.p, h.p, kRows, kH, kK, "sm90_64x64x64_s13_c1x2_coop");
  std::string cfg;
  const tessera::GemmArgs consume = linear(h.p, w2.p, y.p, kSkinnyRows, kN2, kH);
  ASSERT_TRUE(tessera::gemm_select_config(consume, &cfg).ok());
  ASSERT_EQ(cfg.rfind("skinny", 0), 0u) << "the consumer should be the skinny kernel, got " << cfg;
  size_t ws_bytes = 0, bytes = 0;
  for (const tessera::GemmArgs* g : {&produce, &consume}) {
    ASSERT_TRUE(tessera::gemm_workspace_size(*g, &bytes).ok());
    ws_bytes = std::max(ws_bytes, bytes);
  }
  att.o = o.p;
  ASSERT_TRUE(tessera::attention_workspace_size(att, &bytes).ok());
  ws_bytes = std::max(ws_bytes, bytes);
  tt::DeviceBuffer ws;
  ASSERT_EQ(ws.alloc(std::max<size_t>(ws_bytes, 256)), cudaSuccess);

  auto second = [&](int slot) {  // the consumers, writing output slot 0 (chained) or 1 (after a synchronize)
    tessera::GemmArgs g = consume;
    g.d.ptr = y.c() + slot * kSkinnyRows * kN2 * 2;
    EXPECT_TRUE(tessera::gemm(g, stream.s, ws.p, ws.bytes).ok());
    tessera::AttentionArgs a = att;
    a.o = o.c() + slot * kRows * kH * 2;
    EXPECT_TRUE(tessera::attention(a, stream.s, ws.p, ws.bytes).ok());
  };
  auto produce_h = [&] {
    ASSERT_EQ(cudaMemsetAsync(h.p, 0xFF, h.bytes, stream.s), cudaSuccess);  // NaN until the GEMM writes it
    ASSERT_TRUE(tessera::gemm(produce, stream.s, ws.p, ws.bytes).ok());
  };
  for (int rep = 0; rep < 8; ++rep) {
    SCOPED_TRACE("repetition " + std::to_string(rep));
    ASSERT_EQ(cudaMemsetAsync(y.p, 0xFF, y.bytes, stream.s), cudaSuccess);
    ASSERT_EQ(cudaMemsetAsync(o.p, 0xFF, o.bytes, stream.s), cudaSuccess);
    produce_h();
    second(0);  // launched right behind the producer
    ASSERT_EQ(cudaStreamSynchronize(stream.s), cudaSuccess);
    second(1);  // H final long before
    ASSERT_EQ(cudaStreamSynchronize(stream.s), cudaSuccess);
    for (auto [buf, half] : {std::pair{&y, kSkinnyRows * kN2 * 2}, {&o, kRows * kH * 2}}) {
      std::vector<uint8_t> host(buf->bytes);
      ASSERT_EQ(cudaMemcpy(host.data(), buf->p, buf->bytes, cudaMemcpyDeviceToHost), cudaSuccess);
      int64_t differ = 0;
      for (int64_t e = 0; e < half; ++e) differ += host[e] != host[half + e];
      EXPECT_EQ(differ, 0) << (buf == &y ? "skinny GEMM" : "decode attention")
                           << ": bytes that differ from the same call after a synchronize";
    }
  }
}

}  // namespace
