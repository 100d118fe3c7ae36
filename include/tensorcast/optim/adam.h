// tc::optim::Adam: Adam with L2 weight decay added to the gradient (and optional AMSGrad),
// with torch.optim.Adam's update (its default, non-capturable single-tensor path):
//   g = grad + weight_decay * p
//   m = lerp(m, g, 1 - beta1);  v = beta2 * v + (1 - beta2) * g * g
//   step_size = lr / (1 - beta1^t);  denom = sqrt(v) / sqrt(1 - beta2^t) + eps
//   (amsgrad: v_max = max(v_max, v) replaces v in denom)
//   p = p - step_size * m / denom
//
//   tc::optim::Adam opt(params, tc::optim::AdamOptions(1e-3).betas({0.9, 0.95}));
#pragma once
#include <tuple>

#include "tensorcast/optim/optimizer.h"

namespace tc::optim {

using Betas = std::tuple<double, double>;  // (beta1, beta2), as libtorch

struct AdamOptions : OptimizerCloneableOptions<AdamOptions> {
  explicit AdamOptions(double lr = 1e-3) : lr_(lr) {}
  TC_ARG(double, lr);
  TC_ARG(Betas, betas) = Betas(0.9, 0.999);
  TC_ARG(double, eps) = 1e-8;
  TC_ARG(double, weight_decay) = 0.0;
  TC_ARG(bool, amsgrad) = false;
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions defaults = AdamOptions());
  Adam(std::vector<OptimizerParamGroup> groups, AdamOptions defaults = AdamOptions());

 protected:
  void check_options(const OptimizerOptions& o) const override;
  std::vector<std::string> required_buffers(const OptimizerOptions& o) const override;
  std::vector<std::string> known_buffers() const override;
  void update(const OptimizerOptions& o, ParamState& state, const detail::StepArgs& args) override;
  void save_options(const OptimizerOptions& o, StateDict& sd, const std::string& prefix) const override;
  std::unique_ptr<OptimizerOptions> load_options(const StateDict& sd, const std::string& prefix) const override;
};

}  // namespace tc::optim
