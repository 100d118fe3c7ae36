// A small GPT (decoder-only transformer) over bytes:
//   token embedding (vocab, d) + learned position embedding (context, d)
//   N pre-LayerNorm blocks:  x = x + attn(ln1(x));  x = x + mlp(ln2(x))
//                            mlp = Linear(d, 4d) - GELU - Linear(4d, d)
//   final LayerNorm, lm head Linear(d, vocab) (with bias, untied)
// Parameter names: "wte.weight", "wpe.weight", "blocks.0.ln1.weight",
// "blocks.0.attn.qkv.weight", "blocks.0.mlp.fc.weight", "ln_f.bias", "lm_head.weight".
#pragma once
#include "tensorcast/nn/activation.h"
#include "tensorcast/nn/attention.h"
#include "tensorcast/nn/container.h"
#include "tensorcast/nn/dropout.h"
#include "tensorcast/nn/embedding.h"
#include "tensorcast/nn/linear.h"
#include "tensorcast/nn/normalization.h"

namespace tc::nn {

struct GPTConfig {
  TC_ARG(int64_t, vocab_size) = 256;
  TC_ARG(int64_t, context) = 128;  // the longest sequence (block size)
  TC_ARG(int64_t, layers) = 4;
  TC_ARG(int64_t, heads) = 4;
  TC_ARG(int64_t, width) = 256;  // d_model; must divide by heads
  TC_ARG(double, dropout) = 0.0;
};

class MLPImpl : public Module {
 public:
  MLPImpl(int64_t width, double dropout);
  Tensor forward(const Tensor& x);
  Linear fc{nullptr}, proj{nullptr};
  GELU act{nullptr};
  Dropout drop{nullptr};
};
TC_MODULE(MLP);

class BlockImpl : public Module {
 public:
  explicit BlockImpl(const GPTConfig& config);
  Tensor forward(const Tensor& x);
  // The same block over the residual stream x given ln1(x) (`normed`, made by the norm
  // that computed x): returns (the block's output, next_norm of it), each residual add
  // fused into the norm that reads it (LayerNorm::forward_add), the normalized rows in
  // normalized_dtype. GPT chains its blocks so; the values are forward's.
  TensorPair forward_fused(const Tensor& x, const Tensor& normed, LayerNormImpl& next_norm,
                           std::optional<DType> normalized_dtype);
  LayerNorm ln1{nullptr}, ln2{nullptr};
  CausalSelfAttention attn{nullptr};
  MLP mlp{nullptr};
};
TC_MODULE(Block);

class GPTImpl : public Module {
 public:
  explicit GPTImpl(const GPTConfig& config = {});
  // idx int64 (B, T), T <= context -> logits (B, T, vocab). Each residual add runs fused
  // into the layer norm that reads its sum (Block::forward_fused); under autocast the
  // norms write their rows in the autocast dtype the next linear reads (rounded once from
  // the float32 norm, the value a separate cast would give).
  Tensor forward(const Tensor& idx);

  GPTConfig config;
  Embedding wte{nullptr}, wpe{nullptr};
  Dropout drop{nullptr};
  Sequential blocks{nullptr};
  LayerNorm ln_f{nullptr};
  Linear lm_head{nullptr};
};
TC_MODULE(GPT);

}  // namespace tc::nn
