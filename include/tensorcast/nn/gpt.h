/// \file
/// A small GPT (decoder-only transformer) over bytes:
/// \verbatim
///   token embedding (vocab, d) + learned position embedding (context, d)
///   N pre-LayerNorm blocks:  x = x + attn(ln1(x));  x = x + mlp(ln2(x))
///                            mlp = Linear(d, 4d) - GELU - Linear(4d, d)
///   final LayerNorm, lm head Linear(d, vocab) (with bias, untied)
/// \endverbatim
/// Parameter names: "wte.weight", "wpe.weight", "blocks.0.ln1.weight",
/// "blocks.0.attn.qkv.weight", "blocks.0.mlp.fc.weight", "ln_f.bias", "lm_head.weight".
#pragma once
#include "tensorcast/nn/activation.h"
#include "tensorcast/nn/attention.h"
#include "tensorcast/nn/container.h"
#include "tensorcast/nn/dropout.h"
#include "tensorcast/nn/embedding.h"
#include "tensorcast/nn/linear.h"
#include "tensorcast/nn/normalization.h"

namespace tc::nn {

/// The shape of a GPT (tc::nn::GPT).
struct GPTConfig {
  TC_ARG(int64_t, vocab_size) = 256;  ///< tokens (256: bytes)
  TC_ARG(int64_t, context) = 128;     ///< the longest sequence (block size)
  TC_ARG(int64_t, layers) = 4;        ///< transformer blocks
  TC_ARG(int64_t, heads) = 4;         ///< attention heads per block
  TC_ARG(int64_t, width) = 256;       ///< d_model; must divide by heads
  TC_ARG(double, dropout) = 0.0;      ///< dropout probability after the embeddings, in attention and the MLP
};

/// The feed-forward part of a block: Linear(d, 4d), GELU, Linear(4d, d), dropout.
class MLPImpl : public Module {
 public:
  /// For width d and the given dropout probability.
  MLPImpl(int64_t width, double dropout);
  /// (B, T, d) -> (B, T, d).
  Tensor forward(const Tensor& x);
  /// \name Linear layers
  /// @{

  /// The two linear layers (d -> 4d, 4d -> d).
  Linear fc{nullptr}, proj{nullptr};
  /// @}
  GELU act{nullptr};      ///< the activation (exact GELU)
  Dropout drop{nullptr};  ///< dropout after proj
};
TC_MODULE(MLP);

/// A pre-LayerNorm transformer block: x + attn(ln1(x)), then x + mlp(ln2(x)).
class BlockImpl : public Module {
 public:
  /// A block of config's width, heads, context and dropout.
  explicit BlockImpl(const GPTConfig& config);
  /// (B, T, d) -> (B, T, d).
  Tensor forward(const Tensor& x);
  /// The same block over the residual stream x given ln1(x) (`normed`, made by the norm
  /// that computed x): returns (the block's output, next_norm of it), each residual add
  /// fused into the norm that reads it (LayerNorm::forward_add), the normalized rows in
  /// normalized_dtype. GPT chains its blocks so; the values are forward's.
  TensorPair forward_fused(const Tensor& x, const Tensor& normed, LayerNormImpl& next_norm,
                           std::optional<DType> normalized_dtype);
  /// \name Norms
  /// @{

  /// The norms before attention and the MLP.
  LayerNorm ln1{nullptr}, ln2{nullptr};
  /// @}
  CausalSelfAttention attn{nullptr};  ///< causal self-attention
  MLP mlp{nullptr};                   ///< the feed-forward part
};
TC_MODULE(Block);

/// A GPT-2 style language model (see the top of this file); TC_MODULE(GPT) is its holder.
class GPTImpl : public Module {
 public:
  /// Builds the model of `config`, initialized as GPT-2 (normal(0, 0.02) weights).
  explicit GPTImpl(const GPTConfig& config = {});
  /// idx int64 (B, T), T <= context -> logits (B, T, vocab). Each residual add runs fused
  /// into the layer norm that reads its sum (Block::forward_fused); under autocast the
  /// norms write their rows in the autocast dtype the next linear reads (rounded once from
  /// the float32 norm, the value a separate cast would give).
  Tensor forward(const Tensor& idx);

  GPTConfig config;  ///< as constructed
  /// \name Embeddings
  /// @{

  /// Token and position embeddings.
  Embedding wte{nullptr}, wpe{nullptr};
  /// @}
  Dropout drop{nullptr};       ///< dropout after the embeddings
  Sequential blocks{nullptr};  ///< the blocks, in order
  LayerNorm ln_f{nullptr};     ///< the final norm
  Linear lm_head{nullptr};     ///< the output projection to the vocabulary (untied from wte)
};
TC_MODULE(GPT);

}  // namespace tc::nn
