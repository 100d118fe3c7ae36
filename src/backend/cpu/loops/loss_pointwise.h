// Internal: the elementwise loss kernels (mse_loss, binary_cross_entropy_with_logits).
//
// The "_sum" forms fuse the reduction: the per-element loss is summed block by block as
// it is computed, never stored. Sums run over fixed chunks of the index space and combine
// in float64 in chunk order, so the result does not depend on the number of threads; out
// (0-d) receives the sum divided by `divisor`, rounded once to out's dtype. Everything
// computes in out's compute type (float32; float64 for float64).
#pragma once
#include "core/tensor_impl.h"

namespace tc::cpu {

// sum((input - target)^2) over their broadcast shape.
void mse_loss_sum(const Tensor& out, const Tensor& input, const Tensor& target, double divisor);

// binary_cross_entropy_with_logits per element: w * ((1 - t) x + lw softplus(-x)),
// lw = 1 + (pw - 1) t (PyTorch's formula); x, t, w, pw broadcast to out's shape.
void bce_with_logits(const Tensor& out, const Tensor& x, const Tensor& t, const Tensor& w, const Tensor& pw);
void bce_with_logits_sum(const Tensor& out, const Tensor& x, const Tensor& t, const Tensor& w, const Tensor& pw,
                         double divisor);

// The gradients for the incoming gradient g (broadcast): gx = w g ((1 - t) - lw sigmoid(-x)),
// gt = w g (-x + (pw - 1) softplus(-x)). Either may be undefined (not wanted).
void bce_with_logits_backward(const Tensor& gx, const Tensor& gt, const Tensor& x, const Tensor& t, const Tensor& w,
                              const Tensor& pw, const Tensor& g);

}  // namespace tc::cpu
