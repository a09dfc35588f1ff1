// The GEMM tuning cache (gemm/tune_cache.hpp, gemm/tune.cpp): line format and parse, the file's
// path from the environment, load/append through temporary files, whatever else the path may name
// (a FIFO, a directory, a device, a file over the size cap, garbage, an unopenable path), and
// which cached configurations gemm() may use (tuned_config). No GPU needed.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <type_traits>

#include "core/device.hpp"
#include "gemm/configs.hpp"
#include "gemm/plan.hpp"
#include "gemm/tune_cache.hpp"
#include "tessera/tessera.hpp"

// The library's internal namespace (headers under src/).
namespace ti = tessera::gemm_impl;
namespace fs = std::filesystem;

namespace {

using ti::TuneCache;
using ti::TuneKey;

TuneKey sample_key() {
  TuneKey k;
  k.device = "NVIDIA H100 80GB HBM3";
  k.cc = 90;
  k.m = 4096;
  k.n = 2048;
  k.k = 1024;
  k.batch = 3;
  k.ab_dtype = ti::kBF16;
  k.a_k_major = true;
  k.b_k_major = false;
  k.d_dtype = ti::kF32;
  return k;
}

void expect_same_key(const TuneKey& a, const TuneKey& b) {
  EXPECT_EQ(a.device, b.device);
  EXPECT_EQ(a.cc, b.cc);
  EXPECT_EQ(a.m, b.m);
  EXPECT_EQ(a.n, b.n);
  EXPECT_EQ(a.k, b.k);
  EXPECT_EQ(a.batch, b.batch);
  EXPECT_EQ(a.ab_dtype, b.ab_dtype);
  EXPECT_EQ(a.a_k_major, b.a_k_major);
  EXPECT_EQ(a.b_k_major, b.b_k_major);
  EXPECT_EQ(a.d_dtype, b.d_dtype);
  EXPECT_EQ(ti::tune_key_string(a), ti::tune_key_string(b));
}

// A fresh directory under the system temp dir, removed with everything in it at the end.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = fs::temp_directory_path() /
            ("tessera_tune_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p);
  out << text;
}

// Sets (or, with null, unsets) an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_.c_str(), old_->c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// ---- format / parse -------------------------------------------------------------------------------

TEST(TuneCacheFormat, RoundTrip) {
  const TuneKey key = sample_key();
  const std::string line = ti::format_tune_line(key, "sm90_128x256x64");
  EXPECT_EQ(line, "v1 90 4096 2048 1024 3 1 1 0 2 sm90_128x256x64 NVIDIA H100 80GB HBM3");
  TuneKey back;
  std::string config;
  ASSERT_TRUE(ti::parse_tune_line(line, &back, &config));
  EXPECT_EQ(config, "sm90_128x256x64");
  expect_same_key(key, back);
}

TEST(TuneCacheFormat, RoundTripEveryFlagAndDtype) {
  for (int ab = 0; ab <= 1; ++ab)
    for (int dt = 0; dt <= 2; ++dt)
      for (int ak = 0; ak <= 1; ++ak)
        for (int bk = 0; bk <= 1; ++bk) {
          TuneKey key = sample_key();
          key.ab_dtype = ab;
          key.d_dtype = dt;
          key.a_k_major = ak;
          key.b_k_major = bk;
          key.m = 0;  // empty-but-valid extents parse too
          key.batch = 1;
          TuneKey back;
          std::string config;
          ASSERT_TRUE(ti::parse_tune_line(ti::format_tune_line(key, "cfg"), &back, &config));
          expect_same_key(key, back);
        }
}

TEST(TuneCacheFormat, DeviceNameIsNormalised) {
  TuneKey key = sample_key();
  key.device = "  Weird\tGPU\nname  ";
  const std::string line = ti::format_tune_line(key, "c");
  EXPECT_EQ(line.find('\n'), std::string::npos);
  TuneKey back;
  std::string config;
  ASSERT_TRUE(ti::parse_tune_line(line, &back, &config));
  EXPECT_EQ(back.device, "Weird GPU name");
  EXPECT_EQ(ti::tune_key_string(key), ti::tune_key_string(back));  // the lookup key matches the stored one

  key.device = "";
  ASSERT_TRUE(ti::parse_tune_line(ti::format_tune_line(key, "c"), &back, &config));
  EXPECT_EQ(back.device, "unknown");
  // Trailing blanks and a CR (a file edited on Windows) do not change the device.
  ASSERT_TRUE(ti::parse_tune_line("v1 90 1 2 3 1 0 1 1 0 cfg  My GPU  \r", &back, &config));
  EXPECT_EQ(back.device, "My GPU");
}

TEST(TuneCacheFormat, MalformedLinesAreRejected) {
  const char* bad[] = {
      "",
      "   ",
      "# v1 90 1 2 3 1 0 1 1 0 cfg GPU",       // comment
      "v2 90 1 2 3 1 0 1 1 0 cfg GPU",         // unknown version
      "v1 90 1 2 3 1 0 1 1 0 cfg",             // no device name
      "v1 90 1 2 3 1 0 1 1 0",                 // no config
      "v1 90 1 2 3 1 0 1 1",                   // short
      "v1 x90 1 2 3 1 0 1 1 0 cfg GPU",        // non-numeric
      "v1 90 1 2 3.5 1 0 1 1 0 cfg GPU",       // not an integer
      "v1 90 1 2 3 0 0 1 1 0 cfg GPU",         // batch 0
      "v1 90 -1 2 3 1 0 1 1 0 cfg GPU",        // negative M
      "v1 0 1 2 3 1 0 1 1 0 cfg GPU",          // cc 0
      "v1 90 1 2 3 1 7 1 1 0 cfg GPU",         // dtype tag out of range
      "v1 90 1 2 3 1 0 1 1 9 cfg GPU",         // dtype tag out of range
      "v1 90 1 2 3 1 0 2 1 0 cfg GPU",         // major flag not 0/1
      "v1 90 1 2 3 1 0 1 true 0 cfg GPU",      // major flag not 0/1
      "v1 90 99999999999999999999 2 3 1 0 1 1 0 cfg GPU",  // overflow
  };
  for (const char* line : bad) {
    TuneKey key;
    std::string config;
    EXPECT_FALSE(ti::parse_tune_line(line, &key, &config)) << "accepted: '" << line << "'";
  }
}

// ---- path ---------------------------------------------------------------------------------------

TEST(TuneCachePath, Selection) {
  EXPECT_EQ(ti::tune_cache_path_from("/x/cache.txt", "/xdg", "/home/u"), "/x/cache.txt");
  EXPECT_EQ(ti::tune_cache_path_from("", "/xdg", "/home/u"), "");  // set but empty: disabled
  EXPECT_EQ(ti::tune_cache_path_from(nullptr, "/xdg", "/home/u"), "/xdg/tessera/gemm_tune.txt");
  EXPECT_EQ(ti::tune_cache_path_from(nullptr, "", "/home/u"), "/home/u/.cache/tessera/gemm_tune.txt");
  EXPECT_EQ(ti::tune_cache_path_from(nullptr, nullptr, "/home/u"), "/home/u/.cache/tessera/gemm_tune.txt");
  EXPECT_EQ(ti::tune_cache_path_from(nullptr, nullptr, nullptr), "");
  EXPECT_EQ(ti::tune_cache_path_from(nullptr, nullptr, ""), "");
}

TEST(TuneCachePath, FromEnvironment) {
  {
    ScopedEnv t("TESSERA_TUNE_CACHE", "/tmp/explicit_tune.txt");
    ScopedEnv x("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(ti::tune_cache_path(), "/tmp/explicit_tune.txt");
  }
  {
    ScopedEnv t("TESSERA_TUNE_CACHE", "");
    ScopedEnv x("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(ti::tune_cache_path(), "");
  }
  {
    ScopedEnv t("TESSERA_TUNE_CACHE", nullptr);
    ScopedEnv x("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(ti::tune_cache_path(), "/xdg/tessera/gemm_tune.txt");
  }
  {
    ScopedEnv t("TESSERA_TUNE_CACHE", nullptr);
    ScopedEnv x("XDG_CACHE_HOME", nullptr);
    ScopedEnv h("HOME", "/home/someone");
    EXPECT_EQ(ti::tune_cache_path(), "/home/someone/.cache/tessera/gemm_tune.txt");
  }
  {
    ScopedEnv t("TESSERA_TUNE_CACHE", nullptr);
    ScopedEnv x("XDG_CACHE_HOME", nullptr);
    ScopedEnv h("HOME", nullptr);
    EXPECT_EQ(ti::tune_cache_path(), "");
  }
}

// ---- the file -----------------------------------------------------------------------------------

TEST(TuneCacheFile, MissingFileIsEmpty) {
  TempDir dir;
  TuneCache cache((dir.path() / "none.txt").string());
  EXPECT_TRUE(cache.empty());
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_FALSE(cache.lookup(sample_key()));
}

TEST(TuneCacheFile, LoadSkipsMalformedAndLaterLinesWin) {
  TempDir dir;
  const fs::path file = dir.path() / "cache.txt";
  TuneKey other = sample_key();
  other.m = 8192;
  write_file(file, "# comment\n"
                   "\n"
                   "garbage line\n" +
                       ti::format_tune_line(sample_key(), "first") + "\n" +
                       "v1 90 4096 2048 1024 3 1 1 0 2 broken\n" +          // no device: ignored
                       ti::format_tune_line(other, "other") + "\n" +
                       ti::format_tune_line(sample_key(), "second") + "\n" +  // wins over "first"
                       "v1 90 4096 2048 1024 3 1 1 0 2 third");               // truncated last line
  TuneCache cache(file.string());
  EXPECT_FALSE(cache.empty());
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.lookup(sample_key()).value_or(""), "second");
  EXPECT_EQ(cache.lookup(other).value_or(""), "other");

  // Any field that differs is another problem.
  TuneKey k = sample_key();
  k.device = "NVIDIA H200";
  EXPECT_FALSE(cache.lookup(k));
  k = sample_key();
  k.cc = 80;
  EXPECT_FALSE(cache.lookup(k));
  k = sample_key();
  k.batch = 1;
  EXPECT_FALSE(cache.lookup(k));
  k = sample_key();
  k.b_k_major = true;
  EXPECT_FALSE(cache.lookup(k));
  k = sample_key();
  k.d_dtype = ti::kBF16;
  EXPECT_FALSE(cache.lookup(k));
}

TEST(TuneCacheFile, StoreCreatesDirectoriesAndAFreshLoadSeesIt) {
  TempDir dir;
  const fs::path file = dir.path() / "nested" / "deeper" / "gemm_tune.txt";
  {
    TuneCache cache(file.string());
    std::string error;
    ASSERT_TRUE(cache.store(sample_key(), "cfg_a", &error)) << error;
    EXPECT_EQ(cache.lookup(sample_key()).value_or(""), "cfg_a");  // visible at once in this process
    ASSERT_TRUE(cache.store(sample_key(), "cfg_b", &error)) << error;
    EXPECT_EQ(cache.lookup(sample_key()).value_or(""), "cfg_b");
  }
  ASSERT_TRUE(fs::exists(file));
  TuneCache fresh(file.string());  // another process, in effect
  EXPECT_EQ(fresh.size(), 1u);
  EXPECT_EQ(fresh.lookup(sample_key()).value_or(""), "cfg_b");

  // A store after entries were loaded from the file keeps the newest value, here and on reload.
  std::string error;
  ASSERT_TRUE(fresh.store(sample_key(), "cfg_c", &error)) << error;
  EXPECT_EQ(fresh.lookup(sample_key()).value_or(""), "cfg_c");
  TuneCache again(file.string());
  EXPECT_EQ(again.lookup(sample_key()).value_or(""), "cfg_c");
}

TEST(TuneCacheFile, StoreBeforeAnyLookupKeepsOlderEntries) {
  TempDir dir;
  const fs::path file = dir.path() / "cache.txt";
  TuneKey other = sample_key();
  other.n = 64;
  write_file(file, ti::format_tune_line(other, "old") + "\n" + ti::format_tune_line(sample_key(), "stale") + "\n");
  TuneCache cache(file.string());
  std::string error;
  ASSERT_TRUE(cache.store(sample_key(), "new", &error)) << error;
  EXPECT_EQ(cache.lookup(sample_key()).value_or(""), "new");
  EXPECT_EQ(cache.lookup(other).value_or(""), "old");
}

TEST(TuneCacheFile, StoreFailures) {
  std::string error;
  TuneCache disabled("");
  EXPECT_FALSE(disabled.store(sample_key(), "cfg", &error));
  EXPECT_NE(error.find("disabled"), std::string::npos) << error;
  EXPECT_FALSE(disabled.lookup(sample_key()));

  TempDir dir;
  TuneCache cache((dir.path() / "c.txt").string());
  EXPECT_FALSE(cache.store(sample_key(), "", &error));
  EXPECT_FALSE(cache.store(sample_key(), "two words", &error));
  // The parent "directory" is a file: cannot be created.
  write_file(dir.path() / "plain", "x");
  TuneCache blocked((dir.path() / "plain" / "c.txt").string());
  error.clear();
  EXPECT_FALSE(blocked.store(sample_key(), "cfg", &error));
  EXPECT_FALSE(error.empty());
}

// ---- whatever TESSERA_TUNE_CACHE names: no hang, no crash, no throw -----------------------------

// `fn()` run on a detached thread, or nullopt if it has not returned within 5 s: a regression that
// blocks (opening a FIFO waits for its other end) fails the test instead of hanging the run. `fn`
// must own what it uses, since a blocked thread outlives the test.
template <class F>
std::optional<std::invoke_result_t<F>> within_5s(F fn) {
  using R = std::invoke_result_t<F>;
  auto done = std::make_shared<std::promise<R>>();
  std::future<R> result = done->get_future();  // from a promise: its destructor does not wait
  std::thread([done, fn = std::move(fn)]() mutable { done->set_value(fn()); }).detach();
  if (result.wait_for(std::chrono::seconds(5)) != std::future_status::ready) return std::nullopt;
  return result.get();
}

struct LoadThenStore {
  bool empty = false;
  size_t size = 0;
  bool found = false;
  bool stored = false;
  std::string error;
};

// A fresh cache on `path`: what it loaded, then a store of sample_key() -> "cfg" (on a watched thread).
std::optional<LoadThenStore> load_then_store(const std::string& path) {
  return within_5s([path] {
    TuneCache cache(path);
    LoadThenStore r;
    r.empty = cache.empty();
    r.size = cache.size();
    r.found = cache.lookup(sample_key()).has_value();
    r.stored = cache.store(sample_key(), "cfg", &r.error);
    return r;
  });
}

// Loads as an empty cache, and refuses the store with an error that names the path and contains `why`.
void expect_ignored_and_refused(const std::string& path, const std::string& why) {
  const std::optional<LoadThenStore> r = load_then_store(path);
  ASSERT_TRUE(r.has_value()) << "load or store on " << path << " did not return within 5 s";
  EXPECT_TRUE(r->empty) << path;
  EXPECT_EQ(r->size, 0u) << path;
  EXPECT_FALSE(r->found) << path;
  EXPECT_FALSE(r->stored) << path;
  EXPECT_NE(r->error.find(path), std::string::npos) << r->error;
  EXPECT_NE(r->error.find(why), std::string::npos) << r->error;
}

TEST(TuneCacheOddFile, FifoNeitherBlocksNorLoads) {
  TempDir dir;
  const std::string fifo = (dir.path() / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0) << std::strerror(errno);
  expect_ignored_and_refused(fifo, "is a FIFO");

  // With a writer at the other end holding data, loading must still not read from it.
  const int writer = ::open(fifo.c_str(), O_RDWR | O_NONBLOCK);  // O_RDWR: opens without a reader
  ASSERT_GE(writer, 0) << std::strerror(errno);
  const std::string line = ti::format_tune_line(sample_key(), "from_fifo") + "\n";
  ASSERT_EQ(::write(writer, line.data(), line.size()), ssize_t(line.size()));
  expect_ignored_and_refused(fifo, "is a FIFO");
  ::close(writer);
}

TEST(TuneCacheOddFile, DirectoryIsIgnoredAndRefused) {
  TempDir dir;
  expect_ignored_and_refused(dir.path().string(), "is a directory");
  // Also where the directory has the file's name inside the cache directory.
  fs::create_directories(dir.path() / "gemm_tune.txt");
  expect_ignored_and_refused((dir.path() / "gemm_tune.txt").string(), "is a directory");
}

TEST(TuneCacheOddFile, CharacterDeviceIsNeitherReadNorWritten) {
  // /dev/zero never ends: read line by line it would take memory without bound.
  for (const char* dev : {"/dev/zero", "/dev/null"}) {
    if (!fs::exists(dev)) continue;
    expect_ignored_and_refused(dev, "is a character device");
  }
}

// A file of up to the cap loads, and takes a store that keeps it within the cap; one byte more and
// none of it is read. Sparse files: no disk.
TEST(TuneCacheOddFile, SizeCap) {
  TempDir dir;
  const std::string line = ti::format_tune_line(sample_key(), "capped") + "\n";
  const off_t cap = off_t(ti::kTuneCacheMaxBytes);
  for (const off_t size : {cap - 1000, cap, cap + 1}) {
    const fs::path file = dir.path() / ("cache_" + std::to_string(size) + ".txt");
    write_file(file, line);  // then one line of NULs up to `size`, which parses as malformed
    ASSERT_EQ(::truncate(file.c_str(), size), 0) << std::strerror(errno);
    ASSERT_EQ(fs::file_size(file), uintmax_t(size));
    if (size > cap) {
      expect_ignored_and_refused(file.string(), "MiB");
      continue;
    }
    TuneCache cache(file.string());
    EXPECT_EQ(cache.size(), 1u);
    EXPECT_EQ(cache.lookup(sample_key()).value_or(""), "capped");
    TuneKey other = sample_key();
    other.m = 1;
    std::string error;
    const bool stored = cache.store(other, "more", &error);
    if (size == cap) {  // the line would take the file past the cap, where it would not load
      EXPECT_FALSE(stored);
      EXPECT_NE(error.find(file.string()), std::string::npos) << error;
      EXPECT_NE(error.find("16 MiB"), std::string::npos) << error;
      EXPECT_EQ(fs::file_size(file), uintmax_t(size));
    } else {
      EXPECT_TRUE(stored) << error;
      EXPECT_EQ(TuneCache(file.string()).lookup(other).value_or(""), "more");
    }
  }
}

TEST(TuneCacheOddFile, BinaryGarbageIsSkippedAndAStoreStillLands) {
  TempDir dir;
  const fs::path file = dir.path() / "garbage.txt";
  std::mt19937 rng(24);
  std::string bytes(1 << 16, '\0');
  for (char& c : bytes) c = char(rng() & 0xff);
  bytes.back() = 'x';  // an unterminated last line: the stored entry must not be glued onto it
  write_file(file, bytes);
  const std::optional<LoadThenStore> r = load_then_store(file.string());
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->size, 0u);
  EXPECT_TRUE(r->stored) << r->error;
  TuneCache reread(file.string());
  EXPECT_EQ(reread.size(), 1u);
  EXPECT_EQ(reread.lookup(sample_key()).value_or(""), "cfg");
}

// Lines that a looser parser (strtol, atoi, C strings) would read as sample_key() come after the
// good one: any of them accepted would replace "good".
TEST(TuneCacheOddFile, HostileLinesAreSkippedOneByOne) {
  TempDir dir;
  const fs::path file = dir.path() / "hostile.txt";
  const std::string dev = sample_key().device;
  const char with_nul[] = "v1 90 4096\0 2048 1024 3 1 1 0 2 bad NVIDIA H100 80GB HBM3\n";
  std::string text;
  text += "v1 90 4096 2048 1024 3 1 1 0 2 " + std::string(1 << 20, 'c') + " " + dev + "\n";  // 1 MiB name
  text += std::string(1 << 20, '\n');
  text += std::string(1 << 20, ' ') + "\n";
  text += ti::format_tune_line(sample_key(), "good") + "\n";
  text += "v1 90 18446744073709555712 2048 1024 3 1 1 0 2 bad " + dev + "\n";  // 2^64 + 4096
  text += "v1 4294967386 4096 2048 1024 3 1 1 0 2 bad " + dev + "\n";          // 2^32 + 90
  text += "v1 90 " + std::string(100000, '9') + " 2048 1024 3 1 1 0 2 bad " + dev + "\n";
  text += "v1 90 -9223372036854775808 2048 1024 3 1 1 0 2 bad " + dev + "\n";
  text += "v1 90 4096 2048 1024 3 1 1 0 2.0 bad " + dev + "\n";
  text += std::string(with_nul, sizeof with_nul - 1);  // "4096\0": not a number
  text += std::string("\xff\xfe\0v1", 5) + "\n";
  write_file(file, text);
  TuneCache cache(file.string());
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.lookup(sample_key()).value_or(""), "good");
}

TEST(TuneCacheOddFile, UnopenablePaths) {
  TempDir dir;
  write_file(dir.path() / "plain", "x");
  // A component that is a regular file (ENOTDIR), and a name longer than NAME_MAX (ENAMETOOLONG).
  expect_ignored_and_refused((dir.path() / "plain" / "gemm_tune.txt").string(), std::strerror(ENOTDIR));
  expect_ignored_and_refused((dir.path() / "plain" / "sub" / "gemm_tune.txt").string(), std::strerror(ENOTDIR));
  expect_ignored_and_refused((dir.path() / std::string(300, 'n')).string(), std::strerror(ENAMETOOLONG));
  if (fs::is_regular_file("/etc/passwd")) expect_ignored_and_refused("/etc/passwd/x", std::strerror(ENOTDIR));
}

TEST(TuneCacheOddFile, UnreadableFile) {
  if (::geteuid() == 0) GTEST_SKIP() << "root reads and writes files whatever their mode";
  TempDir dir;
  const fs::path file = dir.path() / "locked.txt";
  write_file(file, ti::format_tune_line(sample_key(), "locked") + "\n");
  ASSERT_EQ(::chmod(file.c_str(), 0), 0);
  expect_ignored_and_refused(file.string(), std::strerror(EACCES));
}

// ---- tuned_config: what gemm() may take from the cache ------------------------------------------

const ti::Config* first_of(ti::Kernel kernel) {
  for (const ti::Config& c : ti::configs())
    if (c.kernel == kernel) return &c;
  return nullptr;
}

tessera::detail::DeviceInfo device(int cc, int smem_optin = 232448) {
  tessera::detail::DeviceInfo d;
  d.device = 0;
  d.cc_major = cc / 10;
  d.cc_minor = cc % 10;
  d.sm_count = 132;
  d.smem_optin = smem_optin;
  std::snprintf(d.name, sizeof d.name, "%s", "Test GPU");
  return d;
}

ti::GemmPlan plan_for(int64_t m, int64_t n, int64_t k) {
  tessera::GemmArgs args;
  const void* p = reinterpret_cast<const void*>(uintptr_t(1) << 20);
  args.a = tessera::dense(p, tessera::DType::BF16, m, k);
  args.b = tessera::dense(p, tessera::DType::BF16, k, n);
  args.d = tessera::dense(reinterpret_cast<void*>(uintptr_t(1) << 21), tessera::DType::F32, m, n);
  EXPECT_TRUE(ti::validate(args).ok());
  return ti::make_plan(args);
}

TEST(TuneCacheUse, TunedConfigChecksTheDevice) {
  const ti::Config* sm80 = first_of(ti::Kernel::Sm80);
  const ti::Config* sm90 = first_of(ti::Kernel::Sm90);
  ASSERT_NE(sm80, nullptr);
  TempDir dir;
  TuneCache cache((dir.path() / "c.txt").string());
  const ti::GemmPlan plan = plan_for(512, 256, 128);
  const auto h100 = device(90), a100 = device(80);
  std::string error;

  EXPECT_EQ(ti::tuned_config(cache, plan, h100, true).config, nullptr);  // nothing cached

  ASSERT_TRUE(cache.store(ti::make_tune_key(plan, a100), sm80->name, &error)) << error;
  EXPECT_EQ(ti::tuned_config(cache, plan, a100, true).config, sm80);
  EXPECT_EQ(ti::tuned_config(cache, plan, a100, false).config, sm80);  // sm80 kernels need no TMA
  EXPECT_EQ(ti::tuned_config(cache, plan, h100, true).config, nullptr);  // keyed on cc: another device
  EXPECT_EQ(ti::tuned_config(cache, plan_for(512, 256, 64), a100, true).config, nullptr);  // another problem
  EXPECT_EQ(ti::tuned_config(cache, plan, device(80, sm80->smem_bytes - 1), true).config, nullptr);  // smem

  auto renamed = a100;
  std::snprintf(renamed.name, sizeof renamed.name, "%s", "Other GPU");
  EXPECT_EQ(ti::tuned_config(cache, plan, renamed, true).config, nullptr);

  ASSERT_TRUE(cache.store(ti::make_tune_key(plan, a100), "no_such_config", &error)) << error;
  EXPECT_EQ(ti::tuned_config(cache, plan, a100, true).config, nullptr);  // unknown to this build

  if (sm90) {
    ASSERT_TRUE(cache.store(ti::make_tune_key(plan, h100), sm90->name, &error)) << error;
    EXPECT_EQ(ti::tuned_config(cache, plan, h100, true).config, sm90);
    EXPECT_EQ(ti::tuned_config(cache, plan, h100, false).config, nullptr);  // operands not TMA-ready
    EXPECT_FALSE(ti::tuned_config(cache, plan, h100, true).flip);
    // An sm_90a config cannot run on an sm_80 device even if an entry says so.
    ASSERT_TRUE(cache.store(ti::make_tune_key(plan, a100), sm90->name, &error)) << error;
    EXPECT_EQ(ti::tuned_config(cache, plan, a100, true).config, nullptr);
  }
}

// An entry keeps the orientation `tessera tune` timed: "<name>+flip" comes back flipped, and the
// flipped spelling of a config that cannot flip is ignored like an unknown name.
TEST(TuneCacheUse, TunedConfigKeepsTheOrientation) {
  const ti::Config* flippable = nullptr;
  const ti::Config* fixed = nullptr;
  for (const ti::Config& c : ti::configs()) {
    if (c.kernel != ti::Kernel::Sm90) continue;
    if (c.flip && !flippable) flippable = &c;
    if (!c.flip && !fixed) fixed = &c;
  }
  ASSERT_NE(flippable, nullptr);
  ASSERT_NE(fixed, nullptr);
  TempDir dir;
  TuneCache cache((dir.path() / "c.txt").string());
  const ti::GemmPlan plan = plan_for(128, 512, 256);
  const auto h100 = device(90);
  std::string error;
  ASSERT_TRUE(cache.store(ti::make_tune_key(plan, h100), std::string(flippable->name) + "+flip", &error)) << error;
  const ti::ConfigChoice got = ti::tuned_config(cache, plan, h100, true);
  EXPECT_EQ(got.config, flippable);
  EXPECT_TRUE(got.flip);
  EXPECT_EQ(ti::tuned_config(cache, plan, h100, false).config, nullptr);  // operands not TMA-ready
  ASSERT_TRUE(cache.store(ti::make_tune_key(plan, h100), std::string(fixed->name) + "+flip", &error)) << error;
  EXPECT_EQ(ti::tuned_config(cache, plan, h100, true).config, nullptr);
  ASSERT_TRUE(cache.store(ti::make_tune_key(plan, h100), std::string(flippable->name) + "+flipped", &error)) << error;
  EXPECT_EQ(ti::tuned_config(cache, plan, h100, true).config, nullptr);  // not a spelling
  // The line format carries the spelling through a file: a fresh cache reads it back.
  ASSERT_TRUE(cache.store(ti::make_tune_key(plan, h100), std::string(flippable->name) + "+flip", &error)) << error;
  TuneCache reread(cache.path());
  EXPECT_EQ(ti::tuned_config(reread, plan, h100, true).config, flippable);
  EXPECT_TRUE(ti::tuned_config(reread, plan, h100, true).flip);
}

TEST(TuneCacheUse, KeyIsTheCanonicalProblem) {
  const ti::GemmPlan plan = plan_for(512, 256, 128);
  const TuneKey key = ti::make_tune_key(plan, device(90));
  EXPECT_EQ(key.device, "Test GPU");
  EXPECT_EQ(key.cc, 90);
  EXPECT_EQ(key.m, plan.params.m);
  EXPECT_EQ(key.n, plan.params.n);
  EXPECT_EQ(key.k, 128);
  EXPECT_EQ(key.batch, 1);
  EXPECT_EQ(key.ab_dtype, ti::kBF16);
  EXPECT_EQ(key.d_dtype, ti::kF32);
  EXPECT_EQ(key.a_k_major, plan.a.k_major);
  EXPECT_EQ(key.b_k_major, plan.b.k_major);
}

TEST(TuneCacheUse, StoreRejectsUnknownConfigWithoutAGpu) {
  tessera::GemmArgs args;
  const void* p = reinterpret_cast<const void*>(uintptr_t(1) << 20);
  args.a = tessera::dense(p, tessera::DType::F16, 64, 64);
  args.b = tessera::dense(p, tessera::DType::F16, 64, 64);
  args.d = tessera::dense(reinterpret_cast<void*>(uintptr_t(1) << 21), tessera::DType::F16, 64, 64);
  const tessera::Status s = tessera::gemm_tune_store(args, "no_such_config");
  EXPECT_EQ(s.code, TESSERA_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(s.message.find("no_such_config"), std::string::npos) << s.message;
}

}  // namespace
