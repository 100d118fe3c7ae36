// Internal: activation kernels whose loops are hand-written rather than a scalar lambda
// through map1/map2 (GELU: erf/tanh forms vectorized with the fast_math functions).
#pragma once
#include "core/tensor_impl.h"

namespace tc::cpu {

// out = gelu(x), x broadcast to out's shape; the tanh approximation when tanh_approx.
// float64 and 64-bit integer operands compute in double with std::erf/tanh, the rest in
// float32 with the ISA-cloned loops, rounding once to out's dtype.
void gelu(const Tensor& out, const Tensor& x, bool tanh_approx);

// dx = g * gelu'(x), g and x broadcast to dx's shape.
void gelu_backward(const Tensor& dx, const Tensor& g, const Tensor& x, bool tanh_approx);

}  // namespace tc::cpu
