#include "backend/cpu/conv2d.h"

#include "backend/cpu/loops/conv_direct.h"
#include "backend/cpu/onednn/plan.h"

namespace tc::cpu {

namespace {
// oneDNN reads any positive strides (a permuted view is reordered directly) but not the
// zero strides of an expanded tensor, so those are materialized.
Tensor dnnl_ready(const Tensor& t) {
  if (!t.defined()) return t;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.stride(d) <= 0 && t.size(d) > 1) return t.contiguous();
  return t;
}
}  // namespace

Tensor conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const ConvParams& p) {
  if (x.dtype() == kFloat64) return to_activation_layout(direct_conv2d_forward(x, w, bias, p), is_channels_last(x));
  return dnnl_conv2d_forward(dnnl_ready(x), dnnl_ready(w), dnnl_ready(bias), p);
}

Tensor conv2d_backward_data(const Tensor& grad_out, const Tensor& w, const Shape& input_sizes, const ConvParams& p,
                            bool input_channels_last) {
  const Tensor g = dnnl_ready(grad_out);
  if (g.dtype() == kFloat64)
    return to_activation_layout(direct_conv2d_backward_data(g, w, input_sizes, p), input_channels_last);
  return dnnl_conv2d_backward_data(g, dnnl_ready(w), input_sizes, p, input_channels_last);
}

std::pair<Tensor, Tensor> conv2d_backward_weights(const Tensor& x, const Tensor& grad_out, const Shape& weight_sizes,
                                                  bool with_bias, const ConvParams& p, DType grad_dtype) {
  const Tensor g = dnnl_ready(grad_out);
  if (g.dtype() == kFloat64) return direct_conv2d_backward_weights(x, g, weight_sizes, with_bias, p);
  return dnnl_conv2d_backward_weights(dnnl_ready(x), g, weight_sizes, with_bias, p, grad_dtype);
}

}  // namespace tc::cpu
