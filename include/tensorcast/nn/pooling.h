/// \file
/// MaxPool2d, AvgPool2d, AdaptiveAvgPool2d (no parameters).
#pragma once
#include "tensorcast/nn/module.h"
#include "tensorcast/nn/options.h"

namespace tc::nn {

/// Options of MaxPool2d (torch.nn.MaxPool2d's arguments).
struct MaxPool2dOptions {
  /// A window of kernel_size, the stride the same.
  MaxPool2dOptions(ExpandingArray2 kernel_size) : kernel_size_(kernel_size), stride_(kernel_size) {}  // NOLINT
  TC_ARG(ExpandingArray2, kernel_size);   ///< (kH, kW), or one size for both
  TC_ARG(ExpandingArray2, stride);        ///< defaults to kernel_size, as in PyTorch
  TC_ARG(ExpandingArray2, padding) = 0;   ///< implicit -inf added on each side
  TC_ARG(ExpandingArray2, dilation) = 1;  ///< spacing of the window's taps
  TC_ARG(bool, ceil_mode) = false;        ///< round the output size up instead of down
};

/// The maximum over each window of an (N, C, H, W) input; TC_MODULE(MaxPool2d) is its holder.
class MaxPool2dImpl : public Module {
 public:
  /// From options.
  explicit MaxPool2dImpl(const MaxPool2dOptions& options) : Module("MaxPool2d"), options(options) {}
  /// A kernel_size window with the same stride.
  explicit MaxPool2dImpl(ExpandingArray2 kernel_size) : MaxPool2dImpl(MaxPool2dOptions(kernel_size)) {}
  /// (N, C, H, W) -> (N, C, H', W').
  Tensor forward(const Tensor& input);
  void pretty_print(std::ostream& os) const override;
  MaxPool2dOptions options;  ///< as constructed
};
TC_MODULE(MaxPool2d);

/// Options of AvgPool2d (torch.nn.AvgPool2d's arguments).
struct AvgPool2dOptions {
  /// A window of kernel_size, the stride the same.
  AvgPool2dOptions(ExpandingArray2 kernel_size) : kernel_size_(kernel_size), stride_(kernel_size) {}  // NOLINT
  TC_ARG(ExpandingArray2, kernel_size);    ///< (kH, kW), or one size for both
  TC_ARG(ExpandingArray2, stride);         ///< defaults to kernel_size
  TC_ARG(ExpandingArray2, padding) = 0;    ///< zeros added on each side
  TC_ARG(bool, ceil_mode) = false;         ///< round the output size up instead of down
  TC_ARG(bool, count_include_pad) = true;  ///< whether the padding zeros count in the divisor
};

/// The mean over each window of an (N, C, H, W) input; TC_MODULE(AvgPool2d) is its holder.
class AvgPool2dImpl : public Module {
 public:
  /// From options.
  explicit AvgPool2dImpl(const AvgPool2dOptions& options) : Module("AvgPool2d"), options(options) {}
  /// A kernel_size window with the same stride.
  explicit AvgPool2dImpl(ExpandingArray2 kernel_size) : AvgPool2dImpl(AvgPool2dOptions(kernel_size)) {}
  /// (N, C, H, W) -> (N, C, H', W').
  Tensor forward(const Tensor& input);
  void pretty_print(std::ostream& os) const override;
  AvgPool2dOptions options;  ///< as constructed
};
TC_MODULE(AvgPool2d);

/// Options of AdaptiveAvgPool2d.
struct AdaptiveAvgPool2dOptions {
  /// The output's (H, W).
  AdaptiveAvgPool2dOptions(ExpandingArray2 output_size) : output_size_(output_size) {}  // NOLINT
  TC_ARG(ExpandingArray2, output_size);  ///< (H, W) of the output, or one size for both
};

/// The mean over windows that split (H, W) into output_size; TC_MODULE(AdaptiveAvgPool2d) is its holder.
class AdaptiveAvgPool2dImpl : public Module {
 public:
  /// From options.
  explicit AdaptiveAvgPool2dImpl(const AdaptiveAvgPool2dOptions& options)
      : Module("AdaptiveAvgPool2d"), options(options) {}
  /// The output's (H, W).
  explicit AdaptiveAvgPool2dImpl(ExpandingArray2 output_size)
      : AdaptiveAvgPool2dImpl(AdaptiveAvgPool2dOptions(output_size)) {}
  /// (N, C, H, W) -> (N, C, output_size).
  Tensor forward(const Tensor& input);
  void pretty_print(std::ostream& os) const override;
  AdaptiveAvgPool2dOptions options;  ///< as constructed
};
TC_MODULE(AdaptiveAvgPool2d);

}  // namespace tc::nn
