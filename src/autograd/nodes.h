// Internal: graph nodes the backward engine treats specially, and what they let backward
// formulas ask.
//
// Casts. Under autocast, an fp32 weight reaches a 16-bit GEMM through a cast node. Its
// gradient is wanted in fp32, so an edge into a widening-back cast node carries the cast's
// source dtype: the engine hands fp32 gradients through as they are, and a backward
// formula that can write fp32 directly (a GEMM with bf16 inputs and fp32 output: no
// rounding to bf16, no separate widening pass) asks grad_dtype() for it.
//
// Slices. The gradient of a slice (select, narrow, slice) is zeros of the input's shape
// with the slice's part filled in. When several slices of one tensor are used (attention's
// q, k and v from one projection), the engine adds each later slice's gradient into the
// part of the gradient buffer already collected for that tensor, in place, instead of
// materializing another input-sized tensor of mostly zeros and adding it.
#pragma once
#include <functional>

#include "tensorcast/tensor.h"

namespace tc::autograd::detail {

// Records `out` = `in` cast to out's dtype (Tensor::to); its backward casts the gradient
// back to in's dtype.
Tensor record_cast(const Tensor& out, const Tensor& in);

// The dtype the gradient of `t` is consumed in: the source dtype when t is a 16-bit cast
// of a wider floating tensor, else t's own dtype.
DType grad_dtype(const Tensor& t);

// Records `out` as a slice of `in`: `part(g)` gives the view of an in-shaped tensor g that
// `out` is of `in` (the same view op applied to g).
Tensor record_slice(const char* name, const Tensor& out, const Tensor& in, std::function<Tensor(const Tensor&)> part);

}  // namespace tc::autograd::detail
