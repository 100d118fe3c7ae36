// Linear, Identity and Flatten.
#pragma once
#include "tensorcast/nn/module.h"

namespace tc::nn {

struct LinearOptions {
  LinearOptions(int64_t in_features, int64_t out_features) : in_features_(in_features), out_features_(out_features) {}
  TC_ARG(int64_t, in_features);
  TC_ARG(int64_t, out_features);
  TC_ARG(bool, bias) = true;
};

// y = x W^T + b; weight (out, in) and bias U(-1/sqrt(in), 1/sqrt(in)) as in PyTorch.
class LinearImpl : public Module {
 public:
  LinearImpl(int64_t in_features, int64_t out_features) : LinearImpl(LinearOptions(in_features, out_features)) {}
  explicit LinearImpl(const LinearOptions& options);
  Tensor forward(const Tensor& input);
  void reset_parameters();
  void pretty_print(std::ostream& os) const override;

  LinearOptions options;
  Tensor weight;
  Tensor bias;  // undefined with .bias(false)
};
TC_MODULE(Linear);

class IdentityImpl : public Module {
 public:
  IdentityImpl() : Module("Identity") {}
  Tensor forward(const Tensor& input) { return input; }
};
TC_MODULE(Identity);

struct FlattenOptions {
  TC_ARG(int64_t, start_dim) = 1;
  TC_ARG(int64_t, end_dim) = -1;
};

// Flattens dims start_dim..end_dim (default: all but the batch dim) into one.
class FlattenImpl : public Module {
 public:
  explicit FlattenImpl(const FlattenOptions& options = {}) : Module("Flatten"), options(options) {}
  FlattenImpl(int64_t start_dim, int64_t end_dim)
      : FlattenImpl(FlattenOptions().start_dim(start_dim).end_dim(end_dim)) {}
  Tensor forward(const Tensor& input) { return input.flatten(options.start_dim(), options.end_dim()); }
  void pretty_print(std::ostream& os) const override;

  FlattenOptions options;
};
TC_MODULE(Flatten);

}  // namespace tc::nn
