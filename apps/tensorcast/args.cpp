// The strict flag parser (see args.h).
#include "args.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace tcli {
namespace {

std::string quoted(const std::string& s) { return "'" + s + "'"; }

}  // namespace

int64_t parse_nonnegative_int(const std::string& flag, const std::string& value) {
  // from_chars, unlike strtoll, takes no leading blanks or '+': the whole value is digits.
  int64_t v = -1;
  const char* last = value.data() + value.size();
  const auto [end, ec] = std::from_chars(value.data(), last, v);
  if (value.empty() || value[0] == '-' || ec != std::errc() || end != last)
    throw UsageError(flag + " expects a non-negative integer, got " + quoted(value));
  return v;
}

int64_t parse_positive_int(const std::string& flag, const std::string& value, int64_t max) {
  int64_t v = -1;
  try {
    v = parse_nonnegative_int(flag, value);
  } catch (const UsageError&) {
  }
  if (v <= 0 || v > max)
    throw UsageError(flag + " expects a positive integer" +
                     (max < std::numeric_limits<int64_t>::max() ? " up to " + std::to_string(max) : "") + ", got " +
                     quoted(value));
  return v;
}

double parse_positive_double(const std::string& flag, const std::string& value) {
  errno = 0;
  char* end = nullptr;
  // strtod would skip leading blanks; the value must be the number alone.
  const double v =
      value.empty() || std::isspace(static_cast<unsigned char>(value[0])) ? 0.0 : std::strtod(value.c_str(), &end);
  if (value.empty() || errno != 0 || end == nullptr || *end != '\0' || !std::isfinite(v) || v <= 0)
    throw UsageError(flag + " expects a positive number, got " + quoted(value));
  return v;
}

ArgParser::ArgParser(std::string command, std::string summary)
    : command_(std::move(command)), summary_(std::move(summary)) {}

void ArgParser::flag(const std::string& name, bool* out, const std::string& help) {
  specs_.push_back({name, "", help, false, [out](const std::string&) { *out = true; }});
}

void ArgParser::string(const std::string& name, std::string* out, const std::string& metavar, const std::string& help) {
  specs_.push_back({name, metavar, help, true, [name, out](const std::string& v) {
                      if (v.empty()) throw UsageError(name + " expects a value, got ''");
                      *out = v;
                    }});
}

void ArgParser::choice(const std::string& name, std::string* out, std::vector<std::string> choices,
                       const std::string& help) {
  indexed_choice(
      name, choices, [out, choices](size_t i) { *out = choices[i]; }, help);
}

void ArgParser::indexed_choice(const std::string& name, std::vector<std::string> choices,
                               std::function<void(size_t)> set, const std::string& help) {
  std::string list;
  for (size_t i = 0; i < choices.size(); ++i) list += (i ? "|" : "") + choices[i];
  specs_.push_back({name, list, help, true, [name, choices, list, set](const std::string& v) {
                      for (size_t i = 0; i < choices.size(); ++i)
                        if (choices[i] == v) {
                          set(i);
                          return;
                        }
                      throw UsageError(name + " expects one of " + list + ", got " + quoted(v));
                    }});
}

void ArgParser::positive_int(const std::string& name, int64_t* out, const std::string& metavar, const std::string& help,
                             int64_t max) {
  specs_.push_back(
      {name, metavar, help, true, [name, out, max](const std::string& v) { *out = parse_positive_int(name, v, max); }});
}

void ArgParser::nonnegative_int(const std::string& name, int64_t* out, const std::string& metavar,
                                const std::string& help) {
  specs_.push_back(
      {name, metavar, help, true, [name, out](const std::string& v) { *out = parse_nonnegative_int(name, v); }});
}

void ArgParser::positive_double(const std::string& name, double* out, const std::string& metavar,
                                const std::string& help) {
  specs_.push_back(
      {name, metavar, help, true, [name, out](const std::string& v) { *out = parse_positive_double(name, v); }});
}

void ArgParser::positional(const std::string& name, std::string* out, const std::string& help) {
  positional_name_ = name;
  positional_help_ = help;
  positional_ = out;
}

const ArgParser::Spec* ArgParser::find(const std::string& name) const {
  for (const auto& s : specs_)
    if (s.name == name) return &s;
  return nullptr;
}

bool ArgParser::parse(int argc, char** argv, int first) {
  const std::string see = " (see 'tensorcast " + command_ + " --help')";
  bool have_positional = false;
  for (int i = first; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(help().c_str(), stdout);
      return false;
    }
    if (arg.rfind("--", 0) == 0 && arg.size() > 2) {
      std::string name = arg, value;
      bool inline_value = false;
      if (const auto eq = arg.find('='); eq != std::string::npos) {
        name = arg.substr(0, eq);
        value = arg.substr(eq + 1);
        inline_value = true;
      }
      const Spec* spec = find(name);
      if (!spec) throw UsageError("unknown flag " + name + " for '" + command_ + "'" + see);
      if (!spec->takes_value) {
        if (inline_value) throw UsageError(name + " takes no value, got " + quoted(value));
      } else if (!inline_value) {
        if (i + 1 >= argc)
          throw UsageError(name + " expects a value" + (spec->metavar.empty() ? "" : " (" + spec->metavar + ")"));
        value = argv[++i];
      }
      spec->set(value);
      given_.insert(name);
      continue;
    }
    if (arg.size() > 1 && arg[0] == '-' && !(arg[1] >= '0' && arg[1] <= '9'))
      throw UsageError("unknown flag " + arg + " for '" + command_ + "'" + see);
    if (positional_ && !have_positional) {
      *positional_ = arg;
      have_positional = true;
      continue;
    }
    throw UsageError("unexpected argument " + quoted(arg) + " for '" + command_ + "'" + see);
  }
  if (positional_ && !have_positional) throw UsageError("'" + command_ + "' needs " + positional_name_ + see);
  return true;
}

std::string ArgParser::help() const {
  std::string out = "usage: tensorcast " + command_ + " [flags]" + (positional_ ? " " + positional_name_ : "") +
                    "\n\n" + summary_ + "\n";
  if (positional_)
    out += "\n  " + positional_name_ + std::string(std::max<int>(2, 26 - int(positional_name_.size())), ' ') +
           positional_help_ + "\n";
  out += "\nflags:\n";
  for (const auto& s : specs_) {
    std::string left = "  " + s.name + (s.metavar.empty() ? "" : " " + s.metavar);
    left += std::string(left.size() < 28 ? 28 - left.size() : 2, ' ');
    out += left + s.help + "\n";
  }
  out += "  --help                    this text\n";
  if (!epilog_.empty()) out += "\n" + epilog_ + (epilog_.back() == '\n' ? "" : "\n");
  return out;
}

}  // namespace tcli
