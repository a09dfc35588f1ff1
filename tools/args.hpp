// A small declarative command-line parser: each command lists its options once (OptionSpec), and
// both parsing and the help text come from that list.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tessera_cli {

struct OptionSpec {
  OptionSpec(std::string name_, std::string metavar_, std::string help_, bool value_optional_ = false,
             std::string implicit_value_ = "")
      : name(std::move(name_)),
        metavar(std::move(metavar_)),
        help(std::move(help_)),
        value_optional(value_optional_),
        implicit_value(std::move(implicit_value_)) {}

  std::string name;     // without the leading "--"
  std::string metavar;  // "" for a flag without a value
  std::string help;
  // For options like `--json [FILE]`: the next token is taken as the value only when it does not
  // look like an option; otherwise the value is `implicit_value`.
  bool value_optional;
  std::string implicit_value;
};

class Options {
 public:
  // Accepts `--name value`, `--name=value` and flags; throws a usage error (naming `command`) on
  // an unknown option, a missing value or a positional argument.
  Options(const std::string& command, const std::vector<OptionSpec>& specs, const std::vector<std::string>& args);

  bool has(const std::string& name) const { return values_.count(name) > 0; }
  std::string str(const std::string& name, const std::string& fallback = "") const;
  int64_t integer(const std::string& name, int64_t fallback) const;
  std::optional<int64_t> integer(const std::string& name) const;
  double real(const std::string& name, double fallback) const;

 private:
  std::string command_;
  std::map<std::string, std::string> values_;
};

// Prints "  --name METAVAR   help" lines, aligned, the help word-wrapped.
void print_options(std::FILE* out, const std::vector<OptionSpec>& specs);

// `text` word-wrapped for printing from column `indent` (where the first line is assumed to start):
// later lines are indented by `indent` spaces, and lines end before `line_limit` where words allow.
std::string word_wrap(const std::string& text, size_t indent, size_t line_limit = 100);

}  // namespace tessera_cli
