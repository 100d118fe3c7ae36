// MaxPool2d, AvgPool2d, AdaptiveAvgPool2d (no parameters).
#pragma once
#include "tensorcast/nn/module.h"
#include "tensorcast/nn/options.h"

namespace tc::nn {

struct MaxPool2dOptions {
  MaxPool2dOptions(ExpandingArray2 kernel_size) : kernel_size_(kernel_size), stride_(kernel_size) {}  // NOLINT
  TC_ARG(ExpandingArray2, kernel_size);
  TC_ARG(ExpandingArray2, stride);  // defaults to kernel_size, as in PyTorch
  TC_ARG(ExpandingArray2, padding) = 0;
  TC_ARG(ExpandingArray2, dilation) = 1;
  TC_ARG(bool, ceil_mode) = false;
};

class MaxPool2dImpl : public Module {
 public:
  explicit MaxPool2dImpl(const MaxPool2dOptions& options) : Module("MaxPool2d"), options(options) {}
  explicit MaxPool2dImpl(ExpandingArray2 kernel_size) : MaxPool2dImpl(MaxPool2dOptions(kernel_size)) {}
  Tensor forward(const Tensor& input);
  void pretty_print(std::ostream& os) const override;
  MaxPool2dOptions options;
};
TC_MODULE(MaxPool2d);

struct AvgPool2dOptions {
  AvgPool2dOptions(ExpandingArray2 kernel_size) : kernel_size_(kernel_size), stride_(kernel_size) {}  // NOLINT
  TC_ARG(ExpandingArray2, kernel_size);
  TC_ARG(ExpandingArray2, stride);  // defaults to kernel_size
  TC_ARG(ExpandingArray2, padding) = 0;
  TC_ARG(bool, ceil_mode) = false;
  TC_ARG(bool, count_include_pad) = true;
};

class AvgPool2dImpl : public Module {
 public:
  explicit AvgPool2dImpl(const AvgPool2dOptions& options) : Module("AvgPool2d"), options(options) {}
  explicit AvgPool2dImpl(ExpandingArray2 kernel_size) : AvgPool2dImpl(AvgPool2dOptions(kernel_size)) {}
  Tensor forward(const Tensor& input);
  void pretty_print(std::ostream& os) const override;
  AvgPool2dOptions options;
};
TC_MODULE(AvgPool2d);

struct AdaptiveAvgPool2dOptions {
  AdaptiveAvgPool2dOptions(ExpandingArray2 output_size) : output_size_(output_size) {}  // NOLINT
  TC_ARG(ExpandingArray2, output_size);
};

class AdaptiveAvgPool2dImpl : public Module {
 public:
  explicit AdaptiveAvgPool2dImpl(const AdaptiveAvgPool2dOptions& options)
      : Module("AdaptiveAvgPool2d"), options(options) {}
  explicit AdaptiveAvgPool2dImpl(ExpandingArray2 output_size)
      : AdaptiveAvgPool2dImpl(AdaptiveAvgPool2dOptions(output_size)) {}
  Tensor forward(const Tensor& input);
  void pretty_print(std::ostream& os) const override;
  AdaptiveAvgPool2dOptions options;
};
TC_MODULE(AdaptiveAvgPool2d);

}  // namespace tc::nn
