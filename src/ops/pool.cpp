// max_pool2d, avg_pool2d and adaptive_avg_pool2d: checks, output sizes with PyTorch's
// ceil_mode rule and the autograd formulas, whose results are recorded (differentiable
// again) when backward runs with create_graph. The device's kernels (backend/kernels.def)
// compute; channels-last inputs (NHWC memory) give channels-last outputs and input
// gradients, as PyTorch's channels_last.
#include "backend/cpu/onednn/plan.h"  // is_channels_last
#include "backend/kernels.h"
#include "core/tensor_impl.h"
#include "ops/conv_common.h"
#include "ops/impl.h"
#include "tensorcast/ops.h"

namespace tc::impl {

namespace {

using cpu::PoolParams;

void check_pool_input(const char* op, const Tensor& x) {
  TC_CHECK(x.defined(), op, "got an undefined tensor");
  TC_CHECK(x.dim() == 4, op, "expected 4-d input (N, C, H, W), got shape ", shape_str(x.sizes()));
  TC_CHECK(is_floating(x.dtype()), op, "expected a floating dtype, got ", dtype_name(x.dtype()));
  TC_CHECK(x.numel() > 0, op, "empty input of shape ", shape_str(x.sizes()), " is not supported");
}

// PyTorch's pooling_output_shape: in ceil mode the last window must start inside the
// input or its left padding.
int64_t pool_out_size(int64_t in, int64_t k, int64_t s, int64_t pad, int64_t dil, bool ceil_mode) {
  const int64_t num = in + 2 * pad - dil * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
  int64_t out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
  if (ceil_mode && (out - 1) * s >= in + pad) --out;
  return out;
}

PoolParams pool_params(const char* op, const Tensor& x, const Shape& kernel, const Shape& stride, const Shape& padding,
                       const Shape& dilation, bool ceil_mode) {
  PoolParams p;
  TC_CHECK(!kernel.empty(), op, "kernel_size must have 1 or 2 elements, got ", shape_str(kernel));
  op_util::pair_param(op, "kernel_size", kernel, 1, p.kernel);
  op_util::pair_param(op, "stride", stride.empty() ? kernel : stride, 1, p.stride);
  op_util::pair_param(op, "padding", padding, 0, p.padding);
  op_util::pair_param(op, "dilation", dilation, 1, p.dilation);
  for (int d = 0; d < 2; ++d) {
    TC_CHECK(p.padding[d] <= p.kernel[d] / 2, op, "padding (", p.padding[0], ", ", p.padding[1],
             ") should be at most half of kernel size (", p.kernel[0], ", ", p.kernel[1], ")");
    p.out[d] = pool_out_size(x.size(2 + d), p.kernel[d], p.stride[d], p.padding[d], p.dilation[d], ceil_mode);
  }
  TC_CHECK(p.out[0] > 0 && p.out[1] > 0, op, "output size (", p.out[0], ", ", p.out[1],
           ") is too small for input of shape ", shape_str(x.sizes()), " with kernel (", p.kernel[0], ", ", p.kernel[1],
           "), stride (", p.stride[0], ", ", p.stride[1], "), padding (", p.padding[0], ", ", p.padding[1],
           ") and dilation (", p.dilation[0], ", ", p.dilation[1], ")");
  return p;
}

Tensor grad_as(const Tensor& g, DType dt) { return g.dtype() == dt ? g : g.to(dt); }

// Records gx, a pooling's input gradient that a fused kernel computed from g. It is linear
// in g, so its derivative by g is the adjoint map applied to gg: the forward pooling itself
// for average pooling, the gather at the argmax for max pooling. Without create_graph
// (grad mode off in backward) gx is returned as it is.
template <class Adjoint>
Tensor record_linear(const char* name, const Tensor& gx, const Tensor& g, const Adjoint& adjoint) {
  if (!is_grad_enabled()) return gx;
  return autograd::record(
      name, gx, {g}, [adjoint](const Tensor& gg, const std::vector<bool>&) { return std::vector<Tensor>{adjoint(gg)}; },
      autograd::Differentiable::kTwice);
}

// gg (of the input's shape) at each output's argmax `idx` (int64 h * W + w within a plane,
// -1 for a window that holds no input: 0 there), as a row gather by embedding, whose own
// backward is the scatter-add max pooling's backward is.
Tensor gather_argmax(const Tensor& gg, const Tensor& idx) {
  const int64_t N = gg.size(0), C = gg.size(1), HW = gg.size(2) * gg.size(3);
  const Tensor plane_start =
      arange(0, static_cast<double>(N * C * HW), static_cast<double>(HW), TensorOptions(kInt64).device(idx.device()))
          .view({N, C, 1, 1});
  const Tensor ids = impl::add(impl::clamp(idx, 0.0, std::nullopt), plane_start);
  const Tensor picked = impl::embedding(gg.reshape({N * C * HW, 1}), ids).reshape(idx.sizes());
  return impl::where(ge(idx, 0.0), picked, zeros_like(picked));
}

}  // namespace

Tensor max_pool2d(const Tensor& input, Shape kernel_size, Shape stride, Shape padding, Shape dilation, bool ceil_mode) {
  constexpr const char* kOp = "max_pool2d";
  check_pool_input(kOp, input);
  const PoolParams p = pool_params(kOp, input, kernel_size, stride, padding, dilation, ceil_mode);
  const DType dt = input.dtype();
  const Shape xs = input.sizes();
  const bool cl = cpu::is_channels_last(input);
  Tensor out, saved;
  {
    NoGradGuard no_grad;
    std::tie(out, saved) = backend::kernels_for(input.device()).max_pool2d_forward(input, p, cl);
  }
  // With create_graph the gradient is recorded with its adjoint, the gather at the argmax,
  // which a kernel saving a workspace finds from the input (kept for that: usually an
  // activation its producer keeps anyway, relu's output). The gradient is then taken by
  // the same argmax, so both orders take the same element of a tied window.
  return autograd::record(
      kOp, out, {input},
      [x = input, saved, xs, dt, p, cl](const Tensor& g, const std::vector<bool>&) {
        const backend::Kernels& kernels = backend::kernels_for(x.device());
        if (!is_grad_enabled())
          return std::vector<Tensor>{kernels.max_pool2d_backward(grad_as(g, dt), saved, xs, p, cl)};
        Tensor idx, gx;
        {
          NoGradGuard no_grad;
          idx = kernels.max_pool2d_indices(x.detach(), saved, p);
          gx = kernels.max_pool2d_backward(grad_as(g.detach(), dt), idx, xs, p, cl);
        }
        return std::vector<Tensor>{
            record_linear("max_pool2d_backward", gx, g, [idx](const Tensor& gg) { return gather_argmax(gg, idx); })};
      },
      autograd::Differentiable::kTwice);
}

Tensor avg_pool2d(const Tensor& input, Shape kernel_size, Shape stride, Shape padding, bool ceil_mode,
                  bool count_include_pad) {
  constexpr const char* kOp = "avg_pool2d";
  check_pool_input(kOp, input);
  const PoolParams p = pool_params(kOp, input, kernel_size, stride, padding, {1, 1}, ceil_mode);
  const DType dt = input.dtype();
  const Shape xs = input.sizes();
  const bool cl = cpu::is_channels_last(input);
  // The adjoint of the backward: this pooling again.
  const auto again = [p, ceil_mode, count_include_pad](const Tensor& gg) {
    return impl::avg_pool2d(gg, {p.kernel[0], p.kernel[1]}, {p.stride[0], p.stride[1]}, {p.padding[0], p.padding[1]},
                            ceil_mode, count_include_pad);
  };
  Tensor out;
  {
    NoGradGuard no_grad;
    out = backend::kernels_for(input.device()).avg_pool2d_forward(input, p, count_include_pad, cl);
  }
  return autograd::record(
      kOp, out, {input},
      [xs, dt, p, count_include_pad, cl, again](const Tensor& g, const std::vector<bool>&) {
        const Tensor gx =
            backend::kernels_for(g.device()).avg_pool2d_backward(grad_as(g, dt), xs, p, count_include_pad, cl);
        return std::vector<Tensor>{record_linear("avg_pool2d_backward", gx, g, again)};
      },
      autograd::Differentiable::kTwice);
}

Tensor adaptive_avg_pool2d(const Tensor& input, Shape output_size) {
  constexpr const char* kOp = "adaptive_avg_pool2d";
  check_pool_input(kOp, input);
  TC_CHECK(!output_size.empty(), kOp, "output_size must have 1 or 2 elements, got ", shape_str(output_size));
  int64_t out[2];
  op_util::pair_param(kOp, "output_size", output_size, 1, out);
  const int64_t H = input.size(2), W = input.size(3);
  if (H % out[0] == 0 && W % out[1] == 0) {  // equal windows: plain average pooling
    const Shape k = {H / out[0], W / out[1]};
    return impl::avg_pool2d(input, k, k, {0, 0}, false, true);
  }
  const DType dt = input.dtype();
  const Shape xs = input.sizes();
  const bool cl = cpu::is_channels_last(input);
  const auto again = [oh = out[0], ow = out[1]](const Tensor& gg) { return impl::adaptive_avg_pool2d(gg, {oh, ow}); };
  Tensor y;
  {
    NoGradGuard no_grad;
    y = backend::kernels_for(input.device()).adaptive_avg_pool2d_forward(input, out[0], out[1], cl);
  }
  return autograd::record(
      kOp, y, {input},
      [xs, dt, cl, again](const Tensor& g, const std::vector<bool>&) {
        const Tensor gx = backend::kernels_for(g.device()).adaptive_avg_pool2d_backward(grad_as(g, dt), xs, cl);
        return std::vector<Tensor>{record_linear("adaptive_avg_pool2d_backward", gx, g, again)};
      },
      autograd::Differentiable::kTwice);
}

}  // namespace tc::impl
