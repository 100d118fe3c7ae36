/// \file
/// ReLU, GELU, SiLU (no parameters).
#pragma once
#include <string>

#include "tensorcast/nn/module.h"
#include "tensorcast/ops.h"

namespace tc::nn {

/// max(x, 0); TC_MODULE(ReLU) is its holder.
class ReLUImpl : public Module {
 public:
  ReLUImpl() : Module("ReLU") {}
  /// max(input, 0), elementwise.
  Tensor forward(const Tensor& input);
};
TC_MODULE(ReLU);

/// Options of GELU.
struct GELUOptions {
  TC_ARG(std::string, approximate) = "none";  ///< "none" (erf) or "tanh"
};

/// GELU, exact or tanh-approximated; TC_MODULE(GELU) is its holder.
class GELUImpl : public Module {
 public:
  /// From options.
  explicit GELUImpl(const GELUOptions& options = {});
  /// GELU(input), elementwise.
  Tensor forward(const Tensor& input);
  void pretty_print(std::ostream& os) const override;
  /// The activation it computes, for the fused linear ops: kGeluTanh for approximate
  /// "tanh", else kGelu.
  Activation activation() const noexcept {
    return options.approximate() == "tanh" ? Activation::kGeluTanh : Activation::kGelu;
  }
  GELUOptions options;  ///< as constructed
};
TC_MODULE(GELU);

/// x * sigmoid(x); TC_MODULE(SiLU) is its holder.
class SiLUImpl : public Module {
 public:
  SiLUImpl() : Module("SiLU") {}
  /// input * sigmoid(input), elementwise.
  Tensor forward(const Tensor& input);
};
TC_MODULE(SiLU);

}  // namespace tc::nn
