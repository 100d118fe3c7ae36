// The four models (see models.h for the exact shapes).
#include "models.h"

#include <tensorcast/error.h>
#include <tensorcast/nn/nn.h>
#include <tensorcast/ops.h>

#include "gpt_model.h"

namespace tcli {
namespace nn = tc::nn;

const std::vector<std::string>& model_names() {
  static const std::vector<std::string> names = {"cnn", "mlp", "mlp-large", "gpt"};
  return names;
}

namespace {

Model sequential(std::string name, nn::Sequential net, std::string description) {
  Model m;
  m.name = std::move(name);
  m.module = net.ptr();
  m.forward = [net](const tc::Tensor& x) { return net->forward(x); };
  m.forward_hooked = [net](const tc::Tensor& x, const Model::LayerHook& hook) {
    return net->forward(
        x, [&](size_t i, const tc::Tensor& y) { return hook(std::to_string(i) + " " + net->ptr(i)->name(), y); });
  };
  m.description = std::move(description);
  return m;
}

}  // namespace

Model build_model(const std::string& name) {
  if (name == "cnn")
    return sequential(name,
                      nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 32, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2),
                                     nn::Conv2d(nn::Conv2dOptions(32, 64, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2),
                                     nn::Flatten(), nn::Linear(3136, 128), nn::ReLU(), nn::Linear(128, 10)),
                      "CNN conv32-conv64-fc128-fc10");
  if (name == "mlp")
    return sequential(name,
                      nn::Sequential(nn::Flatten(), nn::Linear(784, 512), nn::ReLU(), nn::Linear(512, 512), nn::ReLU(),
                                     nn::Linear(512, 10)),
                      "MLP 784-512-512-10");
  if (name == "mlp-large")
    return sequential(
        name,
        nn::Sequential(nn::Linear(1024, 4096), nn::GELU(), nn::Linear(4096, 1024), nn::GELU(), nn::Linear(1024, 10)),
        "MLP 1024-4096-1024-10 (GELU)");
  if (name == "gpt") {
    Model m;
    m.name = name;
    auto gpt = make_gpt();
    m.module = gpt.module;
    m.forward = gpt.forward;
    m.forward_hooked = [f = gpt.forward](const tc::Tensor& x, const Model::LayerHook& hook) {
      return hook("logits", f(x));
    };
    m.language_model = true;
    m.description = "GPT bytes, context 128, 4 layers x 4 heads, width 256";
    return m;
  }
  throw tc::Error("[cli] unknown model '" + name + "' (use cnn, mlp, mlp-large or gpt)");
}

tc::Tensor model_loss(const Model& model, const tc::Tensor& logits, const tc::Tensor& target) {
  if (model.language_model) {
    const int64_t vocab = logits.size(-1);
    return tc::cross_entropy(logits.reshape({-1, vocab}), target.reshape({-1}));
  }
  return tc::cross_entropy(logits, target);
}

tc::data::Example synthetic_batch(const std::string& name, int64_t batch_size) {
  if (name == "cnn" || name == "mlp") return {tc::randn({batch_size, 1, 28, 28}), tc::randint(0, 10, {batch_size})};
  if (name == "mlp-large") return {tc::randn({batch_size, 1024}), tc::randint(0, 10, {batch_size})};
  if (name == "gpt")
    return {tc::randint(0, 256, {batch_size, kGptContext}), tc::randint(0, 256, {batch_size, kGptContext})};
  throw tc::Error("[cli] unknown model '" + name + "' (use cnn, mlp, mlp-large or gpt)");
}

}  // namespace tcli
