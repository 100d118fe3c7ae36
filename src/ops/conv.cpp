// conv2d: argument checks with PyTorch-like messages and the autograd formula (the
// device's backward-data and backward-weights kernels; the bias gradient comes with the
// weights'; with create_graph, recorded gradient ops that are differentiable again).
// A channels-last input (NHWC memory) gives a channels-last output and input gradient, as
// PyTorch's channels_last. The kernels: oneDNN and direct loops on the CPU
// (backend/cpu/conv2d.h), cuDNN on CUDA.
#include "autograd/nodes.h"
#include "backend/cpu/onednn/plan.h"  // is_channels_last
#include "backend/kernels.h"
#include "core/tensor_impl.h"
#include "ops/conv_common.h"
#include "ops/impl.h"
#include "tensorcast/ops.h"

namespace tc::impl {

namespace {

constexpr const char* kOp = "conv2d";

void check_conv_args(const Tensor& x, const Tensor& w, const Tensor& b, const cpu::ConvParams& p) {
  TC_CHECK(x.defined() && w.defined(), kOp, "input and weight must be defined");
  TC_CHECK(x.dim() == 4, kOp, "expected 4-d input (N, C, H, W), got shape ", shape_str(x.sizes()));
  TC_CHECK(w.dim() == 4, kOp, "expected 4-d weight (out_channels, in_channels / groups, kH, kW), got shape ",
           shape_str(w.sizes()));
  TC_CHECK(x.dtype() == w.dtype(), kOp, "input dtype ", dtype_name(x.dtype()), " and weight dtype ",
           dtype_name(w.dtype()), " differ");
  TC_CHECK(is_floating(x.dtype()), kOp, "expected a floating dtype, got ", dtype_name(x.dtype()));
  TC_CHECK(x.device() == w.device(), kOp, "expected input and weight on one device, got ", x.device(), " and ",
           w.device());
  TC_CHECK(p.groups > 0, kOp, "groups must be positive, got ", p.groups);
  const int64_t C = x.size(1), O = w.size(0);
  TC_CHECK(C % p.groups == 0, kOp, "groups=", p.groups, " must divide the input's ", C, " channels (input shape ",
           shape_str(x.sizes()), ")");
  TC_CHECK(O % p.groups == 0, kOp, "groups=", p.groups, " must divide the weight's ", O,
           " output channels (weight shape ", shape_str(w.sizes()), ")");
  TC_CHECK(w.size(1) * p.groups == C, kOp, "input of shape ", shape_str(x.sizes()), " has ", C,
           " channels, but weight of shape ", shape_str(w.sizes()), " with groups=", p.groups, " expects ",
           w.size(1) * p.groups, " channels");
  for (int d = 0; d < 2; ++d) {
    const int64_t padded = x.size(2 + d) + 2 * p.padding[d];
    const int64_t k_eff = (w.size(2 + d) - 1) * p.dilation[d] + 1;
    TC_CHECK(k_eff <= padded, kOp, "kernel size (", w.size(2), ", ", w.size(3), ") with dilation (", p.dilation[0],
             ", ", p.dilation[1], ") is larger than the padded input size (", x.size(2) + 2 * p.padding[0], ", ",
             x.size(3) + 2 * p.padding[1], ") of input shape ", shape_str(x.sizes()));
  }
  if (b.defined()) {
    TC_CHECK(b.dim() == 1 && b.size(0) == O, kOp, "expected bias of shape (", O, ") for weight of shape ",
             shape_str(w.sizes()), ", got ", shape_str(b.sizes()));
    TC_CHECK(b.device() == x.device(), kOp, "expected the bias on ", x.device(), ", got ", b.device());
    TC_CHECK(b.dtype() == x.dtype(), kOp, "bias dtype ", dtype_name(b.dtype()), " and input dtype ",
             dtype_name(x.dtype()), " differ");
  }
  TC_CHECK(x.numel() > 0 && w.numel() > 0, kOp, "empty input ", shape_str(x.sizes()), " or weight ",
           shape_str(w.sizes()), " is not supported");
}

// The input gradient of a convolution (a transposed convolution of g by w) and its weight
// gradient (a correlation of x and g), each by the backend the forward runs on.
Tensor input_grad(const Tensor& g, const Tensor& w, const Shape& xs, const cpu::ConvParams& p, bool cl) {
  NoGradGuard no_grad;
  return backend::kernels_for(g.device()).conv2d_backward_data(g, w, xs, p, cl);
}

Tensor weight_grad(const Tensor& x, const Tensor& g, const Shape& ws, const cpu::ConvParams& p) {
  NoGradGuard no_grad;
  return backend::kernels_for(g.device()).conv2d_backward_weights(x, g, ws, false, p, x.dtype()).first;
}

// conv2d without bias, with p's geometry.
Tensor conv_with(const Tensor& x, const Tensor& w, const cpu::ConvParams& p) {
  return impl::conv2d(x, w, Tensor(), {p.stride[0], p.stride[1]}, {p.padding[0], p.padding[1]},
                      {p.dilation[0], p.dilation[1]}, p.groups);
}

Tensor conv2d_backward_weight(const Tensor& x, const Tensor& g, const Shape& ws, const cpu::ConvParams& p);

// Both gradients are bilinear: <input_grad(g, w), a> = <g, conv(a, w)> and
// <weight_grad(x, g), b> = <g, conv(x, b)>, so each one's derivatives are conv2d and the
// other. Recorded, they make conv2d differentiable any number of times.
Tensor conv2d_backward_input(const Tensor& g, const Tensor& w, const Shape& xs, const cpu::ConvParams& p, bool cl) {
  return autograd::record(
      "conv2d_backward_input", input_grad(g, w, xs, p, cl), {g, w},
      [g, w, p](const Tensor& gg, const std::vector<bool>& n) {
        return std::vector<Tensor>{n[0] ? conv_with(gg, w, p) : Tensor(),
                                   n[1] ? conv2d_backward_weight(gg, g, w.sizes(), p) : Tensor()};
      },
      autograd::Differentiable::kTwice);
}

Tensor conv2d_backward_weight(const Tensor& x, const Tensor& g, const Shape& ws, const cpu::ConvParams& p) {
  return autograd::record(
      "conv2d_backward_weight", weight_grad(x, g, ws, p), {x, g},
      [x, g, p](const Tensor& gg, const std::vector<bool>& n) {
        return std::vector<Tensor>{
            n[0] ? conv2d_backward_input(g, gg, x.sizes(), p, cpu::is_channels_last(x)) : Tensor(),
            n[1] ? conv_with(x, gg, p) : Tensor()};
      },
      autograd::Differentiable::kTwice);
}

}  // namespace

Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, Shape stride, Shape padding,
              Shape dilation, int64_t groups) {
  cpu::ConvParams p;
  op_util::pair_param(kOp, "stride", stride, 1, p.stride);
  op_util::pair_param(kOp, "padding", padding, 0, p.padding);
  op_util::pair_param(kOp, "dilation", dilation, 1, p.dilation);
  p.groups = groups;
  check_conv_args(input, weight, bias, p);
  const bool cl = cpu::is_channels_last(input);
  Tensor out;
  {
    NoGradGuard no_grad;  // float16 -> float32 conversions inside are not part of the graph
    out = backend::kernels_for(input.device()).conv2d_forward(input, weight, bias, p);
  }
  return autograd::record(
      kOp, out, {input, weight, bias},
      // Weight and bias gradients in the dtype they are consumed in (autograd/nodes.h): fp32
      // for an autocast copy of an fp32 weight, straight from oneDNN's accumulators.
      // x and w saved as they are: with create_graph the gradients are recorded ops of them.
      [x = input, w = weight, has_bias = bias.defined(), p, cl, gw_dt = autograd::detail::grad_dtype(weight)](
          const Tensor& grad, const std::vector<bool>& needs) {
        if (is_grad_enabled()) {  // create_graph
          const Tensor g = grad.dtype() == x.dtype() ? grad : grad.to(x.dtype());
          return std::vector<Tensor>{needs[0] ? conv2d_backward_input(g, w, x.sizes(), p, cl) : Tensor(),
                                     needs[1] ? conv2d_backward_weight(x, g, w.sizes(), p) : Tensor(),
                                     has_bias && needs[2] ? impl::sum(g, {0, 2, 3}) : Tensor()};
        }
        const Tensor g = grad.dtype() == x.dtype() ? grad : grad.to(x.dtype());
        const backend::Kernels& kernels = backend::kernels_for(x.device());
        Tensor gx, gw, gb;
        if (needs[0]) gx = kernels.conv2d_backward_data(g, w, x.sizes(), p, cl);
        if (needs[1] || (has_bias && needs[2])) {
          std::tie(gw, gb) = kernels.conv2d_backward_weights(x, g, w.sizes(), has_bias && needs[2], p, gw_dt);
          if (!needs[1]) gw = Tensor();
        }
        return std::vector<Tensor>{gx, gw, gb};
      },
      autograd::Differentiable::kTwice);
}

}  // namespace tc::impl
