// Views: new geometry over the same storage. Each records its backward (the inverse
// reshaping of the gradient) so views are differentiable, which puts them in the ops
// layer; the geometry itself (make_view, strides, layouts) is core's.
#include <algorithm>
#include <optional>

#include "autograd/nodes.h"
#include "core/tensor_impl.h"
#include "tensorcast/autograd.h"
#include "tensorcast/ops.h"

namespace tc {

using autograd::record;

namespace {

// Strides for viewing (sizes, strides) as `shape`, or empty if no view is possible.
std::optional<Shape> view_strides(const Shape& sizes, const Shape& strides, const Shape& shape) {
  // An empty tensor has no elements to place: any shape views it (as in PyTorch).
  if (shape_numel(sizes) == 0 || is_contiguous_layout(sizes, strides)) return contiguous_strides(shape);
  // Split the old dims into chunks that are contiguous among themselves; each new dim
  // must fall inside one chunk (the algorithm of PyTorch's computeStride).
  Shape out(shape.size());
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_base_stride = strides.empty() ? 1 : strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= sizes[d];
    if (d == 0 || (sizes[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

Shape infer_shape(const Shape& shape, int64_t numel, const char* op) {
  Shape out = shape;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      TC_CHECK(infer < 0, op, "only one dimension can be inferred in shape ", shape_str(shape));
      infer = static_cast<int64_t>(i);
    } else {
      TC_CHECK(out[i] >= 0, op, "invalid size ", out[i], " in shape ", shape_str(shape));
      known *= out[i];
    }
  }
  if (infer >= 0) {
    TC_CHECK(known != 0 && numel % known == 0, op, "shape ", shape_str(shape), " is invalid for input of size ", numel);
    out[infer] = numel / known;
  }
  TC_CHECK(shape_numel(out) == numel, op, "shape ", shape_str(shape), " is invalid for input of size ", numel);
  return out;
}

Tensor reshape_backward_record(const char* name, const Tensor& self, const Tensor& out) {
  Shape in_shape = self.sizes();
  return record(
      name, out, {self},
      [in_shape](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{g.reshape(in_shape)}; },
      autograd::Differentiable::kTwice);
}

}  // namespace

Tensor Tensor::view(const Shape& shape) const {
  const Shape target = infer_shape(shape, numel(), "view");
  auto st = view_strides(sizes(), strides(), target);
  TC_CHECK(st.has_value(), "view", "size ", shape_str(target), " is not compatible with the input's size ",
           shape_str(sizes()), " and strides ", shape_str(strides()), "; use reshape() instead");
  return reshape_backward_record("view", *this, make_view(*this, target, *st, storage_offset()));
}

Tensor Tensor::reshape(const Shape& shape) const {
  const Shape target = infer_shape(shape, numel(), "reshape");
  if (auto st = view_strides(sizes(), strides(), target))
    return reshape_backward_record("reshape", *this, make_view(*this, target, *st, storage_offset()));
  return contiguous().view(target);
}

Tensor Tensor::flatten(int64_t start, int64_t end) const {
  if (dim() == 0) return reshape({1});
  start = wrap_dim(start, dim(), "flatten");
  end = wrap_dim(end, dim(), "flatten");
  TC_CHECK(start <= end, "flatten", "start_dim ", start, " cannot come after end_dim ", end);
  Shape s(sizes().begin(), sizes().begin() + start);
  int64_t n = 1;
  for (int64_t d = start; d <= end; ++d) n *= sizes()[d];
  s.push_back(n);
  s.insert(s.end(), sizes().begin() + end + 1, sizes().end());
  return reshape(s);
}

Tensor Tensor::permute(const Shape& dims) const {
  TC_CHECK(static_cast<int64_t>(dims.size()) == dim(), "permute", "expected ", dim(), " dims, got ", shape_str(dims));
  Shape sz(dims.size()), st(dims.size()), inverse(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = wrap_dim(dims[i], dim(), "permute");
    TC_CHECK(!seen[d], "permute", "repeated dim ", d, " in ", shape_str(dims));
    seen[d] = true;
    sz[i] = sizes()[d];
    st[i] = strides()[d];
    inverse[d] = static_cast<int64_t>(i);
  }
  return record(
      "permute", make_view(*this, sz, st, storage_offset()), {*this},
      [inverse](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{g.permute(inverse)}; },
      autograd::Differentiable::kTwice);
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  if (dim() == 0) return *this;
  d0 = wrap_dim(d0, dim(), "transpose");
  d1 = wrap_dim(d1, dim(), "transpose");
  Shape perm(dim());
  for (int64_t i = 0; i < dim(); ++i) perm[i] = i;
  std::swap(perm[d0], perm[d1]);
  return permute(perm);
}

Tensor Tensor::t() const {
  TC_CHECK(dim() <= 2, "t", "expects a tensor with <= 2 dimensions, got ", dim());
  return dim() < 2 ? *this : transpose(0, 1);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  TC_CHECK(dim() > 0, "slice", "cannot slice a 0-d tensor");
  d = wrap_dim(d, dim(), "slice");
  TC_CHECK(step > 0, "slice", "step must be positive, got ", step);
  const int64_t n = sizes()[d];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape sz = sizes(), st = strides();
  sz[d] = (end - start + step - 1) / step;
  st[d] *= step;
  return autograd::detail::record_slice(
      "slice", make_view(*this, sz, st, storage_offset() + start * strides()[d]), *this,
      autograd::detail::SlicePart{[d, start, end, step](const Tensor& g) { return g.slice(d, start, end, step); },
                                  step == 1 ? d : -1, start, end});
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  TC_CHECK(dim() > 0, "narrow", "cannot narrow a 0-d tensor");
  d = wrap_dim(d, dim(), "narrow");
  const int64_t n = sizes()[d];
  if (start < 0) start += n;
  TC_CHECK(start >= 0 && length >= 0 && start + length <= n, "narrow", "start ", start, " + length ", length,
           " exceeds dimension size ", n, " of shape ", shape_str(sizes()));
  return slice(d, start, start + length);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  TC_CHECK(dim() > 0, "select", "cannot select on a 0-d tensor");
  d = wrap_dim(d, dim(), "select");
  const int64_t n = sizes()[d];
  TC_CHECK(index >= -n && index < n, "select", "index ", index, " is out of bounds for dimension ", d, " with size ",
           n);
  if (index < 0) index += n;
  Shape sz = sizes(), st = strides();
  sz.erase(sz.begin() + d);
  st.erase(st.begin() + d);
  return autograd::detail::record_slice(
      "select", make_view(*this, sz, st, storage_offset() + index * strides()[d]), *this,
      autograd::detail::SlicePart{[d, index](const Tensor& g) { return g.select(d, index); }, d, index, index + 1});
}

Tensor Tensor::expand(const Shape& shape) const {
  TC_CHECK(shape.size() >= sizes().size(), "expand", "the number of sizes provided (", shape.size(),
           ") must be greater or equal to the number of dimensions in the tensor (", dim(), ")");
  const size_t lead = shape.size() - sizes().size();
  Shape sz(shape.size()), st(shape.size(), 0);
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      TC_CHECK(shape[i] >= 0, "expand", "cannot use -1 for a new leading dimension in ", shape_str(shape));
      sz[i] = shape[i];
      continue;
    }
    const int64_t have = sizes()[i - lead];
    const int64_t want = shape[i] == -1 ? have : shape[i];
    TC_CHECK(have == want || have == 1, "expand", "the expanded size ", want, " must match the existing size ", have,
             " at non-singleton dimension ", i, "; target ", shape_str(shape), ", tensor ", shape_str(sizes()));
    sz[i] = want;
    st[i] = have == want ? strides()[i - lead] : 0;
  }
  Shape in_shape = sizes();
  return record(
      "expand", make_view(*this, sz, st, storage_offset()), {*this},
      [in_shape](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{sum_to_size(g, in_shape)}; },
      autograd::Differentiable::kTwice);
}

Tensor Tensor::unsqueeze(int64_t d) const {
  d = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape s = sizes();
  s.insert(s.begin() + d, 1);
  return view(s);
}

Tensor Tensor::squeeze() const {
  Shape s;
  for (int64_t v : sizes())
    if (v != 1) s.push_back(v);
  return reshape(s);
}

Tensor Tensor::squeeze(int64_t d) const {
  if (dim() == 0) return *this;
  d = wrap_dim(d, dim(), "squeeze");
  if (sizes()[d] != 1) return *this;
  Shape s = sizes();
  s.erase(s.begin() + d);
  return reshape(s);
}

}  // namespace tc
