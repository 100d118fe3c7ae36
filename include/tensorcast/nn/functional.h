// tc::nn::functional: the functional forms of the layers, with libtorch's option structs.
//   namespace F = tc::nn::functional;
//   auto y = F::conv2d(x, w, F::Conv2dFuncOptions().bias(b).padding({1, 1}));
#pragma once
#include "tensorcast/ops.h"

namespace tc::nn::functional {

inline Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias = Tensor()) {
  return tc::linear(input, weight, bias);
}

struct Conv2dFuncOptions {
  TC_ARG(Tensor, bias);
  TC_ARG(Shape, stride) = {1, 1};
  TC_ARG(Shape, padding) = {0, 0};
  TC_ARG(Shape, dilation) = {1, 1};
  TC_ARG(int64_t, groups) = 1;
};
inline Tensor conv2d(const Tensor& input, const Tensor& weight, const Conv2dFuncOptions& o = {}) {
  return tc::conv2d(input, weight, o.bias(), o.stride(), o.padding(), o.dilation(), o.groups());
}

struct MaxPool2dFuncOptions {
  MaxPool2dFuncOptions(Shape kernel_size) : kernel_size_(std::move(kernel_size)) {}  // NOLINT
  TC_ARG(Shape, kernel_size);
  TC_ARG(Shape, stride) = {};
  TC_ARG(Shape, padding) = {0, 0};
  TC_ARG(Shape, dilation) = {1, 1};
  TC_ARG(bool, ceil_mode) = false;
};
inline Tensor max_pool2d(const Tensor& input, const MaxPool2dFuncOptions& o) {
  return tc::max_pool2d(input, o.kernel_size(), o.stride(), o.padding(), o.dilation(), o.ceil_mode());
}

struct AvgPool2dFuncOptions {
  AvgPool2dFuncOptions(Shape kernel_size) : kernel_size_(std::move(kernel_size)) {}  // NOLINT
  TC_ARG(Shape, kernel_size);
  TC_ARG(Shape, stride) = {};
  TC_ARG(Shape, padding) = {0, 0};
  TC_ARG(bool, ceil_mode) = false;
  TC_ARG(bool, count_include_pad) = true;
};
inline Tensor avg_pool2d(const Tensor& input, const AvgPool2dFuncOptions& o) {
  return tc::avg_pool2d(input, o.kernel_size(), o.stride(), o.padding(), o.ceil_mode(), o.count_include_pad());
}
inline Tensor adaptive_avg_pool2d(const Tensor& input, Shape output_size) {
  return tc::adaptive_avg_pool2d(input, std::move(output_size));
}

struct LayerNormFuncOptions {
  LayerNormFuncOptions(Shape normalized_shape) : normalized_shape_(std::move(normalized_shape)) {}  // NOLINT
  TC_ARG(Shape, normalized_shape);
  TC_ARG(Tensor, weight);
  TC_ARG(Tensor, bias);
  TC_ARG(double, eps) = 1e-5;
};
inline Tensor layer_norm(const Tensor& input, const LayerNormFuncOptions& o) {
  return tc::layer_norm(input, o.normalized_shape(), o.weight(), o.bias(), o.eps());
}

struct BatchNormFuncOptions {
  TC_ARG(Tensor, weight);
  TC_ARG(Tensor, bias);
  TC_ARG(bool, training) = false;
  TC_ARG(double, momentum) = 0.1;
  TC_ARG(double, eps) = 1e-5;
};
inline Tensor batch_norm(const Tensor& input, const Tensor& running_mean, const Tensor& running_var,
                         const BatchNormFuncOptions& o = {}) {
  return tc::batch_norm(input, running_mean, running_var, o.weight(), o.bias(), o.training(), o.momentum(), o.eps());
}

struct DropoutFuncOptions {
  TC_ARG(double, p) = 0.5;
  TC_ARG(bool, training) = true;
};
inline Tensor dropout(const Tensor& input, const DropoutFuncOptions& o = {}) {
  return tc::dropout(input, o.p(), o.training());
}

inline Tensor embedding(const Tensor& input, const Tensor& weight) { return tc::embedding(weight, input); }

inline Tensor softmax(const Tensor& x, int64_t dim) { return tc::softmax(x, dim); }
inline Tensor log_softmax(const Tensor& x, int64_t dim) { return tc::log_softmax(x, dim); }
inline Tensor relu(const Tensor& x) { return tc::relu(x); }
inline Tensor gelu(const Tensor& x, std::string_view approximate = "none") { return tc::gelu(x, approximate); }
inline Tensor silu(const Tensor& x) { return tc::silu(x); }

struct CrossEntropyFuncOptions {
  TC_ARG(Tensor, weight);
  TC_ARG(int64_t, ignore_index) = -100;
  TC_ARG(Reduction, reduction) = kMean;
  TC_ARG(double, label_smoothing) = 0.0;
};
inline Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyFuncOptions& o = {}) {
  return tc::cross_entropy(input, target, o.weight(), o.ignore_index(), o.reduction(), o.label_smoothing());
}

struct NLLLossFuncOptions {
  TC_ARG(Tensor, weight);
  TC_ARG(int64_t, ignore_index) = -100;
  TC_ARG(Reduction, reduction) = kMean;
};
inline Tensor nll_loss(const Tensor& input, const Tensor& target, const NLLLossFuncOptions& o = {}) {
  return tc::nll_loss(input, target, o.weight(), o.ignore_index(), o.reduction());
}

struct MSELossFuncOptions {
  TC_ARG(Reduction, reduction) = kMean;
};
inline Tensor mse_loss(const Tensor& input, const Tensor& target, const MSELossFuncOptions& o = {}) {
  return tc::mse_loss(input, target, o.reduction());
}

struct BinaryCrossEntropyWithLogitsFuncOptions {
  TC_ARG(Tensor, weight);
  TC_ARG(Tensor, pos_weight);
  TC_ARG(Reduction, reduction) = kMean;
};
inline Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                               const BinaryCrossEntropyWithLogitsFuncOptions& o = {}) {
  return tc::binary_cross_entropy_with_logits(input, target, o.weight(), o.pos_weight(), o.reduction());
}

}  // namespace tc::nn::functional
