// Conv2d.
#pragma once
#include "tensorcast/nn/module.h"
#include "tensorcast/nn/options.h"

namespace tc::nn {

struct Conv2dOptions {
  Conv2dOptions(int64_t in_channels, int64_t out_channels, ExpandingArray2 kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(kernel_size) {}
  TC_ARG(int64_t, in_channels);
  TC_ARG(int64_t, out_channels);
  TC_ARG(ExpandingArray2, kernel_size);
  TC_ARG(ExpandingArray2, stride) = 1;
  TC_ARG(ExpandingArray2, padding) = 0;
  TC_ARG(ExpandingArray2, dilation) = 1;
  TC_ARG(int64_t, groups) = 1;
  TC_ARG(bool, bias) = true;
};

// Input (N, C_in, H, W); weight (C_out, C_in / groups, kH, kW) and bias initialized
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = C_in / groups * kH * kW, as in PyTorch.
class Conv2dImpl : public Module {
 public:
  Conv2dImpl(int64_t in_channels, int64_t out_channels, ExpandingArray2 kernel_size)
      : Conv2dImpl(Conv2dOptions(in_channels, out_channels, kernel_size)) {}
  explicit Conv2dImpl(const Conv2dOptions& options);
  Tensor forward(const Tensor& input);
  void reset_parameters();
  void pretty_print(std::ostream& os) const override;

  Conv2dOptions options;
  Tensor weight;
  Tensor bias;
};
TC_MODULE(Conv2d);

}  // namespace tc::nn
