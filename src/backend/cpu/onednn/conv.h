// Internal: 2-d convolution on oneDNN (forward, backward data, backward weights + bias).
//
// Inputs may have any strides (a permuted view is reordered by oneDNN directly). A
// channels-last input (NHWC memory, onednn/plan.h's is_channels_last) runs on oneDNN's nhwc
// kernels without reorders and gives a channels-last output; otherwise outputs are new
// contiguous NCHW tensors. Weight gradients are contiguous OIHW. float32 runs natively;
// bfloat16 and float16 run on oneDNN's 16-bit kernels (float32 accumulation) or through
// float32 copies, each result rounded once: where tensorcast/gemm16.h picks the float32
// path, and where oneDNN has no optimized 16-bit kernel.
#pragma once
#include <utility>

#include "backend/cpu/window_params.h"
#include "tensorcast/tensor.h"

namespace tc::cpu {

Tensor dnnl_conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const ConvParams& p);
// grad_input is channels-last when input_channels_last (the forward input's layout).
Tensor dnnl_conv2d_backward_data(const Tensor& grad_out, const Tensor& w, const Shape& input_sizes, const ConvParams& p,
                                 bool input_channels_last = false);
// Returns (grad_weight, grad_bias) in grad_dtype (x's, or float32 for 16-bit x: the float32
// accumulators unrounded); grad_bias is undefined unless with_bias.
std::pair<Tensor, Tensor> dnnl_conv2d_backward_weights(const Tensor& x, const Tensor& grad_out,
                                                       const Shape& weight_sizes, bool with_bias, const ConvParams& p,
                                                       DType grad_dtype);

// The oneDNN implementation the forward of this configuration uses ("" = float32 fallback).
std::string dnnl_conv2d_impl(const Tensor& x, const Tensor& w, const ConvParams& p);

}  // namespace tc::cpu
