// ReLU, GELU, SiLU (no parameters).
#pragma once
#include <string>

#include "tensorcast/nn/module.h"

namespace tc::nn {

class ReLUImpl : public Module {
 public:
  ReLUImpl() : Module("ReLU") {}
  Tensor forward(const Tensor& input);
};
TC_MODULE(ReLU);

struct GELUOptions {
  TC_ARG(std::string, approximate) = "none";  // "none" (erf) or "tanh"
};

class GELUImpl : public Module {
 public:
  explicit GELUImpl(const GELUOptions& options = {});
  Tensor forward(const Tensor& input);
  void pretty_print(std::ostream& os) const override;
  GELUOptions options;
};
TC_MODULE(GELU);

class SiLUImpl : public Module {
 public:
  SiLUImpl() : Module("SiLU") {}
  Tensor forward(const Tensor& input);
};
TC_MODULE(SiLU);

}  // namespace tc::nn
