// A minimal streaming JSON writer (objects, arrays, strings, numbers, booleans, null), indented
// two spaces. Non-finite doubles are written as null, since JSON has no NaN or Infinity.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <type_traits>
#include <vector>

namespace tessera_cli {

class JsonWriter {
 public:
  explicit JsonWriter(std::ostream& os) : os_(os) {}
  ~JsonWriter();  // ends the document with a newline

  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(const std::string& k);

  JsonWriter& value(const std::string& v);
  JsonWriter& value(const char* v) { return value(std::string(v)); }
  JsonWriter& value(double v);
  JsonWriter& value(bool v);
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  JsonWriter& value(T v) {
    return raw(std::to_string(v));
  }
  template <class T>
  JsonWriter& value(const std::optional<T>& v) {
    return v ? value(*v) : null();
  }
  JsonWriter& null() { return raw("null"); }

  template <class T>
  JsonWriter& field(const std::string& k, const T& v) {
    key(k);
    return value(v);
  }

 private:
  JsonWriter& raw(const std::string& token);  // a scalar, after the separator and indentation
  JsonWriter& open(char bracket);
  JsonWriter& close(char bracket);
  void separate();  // comma and newline before the next element of the current container
  void newline();

  std::ostream& os_;
  std::vector<bool> first_;  // per open container: nothing written in it yet
  bool after_key_ = false;
};

}  // namespace tessera_cli
