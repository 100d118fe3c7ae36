// Internal: graph nodes the backward engine treats specially, and what they let backward
// formulas ask.
//
// Casts. Under autocast, an fp32 weight reaches a 16-bit GEMM through a cast node. Its
// gradient is wanted in fp32, so an edge into a widening-back cast node carries the cast's
// source dtype: the engine hands fp32 gradients through as they are, and a backward
// formula that can write fp32 directly (a GEMM with bf16 inputs and fp32 output: no
// rounding to bf16, no separate widening pass) asks grad_dtype() for it. An op that
// computes a 16-bit output in float32 and rounds it once, where a float32 op and a cast
// would stand (add_layer_norm's normalized rows), marks it so too (take_grad_in).
//
// Slices. The gradient of a slice (select, narrow, slice) is zeros of the input's shape,
// laid out as the input is, with the slice's part filled in. When several slices of one
// tensor are used (attention's q, k and v from one projection), the engine assembles that
// gradient from the parts instead: the first slice's gradient is copied into a new buffer
// (uninitialized, in the input's layout), later disjoint slices along the same dim are
// copied into theirs, and only what no slice wrote is zero-filled, when the buffer is used.
// Overlapping slices, or slices along another dim, are added in place. A backward that
// writes several slices' gradients into one block laid out as their input (attention's
// q, k, v) has that block taken as the input's gradient, nothing copied; the engine copies
// the parts out first if it must write there (zero-fill, additions) while something else
// still holds the block.
#pragma once
#include <functional>

#include "tensorcast/tensor.h"

namespace tc::autograd::detail {

// Records `out` = `in` cast to out's dtype (Tensor::to); its backward casts the gradient
// back to in's dtype.
Tensor record_cast(const Tensor& out, const Tensor& in);

// The dtype the gradient of `t` is consumed in: the source dtype when t is a 16-bit cast
// of a wider floating tensor, the dtype take_grad_in gave, else t's own dtype.
DType grad_dtype(const Tensor& t);

// Marks `out`, just recorded by record(), as taking its gradient in `dtype` when that is
// wider than out's own: a 16-bit output that its op computes in float32 and rounds once
// (where a separate op and a cast would stand), whose consumers then write float32
// gradients as they do for a cast. No-op when out was not recorded.
void take_grad_in(const Tensor& out, DType dtype);

// Inside a backward formula, while the engine runs its node: the gradient that input
// `input` has received so far from its other consumers, taken out of the engine's buffer
// (undefined when none has arrived, or when it is not a contiguous tensor of the input's
// shape and gradient dtype). A formula that takes it must add it into the gradient it
// returns for that input: it saves the engine's separate addition pass (IEEE addition
// commutes, so the sum is the same), e.g. layer_norm's backward into the residual
// stream's gradient. Undefined outside a backward.
Tensor take_accumulated_grad(size_t input);

// In a kTwice backward formula run with create_graph: `saved`, the node's own output saved
// detached (saving it as it is would make a reference cycle through the node), as a tensor
// whose grad_fn is the node again, so that what the formula computes from it stays
// differentiable (PyTorch's SavedVariable for an output). Otherwise `saved` itself.
Tensor saved_output(const Tensor& saved);

// In a backward formula run with create_graph: the gradients (weighted by `grad`) of
// compose(inputs), the op written with recorded ops, with respect to the inputs that
// `needs` marks, themselves recorded. A fused op's formula answers create_graph with it
// instead of a composite backward of its own. `inputs` are the forward's, saved as they
// are (not detached); an input that needs no gradient gets an undefined tensor.
std::vector<Tensor> recomputed_grads(const std::function<Tensor(const std::vector<Tensor>&)>& compose,
                                     const std::vector<Tensor>& inputs, const Tensor& grad,
                                     const std::vector<bool>& needs);

// What a slice is of its input: `view(g)` gives the same view of an input-shaped tensor g
// (the view op applied to g); when that view is the indices [start, end) along `dim`
// (select, narrow, a slice of step 1) they are given too, else dim is -1.
struct SlicePart {
  std::function<Tensor(const Tensor&)> view;
  int64_t dim = -1, start = 0, end = 0;
};

// Records `out` as the slice `part` of `in`.
Tensor record_slice(const char* name, const Tensor& out, const Tensor& in, SlicePart part);

}  // namespace tc::autograd::detail
