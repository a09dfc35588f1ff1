#include "json.hpp"

#include <cmath>
#include <cstdio>

namespace tessera_cli {
namespace {

std::string quote(const std::string& s) {
  std::string q = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': q += "\\\""; break;
      case '\\': q += "\\\\"; break;
      case '\n': q += "\\n"; break;
      case '\r': q += "\\r"; break;
      case '\t': q += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          q += buf;
        } else {
          q += char(c);
        }
    }
  }
  return q + "\"";
}

}  // namespace

JsonWriter::~JsonWriter() { os_ << '\n'; }

void JsonWriter::newline() { os_ << '\n' << std::string(2 * first_.size(), ' '); }

void JsonWriter::separate() {
  if (after_key_) {  // a value right after its key stays on the key's line
    after_key_ = false;
    return;
  }
  if (first_.empty()) return;  // the top-level value
  if (!first_.back()) os_ << ',';
  first_.back() = false;
  newline();
}

JsonWriter& JsonWriter::raw(const std::string& token) {
  separate();
  os_ << token;
  return *this;
}

JsonWriter& JsonWriter::open(char bracket) {
  separate();
  os_ << bracket;
  first_.push_back(true);
  return *this;
}

JsonWriter& JsonWriter::close(char bracket) {
  const bool empty = first_.back();
  first_.pop_back();
  if (!empty) newline();
  os_ << bracket;
  return *this;
}

JsonWriter& JsonWriter::begin_object() { return open('{'); }
JsonWriter& JsonWriter::end_object() { return close('}'); }
JsonWriter& JsonWriter::begin_array() { return open('['); }
JsonWriter& JsonWriter::end_array() { return close(']'); }

JsonWriter& JsonWriter::key(const std::string& k) {
  separate();
  os_ << quote(k) << ": ";
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::value(const std::string& v) { return raw(quote(v)); }
JsonWriter& JsonWriter::value(bool v) { return raw(v ? "true" : "false"); }

JsonWriter& JsonWriter::value(double v) {
  if (!std::isfinite(v)) return null();
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return raw(buf);
}

}  // namespace tessera_cli
