/// \file
/// Conv2d.
#pragma once
#include "tensorcast/nn/module.h"
#include "tensorcast/nn/options.h"

namespace tc::nn {

/// Options of Conv2d (torch.nn.Conv2d's arguments).
struct Conv2dOptions {
  /// A convolution from in_channels to out_channels with a kernel_size window.
  Conv2dOptions(int64_t in_channels, int64_t out_channels, ExpandingArray2 kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  TC_ARG(int64_t, in_channels);           ///< C of the (N, C, H, W) input
  TC_ARG(int64_t, out_channels);          ///< C of the output
  TC_ARG(ExpandingArray2, kernel_size);   ///< (kH, kW), or one size for both
  TC_ARG(ExpandingArray2, stride) = 1;    ///< step of the window
  TC_ARG(ExpandingArray2, padding) = 0;   ///< zeros added on each side
  TC_ARG(ExpandingArray2, dilation) = 1;  ///< spacing of the kernel's taps
  TC_ARG(int64_t, groups) = 1;            ///< channels split into this many groups
  TC_ARG(bool, bias) = true;              ///< whether to learn a per-channel bias
};

/// Input (N, C_in, H, W); weight (C_out, C_in / groups, kH, kW) and bias initialized
/// U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = C_in / groups * kH * kW, as in PyTorch.
class Conv2dImpl : public Module {
 public:
  /// A convolution from in_channels to out_channels with a kernel_size window, stride 1, no padding.
  Conv2dImpl(int64_t in_channels, int64_t out_channels, ExpandingArray2 kernel_size)
      : Conv2dImpl(Conv2dOptions(in_channels, out_channels, kernel_size)) {}
  /// From options.
  explicit Conv2dImpl(const Conv2dOptions& options);
  /// (N, C, H, W) -> (N, out_channels, H', W').
  Tensor forward(const Tensor& input);
  /// Weight and bias drawn again as PyTorch's (kaiming uniform).
  void reset_parameters();
  void pretty_print(std::ostream& os) const override;

  Conv2dOptions options;  ///< as constructed
  Tensor weight;          ///< (out_channels, in_channels / groups, kH, kW)
  Tensor bias;            ///< (out_channels), undefined without bias
};
TC_MODULE(Conv2d);

}  // namespace tc::nn
