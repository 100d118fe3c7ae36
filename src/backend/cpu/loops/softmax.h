// Internal: softmax and log_softmax row kernels along one dim of any layout.
#pragma once
#include "core/tensor_impl.h"

namespace tc::cpu {

// y = softmax(x) (log_softmax when `log`) along `dim` (already wrapped). y has x's shape
// and floating dtype, any layout; 16-bit data computes in float32, rounding once.
void softmax_forward(const Tensor& y, const Tensor& x, int64_t dim, bool log);

// gx from the output y and its gradient g (both with y's dtype), one pass per row:
//   softmax:     gx = y * (g - sum(g * y))
//   log_softmax: gx = g - exp(y) * sum(g)
void softmax_backward(const Tensor& gx, const Tensor& g, const Tensor& y, int64_t dim, bool log);

}  // namespace tc::cpu
