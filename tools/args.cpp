#include "args.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "check.hpp"

namespace tessera_cli {
namespace {

bool looks_like_option(const std::string& s) { return s.size() > 2 && s.compare(0, 2, "--") == 0; }

const OptionSpec* find_spec(const std::vector<OptionSpec>& specs, const std::string& name) {
  for (const OptionSpec& s : specs)
    if (s.name == name) return &s;
  return nullptr;
}

}  // namespace

Options::Options(const std::string& command, const std::vector<OptionSpec>& specs,
                 const std::vector<std::string>& args)
    : command_(command) {
  const std::string see_help = " (see `tessera " + command + " --help`)";
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (!looks_like_option(arg)) usage_error("unexpected argument '" + arg + "'" + see_help);
    std::string name = arg.substr(2);
    std::optional<std::string> value;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    }
    const OptionSpec* spec = find_spec(specs, name);
    if (!spec) usage_error("unknown option --" + name + see_help);
    if (spec->metavar.empty()) {
      if (value) usage_error("--" + name + " takes no value" + see_help);
      value = "";
    } else if (!value) {
      const bool next_is_value = i + 1 < args.size() && !looks_like_option(args[i + 1]);
      if (next_is_value)
        value = args[++i];
      else if (spec->value_optional)
        value = spec->implicit_value;
      else
        usage_error("--" + name + " needs a value (" + spec->metavar + ")" + see_help);
    }
    values_[name] = *value;
  }
}

std::string Options::str(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

std::optional<int64_t> Options::integer(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  const char* s = it->second.c_str();
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0')
    usage_error("--" + name + ": expected an integer, got '" + it->second + "'");
  return v;
}

int64_t Options::integer(const std::string& name, int64_t fallback) const {
  return integer(name).value_or(fallback);
}

double Options::real(const std::string& name, double fallback) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  const char* s = it->second.c_str();
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(s, &end);
  if (errno != 0 || end == s || *end != '\0')
    usage_error("--" + name + ": expected a number, got '" + it->second + "'");
  return v;
}

void print_options(std::FILE* out, const std::vector<OptionSpec>& specs) {
  auto left = [](const OptionSpec& s) {
    std::string l = "--" + s.name;
    if (!s.metavar.empty()) l += s.value_optional ? " [" + s.metavar + "]" : " " + s.metavar;
    return l;
  };
  size_t width = 0;
  for (const OptionSpec& s : specs) width = std::max(width, left(s).size());
  for (const OptionSpec& s : specs) {
    std::fprintf(out, "  %-*s  %s\n", int(width), left(s).c_str(), word_wrap(s.help, 2 + width + 2).c_str());
  }
}

std::string word_wrap(const std::string& text, size_t indent, size_t line_limit) {
  std::string out;
  size_t column = indent, pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(' ', pos);
    if (end == std::string::npos) end = text.size();
    const size_t length = end - pos;
    if (column > indent && column + 1 + length > line_limit) {
      out += "\n" + std::string(indent, ' ');
      column = indent;
    } else if (column > indent) {
      out += ' ';
      ++column;
    }
    out.append(text, pos, length);
    column += length;
    pos = end + 1;
  }
  return out;
}

}  // namespace tessera_cli
