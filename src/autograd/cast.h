// Internal: casts in the autograd graph, and the dtype a gradient is best produced in.
//
// Under autocast, an fp32 weight reaches a 16-bit GEMM through a cast node. The weight's
// gradient is wanted in fp32, so an edge into a widening-back cast node carries the cast's
// source dtype: the engine hands fp32 gradients through as they are, and a backward formula
// that can write fp32 directly (a GEMM with bf16 inputs and fp32 output, no rounding to
// bf16 and no separate widening pass) asks grad_dtype() for it.
#pragma once
#include "tensorcast/tensor.h"

namespace tc::autograd::detail {

// Records `out` = `in` cast to out's dtype (Tensor::to); its backward casts the gradient
// back to in's dtype.
Tensor record_cast(const Tensor& out, const Tensor& in);

// The dtype the gradient of `t` is consumed in: the source dtype when t is a 16-bit cast
// of a wider floating tensor, else t's own dtype.
DType grad_dtype(const Tensor& t);

}  // namespace tc::autograd::detail
