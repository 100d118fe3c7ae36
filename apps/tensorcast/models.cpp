// The four models (see models.h for the exact shapes).
#include "models.h"

#include <tensorcast/error.h>
#include <tensorcast/nn/nn.h>
#include <tensorcast/ops.h>

#include "gpt_model.h"

namespace tcli {
namespace nn = tc::nn;

namespace {

Model sequential(std::string name, nn::Sequential net, std::string description) {
  Model m;
  m.name = std::move(name);
  m.module = net.ptr();
  m.forward = [net](const tc::Tensor& x) { return net->forward(x); };
  // Layers by the Sequential's own names, which a fused activation's removal leaves as they were.
  m.forward_hooked = [net](const tc::Tensor& x, const Model::LayerHook& hook) {
    return net->forward(x, [&](size_t i, const tc::Tensor& y) {
      return hook(net->named_children()[i].first + " " + net->ptr(i)->name(), y);
    });
  };
  m.description = std::move(description);
  return m;
}

Model cnn() {
  return sequential("cnn",
                    nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 32, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2),
                                   nn::Conv2d(nn::Conv2dOptions(32, 64, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2),
                                   nn::Flatten(), nn::Linear(3136, 128), nn::ReLU(), nn::Linear(128, 10)),
                    "CNN conv32-conv64-fc128-fc10");
}

Model mlp() {
  return sequential("mlp",
                    nn::Sequential(nn::Flatten(), nn::Linear(784, 512), nn::ReLU(), nn::Linear(512, 512), nn::ReLU(),
                                   nn::Linear(512, 10)),
                    "MLP 784-512-512-10");
}

Model mlp_large(const ModelSize& size) {
  const int64_t w = size.width > 0 ? size.width : 1024;
  nn::Sequential net(nn::Linear(w, 4 * w), nn::GELU(), nn::Linear(4 * w, w), nn::GELU(), nn::Linear(w, 10));
  // Each GELU runs in its Linear's product (tc::linear_activation) where that gives the
  // same bits: 16-bit products, where the GELU is looked up as the product is written.
  nn::fuse_linear_activation(*net);
  Model m =
      sequential("mlp-large", net,
                 "MLP " + std::to_string(w) + "-" + std::to_string(4 * w) + "-" + std::to_string(w) + "-10 (GELU)");
  m.keeps_weight_copies = true;
  return m;
}

Model gpt(const ModelSize& size) {
  Model m;
  m.name = "gpt";
  const int64_t w = size.width > 0 ? size.width : 256, layers = size.layers > 0 ? size.layers : 4,
                ctx = size.context > 0 ? size.context : kGptContext, vocab = size.vocab > 0 ? size.vocab : 256;
  if (w % 64 != 0)
    throw tc::Error("[cli] gpt --width must be a multiple of 64 (heads of 64), got " + std::to_string(w));
  auto handle = make_gpt(w, layers, ctx, vocab);
  m.module = handle.module;
  m.forward = handle.forward;
  m.forward_hooked = [f = handle.forward](const tc::Tensor& x, const Model::LayerHook& hook) {
    return hook("logits", f(x));
  };
  m.language_model = true;
  m.keeps_weight_copies = true;
  m.description = (vocab == 256 ? std::string("GPT bytes") : "GPT vocab " + std::to_string(vocab)) + ", context " +
                  std::to_string(ctx) + ", " + std::to_string(layers) + " layers x " + std::to_string(w / 64) +
                  " heads, width " + std::to_string(w);
  return m;
}

}  // namespace

Model build_model(ModelKind kind, const ModelSize& size) {
  const bool sized = kind == ModelKind::kMlpLarge || kind == ModelKind::kGpt;
  if (!size.is_default() && !sized)
    throw tc::Error("[cli] --width, --layers, --context and --vocab apply to mlp-large and gpt, not " +
                    setting_name(kind));
  if (size.layers != 0 && kind != ModelKind::kGpt) throw tc::Error("[cli] --layers applies to gpt only");
  if (size.context != 0 && kind != ModelKind::kGpt) throw tc::Error("[cli] --context applies to gpt only");
  if (size.vocab != 0 && kind != ModelKind::kGpt) throw tc::Error("[cli] --vocab applies to gpt only");
  switch (kind) {
    case ModelKind::kCnn:
      return cnn();
    case ModelKind::kMlp:
      return mlp();
    case ModelKind::kMlpLarge:
      return mlp_large(size);
    case ModelKind::kGpt:
      return gpt(size);
  }
  throw tc::Error("[cli] unknown model kind " + std::to_string(static_cast<int>(kind)));
}

tc::Tensor model_loss(const Model& model, const tc::Tensor& logits, const tc::Tensor& target) {
  if (model.language_model) {
    const int64_t vocab = logits.size(-1);
    return tc::cross_entropy(logits.reshape({-1, vocab}), target.reshape({-1}));
  }
  return tc::cross_entropy(logits, target);
}

tc::data::Example synthetic_batch(ModelKind kind, int64_t batch_size, const ModelSize& size) {
  switch (kind) {
    case ModelKind::kCnn:
    case ModelKind::kMlp:
      return {tc::randn({batch_size, 1, 28, 28}), tc::randint(0, 10, {batch_size})};
    case ModelKind::kMlpLarge:
      return {tc::randn({batch_size, size.width > 0 ? size.width : 1024}), tc::randint(0, 10, {batch_size})};
    case ModelKind::kGpt: {
      const int64_t ctx = size.context > 0 ? size.context : kGptContext, vocab = size.vocab > 0 ? size.vocab : 256;
      return {tc::randint(0, vocab, {batch_size, ctx}), tc::randint(0, vocab, {batch_size, ctx})};
    }
  }
  throw tc::Error("[cli] unknown model kind " + std::to_string(static_cast<int>(kind)));
}

}  // namespace tcli
