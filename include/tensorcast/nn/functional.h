/// \file
/// tc::nn::functional: the functional forms of the layers, with libtorch's option structs.
/// \code{.cpp}
///   namespace F = tc::nn::functional;
///   auto y = F::conv2d(x, w, F::Conv2dFuncOptions().bias(b).padding({1, 1}));
/// \endcode
#pragma once
#include "tensorcast/ops.h"

namespace tc::nn::functional {

/// y = input weight^T + bias over the last dimension (tc::linear).
inline Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor()) {
  return tc::linear(input, weight, bias);
}

/// Options of conv2d (torch.nn.functional.conv2d's arguments).
struct Conv2dFuncOptions {
  TC_ARG(Tensor, bias);              ///< added per output channel (undefined: none)
  TC_ARG(Shape, stride) = {1, 1};    ///< (height, width)
  TC_ARG(Shape, padding) = {0, 0};   ///< zeros added on each side, (height, width)
  TC_ARG(Shape, dilation) = {1, 1};  ///< spacing of the kernel's taps, (height, width)
  TC_ARG(int64_t, groups) = 1;       ///< input and output channels split into this many groups
};
/// A 2-d convolution of input (N, C, H, W) with weight (out, C / groups, kH, kW) (tc::conv2d).
inline Tensor conv2d(const Tensor& input, const Tensor& weight, const Conv2dFuncOptions& o = {}) {
  return tc::conv2d(input, weight, o.bias(), o.stride(), o.padding(), o.dilation(), o.groups());
}

/// Options of max_pool2d.
struct MaxPool2dFuncOptions {
  /// A square or (kH, kW) window.
  MaxPool2dFuncOptions(Shape kernel_size) : kernel_size_(std::move(kernel_size)) {}  // NOLINT
  /// (kH, kW), or one size for both.
  TC_ARG(Shape, kernel_size);
  TC_ARG(Shape, stride) = {};        ///< empty: kernel_size, as in PyTorch
  TC_ARG(Shape, padding) = {0, 0};   ///< implicit -inf added on each side
  TC_ARG(Shape, dilation) = {1, 1};  ///< spacing of the window's taps
  TC_ARG(bool, ceil_mode) = false;   ///< round the output size up instead of down
};
/// The maximum over each window (tc::max_pool2d).
inline Tensor max_pool2d(const Tensor& input, const MaxPool2dFuncOptions& o) {
  return tc::max_pool2d(input, o.kernel_size(), o.stride(), o.padding(), o.dilation(), o.ceil_mode());
}

/// Options of avg_pool2d.
struct AvgPool2dFuncOptions {
  /// A square or (kH, kW) window.
  AvgPool2dFuncOptions(Shape kernel_size) : kernel_size_(std::move(kernel_size)) {}  // NOLINT
  /// (kH, kW), or one size for both.
  TC_ARG(Shape, kernel_size);
  TC_ARG(Shape, stride) = {};              ///< empty: kernel_size, as in PyTorch
  TC_ARG(Shape, padding) = {0, 0};         ///< zeros added on each side
  TC_ARG(bool, ceil_mode) = false;         ///< round the output size up instead of down
  TC_ARG(bool, count_include_pad) = true;  ///< whether the padding zeros count in the divisor
};
/// The mean over each window (tc::avg_pool2d).
inline Tensor avg_pool2d(const Tensor& input, const AvgPool2dFuncOptions& o) {
  return tc::avg_pool2d(input, o.kernel_size(), o.stride(), o.padding(), o.ceil_mode(), o.count_include_pad());
}
/// The mean over windows that split (H, W) into output_size (tc::adaptive_avg_pool2d).
inline Tensor adaptive_avg_pool2d(const Tensor& input, Shape output_size) {
  return tc::adaptive_avg_pool2d(input, std::move(output_size));
}

/// Options of layer_norm.
struct LayerNormFuncOptions {
  /// Normalizes over the trailing dimensions `normalized_shape`.
  LayerNormFuncOptions(Shape normalized_shape) : normalized_shape_(std::move(normalized_shape)) {}  // NOLINT
  TC_ARG(Shape, normalized_shape);  ///< the trailing dimensions normalized over
  TC_ARG(Tensor, weight);           ///< per-element scale (undefined: none)
  TC_ARG(Tensor, bias);             ///< per-element shift (undefined: none)
  TC_ARG(double, eps) = 1e-5;       ///< added to the variance
};
/// Layer normalization over the last dimensions (tc::layer_norm).
inline Tensor layer_norm(const Tensor& input, const LayerNormFuncOptions& o) {
  return tc::layer_norm(input, o.normalized_shape(), o.weight(), o.bias(), o.eps());
}

/// Options of batch_norm.
struct BatchNormFuncOptions {
  TC_ARG(Tensor, weight);          ///< per-channel scale (undefined: none)
  TC_ARG(Tensor, bias);            ///< per-channel shift (undefined: none)
  TC_ARG(bool, training) = false;  ///< true: batch statistics, updating the running ones; false: the running statistics
  TC_ARG(double, momentum) = 0.1;  ///< weight of the new batch's statistics in the running ones
  TC_ARG(double, eps) = 1e-5;      ///< added to the variance
};
/// Batch normalization over the channel dimension (tc::batch_norm).
inline Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                         const BatchNormFuncOptions& o = {}) {
  return tc::batch_norm(input, running_mean, running_var, o.weight(), o.bias(), o.training(), o.momentum(), o.eps());
}

/// Options of dropout.
struct DropoutFuncOptions {
  TC_ARG(double, p) = 0.5;        ///< probability of zeroing an element
  TC_ARG(bool, training) = true;  ///< false: the identity
};
/// Zeroes elements with probability p and scales the rest by 1 / (1 - p) (tc::dropout).
inline Tensor dropout(const Tensor& input, const DropoutFuncOptions& o = {}) {
  return tc::dropout(input, o.p(), o.training());
}

/// Rows of weight picked by the int64 indices in input (tc::embedding; note the argument order is PyTorch's).
inline Tensor embedding(const Tensor& input, const Tensor& weight) { return tc::embedding(weight, input); }

/// softmax along dim (tc::softmax).
inline Tensor softmax(const Tensor& x, int64_t dim) { return tc::softmax(x, dim); }
/// log(softmax) along dim, computed stably (tc::log_softmax).
inline Tensor log_softmax(const Tensor& x, int64_t dim) { return tc::log_softmax(x, dim); }
/// max(x, 0) (tc::relu).
inline Tensor relu(const Tensor& x) { return tc::relu(x); }
/// GELU, exact ("none") or with the tanh approximation ("tanh") (tc::gelu).
inline Tensor gelu(const Tensor& x, std::string_view approximate = "none") { return tc::gelu(x, approximate); }
/// x * sigmoid(x) (tc::silu).
inline Tensor silu(const Tensor& x) { return tc::silu(x); }

/// Options of cross_entropy.
struct CrossEntropyFuncOptions {
  TC_ARG(Tensor, weight);                 ///< per-class weight (undefined: all 1)
  TC_ARG(int64_t, ignore_index) = -100;   ///< targets equal to it add nothing
  TC_ARG(Reduction, reduction) = kMean;   ///< None, Mean or Sum over the batch
  TC_ARG(double, label_smoothing) = 0.0;  ///< share of the target's probability spread over all classes
};
/// Cross entropy of logits (N, C) against class indices (N) (tc::cross_entropy).
inline Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyFuncOptions& o = {}) {
  return tc::cross_entropy(input, target, o.weight(), o.ignore_index(), o.reduction(), o.label_smoothing());
}

/// Options of nll_loss.
struct NLLLossFuncOptions {
  TC_ARG(Tensor, weight);                ///< per-class weight (undefined: all 1)
  TC_ARG(int64_t, ignore_index) = -100;  ///< targets equal to it add nothing
  TC_ARG(Reduction, reduction) = kMean;  ///< None, Mean or Sum over the batch
};
/// Negative log likelihood of log-probabilities (N, C) against class indices (tc::nll_loss).
inline Tensor nll_loss(const Tensor& input, const Tensor& target, const NLLLossFuncOptions& o = {}) {
  return tc::nll_loss(input, target, o.weight(), o.ignore_index(), o.reduction());
}

/// Options of mse_loss.
struct MSELossFuncOptions {
  TC_ARG(Reduction, reduction) = kMean;  ///< None, Mean or Sum
};
/// Mean squared error (tc::mse_loss).
inline Tensor mse_loss(const Tensor& input, const Tensor& target, const MSELossFuncOptions& o = {}) {
  return tc::mse_loss(input, target, o.reduction());
}

/// Options of binary_cross_entropy_with_logits.
struct BinaryCrossEntropyWithLogitsFuncOptions {
  TC_ARG(Tensor, weight);                ///< per-element weight (undefined: all 1)
  TC_ARG(Tensor, pos_weight);            ///< weight of the positive examples per class (undefined: 1)
  TC_ARG(Reduction, reduction) = kMean;  ///< None, Mean or Sum
};
/// Binary cross entropy of logits against targets in [0, 1], computed stably.
inline Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                               const BinaryCrossEntropyWithLogitsFuncOptions& o = {}) {
  return tc::binary_cross_entropy_with_logits(input, target, o.weight(), o.pos_weight(), o.reduction());
}

}  // namespace tc::nn::functional
