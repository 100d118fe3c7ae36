/// \file
/// Dropout: zeroes elements with probability p in training mode and scales the rest by
/// 1 / (1 - p); the identity in eval mode.
#pragma once
#include "tensorcast/nn/module.h"

namespace tc::nn {

/// Options of Dropout.
struct DropoutOptions {
  /// Probability p, implicit: `Dropout(0.1)`.
  DropoutOptions(double p = 0.5) : p_(p) {}  // NOLINT: Dropout(0.1)
  TC_ARG(double, p);                         ///< probability of zeroing an element
};

/// Zeroes elements with probability p in training mode and scales the rest by 1 / (1 - p); the identity in eval
/// mode. TC_MODULE(Dropout) is its holder.
class DropoutImpl : public Module {
 public:
  /// From options.
  explicit DropoutImpl(const DropoutOptions& options = {});
  /// With probability p.
  explicit DropoutImpl(double p) : DropoutImpl(DropoutOptions(p)) {}
  /// input with dropout applied (training mode) or unchanged (eval mode).
  Tensor forward(const Tensor& input);
  void pretty_print(std::ostream& os) const override;
  DropoutOptions options;  ///< as constructed
};
TC_MODULE(Dropout);

}  // namespace tc::nn
