// Internal: direct-loop convolution and pooling for contiguous NCHW tensors.
//
// These serve float64 (the dtype gradcheck references run in; oneDNN has no f64) and the
// pooling cases oneDNN cannot express exactly (PyTorch's adaptive windows, avg pooling
// whose ceil_mode window overhangs the padded input). Correctness over speed: plain loops,
// parallel over (n, c) planes. Pooling runs in float or double; callers convert 16-bit.
#pragma once
#include <utility>

#include "backend/cpu/window_params.h"
#include "tensorcast/tensor.h"

namespace tc::cpu {

// float64 only.
Tensor direct_conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const ConvParams& p);
Tensor direct_conv2d_backward_data(const Tensor& gy, const Tensor& w, const Shape& input_sizes, const ConvParams& p);
std::pair<Tensor, Tensor> direct_conv2d_backward_weights(const Tensor& x, const Tensor& gy, const Shape& weight_sizes,
                                                         bool with_bias, const ConvParams& p);

// float32 or float64. Max pooling returns (values, int64 argmax as h * W + w within a plane).
std::pair<Tensor, Tensor> direct_max_pool2d(const Tensor& x, const PoolParams& p);
Tensor direct_max_pool2d_backward(const Tensor& gy, const Tensor& indices, const Shape& input_sizes);
// Divisor as PyTorch: the window clipped to the padded input (count_include_pad) or to the
// input itself.
Tensor direct_avg_pool2d(const Tensor& x, const PoolParams& p, bool count_include_pad);
Tensor direct_avg_pool2d_backward(const Tensor& gy, const Shape& input_sizes, const PoolParams& p,
                                  bool count_include_pad);
// Window i spans [floor(i * In / Out), ceil((i + 1) * In / Out)).
Tensor direct_adaptive_avg_pool2d(const Tensor& x, int64_t out_h, int64_t out_w);
Tensor direct_adaptive_avg_pool2d_backward(const Tensor& gy, const Shape& input_sizes);

}  // namespace tc::cpu
