// What the AMP recipes share, in tensorcast's API: the model, the data, the scaler's options
// and the JSON trace (their formulas and the trace's format: recipe_data.h, which the libtorch
// port of the recipes shares).
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

#include "recipe_data.h"

namespace recipe {

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

/// Linear-ReLU-Linear; model k's weights come from mlp_formulas(k).
struct MlpImpl : tc::nn::Module {
  explicit MlpImpl(int k) : Module("Mlp") {
    fc1 = register_module("fc1", tc::nn::Linear(kIn, kHidden));
    fc2 = register_module("fc2", tc::nn::Linear(kHidden, kOut));
    tc::NoGradGuard no_grad;
    std::vector<tc::Tensor> params{fc1->weight, fc1->bias, fc2->weight, fc2->bias};
    const std::vector<ParamFormula> formulas = mlp_formulas(k);
    for (size_t i = 0; i < params.size(); ++i) {
      const ParamFormula& f = formulas[i];
      params[i].copy_(tc::tensor(formula_values(params[i].numel(), f.amp, f.freq, f.phase), f.shape));
    }
  }
  tc::Tensor hidden(const tc::Tensor& x) { return tc::relu(fc1->forward(x)); }
  tc::Tensor forward(const tc::Tensor& x) { return fc2->forward(hidden(x)); }
  tc::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TC_MODULE(Mlp);

/// The inputs (kBatch, kIn) and classes (kBatch) of a step (batch_values).
inline std::pair<tc::Tensor, tc::Tensor> batch(int step, bool inf = false) {
  BatchValues v = batch_values(step, inf);
  return {tc::tensor(v.x, {kBatch, kIn}), tc::tensor(v.y, {kBatch})};
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

/// TraceWriter fed with tensors.
class Trace : public TraceWriter {
 public:
  Trace(const char* recipe, const Precision& p) : TraceWriter(recipe, p.name) {}
  /// Named tensors under "name" ("weights"), after the steps.
  void tensors(const char* name, const std::vector<std::pair<std::string, tc::Tensor>>& named) {
    Named v;
    for (const auto& [key, t] : named) v.emplace_back(key, doubles(t));
    values(name, v);
  }
  void outputs(const tc::Tensor& t) { TraceWriter::outputs(doubles(t)); }

 private:
  static std::vector<double> doubles(const tc::Tensor& t) { return t.detach().to(tc::kFloat32).to_vector(); }
};

/// The final weights of `model`, named "prefix" + PyTorch's dotted names.
inline std::vector<std::pair<std::string, tc::Tensor>> weights(const tc::nn::Module& model,
                                                               const std::string& prefix = "") {
  std::vector<std::pair<std::string, tc::Tensor>> out;
  for (auto& [name, t] : model.named_parameters()) out.emplace_back(prefix + name, t);
  return out;
}

}  // namespace recipe
