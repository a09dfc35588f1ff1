// The tuning cache file (see tune_cache.hpp): format, parse, path, load once, append.
#include "gemm/tune_cache.hpp"

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <vector>

namespace tessera::gemm_impl {
namespace {

constexpr const char* kVersion = "v1";
constexpr int kMaxDTypeTag = 2;  // kF32

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

void TuneCache::ensure_loaded() {
  std::call_once(loaded_, [this] {
    if (path_.empty()) return;
    std::ifstream in(path_);
    if (!in) return;  // no file yet: an empty cache
    std::map<std::string, std::string> entries;
    std::string line, config;
    TuneKey key;
    while (std::getline(in, line))
      if (parse_tune_line(line, &key, &config)) entries[tune_key_string(key)] = config;  // later lines win
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [k, v] : entries) entries_[k] = v;
    has_entries_.store(!entries_.empty(), std::memory_order_release);
  });
}

std::optional<std::string> TuneCache::lookup(const TuneKey& key) {
  ensure_loaded();
  if (!has_entries_.load(std::memory_order_acquire)) return std::nullopt;
  const std::string k = tune_key_string(key);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(k);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

size_t TuneCache::size() {
  ensure_loaded();
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

bool TuneCache::store(const TuneKey& key, const std::string& config, std::string* error) {
  auto fail = [&](const std::string& why) {
    if (error) *error = why;
    return false;
  };
  if (path_.empty()) return fail("the tuning cache is disabled (TESSERA_TUNE_CACHE is set to an empty value)");
  if (config.empty()) return fail("empty configuration name");
  for (char c : config)
    if (is_blank(c) || static_cast<unsigned char>(c) < 0x20)
      return fail("configuration name with blanks: '" + config + "'");
  ensure_loaded();  // so that this entry, the newest, is not overwritten by an older line later

  const std::filesystem::path path(path_);
  std::error_code ec;
  if (path.has_parent_path()) {
    std::filesystem::create_directories(path.parent_path(), ec);
    if (ec) return fail("creating " + path.parent_path().string() + ": " + ec.message());
  }
  std::lock_guard<std::mutex> lock(mu_);
  const bool is_new = !std::filesystem::exists(path, ec);
  std::string text;
  if (is_new)
    text = "# tessera GEMM tuning cache, written by `tessera tune`; later lines win. Fields:\n"
           "# v1 cc m n k batch ab_dtype a_k_major b_k_major d_dtype config device_name\n";
  text += format_tune_line(key, config) + "\n";
  // One write in append mode: concurrent writers (other processes) do not interleave a line.
  std::FILE* f = std::fopen(path_.c_str(), "a");
  if (!f) return fail("opening " + path_ + ": " + std::strerror(errno));
  const size_t written = std::fwrite(text.data(), 1, text.size(), f);
  const bool flushed = std::fflush(f) == 0;
  const int saved_errno = errno;
  const bool closed = std::fclose(f) == 0;
  if (written != text.size() || !flushed || !closed)
    return fail("writing " + path_ + ": " + std::strerror(saved_errno ? saved_errno : errno));
  entries_[tune_key_string(key)] = config;
  has_entries_.store(true, std::memory_order_release);
  return true;
}

TuneCache& global_tune_cache() {
  static TuneCache* cache = new TuneCache(tune_cache_path());  // never destroyed: usable during exit
  return *cache;
}

}  // namespace tessera::gemm_impl
