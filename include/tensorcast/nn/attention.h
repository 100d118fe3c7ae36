/// \file
/// CausalSelfAttention: multi-head self-attention where position t attends to positions
/// <= t (GPT's attention block).
///
/// \verbatim
///   q, k, v = split(qkv(x))             each (B, T, C) viewed as (B, H, T, hd), hd = C / H
///   y = softmax(q k^T / sqrt(hd) + mask) v    mask: 0 on and below the diagonal, -inf above
///   out = proj(merge_heads(y))
/// \endverbatim
///
/// y is one scaled_dot_product_attention(q, k, v, is_causal) over all (B, H): the fused
/// kernel reads q, k and v as strided views of qkv's output, skips the keys above the
/// diagonal and never stores the (T, T) weights (with attention dropout in training, the
/// composite does). Under autocast it runs in 16-bit, as PyTorch's policy says.
#pragma once
#include "tensorcast/nn/dropout.h"
#include "tensorcast/nn/linear.h"
#include "tensorcast/nn/module.h"

namespace tc::nn {

/// Options of CausalSelfAttention.
struct CausalSelfAttentionOptions {
  /// embed_dim split into num_heads heads.
  CausalSelfAttentionOptions(int64_t embed_dim, int64_t num_heads) : embed_dim_(embed_dim), num_heads_(num_heads) {}
  TC_ARG(int64_t, embed_dim);     ///< C, the model width
  TC_ARG(int64_t, num_heads);     ///< heads; must divide embed_dim
  TC_ARG(double, dropout) = 0.0;  ///< on the attention weights and on the output (training only)
  TC_ARG(bool, bias) = true;      ///< of the qkv and proj Linears
};

/// Multi-head self-attention with a causal mask (see the top of this file); TC_MODULE(CausalSelfAttention) is its
/// holder.
class CausalSelfAttentionImpl : public Module {
 public:
  /// From options.
  explicit CausalSelfAttentionImpl(const CausalSelfAttentionOptions& options);
  /// embed_dim split into num_heads heads.
  CausalSelfAttentionImpl(int64_t embed_dim, int64_t num_heads)
      : CausalSelfAttentionImpl(CausalSelfAttentionOptions(embed_dim, num_heads)) {}
  /// x (B, T, C) -> (B, T, C).
  Tensor forward(const Tensor& x);

  CausalSelfAttentionOptions options;  ///< as constructed
  Linear qkv{nullptr};                 ///< Linear(C, 3C): q, k, v stacked along the output features
  Linear proj{nullptr};                ///< Linear(C, C)
  /// \name Dropout
  /// @{

  /// Dropout on the attention weights and on the output.
  Dropout attn_dropout{nullptr}, resid_dropout{nullptr};
  /// @}
};
TC_MODULE(CausalSelfAttention);

}  // namespace tc::nn
