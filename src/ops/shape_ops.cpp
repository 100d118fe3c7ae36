// cat and stack: joining tensors along a dimension, with dtype promotion across inputs;
// the copy is backend/cpu/loops/shape_ops.cpp. Backward narrows the gradient back.
#include "backend/kernels.h"
#include "core/tensor_impl.h"
#include "ops/impl.h"
#include "ops/pointwise.h"
#include "tensorcast/autograd.h"

namespace tc::impl {

namespace {

// PyTorch's legacy rule: 1-d empty tensors are skipped whatever the other shapes are.
bool skipped_in_cat(const Tensor& t) { return t.dim() == 1 && t.numel() == 0; }

}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  constexpr const char* op = "cat";
  TC_CHECK(!tensors.empty(), op, "expected a non-empty list of tensors");
  int64_t ref = -1;  // the first tensor that takes part
  DType dt = kBool;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    TC_CHECK(t.defined(), op, "tensor ", i, " is undefined");
    TC_CHECK(t.dim() > 0, op, "zero-dimensional tensor (at position ", i, ") cannot be concatenated");
    if (i > 0) op_util::check_same_device(op, tensors[0], t);
    dt = i == 0 ? t.dtype() : promote_types(dt, t.dtype());
    if (ref < 0 && !skipped_in_cat(t)) ref = static_cast<int64_t>(i);
  }
  if (ref < 0) return make_tensor({0}, dt, tensors[0].device());
  const Tensor& r = tensors[ref];
  const int64_t d = wrap_dim(dim, r.dim(), op);
  Shape out_shape = r.sizes();
  out_shape[d] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (skipped_in_cat(t)) continue;
    TC_CHECK(t.dim() == r.dim(), op, "tensors must have the same number of dimensions: tensor ", ref, " has shape ",
             shape_str(r.sizes()), " but tensor ", i, " has shape ", shape_str(t.sizes()));
    for (int64_t k = 0; k < r.dim(); ++k)
      TC_CHECK(k == d || t.size(k) == r.size(k), op, "sizes of tensors must match except in dimension ", d, ": tensor ",
               ref, " has shape ", shape_str(r.sizes()), " but tensor ", i, " has shape ", shape_str(t.sizes()));
    out_shape[d] += t.size(d);
  }
  Tensor out = make_tensor(out_shape, dt, r.device());

  std::vector<int64_t> starts(tensors.size(), 0), lens(tensors.size());
  std::vector<bool> skip(tensors.size());
  int64_t start = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    starts[i] = start;
    skip[i] = skipped_in_cat(tensors[i]);
    lens[i] = skip[i] ? 0 : tensors[i].size(d);
    start += lens[i];
  }
  // Skipped tensors have no elements: nothing to copy.
  backend::kernels_for(out.device()).cat_into(out, tensors, starts, d);
  return autograd::record(
      op, out, tensors,
      [d, starts, lens, skip](const Tensor& g, const std::vector<bool>& needs) {
        std::vector<Tensor> grads(needs.size());
        for (size_t i = 0; i < needs.size(); ++i) {
          if (!needs[i]) continue;
          grads[i] =
              skip[i] ? zeros({0}, TensorOptions(g.dtype()).device(g.device())) : g.narrow(d, starts[i], lens[i]);
        }
        return grads;
      },
      autograd::Differentiable::kTwice);
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  constexpr const char* op = "stack";
  TC_CHECK(!tensors.empty(), op, "expected a non-empty list of tensors");
  for (size_t i = 0; i < tensors.size(); ++i) {
    TC_CHECK(tensors[i].defined(), op, "tensor ", i, " is undefined");
    TC_CHECK(tensors[i].sizes() == tensors[0].sizes(), op,
             "expected all tensors to have the same shape, but tensor 0 has shape ", shape_str(tensors[0].sizes()),
             " and tensor ", i, " has shape ", shape_str(tensors[i].sizes()));
  }
  const int64_t d = wrap_dim(dim, tensors[0].dim() + 1, op);
  std::vector<Tensor> parts;
  parts.reserve(tensors.size());
  for (const Tensor& t : tensors) parts.push_back(t.unsqueeze(d));
  return impl::cat(parts, d);
}

}  // namespace tc::impl
