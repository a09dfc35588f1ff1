// The tuning cache file (see tune_cache.hpp): format, parse, path, load once, append.
#include "gemm/tune_cache.hpp"

#include "core/environment.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace tessera::gemm_impl {
namespace {

constexpr const char* kVersion = "v1";
constexpr int kMaxDTypeTag = 6;  // kE5M2

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'; }

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && is_blank(s[b])) ++b;
  while (e > b && is_blank(s[e - 1])) --e;
  return s.substr(b, e - b);
}

// The whole token as a decimal integer (an optional leading '-'), else false.
bool to_int64(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  const char* first = s.data();
  const char* last = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(first, last, *out);
  return ec == std::errc() && ptr == last;
}

bool to_flag(const std::string& s, bool* out) {
  if (s == "0" || s == "1") {
    *out = s == "1";
    return true;
  }
  return false;
}

// The next whitespace-separated token of `line` from `*pos`; false at the end.
bool next_token(const std::string& line, size_t* pos, std::string* token) {
  size_t i = *pos;
  while (i < line.size() && is_blank(line[i])) ++i;
  const size_t start = i;
  while (i < line.size() && !is_blank(line[i])) ++i;
  *pos = i;
  if (i == start) return false;
  *token = line.substr(start, i - start);
  return true;
}

// "cc m n k batch ab_dtype a_k_major b_k_major d_dtype ", the numbers of a key. Built with
// std::to_string, not a stream: a stream swallows std::bad_alloc and returns a truncated string,
// which store() would write to the file as a broken line.
std::string key_fields(const TuneKey& key) {
  std::string s;
  for (const int64_t v : {int64_t(key.cc), key.m, key.n, key.k, key.batch, int64_t(key.ab_dtype),
                          int64_t(key.a_k_major ? 1 : 0), int64_t(key.b_k_major ? 1 : 0), int64_t(key.d_dtype)})
    s += std::to_string(v) + ' ';
  return s;
}

}  // namespace

std::string normalize_device_name(const std::string& name) {
  std::string s = name;
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  s = trim(s);
  return s.empty() ? std::string("unknown") : s;
}

std::string format_tune_line(const TuneKey& key, const std::string& config) {
  return std::string(kVersion) + ' ' + key_fields(key) + config + ' ' + normalize_device_name(key.device);
}

bool parse_tune_line(const std::string& line, TuneKey* key, std::string* config) {
  size_t pos = 0;
  std::string tok[11];  // version, cc, m, n, k, batch, ab, ak, bk, dt, config
  for (std::string& t : tok)
    if (!next_token(line, &pos, &t)) return false;
  if (tok[0] != kVersion) return false;  // also skips comments ("#...") and other versions
  int64_t cc = 0, ab = 0, dt = 0;
  TuneKey k;
  if (!to_int64(tok[1], &cc) || !to_int64(tok[2], &k.m) || !to_int64(tok[3], &k.n) || !to_int64(tok[4], &k.k) ||
      !to_int64(tok[5], &k.batch) || !to_int64(tok[6], &ab) || !to_flag(tok[7], &k.a_k_major) ||
      !to_flag(tok[8], &k.b_k_major) || !to_int64(tok[9], &dt))
    return false;
  if (cc <= 0 || cc > 10000 || k.m < 0 || k.n < 0 || k.k < 0 || k.batch < 1 || ab < 0 || ab > kMaxDTypeTag ||
      dt < 0 || dt > kMaxDTypeTag)
    return false;
  const std::string device = trim(line.substr(pos));
  if (device.empty()) return false;
  k.cc = int(cc);
  k.ab_dtype = int(ab);
  k.d_dtype = int(dt);
  k.device = normalize_device_name(device);
  *key = k;
  *config = tok[10];
  return true;
}

std::string tune_key_string(const TuneKey& key) { return key_fields(key) + normalize_device_name(key.device); }

std::string tune_cache_path_from(const char* tune_env, const char* xdg_cache_home, const char* home) {
  if (tune_env) return tune_env;  // "" = disabled
  const std::string file = "tessera/gemm_tune.txt";
  if (xdg_cache_home && *xdg_cache_home) return (std::filesystem::path(xdg_cache_home) / file).string();
  if (home && *home) return (std::filesystem::path(home) / ".cache" / file).string();
  return "";
}

std::string tune_cache_path() {
  return tune_cache_path_from(std::getenv("TESSERA_TUNE_CACHE"), std::getenv("XDG_CACHE_HOME"),
                              std::getenv("HOME"));
}

namespace {

// "a directory", "a FIFO", ... for the error that refuses a file that is not a regular one.
const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

// Closes `fd` on every path out of the loader and the writer.
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

// The file's text if it is a regular file of at most kTuneCacheMaxBytes, else nullopt. Checked
// with stat before the open (opening a device can have effects of its own), opened without
// blocking (a FIFO put there since would block a plain open until a writer comes), checked again
// with fstat on what was opened, and read until EOF with the cap rechecked, since the size can
// grow meanwhile or read as 0 (files of /proc).
std::optional<std::string> read_cache_file(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  int fd;
  do fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  while (fd < 0 && errno == EINTR);
  if (fd < 0) return std::nullopt;  // missing, no permission, a component not a directory, ...
  FdCloser closer{fd};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > off_t(kTuneCacheMaxBytes)) return std::nullopt;
  std::string text;
  char buf[1 << 16];
  for (;;) {
    const ssize_t got = ::read(fd, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return std::nullopt;
    if (got == 0) return text;
    if (text.size() + size_t(got) > kTuneCacheMaxBytes) return std::nullopt;
    text.append(buf, size_t(got));
  }
}

}  // namespace

void TuneCache::ensure_loaded() noexcept {
  try {
    std::call_once(loaded_, [this] { load(); });
  } catch (...) {  // std::system_error from call_once itself: stay empty
  }
}

// Whatever fails here (no host memory for the text or the entries) leaves an empty cache: the
// heuristic then chooses, as without a file.
void TuneCache::load() noexcept {
  if (path_.empty()) return;
  try {
    const std::optional<std::string> text = read_cache_file(path_);
    if (!text) return;
    std::map<std::string, std::string> entries;
    std::string config;
    TuneKey key;
    for (size_t begin = 0; begin < text->size();) {
      size_t end = text->find('\n', begin);
      if (end == std::string::npos) end = text->size();
      if (parse_tune_line(text->substr(begin, end - begin), &key, &config))
        entries[tune_key_string(key)] = config;  // later lines win
      begin = end + 1;
    }
    std::lock_guard<std::mutex> lock(mu_);
    entries_.swap(entries);  // empty until now: store() loads before it adds an entry
    has_entries_.store(!entries_.empty(), std::memory_order_release);
  } catch (...) {
  }
}

std::optional<std::string> TuneCache::lookup(const TuneKey& key) noexcept {
  ensure_loaded();
  if (!has_entries_.load(std::memory_order_acquire)) return std::nullopt;
  try {
    const std::string k = tune_key_string(key);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(k);
    if (it == entries_.end()) return std::nullopt;
    return it->second;
  } catch (...) {  // no host memory for the key or the copy: a miss, so the heuristic chooses
    return std::nullopt;
  }
}

size_t TuneCache::size() {
  ensure_loaded();
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

bool TuneCache::store(const TuneKey& key, const std::string& config, std::string* error) noexcept {
  auto report = [&](const char* why) noexcept {
    if (!error) return;
    try {
      *error = path_ + ": " + why;
    } catch (...) {  // no memory even for the message
      error->clear();
    }
  };
  try {
    return store_line(key, config, error);
  } catch (const std::exception& e) {  // std::bad_alloc, std::filesystem_error, ...
    report(e.what());
  } catch (...) {
    report("unknown C++ exception");
  }
  return false;
}

bool TuneCache::store_line(const TuneKey& key, const std::string& config, std::string* error) {
  auto fail = [&](const std::string& why) {
    if (error) *error = why;
    return false;
  };
  auto fail_errno = [&](const char* doing) {
    const int err = errno;  // before the message's allocations
    return fail(std::string(doing) + " " + path_ + ": " + std::strerror(err));
  };
  if (path_.empty()) return fail("the tuning cache is disabled (TESSERA_TUNE_CACHE is set to an empty value)");
  if (config.empty()) return fail("empty configuration name");
  for (char c : config)
    if (is_blank(c) || static_cast<unsigned char>(c) < 0x20)
      return fail("configuration name with blanks: '" + config + "'");
  ensure_loaded();  // so that this entry, the newest, is not overwritten by an older line later
  const std::string rule = "; the tuning cache must be a regular file of at most " +
                           std::to_string(kTuneCacheMaxBytes >> 20) + " MiB";

  // Refuse what load would ignore, before creating anything: another kind of file (a FIFO would
  // block the open below), or a path that cannot be a file at all.
  struct stat st;
  if (::stat(path_.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode)) return fail(path_ + " is " + file_kind(st.st_mode) + rule);
  } else if (errno != ENOENT) {
    return fail_errno("checking");
  }
  const std::filesystem::path path(path_);
  std::error_code ec;
  if (path.has_parent_path()) {
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) return fail("creating " + path.parent_path().string() + " for " + path_ + ": " + ec.message());
  }

  std::lock_guard<std::mutex> lock(mu_);
  int fd;  // read and write: the last byte is read below
  do fd = ::open(path_.c_str(), O_RDWR | O_APPEND | O_CREAT | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0666);
  while (fd < 0 && errno == EINTR);
  if (fd < 0) return fail_errno("opening");
  FdCloser closer{fd};
  // Again on what was opened: the path may have been replaced since the stat.
  if (::fstat(fd, &st) != 0) return fail_errno("checking");
  if (!S_ISREG(st.st_mode)) return fail(path_ + " is " + file_kind(st.st_mode) + rule);
  std::string text;
  if (st.st_size == 0)
    text = "# tessera GEMM tuning cache, written by `tessera tune`; later lines win. Fields:\n"
           "# v1 cc m n k batch ab_dtype a_k_major b_k_major d_dtype config device_name\n";
  else if (char last = 0; ::pread(fd, &last, 1, st.st_size - 1) == 1 && last != '\n')
    text = "\n";  // the file's last line is unterminated: do not glue this entry onto it
  text += format_tune_line(key, config) + "\n";
  if (st.st_size + off_t(text.size()) > off_t(kTuneCacheMaxBytes))  // load would ignore the whole file
    return fail(path_ + " would grow past " + std::to_string(kTuneCacheMaxBytes >> 20) +
                " MiB, the most the tuning cache reads; delete or shorten it");
  // One write in append mode: concurrent writers (other processes) do not interleave a line.
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) errno = EIO;
    if (n <= 0) return fail_errno("writing");
    done += size_t(n);
  }
  closer.fd = -1;
  if (::close(fd) != 0) return fail_errno("writing");
  entries_[tune_key_string(key)] = config;
  has_entries_.store(true, std::memory_order_release);
  return true;
}

TuneCache& global_tune_cache() {
  // One cache per environment snapshot (core/environment.hpp): reread_environment() may point
  // TESSERA_TUNE_CACHE elsewhere. Caches are never destroyed (a caller may hold one; usable at exit).
  static std::mutex mu;
  static TuneCache* cache = nullptr;
  static unsigned generation = 0;
  const detail::Environment& env = detail::environment();
  std::lock_guard<std::mutex> lock(mu);
  if (!cache || generation != env.generation) {
    cache = new TuneCache(tune_cache_path_from(env.tune_cache_set ? env.tune_cache.c_str() : nullptr,
                                               env.xdg_cache_home.c_str(), env.home.c_str()));
    generation = env.generation;
  }
  return *cache;
}

}  // namespace tessera::gemm_impl
