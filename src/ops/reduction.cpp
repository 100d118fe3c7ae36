// Reduction ops: sum, mean, var, max/min (all elements or along a dim, with indices),
// argmax/argmin and sum_to_size, with their backward formulas. Argument checks and
// autograd live here; the loops are in backend/cpu/loops/reduce.cpp and backend/cuda/reduce.cu.
#include <cmath>

#include "backend/kernels.h"
#include "ops/impl.h"
#include "ops/pointwise.h"

namespace tc::impl {

using autograd::record;

namespace {

// (Devices are the dispatcher's business: it refuses a CUDA tensor for an op without a kernel.)
void check_input(const char* op, const Tensor& x) { TC_CHECK(x.defined(), op, "got an undefined tensor"); }

// Which dims `dims` reduces (empty = all); rejects out-of-range and repeated dims. A 0-d
// tensor accepts dim 0 / -1, as in PyTorch.
std::vector<bool> reduced_mask(const char* op, const Tensor& x, const Shape& dims) {
  const int64_t nd = x.dim();
  std::vector<bool> mask(static_cast<size_t>(nd), dims.empty());
  std::vector<bool> seen(static_cast<size_t>(std::max<int64_t>(nd, 1)), false);
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, std::max<int64_t>(nd, 1), op);
    TC_CHECK(!seen[w], op, "dim ", w, " appears multiple times in the list of dims ", shape_str(dims),
             " for a tensor of shape ", shape_str(x.sizes()));
    seen[w] = true;
    if (nd > 0) mask[w] = true;
  }
  return mask;
}

Shape reduced_shape(const Tensor& x, const std::vector<bool>& mask, bool keepdim) {
  Shape s;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (!mask[d])
      s.push_back(x.size(d));
    else if (keepdim)
      s.push_back(1);
  }
  return s;
}

int64_t reduced_count(const Tensor& x, const std::vector<bool>& mask) {
  int64_t n = 1;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (mask[d]) n *= x.size(d);
  return n;
}

// g (the reduced shape, with or without kept dims) broadcast back over x's shape.
Tensor expand_back(const Tensor& g, const Shape& in_shape, const std::vector<bool>& mask) {
  Shape keep;
  for (size_t d = 0; d < in_shape.size(); ++d) keep.push_back(mask[d] ? 1 : in_shape[d]);
  return g.reshape(keep).expand(in_shape);
}

DType float_acc_dtype(DType t) { return t == kFloat64 ? kFloat64 : kFloat32; }

Tensor sum_impl(const char* op, const Tensor& x, const std::vector<bool>& mask, bool keepdim, bool is_mean) {
  const int64_t n = reduced_count(x, mask);
  DType out_dtype = x.dtype();
  if (is_mean) {
    TC_CHECK(is_floating(x.dtype()), op, "could not infer the output dtype: the input must have a floating dtype, got ",
             dtype_name(x.dtype()), " for a tensor of shape ", shape_str(x.sizes()));
  } else if (!is_floating(x.dtype())) {
    out_dtype = kInt64;  // exact integer sums, as torch.sum
  }
  Tensor out = make_tensor(reduced_shape(x, mask, keepdim), out_dtype, x.device());
  backend::kernels_for(x.device()).sum_kernel(out, x, mask, is_mean ? static_cast<double>(n) : 1.0);
  return record(
      op, out, {x},
      [in_shape = x.sizes(), mask, n, is_mean](const Tensor& g, const std::vector<bool>&) {
        return std::vector<Tensor>{is_mean ? expand_back(impl::div(g, static_cast<double>(n)), in_shape, mask)
                                           : expand_back(g, in_shape, mask)};
      },
      autograd::Differentiable::kTwice);
}

// max/min over all elements; backward spreads the gradient evenly over every element
// equal to the result (NaNs count as equal to a NaN result), as torch.amax does. The count
// stays a tensor on the device (no host read in the backward).
Tensor minmax_all(const char* op, const Tensor& x, bool is_max) {
  check_input(op, x);
  TC_CHECK(x.numel() > 0, op, "cannot reduce over a zero-size tensor of shape ", shape_str(x.sizes()),
           " (the operation has no identity)");
  Tensor out = make_tensor({}, x.dtype(), x.device());
  backend::kernels_for(x.device()).minmax_kernel(out, Tensor(), x, -1, is_max);
  return record(
      op, out, {x},
      [x = x.detach(), out = out.detach()](const Tensor& g, const std::vector<bool>&) {
        const Tensor mask = op_util::map2(x, out, kBool, "minmax_backward", fn::EqualOrBothNan{});
        const Tensor count = impl::sum(mask);  // int64, at least 1: out is one of x's elements
        // g / count in float64 (count is int64), rounded once into g's dtype. With
        // create_graph, g times each element's share 1 / count, a recorded product.
        if (!is_grad_enabled())
          return std::vector<Tensor>{op_util::map3(mask, g, count, g.dtype(), "minmax_backward", fn::ShareWhere{})};
        const Tensor one = full({}, 1.0, TensorOptions(g.dtype()).device(g.device()));
        return std::vector<Tensor>{
            impl::mul(op_util::map3(mask, one, count, g.dtype(), "minmax_backward", fn::ShareWhere{}), g)};
      },
      autograd::Differentiable::kTwice);
}

std::tuple<Tensor, Tensor> minmax_dim(const char* op, const Tensor& x, int64_t dim, bool keepdim, bool is_max) {
  check_input(op, x);
  const int64_t nd = x.dim();
  const int64_t d = wrap_dim(dim, std::max<int64_t>(nd, 1), op);
  std::vector<bool> mask(static_cast<size_t>(nd), false);
  if (nd > 0) {
    mask[d] = true;
    TC_CHECK(x.size(d) > 0, op, "cannot reduce over a zero-size dimension: dim ", d, " of a tensor of shape ",
             shape_str(x.sizes()), " (", dtype_name(x.dtype()), ")");
  }
  const Shape shape = reduced_shape(x, mask, keepdim);
  Tensor values = make_tensor(shape, x.dtype(), x.device());
  Tensor indices = make_tensor(shape, kInt64, x.device());
  backend::kernels_for(x.device()).minmax_kernel(values, indices, x, nd > 0 ? d : -1, is_max);
  values = record(
      op, values, {x},
      [in_shape = x.sizes(), idx = indices, d, nd, keepdim](const Tensor& g, const std::vector<bool>&) {
        if (nd == 0) return std::vector<Tensor>{g.reshape({})};
        const bool create_graph = is_grad_enabled();
        // With create_graph: a one-hot mask of the chosen elements (scattered ones) times g, a
        // recorded product.
        const Tensor src = create_graph ? full(g.sizes(), 1.0, TensorOptions(g.dtype()).device(g.device())) : g;
        Tensor grad = zeros(in_shape, TensorOptions(g.dtype()).device(g.device()));
        backend::kernels_for(g.device()).scatter_along_dim(grad, src.contiguous(), idx, d);
        if (create_graph) grad = impl::mul(grad, keepdim ? g : g.unsqueeze(d));
        return std::vector<Tensor>{grad};
      },
      autograd::Differentiable::kTwice);
  return {values, indices};
}

Tensor arg_impl(const char* op, const Tensor& x, std::optional<int64_t> dim, bool keepdim, bool is_max) {
  check_input(op, x);
  if (dim) return std::get<1>(minmax_dim(op, x.detach(), *dim, keepdim, is_max));
  TC_CHECK(x.numel() > 0, op, "cannot reduce over a zero-size tensor of shape ", shape_str(x.sizes()),
           " (the operation has no identity)");
  Tensor idx = make_tensor(keepdim ? Shape(static_cast<size_t>(x.dim()), 1) : Shape{}, kInt64, x.device());
  backend::kernels_for(x.device()).minmax_kernel(Tensor(), idx, x, -1, is_max);
  return idx;
}

}  // namespace

Tensor sum(const Tensor& x) {
  check_input("sum", x);
  return sum_impl("sum", x, std::vector<bool>(static_cast<size_t>(x.dim()), true), false, false);
}

Tensor sum(const Tensor& x, const Shape& dims, bool keepdim) {
  check_input("sum", x);
  return sum_impl("sum", x, reduced_mask("sum", x, dims), keepdim, false);
}

Tensor mean(const Tensor& x) {
  check_input("mean", x);
  return sum_impl("mean", x, std::vector<bool>(static_cast<size_t>(x.dim()), true), false, true);
}

Tensor mean(const Tensor& x, const Shape& dims, bool keepdim) {
  check_input("mean", x);
  return sum_impl("mean", x, reduced_mask("mean", x, dims), keepdim, true);
}

Tensor var(const Tensor& x, const Shape& dims, int64_t correction, bool keepdim) {
  check_input("var", x);
  TC_CHECK(is_floating(x.dtype()), "var", "expected a floating dtype, got ", dtype_name(x.dtype()),
           " for a tensor of shape ", shape_str(x.sizes()));
  TC_CHECK(correction >= 0, "var", "correction must be non-negative, got ", correction);
  const std::vector<bool> mask = reduced_mask("var", x, dims);
  const int64_t n = reduced_count(x, mask);
  const Shape shape = reduced_shape(x, mask, keepdim);
  Tensor out = make_tensor(shape, x.dtype(), x.device());
  const bool grad = autograd::any_requires_grad({x}) && is_grad_enabled();
  // The mean in the accumulation dtype, kept for the backward so 16-bit inputs do not
  // see a rounded mean.
  Tensor mean_acc = grad ? make_tensor(shape, float_acc_dtype(x.dtype()), x.device()) : Tensor();
  backend::kernels_for(x.device()).var_kernel(out, mean_acc, x, mask, correction);
  if (!grad) return out;
  return record(
      "var", out, {x},
      [x, mean_acc, mask, n, correction](const Tensor& g, const std::vector<bool>&) {
        const Shape& in_shape = x.sizes();
        Shape keep, dims;
        for (size_t d = 0; d < in_shape.size(); ++d) {
          keep.push_back(mask[d] ? 1 : in_shape[d]);
          if (mask[d]) dims.push_back(static_cast<int64_t>(d));
        }
        const double scale = 2.0 / static_cast<double>(std::max<int64_t>(0, n - correction));
        if (is_grad_enabled())  // create_graph: scale (x - mean(x)) g, the mean recomputed by recorded ops
          return std::vector<Tensor>{
              impl::mul(impl::mul(impl::sub(x, impl::mean(x, dims, true)), g.reshape(keep)), scale)};
        return std::vector<Tensor>{op_util::map3(x.detach(), mean_acc.reshape(keep), g.reshape(keep), g.dtype(),
                                                 "var_backward", fn::VarBackward{scale})};
      },
      autograd::Differentiable::kTwice);
}

Tensor max(const Tensor& x) { return minmax_all("max", x, true); }
Tensor min(const Tensor& x) { return minmax_all("min", x, false); }

std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  return minmax_dim("max", x, dim, keepdim, true);
}
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  return minmax_dim("min", x, dim, keepdim, false);
}

Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_impl("argmax", x, dim, keepdim, true);
}
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_impl("argmin", x, dim, keepdim, false);
}

Tensor sum_to_size(const Tensor& x, const Shape& size) {
  check_input("sum_to_size", x);
  if (x.sizes() == size) return x;
  const int64_t nd = x.dim();
  const int64_t lead = nd - static_cast<int64_t>(size.size());
  TC_CHECK(lead >= 0, "sum_to_size", "size ", shape_str(size), " is not expandable to the tensor's shape ",
           shape_str(x.sizes()));
  std::vector<bool> mask(static_cast<size_t>(nd), false);
  bool any = false;
  for (int64_t d = 0; d < nd; ++d) {
    if (d < lead) {
      mask[d] = x.size(d) != 1;
    } else {
      const int64_t want = size[d - lead];
      TC_CHECK(want == x.size(d) || want == 1, "sum_to_size", "size ", shape_str(size),
               " is not expandable to the tensor's shape ", shape_str(x.sizes()));
      mask[d] = want == 1 && x.size(d) != 1;
    }
    any = any || mask[d];
  }
  if (!any) return x.reshape(size);  // only size-1 dims differ: no arithmetic needed
  return sum_impl("sum", x, mask, true, false).reshape(size);
}

}  // namespace tc::impl
