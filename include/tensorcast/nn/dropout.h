// Dropout: zeroes elements with probability p in training mode and scales the rest by
// 1 / (1 - p); the identity in eval mode.
#pragma once
#include "tensorcast/nn/module.h"

namespace tc::nn {

struct DropoutOptions {
  DropoutOptions(double p = 0.5) : p_(p) {}  // NOLINT: Dropout(0.1)
  TC_ARG(double, p);
};

class DropoutImpl : public Module {
 public:
  explicit DropoutImpl(const DropoutOptions& options = {});
  explicit DropoutImpl(double p) : DropoutImpl(DropoutOptions(p)) {}
  Tensor forward(const Tensor& input);
  void pretty_print(std::ostream& os) const override;
  DropoutOptions options;
};
TC_MODULE(Dropout);

}  // namespace tc::nn
