// The models of `tensorcast train/bench/report`, with EXACTLY these shapes (the
// benchmarks and the side-by-side PyTorch comparison depend on them):
//   cnn        Conv2d(1,32,3,p1)-ReLU-MaxPool2d(2)-Conv2d(32,64,3,p1)-ReLU-MaxPool2d(2)-Flatten-
//              Linear(3136,128)-ReLU-Linear(128,10)             input (B,1,28,28), normalized
//   mlp        Flatten-Linear(784,512)-ReLU-Linear(512,512)-ReLU-Linear(512,10)   (B,1,28,28)
//   mlp-large  Linear(1024,4096)-GELU-Linear(4096,1024)-GELU-Linear(1024,10)      (B,1024) synthetic
//   gpt        bytes (vocab 256), context 128, 4 layers, 4 heads, width 256, pre-LayerNorm,
//              GELU MLP x4                                        (B,128) int64 -> (B,128,256)
// Parameters are fp32 (master weights) initialized with PyTorch's defaults from the global
// generator (tc::manual_seed first).
#pragma once
#include <tensorcast/data/dataset.h>
#include <tensorcast/nn/module.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "settings.h"

namespace tcli {

struct Model {
  std::string name;
  std::shared_ptr<tc::nn::Module> module;
  std::function<tc::Tensor(const tc::Tensor&)> forward;  // logits
  // forward, passing layer outputs through hook(layer name, output) (the numerics report
  // watches them): every module of the Sequential models, the logits of gpt.
  using LayerHook = std::function<tc::Tensor(const std::string&, const tc::Tensor&)>;
  std::function<tc::Tensor(const tc::Tensor&, const LayerHook&)> forward_hooked;
  bool language_model = false;  // logits (B,T,256), targets (B,T)
  // Whether training keeps the 16-bit weight copies from one step to the next, written by
  // the optimizer step (tc::amp::set_autocast_cache_keeps_training_copies): gpt, whose peak
  // memory comes as its backward starts, when every copy is alive anyway, and mlp-large,
  // whose 8.4M weights' casts are a noticeable share of a step (for a little more peak
  // memory at small batches, none at large ones); not the convnet and the small mlp, whose peak comes late in the
  // backward, after their graph freed some copies, and whose casts cost little.
  bool keeps_weight_copies = false;
  std::string description;  // one line, for logs
};

// Other sizes of mlp-large and gpt, for scaling benchmarks and plans (`tensorcast bench
// --width --layers --context`, `tensorcast plan --vocab`); 0 keeps the shape above.
// mlp-large of width W: Linear(W,4W)-GELU-Linear(4W,W)-GELU-Linear(W,10) on (B,W); gpt of
// width W has W/64 heads (4 at 256) and `vocab` tokens (GPT-2's: 50257).
struct ModelSize {
  int64_t width = 0, layers = 0, context = 0, vocab = 0;
  bool is_default() const { return width == 0 && layers == 0 && context == 0 && vocab == 0; }
};

Model build_model(ModelKind kind, const ModelSize& size = {});

// Cross-entropy of the model's logits (flattening (B,T,V) for the language model).
tc::Tensor model_loss(const Model& model, const tc::Tensor& logits, const tc::Tensor& target);

// A random batch of the model's input shape and targets, for benchmarks.
tc::data::Example synthetic_batch(ModelKind kind, int64_t batch_size, const ModelSize& size = {});

inline constexpr int64_t kGptContext = 128;

}  // namespace tcli
