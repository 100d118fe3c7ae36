// PyTorch's eight "Automatic Mixed Precision examples" recipes in libtorch, with
// tensorcast's GradScaler and autocast guard (tc::torch_amp, docs/libtorch.md): the same
// recipes as examples/amp_recipes/ (tensorcast's own API, one program each) and
// tests/amp_recipes/reference.py (PyTorch in Python), in one program because libtorch's
// headers compile slowly.
//
//   amp_recipes_torch RECIPE [--precision bf16|fp16]
//
// RECIPE: typical, clipping, accumulation, gradient_penalty, multiple_models,
// custom_function, inference or resume. Prints the JSON trace of examples/amp_recipes/
// recipe.h (per step the loss, which optimizer steps were skipped and the scale after
// update(); then the final weights), which tests/amp_recipes/compare.py compares with
// reference.py's. The sizes, the weight and data formulas and the trace's format come from
// examples/amp_recipes/recipe_data.h (standard C++, shared with tensorcast's recipes; built
// with -ffp-contract=off, so that they round as Python's do).
//
// Every recipe reproduces reference.py bit for bit but those with AdamW (multiple_models'
// second model, resume): libtorch's AdamW updates its first moment with mul_ and add_
// where Python's uses lerp_, so their weights differ by float32's roundoff.
#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "recipe_data.h"
#include "tensorcast/torch/amp.h"

namespace {

namespace F = torch::nn::functional;

using recipe::kBatch;
using recipe::kGrowthInterval;
using recipe::kHidden;
using recipe::kIn;
using recipe::kInfStep;
using recipe::kOut;
using recipe::kSteps;

struct Precision {
  torch::ScalarType dtype = torch::kBFloat16;
  const char* name = "bf16";
};

/// Linear-ReLU-Linear; model k's weights come from recipe::mlp_formulas(k).
struct MlpImpl : torch::nn::Module {
  explicit MlpImpl(int k) {
    fc1 = register_module("fc1", torch::nn::Linear(kIn, kHidden));
    fc2 = register_module("fc2", torch::nn::Linear(kHidden, kOut));
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> params{fc1->weight, fc1->bias, fc2->weight, fc2->bias};
    const std::vector<recipe::ParamFormula> formulas = recipe::mlp_formulas(k);
    for (size_t i = 0; i < params.size(); ++i) {
      const recipe::ParamFormula& f = formulas[i];
      params[i].copy_(
          torch::tensor(recipe::formula_values(params[i].numel(), f.amp, f.freq, f.phase)).reshape(f.shape));
    }
  }
  torch::Tensor hidden(const torch::Tensor& x) { return torch::relu(fc1->forward(x)); }
  torch::Tensor forward(const torch::Tensor& x) { return fc2->forward(hidden(x)); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(Mlp);

/// The inputs (kBatch, kIn) and classes (kBatch) of a step (recipe::batch_values).
std::pair<torch::Tensor, torch::Tensor> batch(int step, bool inf = false) {
  const recipe::BatchValues v = recipe::batch_values(step, inf);
  return {torch::tensor(v.x).reshape({kBatch, kIn}), torch::tensor(v.y)};
}

/// fp16: the scale alternates between 2^22 (the loss's gradient overflows: a skip) and 2^14
/// (three clean steps, then a growth); bf16 overflows only at the inf input (recipe.h).
tc::torch_amp::GradScaler make_scaler(const Precision& p) {
  if (p.dtype == torch::kHalf)
    return tc::torch_amp::GradScaler("cpu", tc::torch_amp::GradScalerOptions()
                                                .init_scale(std::ldexp(1.0, 22))
                                                .growth_factor(std::ldexp(1.0, 8))
                                                .backoff_factor(std::ldexp(1.0, -8))
                                                .growth_interval(kGrowthInterval));
  return tc::torch_amp::GradScaler(
      "cpu", tc::torch_amp::GradScalerOptions().init_scale(65536.0).growth_interval(kGrowthInterval));
}

using Named = std::vector<std::pair<std::string, torch::Tensor>>;

/// recipe::TraceWriter fed with tensors.
class Trace : public recipe::TraceWriter {
 public:
  Trace(const std::string& recipe, const Precision& p) : TraceWriter(recipe, p.name) {}
  void weights(const std::vector<std::pair<std::string, torch::Tensor>>& named) {
    TraceWriter::Named v;
    for (const auto& [key, t] : named) v.emplace_back(key, doubles(t));
    values("weights", v);
  }
  void outputs(const torch::Tensor& t) { TraceWriter::outputs(doubles(t)); }

 private:
  static std::vector<double> doubles(const torch::Tensor& t) {
    const torch::Tensor flat = t.detach().to(torch::kDouble).reshape({-1}).contiguous();
    return std::vector<double>(flat.data_ptr<double>(), flat.data_ptr<double>() + flat.numel());
  }
};

/// The parameters of `model` under "prefix" + their dotted names ("fc1.weight", ...).
Named weights(const torch::nn::Module& model, const std::string& prefix = "") {
  Named out;
  for (const auto& item : model.named_parameters()) out.emplace_back(prefix + item.key(), item.value());
  return out;
}

/// with torch.autocast("cpu", dtype): loss = F.cross_entropy(model(x), y)
torch::Tensor autocast_loss(Mlp& model, const torch::Tensor& x, const torch::Tensor& y, const Precision& p) {
  tc::torch_amp::AutocastGuard autocast(torch::kCPU, p.dtype);
  return F::cross_entropy(model->forward(x), y);
}

/// scaler.update() and the step's trace line (the scale after the update).
void finish_step(Trace& trace, tc::torch_amp::GradScaler& scaler, double loss, const std::vector<bool>& stepped) {
  scaler.update();
  std::vector<bool> skipped;
  for (bool s : stepped) skipped.push_back(!s);
  trace.step(loss, skipped, scaler.get_scale());
}

void typical(const Precision& p, Trace& trace) {
  Mlp model(0);
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.2).momentum(0.9));
  auto scaler = make_scaler(p);
  for (int step = 0; step < kSteps; ++step) {
    auto [x, y] = batch(step, step == kInfStep);
    opt.zero_grad();
    torch::Tensor loss = autocast_loss(model, x, y, p);
    scaler.scale(loss).backward();
    const bool stepped = scaler.step(opt);
    finish_step(trace, scaler, loss.item<double>(), {stepped});
  }
  trace.weights(weights(*model));
}

void clipping(const Precision& p, Trace& trace) {
  Mlp model(0);
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.2).momentum(0.9));
  auto scaler = make_scaler(p);
  for (int step = 0; step < kSteps; ++step) {
    auto [x, y] = batch(step, step == kInfStep);
    opt.zero_grad();
    torch::Tensor loss = autocast_loss(model, x, y, p);
    scaler.scale(loss).backward();
    scaler.unscale_(opt);  // the gradients unscaled, so that the clipping threshold means what it says
    torch::nn::utils::clip_grad_norm_(model->parameters(), 0.25);
    const bool stepped = scaler.step(opt);
    finish_step(trace, scaler, loss.item<double>(), {stepped});
  }
  trace.weights(weights(*model));
}

void accumulation(const Precision& p, Trace& trace) {
  constexpr int kAccumulate = 4;
  Mlp model(0);
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.2).momentum(0.9));
  auto scaler = make_scaler(p);
  for (int step = 0; step < kSteps; ++step) {
    opt.zero_grad();
    double total = 0.0;
    for (int micro = 0; micro < kAccumulate; ++micro) {
      auto [x, y] = batch(step * kAccumulate + micro, step == kInfStep && micro == 1);
      torch::Tensor loss = autocast_loss(model, x, y, p) / kAccumulate;
      scaler.scale(loss).backward();  // the same scale for every micro-batch of a step
      total += loss.item<double>();
    }
    const bool stepped = scaler.step(opt);
    finish_step(trace, scaler, total, {stepped});
  }
  trace.weights(weights(*model));
}

void gradient_penalty(const Precision& p, Trace& trace) {
  Mlp model(0);
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.2).momentum(0.9));
  auto scaler = make_scaler(p);
  const std::vector<torch::Tensor> params = model->parameters();
  for (int step = 0; step < kSteps; ++step) {
    auto [x, y] = batch(step, step == kInfStep);
    opt.zero_grad();
    torch::Tensor loss = autocast_loss(model, x, y, p);
    // The penalty's gradients: of the scaled loss (no underflow), unscaled by hand (not
    // through unscale_, which is for the gradients the optimizer steps with).
    const std::vector<torch::Tensor> scaled_grads =
        torch::autograd::grad({scaler.scale(loss)}, params, {}, std::nullopt, /*create_graph=*/true);
    const double inv_scale = 1.0 / scaler.get_scale();
    {
      tc::torch_amp::AutocastGuard autocast(torch::kCPU, p.dtype);
      torch::Tensor sum_of_squares;
      for (const torch::Tensor& g : scaled_grads) {
        torch::Tensor s = (g * inv_scale).pow(2).sum();
        sum_of_squares = sum_of_squares.defined() ? sum_of_squares + s : s;
      }
      loss = loss + sum_of_squares.sqrt();
    }
    scaler.scale(loss).backward();
    const bool stepped = scaler.step(opt);
    finish_step(trace, scaler, loss.item<double>(), {stepped});
  }
  trace.weights(weights(*model));
}

void multiple_models(const Precision& p, Trace& trace) {
  Mlp model0(0), model1(1);
  torch::optim::SGD opt0(model0->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  torch::optim::AdamW opt1(model1->parameters(), torch::optim::AdamWOptions(0.01).weight_decay(0.01));
  auto scaler = make_scaler(p);  // one scaler for both models and optimizers
  for (int step = 0; step < kSteps; ++step) {
    auto [x, y] = batch(step, step == kInfStep);
    const torch::Tensor target = torch::one_hot(y, kOut).to(torch::kFloat);
    opt0.zero_grad();
    opt1.zero_grad();
    torch::Tensor loss0, loss1;
    {
      tc::torch_amp::AutocastGuard autocast(torch::kCPU, p.dtype);
      torch::Tensor out0 = model0->forward(x), out1 = model1->forward(x);
      loss0 = F::mse_loss(2 * out0 + 3 * out1, target);
      loss1 = F::mse_loss(3 * out0 - 5 * out1, target);
    }
    scaler.scale(loss0).backward({}, /*retain_graph=*/true);
    scaler.scale(loss1).backward();
    scaler.unscale_(opt0);  // as PyTorch's recipe: only to inspect or clip model0's gradients
    const bool stepped0 = scaler.step(opt0);
    const bool stepped1 = scaler.step(opt1);
    finish_step(trace, scaler, loss0.item<double>() + loss1.item<double>(), {stepped0, stepped1});
  }
  Named named = weights(*model0, "model0.");
  for (auto& w : weights(*model1, "model1.")) named.push_back(w);
  trace.weights(named);
}

/// PyTorch's example: an fp32 matmul inside an autocast region. torch.amp's
/// custom_fwd(cast_inputs=torch.float32) and custom_bwd by hand: in an autocast region the
/// forward casts its floating inputs (but float64) to fp32 and runs with autocast off; the
/// backward runs with autocast as the forward did (off).
struct MyMM : torch::autograd::Function<MyMM> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor a, torch::Tensor b) {
    std::optional<tc::torch_amp::AutocastGuard> off;
    if (at::autocast::is_autocast_enabled(torch::kCPU)) {
      off.emplace(torch::kCPU, std::nullopt, /*enabled=*/false);
      auto cast = [](const torch::Tensor& t) {
        return t.is_floating_point() && t.scalar_type() != torch::kDouble ? t.to(torch::kFloat) : t;
      };
      a = cast(a);
      b = cast(b);
    }
    ctx->save_for_backward({a, b});
    return a.mm(b);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    tc::torch_amp::AutocastGuard off(torch::kCPU, std::nullopt, /*enabled=*/false);
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &a = saved[0], &b = saved[1];
    return {grad[0].mm(b.t()), a.t().mm(grad[0])};
  }
};

void custom_function(const Precision& p, Trace& trace) {
  Mlp model(0);
  // The output layer's weight, stored (hidden, out) for MyMM; fc2's bias is unused.
  torch::Tensor w2 = model->fc2->weight.detach().t().contiguous().requires_grad_(true);
  torch::optim::SGD opt({model->fc1->weight, model->fc1->bias, w2}, torch::optim::SGDOptions(0.2).momentum(0.9));
  auto scaler = make_scaler(p);
  for (int step = 0; step < kSteps; ++step) {
    auto [x, y] = batch(step, step == kInfStep);
    opt.zero_grad();
    torch::Tensor loss;
    {
      tc::torch_amp::AutocastGuard autocast(torch::kCPU, p.dtype);
      torch::Tensor out = MyMM::apply(model->hidden(x), w2);
      loss = F::cross_entropy(out, y);
    }
    scaler.scale(loss).backward();
    const bool stepped = scaler.step(opt);
    finish_step(trace, scaler, loss.item<double>(), {stepped});
  }
  trace.weights({{"fc1.weight", model->fc1->weight}, {"fc1.bias", model->fc1->bias}, {"w2", w2}});
}

void inference(const Precision& p, Trace& trace) {
  Mlp model(0);
  model->eval();
  torch::Tensor out;
  for (int step = 0; step < kSteps; ++step) {
    auto [x, y] = batch(step);
    torch::NoGradGuard no_grad;
    tc::torch_amp::AutocastGuard autocast(torch::kCPU, p.dtype);
    out = model->forward(x);
    trace.step(F::cross_entropy(out, y).item<double>(), {}, 1.0);
  }
  trace.weights(weights(*model));
  trace.outputs(out);
}

void resume(const Precision& p, Trace& trace) {
  constexpr int kResumeAt = 12;
  auto make_optimizer = [](Mlp& model) {
    return torch::optim::AdamW(model->parameters(), torch::optim::AdamWOptions(0.01).weight_decay(0.01));
  };
  auto train = [&](Mlp& model, torch::optim::AdamW& opt, tc::torch_amp::GradScaler& scaler, int first, int last,
                   Trace* out) {
    for (int step = first; step < last; ++step) {
      auto [x, y] = batch(step, step == kInfStep);
      opt.zero_grad();
      torch::Tensor loss = autocast_loss(model, x, y, p);
      scaler.scale(loss).backward();
      const bool stepped = scaler.step(opt);
      if (out)
        finish_step(*out, scaler, loss.item<double>(), {stepped});
      else
        scaler.update();
    }
  };

  Mlp model(0);
  auto opt = make_optimizer(model);
  auto scaler = make_scaler(p);
  train(model, opt, scaler, 0, kResumeAt, &trace);
  // The checkpoint, in memory (a file in a real run): the scaler's state dict pickled as
  // torch.save would write it, the model and the optimizer in libtorch's archive format.
  std::stringstream model_bytes, opt_bytes;
  torch::save(model, model_bytes);
  torch::save(opt, opt_bytes);
  const std::vector<char> scaler_bytes = torch::pickle_save(scaler.state_dict());

  // Fresh objects (other weights, the scaler's default options) take the checkpoint.
  Mlp resumed(5);
  auto resumed_opt = make_optimizer(resumed);
  tc::torch_amp::GradScaler resumed_scaler("cpu");
  torch::load(resumed, model_bytes);
  torch::load(resumed_opt, opt_bytes);
  resumed_scaler.load_state_dict(torch::pickle_load(scaler_bytes).toGenericDict());
  train(resumed, resumed_opt, resumed_scaler, kResumeAt, kSteps, &trace);

  // The run without the interruption, which the resumed one must reproduce bit for bit.
  Mlp straight(0);
  auto straight_opt = make_optimizer(straight);
  auto straight_scaler = make_scaler(p);
  train(straight, straight_opt, straight_scaler, 0, kSteps, nullptr);
  const auto a = resumed->parameters(), b = straight->parameters();
  for (size_t i = 0; i < a.size(); ++i)
    if (!torch::equal(a[i], b[i]))
      throw std::runtime_error("resume: parameter " + std::to_string(i) + " differs from the uninterrupted run");
  if (resumed_scaler.get_scale() != straight_scaler.get_scale())
    throw std::runtime_error("resume: the scale differs from the uninterrupted run");
  trace.weights(weights(*resumed));
}

const std::map<std::string, std::function<void(const Precision&, Trace&)>> kRecipes = {
    {"typical", typical},
    {"clipping", clipping},
    {"accumulation", accumulation},
    {"gradient_penalty", gradient_penalty},
    {"multiple_models", multiple_models},
    {"custom_function", custom_function},
    {"inference", inference},
    {"resume", resume},
};

[[noreturn]] void usage(const char* argv0) {
  std::string names;
  for (const auto& [name, fn] : kRecipes) names += (names.empty() ? "" : "|") + name;
  std::fprintf(stderr, "usage: %s %s [--precision bf16|fp16]\n", argv0, names.c_str());
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 2 || !kRecipes.count(argv[1])) usage(argv[0]);
  const std::string recipe = argv[1];
  Precision precision;
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "--precision") != 0 || i + 1 >= argc) usage(argv[0]);
    const std::string v = argv[++i];
    if (v == "fp16")
      precision = {torch::kHalf, "fp16"};
    else if (v != "bf16")
      usage(argv[0]);
  }
  torch::set_num_threads(1);  // as reference.py: the same summation orders
  Trace trace(recipe, precision);
  kRecipes.at(recipe)(precision, trace);
  return 0;
} catch (const std::exception& e) {
  std::fflush(stdout);
  std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
  return 1;
}
