// What the AMP recipe programs share whatever engine runs them (examples/amp_recipes with
// tensorcast's API, examples/amp_recipes_torch with libtorch): the sizes, the closed
// formulas of the weights and the data, and the JSON trace. Standard C++ only, so that a
// libtorch program includes it without tensorcast's headers. tests/amp_recipes/reference.py
// evaluates the same formulas in Python: build the programs with -ffp-contract=off, so that
// they round as Python's do.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace recipe {

constexpr int64_t kBatch = 8, kIn = 8, kHidden = 16, kOut = 4;
constexpr int kSteps = 24;
constexpr int kInfStep = 10;  // the step whose input holds an inf
constexpr int64_t kGrowthInterval = 3;

/// amp * sin(freq * i + phase) for i < n, evaluated in double and rounded to float32.
inline std::vector<float> formula_values(int64_t n, double amp, double freq, double phase) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(amp * std::sin(freq * i + phase));
  return v;
}

/// One parameter of the Linear-ReLU-Linear model: its name, shape and formula.
struct ParamFormula {
  const char* name;
  std::vector<int64_t> shape;
  double amp, freq, phase;
};

/// Model k's parameters (fc1.weight, fc1.bias, fc2.weight, fc2.bias): phases shifted by k.
inline std::vector<ParamFormula> mlp_formulas(int k) {
  const double p = 1.0 + 2.0 * k;
  return {{"fc1.weight", {kHidden, kIn}, 0.5, 0.37, p},
          {"fc1.bias", {kHidden}, 0.05, 0.53, p + 0.5},
          {"fc2.weight", {kOut, kHidden}, 0.3, 0.29, p + 1.0},
          {"fc2.bias", {kOut}, 0.05, 0.61, p + 1.5}};
}

/// A step's inputs (kBatch x kIn, row-major) and classes (kBatch).
struct BatchValues {
  std::vector<float> x;
  std::vector<int64_t> y;
};

/// Four batches in turn; the class's pattern dominates, so the loss falls. With `inf`,
/// x[0][0] is inf.
inline BatchValues batch_values(int step, bool inf) {
  const int b = step % 4;
  BatchValues v;
  for (int n = 0; n < kBatch; ++n) {
    const int c = (n + b) % 4;
    v.y.push_back(c);
    for (int j = 0; j < kIn; ++j)
      v.x.push_back(static_cast<float>(0.4 * std::sin(1.3 * (c + 1) * j + 0.4 * c) +
                                       0.05 * std::sin(0.71 * (n * kIn + j) + 0.37 * b)));
  }
  if (inf) v.x[0] = INFINITY;
  return v;
}

/// The JSON trace on stdout: per step the loss (null when not finite), whether each
/// optimizer's step was skipped and the scale after update(); then named value lists
/// ("weights") and, for inference, "outputs".
class TraceWriter {
 public:
  using Named = std::vector<std::pair<std::string, std::vector<double>>>;
  TraceWriter(const std::string& recipe, const char* precision) {
    std::printf("{\"recipe\": \"%s\", \"precision\": \"%s\", \"steps\": [", recipe.c_str(), precision);
  }
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;
  void step(double loss, const std::vector<bool>& skipped, double scale) {
    std::printf("%s\n{\"loss\": ", steps_++ ? "," : "");
    number(loss);
    std::printf(", \"skipped\": [");
    for (size_t i = 0; i < skipped.size(); ++i) std::printf("%s%s", i ? ", " : "", skipped[i] ? "true" : "false");
    std::printf("], \"scale\": ");
    number(scale);
    std::printf("}");
    losses_.push_back(loss);
  }
  /// `named` under "name", after the steps.
  void values(const char* name, const Named& named) {
    std::printf("],\n\"%s\": {", name);
    for (size_t i = 0; i < named.size(); ++i) {
      std::printf("%s\n\"%s\": [", i ? "," : "", named[i].first.c_str());
      list(named[i].second);
      std::printf("]");
    }
    std::printf("}");
    closed_ = true;
  }
  void outputs(const std::vector<double>& v) {
    std::printf(",\n\"outputs\": [");
    list(v);
    std::printf("]");
  }
  ~TraceWriter() { std::printf("%s}\n", closed_ ? "" : "]"); }
  const std::vector<double>& losses() const { return losses_; }

 private:
  static void number(double v) {
    if (std::isfinite(v))
      std::printf("%.17g", v);
    else
      std::printf("null");
  }
  static void list(const std::vector<double>& v) {
    for (size_t i = 0; i < v.size(); ++i) {
      std::printf("%s", i ? ", " : "");
      number(v[i]);
    }
  }
  int steps_ = 0;
  bool closed_ = false;
  std::vector<double> losses_;
};

}  // namespace recipe
