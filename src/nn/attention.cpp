// CausalSelfAttention and the GPT built from it.
#include "tensorcast/nn/attention.h"

#include <tuple>

#include "tensorcast/amp/autocast.h"
#include "tensorcast/amp/fp8.h"
#include "tensorcast/autograd.h"
#include "tensorcast/nn/gpt.h"
#include "tensorcast/ops.h"

namespace tc::nn {

CausalSelfAttentionImpl::CausalSelfAttentionImpl(const CausalSelfAttentionOptions& o)
    : Module("CausalSelfAttention"), options(o) {
  TC_CHECK(o.embed_dim() > 0 && o.num_heads() > 0 && o.embed_dim() % o.num_heads() == 0, "nn",
           "CausalSelfAttention: embed_dim (", o.embed_dim(), ") must be a positive multiple of num_heads (",
           o.num_heads(), ")");
  qkv = register_module("qkv", Linear(LinearOptions(o.embed_dim(), 3 * o.embed_dim()).bias(o.bias())));
  proj = register_module("proj", Linear(LinearOptions(o.embed_dim(), o.embed_dim()).bias(o.bias())));
  attn_dropout = register_module("attn_dropout", Dropout(o.dropout()));
  resid_dropout = register_module("resid_dropout", Dropout(o.dropout()));
}

Tensor CausalSelfAttentionImpl::forward(const Tensor& x) {
  const int64_t C = options.embed_dim(), H = options.num_heads(), hd = C / H;
  TC_CHECK(x.defined() && x.dim() == 3 && x.size(2) == C, "nn", "CausalSelfAttention(", C, ", heads=", H,
           ") expects input of shape (B, T, ", C, "), got ",
           x.defined() ? shape_str(x.sizes()) : "an undefined tensor");
  const int64_t B = x.size(0), T = x.size(1);
  // (B, T, 3C) -> (B, T, 3, H, hd) -> (3, B, H, T, hd): q, k, v as views, no copies.
  const Tensor heads = qkv->forward(x).view({B, T, 3, H, hd}).permute({2, 0, 3, 1, 4});
  const Tensor q = heads.select(0, 0), k = heads.select(0, 1), v = heads.select(0, 2);
  const double p = attn_dropout->is_training() ? attn_dropout->options.p() : 0.0;
  // (B, H, T, hd), stored (B, T, H, hd): merging the heads back is a view.
  const Tensor y =
      tc::scaled_dot_product_attention(q, k, v, Tensor(), p, /*is_causal=*/true).transpose(1, 2).reshape({B, T, C});
  return resid_dropout->forward(proj->forward(y));
}

// ---------------------------------------------------------------- GPT
MLPImpl::MLPImpl(int64_t width, double dropout) : Module("MLP") {
  fc = register_module("fc", Linear(width, 4 * width));
  act = register_module("act", GELU());
  proj = register_module("proj", Linear(4 * width, width));
  drop = register_module("drop", Dropout(dropout));
}

// fc, act and proj as one op (tc::mlp): GELU in the GEMM's epilogue when no graph is
// recorded, and without a pass of its own in training; the same value as
// proj->forward(act->forward(fc->forward(x))) but for the 16-bit rounding. Under an fp8
// recipe the layers run one by one, each Linear on the recipe's GEMMs.
Tensor MLPImpl::forward(const Tensor& x) {
  const Tensor h = fp8::active_recipe() ? proj->forward(act->forward(fc->forward(x)))
                                        : tc::mlp(x, fc->weight, fc->bias, proj->weight, proj->bias, act->activation());
  return drop->forward(h);
}

BlockImpl::BlockImpl(const GPTConfig& c) : Module("Block") {
  ln1 = register_module("ln1", LayerNorm(c.width()));
  attn = register_module("attn",
                         CausalSelfAttention(CausalSelfAttentionOptions(c.width(), c.heads()).dropout(c.dropout())));
  ln2 = register_module("ln2", LayerNorm(c.width()));
  mlp = register_module("mlp", MLP(c.width(), c.dropout()));
}

Tensor BlockImpl::forward(const Tensor& x) {
  Tensor h = x + attn->forward(ln1->forward(x));
  return h + mlp->forward(ln2->forward(h));
}

TensorPair BlockImpl::forward_fused(const Tensor& x, const Tensor& normed, LayerNormImpl& next_norm,
                                    std::optional<DType> normalized_dtype) {
  const auto [h, h_normed] = ln2->forward_add(x, attn->forward(normed), normalized_dtype);
  return next_norm.forward_add(h, mlp->forward(h_normed), normalized_dtype);
}

GPTImpl::GPTImpl(const GPTConfig& c) : Module("GPT"), config(c) {
  TC_CHECK(c.vocab_size() > 0 && c.context() > 0 && c.layers() >= 0, "nn", "GPT: vocab_size, context must be positive");
  wte = register_module("wte", Embedding(c.vocab_size(), c.width()));
  wpe = register_module("wpe", Embedding(c.context(), c.width()));
  drop = register_module("drop", Dropout(c.dropout()));
  blocks = register_module("blocks", Sequential());
  for (int64_t i = 0; i < c.layers(); ++i) blocks->push_back(Block(c));
  ln_f = register_module("ln_f", LayerNorm(c.width()));
  lm_head = register_module("lm_head", Linear(c.width(), c.vocab_size()));
}

Tensor GPTImpl::forward(const Tensor& idx) {
  TC_CHECK(idx.defined() && idx.dim() == 2 && idx.dtype() == kInt64, "nn",
           "GPT expects int64 token indices of shape (B, T), got ",
           idx.defined() ? shape_str(idx.sizes()) + " " + std::string(dtype_name(idx.dtype())) : "an undefined tensor");
  const int64_t T = idx.size(1);
  TC_CHECK(T >= 1 && T <= config.context(), "nn", "GPT: sequence length ", T, " of input ", shape_str(idx.sizes()),
           " exceeds the context ", config.context());
  const Device dev = idx.device();
  const Tensor pos = tc::arange(static_cast<double>(T), TensorOptions(kInt64).device(dev));
  const Tensor tok = wte->forward(idx), at = wpe->forward(pos);  // (B, T, d) + (T, d)
  // The dtype the next linear reads the normalized rows in (it would cast them to it).
  const std::optional<DType> dt =
      amp::is_autocast_enabled(dev.type) ? std::optional(amp::get_autocast_dtype(dev.type)) : std::nullopt;
  LayerNormImpl& first = blocks->is_empty() ? *ln_f : *blocks->at<BlockImpl>(0)->ln1;
  Tensor x, normed;
  if (drop->is_training() && drop->options.p() > 0) {
    x = drop->forward(tok + at);
    normed = first.forward(x);
  } else {
    std::tie(x, normed) = first.forward_add(tok, at, dt);
  }
  for (size_t i = 0; i < blocks->size(); ++i) {
    LayerNormImpl& next = i + 1 < blocks->size() ? *blocks->at<BlockImpl>(i + 1)->ln1 : *ln_f;
    std::tie(x, normed) = blocks->at<BlockImpl>(i)->forward_fused(x, normed, next, dt);
  }
  return lm_head->forward(normed);
}

}  // namespace tc::nn
