// Internal: 2-d max, average and adaptive average pooling on CUDA tensors.
#pragma once
#include <utility>

#include "backend/cpu/window_params.h"
#include "tensorcast/tensor.h"

namespace tc::gpu {

// The pooling of (N, C, H, W) x of any floating dtype and any strides (read in place), on
// x's device, with the CPU kernels' semantics (backend/cpu/loops/conv_direct.cpp's windows,
// divisors and NaN rule). Outputs and input gradients are new tensors, NHWC in memory when
// channels_last (the op passes cpu::is_channels_last of the forward input), else
// contiguous; 16-bit data computes in float32 and rounds once, float64 in float64.
// Gradients may have any strides and must have the forward's dtype.

// Max pooling: (values, indices) with indices int64 h * W + w within each plane (-1 for a
// window that holds no input element), laid out like the values. The first maximum of a
// window in row-major order wins; a NaN wins, as in PyTorch.
std::pair<Tensor, Tensor> max_pool2d_forward(const Tensor& x, const cpu::PoolParams& p, bool channels_last);
// A gather: each input element sums the gradients of the windows whose argmax it is, in
// ascending output order (the CPU's order), so it is deterministic with overlapping windows.
Tensor max_pool2d_backward(const Tensor& grad_out, const Tensor& indices, const Shape& input_sizes,
                           const cpu::PoolParams& p, bool channels_last);

// Average pooling (dilation 1): PyTorch's divisor, the window clipped to the padded input
// when count_include_pad, to the input otherwise.
Tensor avg_pool2d_forward(const Tensor& x, const cpu::PoolParams& p, bool count_include_pad, bool channels_last);
// A gather: each input element sums grad / divisor of the windows that hold it, in
// ascending output order.
Tensor avg_pool2d_backward(const Tensor& grad_out, const Shape& input_sizes, const cpu::PoolParams& p,
                           bool count_include_pad, bool channels_last);

// Adaptive average pooling: window [floor(o * H / OH), ceil((o + 1) * H / OH)) per dim.
Tensor adaptive_avg_pool2d_forward(const Tensor& x, int64_t out_h, int64_t out_w, bool channels_last);
Tensor adaptive_avg_pool2d_backward(const Tensor& grad_out, const Shape& input_sizes, bool channels_last);

}  // namespace tc::gpu
