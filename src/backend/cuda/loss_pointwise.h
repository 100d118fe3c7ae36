// Internal: the elementwise losses (mse_loss, binary_cross_entropy_with_logits) on CUDA tensors.
#pragma once
#include "tensorcast/tensor.h"

namespace tc::gpu {

// cpu::mse_loss_sum, bce_with_logits, bce_with_logits_sum and bce_with_logits_backward's
// contracts (backend/cpu/loops/loss_pointwise.h) on one CUDA device: any dtypes and strides,
// operands broadcast, everything computed in out's compute type (float32; float64 for
// float64). The "_sum" forms never store the per-element losses: a fixed number of blocks
// for the size (grid-stride, float64 partial sums, a fixed tree) and reduce.cu's sum of
// the partials, divided by `divisor` and rounded once: deterministic, equal to the CPU's
// chunked sums to rounding. exp/log1p are CUDA's, not the CPU's fast_math (a few ulps).
void mse_loss_sum(const Tensor& out, const Tensor& input, const Tensor& target, double divisor);
void bce_with_logits(const Tensor& out, const Tensor& x, const Tensor& t, const Tensor& w, const Tensor& pw);
void bce_with_logits_sum(const Tensor& out, const Tensor& x, const Tensor& t, const Tensor& w, const Tensor& pw,
                         double divisor);
void bce_with_logits_backward(const Tensor& gx, const Tensor& gt, const Tensor& x, const Tensor& t, const Tensor& w,
                              const Tensor& pw, const Tensor& g);

}  // namespace tc::gpu
