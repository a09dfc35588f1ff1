// No C++ exception crosses the C ABI (tessera.h): detail::guard turns each kind into
// INTERNAL_ERROR with its message, and every C entry, run while host allocations fail, returns a
// status (or its getter's NULL / 0) instead of terminating the process. No GPU needed: without
// one the calls that would run a kernel return CUDA_ERROR; with one they run on real buffers.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "core/status.hpp"
#include "gemm/tune_cache.hpp"
#include "tessera/tessera.h"
#include "tessera/tessera.hpp"

// ---- allocation failure, for this test binary only ----------------------------------------------
// While t_allocs_left >= 0, operator new succeeds that many more times and then throws
// std::bad_alloc: on every later call, or with t_fail_once on that one only (which finds code that
// swallows the failure and carries on with a half-built result). t_allocs_left is -1 otherwise,
// where this is the usual operator new, so the other tests linked into this binary are
// unaffected; thread_local keeps gtest's and other tests' threads out of it.
namespace {
thread_local long t_allocs_left = -1;
thread_local bool t_fail_once = false;
thread_local bool t_injected = false;  // an allocation failed because of t_allocs_left
}  // namespace

// GCC pairs the inlined new and delete below and warns about malloc/free: they do match here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(std::size_t size) {
  if (t_allocs_left == 0) {
    t_injected = true;
    if (t_fail_once) t_allocs_left = -1;
    throw std::bad_alloc();
  }
  if (t_allocs_left > 0) --t_allocs_left;
  for (;;) {
    if (void* p = std::malloc(size ? size : 1)) return p;
    const std::new_handler handler = std::get_new_handler();
    if (!handler) throw std::bad_alloc();
    handler();
  }
}
void* operator new[](std::size_t size) { return ::operator new(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

namespace {

// Host allocations in this scope fail from the (after + 1)-th on (all of them with after = 0), or
// with `once` only that one.
class FailAllocations {
 public:
  explicit FailAllocations(long after = 0, bool once = false) {
    t_injected = false;
    t_fail_once = once;
    t_allocs_left = after;
  }
  ~FailAllocations() { t_allocs_left = -1; }
  FailAllocations(const FailAllocations&) = delete;
  FailAllocations& operator=(const FailAllocations&) = delete;
};

bool has(const char* text, const std::string& part) { return text && std::string(text).find(part) != std::string::npos; }

// ---- detail::guard: every kind of exception becomes a status ------------------------------------

using tessera::detail::guard;

TEST(CAbiGuard, PassesResultsThrough) {
  EXPECT_EQ(guard([] { return TESSERA_STATUS_NOT_SUPPORTED; }), TESSERA_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(guard<int>([] { return 7; }, 0), 7);
}

TEST(CAbiGuard, EachExceptionBecomesInternalErrorWithItsMessage) {
  struct Case {
    const char* name;
    std::function<tessera_status_t()> body;
    std::string message;  // expected in tessera_last_error()
  };
  const std::filesystem::path path = "/no/such/dir/gemm_tune.txt";
  const Case cases[] = {
      {"bad_alloc", []() -> tessera_status_t { throw std::bad_alloc(); }, "out of host memory"},
      {"runtime_error", []() -> tessera_status_t { throw std::runtime_error("boom"); }, "boom"},
      {"filesystem_error",
       [&]() -> tessera_status_t {
         throw std::filesystem::filesystem_error("create_directories", path,
                                                 std::error_code(ENOTDIR, std::generic_category()));
       },
       path.string()},
      {"system_error",
       []() -> tessera_status_t { throw std::system_error(std::make_error_code(std::errc::resource_deadlock_would_occur), "mutex"); },
       "mutex"},
      {"length_error", []() -> tessera_status_t { return tessera_status_t(std::string(std::string::npos, 'x').size()); },
       ""},
      {"int", []() -> tessera_status_t { throw 42; }, "unknown C++ exception"},
  };
  for (const Case& c : cases) {
    tessera::detail::remember(tessera::Status::success());
    EXPECT_EQ(guard(c.body), TESSERA_STATUS_INTERNAL_ERROR) << c.name;
    EXPECT_TRUE(has(tessera_last_error(), c.message)) << c.name << ": " << tessera_last_error();
    EXPECT_STRNE(tessera_last_error(), "") << c.name;
  }
  // The getters' neutral values.
  EXPECT_EQ(guard<const char*>([]() -> const char* { throw std::runtime_error("name"); }, nullptr), nullptr);
  EXPECT_EQ(guard<int>([]() -> int { throw std::bad_alloc(); }, 0), 0);
  EXPECT_STREQ(tessera_last_error(), "out of host memory");
}

// Where even the message cannot be copied, tessera_last_error() still says what happened.
TEST(CAbiGuard, MessageThatCannotBeStored) {
  const std::runtime_error big(std::string(100000, 'e'));  // longer than anything stored before
  const tessera::Status failed{TESSERA_STATUS_INVALID_ARGUMENT, std::string(200000, 'v')};
  tessera_status_t s;
  {
    FailAllocations fail;
    s = guard([&]() -> tessera_status_t { throw big; });  // copying an exception does not allocate
  }
  EXPECT_EQ(s, TESSERA_STATUS_INTERNAL_ERROR);
  EXPECT_TRUE(has(tessera_last_error(), "out of host memory")) << tessera_last_error();
  {
    FailAllocations fail;
    s = tessera::detail::remember(failed).code;
  }
  EXPECT_EQ(s, TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(has(tessera_last_error(), "out of host memory")) << tessera_last_error();
  tessera::detail::remember(tessera::Status::success());
  EXPECT_STREQ(tessera_last_error(), "");
}

// ---- every C entry while host allocations fail --------------------------------------------------

// Device buffers for the calls that pass validation: real ones with a GPU, so that those calls
// may run; without one, addresses that nothing dereferences (the device check fails first).
class Buffers {
 public:
  Buffers() {
    int n = 0;
    gpu_ = cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
    if (!gpu_ || cudaMalloc(&base_, kBytes) != cudaSuccess) {
      cudaGetLastError();
      gpu_ = false;
      base_ = reinterpret_cast<void*>(uintptr_t(1) << 24);
    }
  }
  ~Buffers() {
    if (gpu_) cudaFree(base_);
  }
  bool gpu() const { return gpu_; }
  void* at(size_t offset) const { return static_cast<char*>(base_) + offset; }

  static constexpr size_t kBytes = size_t(1) << 22;  // four regions of 1 MiB

 private:
  bool gpu_ = false;
  void* base_ = nullptr;
};

tessera::GemmArgs gemm_args(const Buffers& buf) {
  tessera::GemmArgs g;
  g.a = tessera::dense(buf.at(0), tessera::DType::BF16, 64, 64);
  g.b = tessera::dense(buf.at(1 << 20), tessera::DType::BF16, 64, 64);
  g.d = tessera::dense(buf.at(2 << 20), tessera::DType::F32, 64, 64);
  return g;
}

tessera_attention_args_t attention_args(const Buffers& buf) {
  tessera::AttentionArgs a;
  a.q = buf.at(0);
  a.k = buf.at(1 << 20);
  a.v = buf.at(2 << 20);
  a.o = buf.at(3 << 20);
  a.dtype = tessera::DType::BF16;
  a.batch = a.heads_q = a.heads_kv = 1;
  a.seqlen_q = a.seqlen_k = a.head_dim = 64;
  tessera::bshd_strides(64, 1, 64, a.q_stride);
  tessera::bshd_strides(64, 1, 64, a.k_stride);
  tessera::bshd_strides(64, 1, 64, a.v_stride);
  tessera::bshd_strides(64, 1, 64, a.o_stride);
  return tessera::to_c(a);
}

// One sequence of 64 query rows and keys. On a GPU the cu_seqlens hold -1 (set here), which the
// kernels read as empty sequences: the call runs and writes nothing.
tessera_varlen_args_t varlen_args(const Buffers& buf) {
  tessera::VarlenArgs a;
  a.q = buf.at(0);
  a.k = buf.at(1 << 20);
  a.v = buf.at(2 << 20);
  a.o = buf.at(3 << 20);
  auto* cu = static_cast<int32_t*>(buf.at((3 << 20) + (512 << 10)));  // past O's 8 KiB
  if (buf.gpu()) {
    EXPECT_EQ(cudaMemset(cu, 0xFF, 8), cudaSuccess);
  }
  a.cu_seqlens_q = a.cu_seqlens_k = cu;
  a.dtype = tessera::DType::BF16;
  a.batch = a.heads_q = a.heads_kv = 1;
  a.total_q = a.total_k = a.max_seqlen_q = a.max_seqlen_k = a.head_dim = 64;
  tessera::packed_strides(1, 64, a.q_stride);
  tessera::packed_strides(1, 64, a.k_stride);
  tessera::packed_strides(1, 64, a.v_stride);
  tessera::packed_strides(1, 64, a.o_stride);
  return tessera::to_c(a);
}

struct Sweep {
  tessera_status_t expected;  // the status without failures
  int failing_runs;           // runs in which an allocation failed
};

// Runs `call` once as it is (its status: `expected`), then again with the 1st, 2nd, ... host
// allocation failing (that one only, or every one from there on), until a run meets no failure.
// Each run must return: `expected` where the failure was absorbed (a tuning cache that cannot be
// read is an empty one), else INTERNAL_ERROR with "out of host memory" in tessera_last_error().
// An exception that got out would end this process (or fail the test, if gtest caught it).
template <class Call>
Sweep sweep_allocation_failures(const std::string& what, Call call) {
  Sweep r{call(), 0};
  for (const bool once : {false, true})
    for (long n = 0;; ++n) {
      if (n > 100000) {
        ADD_FAILURE() << what << ": still allocating after 100000 allocations";
        break;
      }
      tessera_status_t s;
      bool injected;
      {
        FailAllocations fail(n, once);
        s = call();
        injected = t_injected;
      }
      if (!injected) {
        EXPECT_EQ(s, r.expected) << what << ": a run without failures";
        break;
      }
      ++r.failing_runs;
      if (s != r.expected) {
        EXPECT_EQ(s, TESSERA_STATUS_INTERNAL_ERROR) << what << " with allocation " << n << " failing";
        EXPECT_TRUE(has(tessera_last_error(), "out of host memory")) << what << ": " << tessera_last_error();
      }
    }
  return r;
}

// Sets an environment variable for one scope.
// (The library reads the environment once: re-read it after each change.)
class EnvVar {
 public:
  EnvVar(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
    tessera_reread_environment();
  }
  ~EnvVar() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
    tessera_reread_environment();
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(CAbiAllocationFailure, EveryStatusEntry) {
  const Buffers buf;
  const tessera::GemmArgs valid = gemm_args(buf);
  const tessera_gemm_args_t g = tessera::to_c(valid);  // borrows valid.config: keep `valid` alive
  tessera::GemmArgs unknown_config = valid;
  unknown_config.config = "no_such_config";  // a long message listing every config
  const tessera_gemm_args_t g_unknown = tessera::to_c(unknown_config);
  tessera_gemm_args_t g_bad_dtype = g;
  g_bad_dtype.a.dtype = TESSERA_DTYPE_F32;
  const tessera_attention_args_t at = attention_args(buf);
  tessera_attention_args_t at_bad = at;
  at_bad.head_dim = 100;
  const tessera_varlen_args_t vl = varlen_args(buf);
  tessera_varlen_args_t vl_bad = vl;
  vl_bad.heads_kv = 3;
  void* ws = buf.at(3 << 20);
  size_t bytes = 0;
  const char* name = nullptr;

  struct Entry {
    std::string what;
    std::function<tessera_status_t()> call;
    bool valid;  // passes validation: runs (GPU) or fails on the device (no GPU)
  };
  const std::vector<Entry> entries = {
      {"tessera_gemm_workspace_size", [&] { return tessera_gemm_workspace_size(&g, &bytes); }, true},
      {"tessera_gemm", [&] { return tessera_gemm(&g, ws, 1 << 20, nullptr); }, true},
      {"tessera_gemm_select_config", [&] { return tessera_gemm_select_config(&g, &name); }, true},
      {"tessera_attention", [&] { return tessera_attention(&at, nullptr); }, true},
      {"tessera_gemm_workspace_size(null args)", [&] { return tessera_gemm_workspace_size(nullptr, &bytes); }, false},
      {"tessera_gemm_workspace_size(null bytes)", [&] { return tessera_gemm_workspace_size(&g, nullptr); }, false},
      {"tessera_gemm_workspace_size(bad dtype)", [&] { return tessera_gemm_workspace_size(&g_bad_dtype, &bytes); },
       false},
      {"tessera_gemm(null args)", [&] { return tessera_gemm(nullptr, nullptr, 0, nullptr); }, false},
      {"tessera_gemm(unknown config)", [&] { return tessera_gemm(&g_unknown, ws, 1 << 20, nullptr); }, false},
      {"tessera_gemm(bad dtype)", [&] { return tessera_gemm(&g_bad_dtype, ws, 1 << 20, nullptr); }, false},
      {"tessera_gemm_select_config(null name)", [&] { return tessera_gemm_select_config(&g, nullptr); }, false},
      {"tessera_gemm_select_config(unknown config)", [&] { return tessera_gemm_select_config(&g_unknown, &name); },
       false},
      {"tessera_attention(null args)", [&] { return tessera_attention(nullptr, nullptr); }, false},
      {"tessera_attention(head_dim 100)", [&] { return tessera_attention(&at_bad, nullptr); }, false},
      {"tessera_attention_varlen", [&] { return tessera_attention_varlen(&vl, nullptr, 0, nullptr); }, true},
      {"tessera_attention_varlen(null args)", [&] { return tessera_attention_varlen(nullptr, nullptr, 0, nullptr); },
       false},
      {"tessera_attention_varlen(heads_kv 3)", [&] { return tessera_attention_varlen(&vl_bad, nullptr, 0, nullptr); },
       false},
      {"tessera_attention_varlen_workspace_size(heads_kv 3)",
       [&] { return tessera_attention_varlen_workspace_size(&vl_bad, &bytes); }, false},
  };
  for (const Entry& e : entries) {
    const Sweep r = sweep_allocation_failures(e.what, e.call);
    // A failure builds its message (longer than std::string keeps inline), so the sweep failed
    // at least that allocation; a success may allocate nothing at all.
    if (r.expected != TESSERA_STATUS_SUCCESS) {
      EXPECT_GT(r.failing_runs, 0) << e.what;
    }
    if (!e.valid) {
      EXPECT_EQ(r.expected, TESSERA_STATUS_INVALID_ARGUMENT) << e.what;
    } else if (!buf.gpu() && e.what != "tessera_gemm_workspace_size") {  // nothing could run
      EXPECT_NE(r.expected, TESSERA_STATUS_SUCCESS) << e.what;
    } else {
      EXPECT_EQ(r.expected, TESSERA_STATUS_SUCCESS) << e.what << ": " << tessera_last_error();
    }
  }
  if (buf.gpu()) {
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
}

// An override read from the environment fails with a message too.
TEST(CAbiAllocationFailure, BadEnvironmentOverride) {
  const Buffers buf;
  const tessera::GemmArgs valid = gemm_args(buf);
  const tessera_gemm_args_t g = tessera::to_c(valid);
  size_t bytes = 0;
  const EnvVar splits("TESSERA_GEMM_SPLITS", "not_a_number");
  const Sweep r = sweep_allocation_failures("TESSERA_GEMM_SPLITS", [&] { return tessera_gemm_workspace_size(&g, &bytes); });
  EXPECT_EQ(r.expected, TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_GT(r.failing_runs, 0);
}

// Every line of the file at `path` is a comment or an entry: nothing half-written.
void expect_whole_lines(const std::string& path) {
  std::ifstream in(path);
  std::string line, config;
  tessera::gemm_impl::TuneKey key;
  while (std::getline(in, line))
    EXPECT_TRUE(line.empty() || line[0] == '#' || tessera::gemm_impl::parse_tune_line(line, &key, &config))
        << "broken line in " << path << ": '" << line << "'";
}

// The tuning cache that gemm() consults (on a GPU) throws nothing either: out of host memory, its
// load is an empty cache, a lookup a miss, a store a failure that writes no broken line
// (tune_cache.hpp).
TEST(CAbiAllocationFailure, TuneCacheThrowsNothing) {
  namespace ti = tessera::gemm_impl;
  const std::string path = testing::TempDir() + "tessera_c_abi_tune_" + std::to_string(::getpid()) + ".txt";
  ti::TuneKey cached, stored;
  cached.device = stored.device = "Test GPU";
  cached.cc = stored.cc = 90;
  cached.m = cached.n = cached.k = 64;
  stored.m = stored.n = stored.k = 128;
  int failing_runs = 0;
  for (const bool once : {false, true})
    for (long n = 0;; ++n) {
      ASSERT_LT(n, 100000) << "still allocating after 100000 allocations";
      std::ofstream(path) << ti::format_tune_line(cached, "cached") << "\n";  // afresh for each run
      auto cache = std::make_unique<ti::TuneCache>(path);
      std::optional<std::string> found;
      bool ok, injected;
      std::string error;
      {
        FailAllocations fail(n, once);
        found = cache->lookup(cached);
        ok = cache->store(stored, "stored", &error);
        injected = t_injected;
      }
      expect_whole_lines(path);
      if (!injected) {
        EXPECT_EQ(found.value_or("(none)"), "cached");
        EXPECT_TRUE(ok) << error;
        EXPECT_EQ(cache->lookup(stored).value_or("(none)"), "stored");
        EXPECT_EQ(ti::TuneCache(path).lookup(stored).value_or("(none)"), "stored");
        break;
      }
      ++failing_runs;
      EXPECT_TRUE(!found || *found == "cached") << *found;
      if (!ok && !error.empty()) {
        EXPECT_NE(error.find(path), std::string::npos) << error;
      }
    }
  EXPECT_GT(failing_runs, 0);
  std::remove(path.c_str());
}

// The entries without a status: the value they return when nothing fails, or their neutral value.
TEST(CAbiAllocationFailure, Getters) {
  const int count = tessera_gemm_config_count();
  ASSERT_GT(count, 0);
  const std::string first = tessera_gemm_config_name(0);
  const std::string reason = tessera_gemm_config_description(0);
  const std::string success = tessera_status_string(TESSERA_STATUS_SUCCESS);
  const std::string version = tessera_version();
  int n;
  const char *name, *description, *out_of_range, *status, *ver, *error;
  {
    FailAllocations fail;
    n = tessera_gemm_config_count();
    name = tessera_gemm_config_name(0);
    description = tessera_gemm_config_description(0);
    out_of_range = tessera_gemm_config_name(count);
    status = tessera_status_string(TESSERA_STATUS_SUCCESS);
    ver = tessera_version();
    error = tessera_last_error();
  }
  EXPECT_TRUE(n == count || n == 0) << n;
  EXPECT_TRUE(!name || first == name);
  EXPECT_TRUE(!description || reason == description);
  EXPECT_EQ(out_of_range, nullptr);
  EXPECT_EQ(status, success);
  EXPECT_EQ(ver, version);
  EXPECT_NE(error, nullptr);
  EXPECT_EQ(tessera_gemm_config_name(-1), nullptr);
  EXPECT_EQ(tessera_gemm_config_description(count), nullptr);
}

}  // namespace
