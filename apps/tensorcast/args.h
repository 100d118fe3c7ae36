// A strict command-line parser for the `tensorcast` subcommands.
//
//   ArgParser p("train", "Trains a model with automatic mixed precision.");
//   p.positive_int("--epochs", &epochs, "N", "passes over the training set");
//   p.choice("--precision", &precision, {"auto", "fp32", "bf16", "fp16"}, "compute precision");
//   if (!p.parse(argc, argv)) return 0;   // --help was printed
//
// Anything it does not understand (an unknown flag, a missing value, a bad number, a
// value out of its choices, a stray argument) throws UsageError with ONE line that says
// what is wrong; main prints it as "tensorcast: <line>" and exits with status 2.
#pragma once
#include <cstdint>
#include <functional>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace tcli {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class ArgParser {
 public:
  ArgParser(std::string command, std::string summary);

  // Flags. `metavar` names the value in --help; `help` is one line.
  void flag(const std::string& name, bool* out, const std::string& help);
  void string(const std::string& name, std::string* out, const std::string& metavar, const std::string& help);
  void choice(const std::string& name, std::string* out, std::vector<std::string> choices, const std::string& help);
  // A choice stored as an enum: `choices` pairs each accepted text with its value
  // (settings.h's setting_choices).
  template <class E>
  void choice(const std::string& name, E* out, const std::vector<std::pair<std::string, E>>& choices,
              const std::string& help) {
    std::vector<std::string> texts;
    for (const auto& c : choices) texts.push_back(c.first);
    indexed_choice(
        name, std::move(texts), [out, choices](size_t i) { *out = choices[i].second; }, help);
  }
  void positive_int(const std::string& name, int64_t* out, const std::string& metavar, const std::string& help,
                    int64_t max = std::numeric_limits<int64_t>::max());
  void nonnegative_int(const std::string& name, int64_t* out, const std::string& metavar, const std::string& help);
  void positive_double(const std::string& name, double* out, const std::string& metavar, const std::string& help);
  // One positional argument (inspect FILE).
  void positional(const std::string& name, std::string* out, const std::string& help);
  // Free text appended to --help (examples, notes).
  void epilog(std::string text) { epilog_ = std::move(text); }

  // Parses argv[first..argc). Returns false when --help/-h was asked for (help printed to
  // stdout). Accepts "--flag value" and "--flag=value".
  bool parse(int argc, char** argv, int first);
  // True when the flag appeared on the command line.
  bool given(const std::string& name) const { return given_.count(name) != 0; }
  std::string help() const;

 private:
  struct Spec {
    std::string name, metavar, help;
    bool takes_value = true;
    std::function<void(const std::string&)> set;  // throws UsageError
  };
  const Spec* find(const std::string& name) const;
  // A flag whose value must be one of `choices`; set(i) takes the index of the one given.
  void indexed_choice(const std::string& name, std::vector<std::string> choices, std::function<void(size_t)> set,
                      const std::string& help);

  std::string command_, summary_, epilog_;
  std::vector<Spec> specs_;
  std::string positional_name_, positional_help_;
  std::string* positional_ = nullptr;
  std::set<std::string> given_;
};

// The value checks, shared with code that validates flags itself.
int64_t parse_positive_int(const std::string& flag, const std::string& value,
                           int64_t max = std::numeric_limits<int64_t>::max());
int64_t parse_nonnegative_int(const std::string& flag, const std::string& value);
double parse_positive_double(const std::string& flag, const std::string& value);

}  // namespace tcli
