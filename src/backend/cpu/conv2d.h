// Internal: conv2d on the CPU, the kernels of the table (backend/kernels.def): oneDNN for
// float32 / bfloat16 / float16, the direct loops for float64 (computed NCHW and copied
// into a channels-last input's layout).
#pragma once
#include <utility>

#include "backend/cpu/onednn/conv.h"
#include "tensorcast/tensor.h"

namespace tc::cpu {

Tensor conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const ConvParams& p);
Tensor conv2d_backward_data(const Tensor& grad_out, const Tensor& w, const Shape& input_sizes, const ConvParams& p,
                            bool input_channels_last);
std::pair<Tensor, Tensor> conv2d_backward_weights(const Tensor& x, const Tensor& grad_out, const Shape& weight_sizes,
                                                  bool with_bias, const ConvParams& p, DType grad_dtype);

}  // namespace tc::cpu
