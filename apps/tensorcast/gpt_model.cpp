// The CLI's gpt: tc::nn::GPT with the shapes of docs/cli.md ("Models").
#include "gpt_model.h"

#include <tensorcast/nn/gpt.h>

namespace tcli {

GptHandle make_gpt() {
  tc::nn::GPT gpt(tc::nn::GPTConfig().vocab_size(256).context(128).layers(4).heads(4).width(256).dropout(0.0));
  return {gpt.ptr(), [gpt](const tc::Tensor& idx) { return gpt->forward(idx); }};
}

}  // namespace tcli
