// What the AMP recipes share: the model, the data, the scaler's options and the JSON trace.
//
// Every weight and input comes from a closed formula, evaluated in double with the C
// library's sin and rounded to float32, so that tests/amp_recipes/reference.py (the same
// recipes in PyTorch) starts from the same bits without sharing a random generator.
//
// The forced overflows. fp16: the scaler starts at 2^22, where the loss's gradient overflows
// fp16 at the first 16-bit activation it reaches; the backoff (2^-8) brings it to 2^14,
// three steps later the growth (2^8) takes it back to 2^22, and so on: a skip every fourth
// step. Every skip therefore comes from an activation gradient, which tensorcast and PyTorch
// compute alike, and never from a weight gradient alone (tensorcast writes an autocast
// linear's weight gradient in fp32, PyTorch rounds it to fp16 first: docs/amp.md), so the
// skips compare exactly; at 2^14 every gradient is far below fp16's limit. Both precisions:
// step 10's input holds an inf (a skip in bf16 too). reference.py checks that each fp16
// skip it sees comes from an activation gradient.
#pragma once
#include <tensorcast/tensorcast.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace recipe {

constexpr int64_t kBatch = 8, kIn = 8, kHidden = 16, kOut = 4;
constexpr int kSteps = 24;
constexpr int kInfStep = 10;  // the step whose input holds an inf
constexpr int64_t kGrowthInterval = 3;

/// The precision of a run: `--precision bf16|fp16` (bf16 when absent).
struct Precision {
  tc::DType dtype = tc::kBFloat16;
  const char* name = "bf16";
};

inline Precision parse_precision(int argc, char** argv) {
  Precision p;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--precision") == 0 && i + 1 < argc) {
      std::string v = argv[++i];
      if (v == "fp16") {
        p = {tc::kFloat16, "fp16"};
      } else if (v != "bf16") {
        std::fprintf(stderr, "%s: --precision must be bf16 or fp16, not %s\n", argv[0], v.c_str());
        std::exit(2);
      }
    } else {
      std::fprintf(stderr, "usage: %s [--precision bf16|fp16]\n", argv[0]);
      std::exit(2);
    }
  }
  return p;
}

/// value[i] = amp * sin(freq * i + phase), row-major, float32.
inline tc::Tensor formula(const tc::Shape& shape, double amp, double freq, double phase) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(amp * std::sin(freq * i + phase));
  return tc::tensor(v, shape);
}

/// Linear-ReLU-Linear; model k's weights come from formula() with phases shifted by k.
struct MlpImpl : tc::nn::Module {
  explicit MlpImpl(int k) : Module("Mlp") {
    fc1 = register_module("fc1", tc::nn::Linear(kIn, kHidden));
    fc2 = register_module("fc2", tc::nn::Linear(kHidden, kOut));
    tc::NoGradGuard no_grad;
    const double p = 1.0 + 2.0 * k;
    fc1->weight.copy_(formula({kHidden, kIn}, 0.5, 0.37, p));
    fc1->bias.copy_(formula({kHidden}, 0.05, 0.53, p + 0.5));
    fc2->weight.copy_(formula({kOut, kHidden}, 0.3, 0.29, p + 1.0));
    fc2->bias.copy_(formula({kOut}, 0.05, 0.61, p + 1.5));
  }
  tc::Tensor hidden(const tc::Tensor& x) { return tc::relu(fc1->forward(x)); }
  tc::Tensor forward(const tc::Tensor& x) { return fc2->forward(hidden(x)); }
  tc::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TC_MODULE(Mlp);

/// The inputs (kBatch, kIn) and classes (kBatch) of a step: four batches in turn; the
/// class's pattern dominates, so the loss falls. With `inf`, x[0][0] is inf.
inline std::pair<tc::Tensor, tc::Tensor> batch(int step, bool inf = false) {
  const int b = step % 4;
  std::vector<float> x;
  std::vector<int64_t> y;
  for (int n = 0; n < kBatch; ++n) {
    const int c = (n + b) % 4;
    y.push_back(c);
    for (int j = 0; j < kIn; ++j)
      x.push_back(static_cast<float>(0.4 * std::sin(1.3 * (c + 1) * j + 0.4 * c) +
                                     0.05 * std::sin(0.71 * (n * kIn + j) + 0.37 * b)));
  }
  if (inf) x[0] = INFINITY;
  return {tc::tensor(x, {kBatch, kIn}), tc::tensor(y, {kBatch})};
}

/// The scaler of a run (see the top of this file).
inline tc::amp::GradScaler make_scaler(const Precision& p) {
  if (p.dtype == tc::kFloat16)
    return tc::amp::GradScaler(tc::amp::GradScalerOptions()
                                   .init_scale(std::ldexp(1.0, 22))
                                   .growth_factor(std::ldexp(1.0, 8))
                                   .backoff_factor(std::ldexp(1.0, -8))
                                   .growth_interval(kGrowthInterval));
  return tc::amp::GradScaler(tc::amp::GradScalerOptions().init_scale(65536.0).growth_interval(kGrowthInterval));
}

/// The JSON trace on stdout: per step the loss (null when not finite), whether each
/// optimizer's step was skipped and the scale after update(); then the final weights.
class Trace {
 public:
  Trace(const char* recipe, const Precision& p) {
    std::printf("{\"recipe\": \"%s\", \"precision\": \"%s\", \"steps\": [", recipe, p.name);
  }
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
  /// `values` under "name" (after the steps: "weights" with named tensors, "outputs").
  void tensors(const char* name, const std::vector<std::pair<std::string, tc::Tensor>>& named) {
    std::printf("],\n\"%s\": {", name);
    for (size_t i = 0; i < named.size(); ++i) {
      std::printf("%s\n\"%s\": [", i ? "," : "", named[i].first.c_str());
      values(named[i].second);
      std::printf("]");
    }
    std::printf("}");
    closed_ = true;
  }
  void outputs(const tc::Tensor& t) {
    std::printf(",\n\"outputs\": [");
    values(t);
    std::printf("]");
  }
  ~Trace() { std::printf("%s}\n", closed_ ? "" : "]"); }
  const std::vector<double>& losses() const { return losses_; }

 private:
  static void number(double v) {
    if (std::isfinite(v))
      std::printf("%.17g", v);
    else
      std::printf("null");
  }
  static void values(const tc::Tensor& t) {
    const std::vector<double> v = t.detach().to(tc::kFloat32).to_vector();
    for (size_t i = 0; i < v.size(); ++i) {
      std::printf("%s", i ? ", " : "");
      number(v[i]);
    }
  }
  int steps_ = 0;
  bool closed_ = false;
  std::vector<double> losses_;
};

/// The final weights of `model`, named "prefix" + PyTorch's dotted names.
inline std::vector<std::pair<std::string, tc::Tensor>> weights(const tc::nn::Module& model,
                                                               const std::string& prefix = "") {
  std::vector<std::pair<std::string, tc::Tensor>> out;
  for (auto& [name, t] : model.named_parameters()) out.emplace_back(prefix + name, t);
  return out;
}

}  // namespace recipe
