// The `gpt` model of the CLI: byte vocabulary (256), context 128, 4 layers, 4 heads,
// width 256, pre-LayerNorm blocks with a GELU MLP (x4), built from tc::nn.
#pragma once
#include <tensorcast/nn/module.h>

#include <functional>
#include <memory>

namespace tcli {

struct GptHandle {
  std::shared_ptr<tc::nn::Module> module;
  std::function<tc::Tensor(const tc::Tensor&)> forward;  // int64 (B, T) -> logits (B, T, vocab)
};
// width 256, 4 layers, context 128 unless given; heads = width / 64.
GptHandle make_gpt(int64_t width = 256, int64_t layers = 4, int64_t context = 128, int64_t vocab = 256);

}  // namespace tcli
