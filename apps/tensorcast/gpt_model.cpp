// The CLI's gpt: tc::nn::GPT with the shapes of docs/cli.md ("Models").
#include "gpt_model.h"

#include <tensorcast/nn/gpt.h>

#include <algorithm>

namespace tcli {

GptHandle make_gpt(int64_t width, int64_t layers, int64_t context, int64_t vocab) {
  tc::nn::GPT gpt(tc::nn::GPTConfig()
                      .vocab_size(vocab)
                      .context(context)
                      .layers(layers)
                      .heads(std::max<int64_t>(1, width / 64))
                      .width(width)
                      .dropout(0.0));
  return {gpt.ptr(), [gpt](const tc::Tensor& idx) { return gpt->forward(idx); }};
}

}  // namespace tcli
