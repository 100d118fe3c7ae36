/// \file
/// tc::optim::Adam: Adam with L2 weight decay added to the gradient (and optional AMSGrad),
/// with torch.optim.Adam's update (its default, non-capturable single-tensor path):
/// \verbatim
///   g = grad + weight_decay * p
///   m = lerp(m, g, 1 - beta1);  v = beta2 * v + (1 - beta2) * g * g
///   step_size = lr / (1 - beta1^t);  denom = sqrt(v) / sqrt(1 - beta2^t) + eps
///   (amsgrad: v_max = max(v_max, v) replaces v in denom)
///   p = p - step_size * m / denom
/// \endverbatim
///
/// \code{.cpp}
///   tc::optim::Adam opt(params, tc::optim::AdamOptions(1e-3).betas({0.9, 0.95}));
/// \endcode
#pragma once
#include <tuple>

#include "tensorcast/optim/optimizer.h"

namespace tc::optim {

using Betas = std::tuple<double, double>;  ///< (beta1, beta2), as libtorch

/// Options of Adam (libtorch's AdamOptions).
struct AdamOptions : OptimizerCloneableOptions<AdamOptions> {
  /// Adam with learning rate lr.
  explicit AdamOptions(double lr = 1e-3) : lr_(lr) {}
  TC_ARG(double, lr);                        ///< learning rate
  TC_ARG(Betas, betas) = Betas(0.9, 0.999);  ///< decay rates of the first and second moments
  TC_ARG(double, eps) = 1e-8;                ///< added to the denominator
  TC_ARG(double, weight_decay) = 0.0;        ///< L2 penalty added to the gradient
  TC_ARG(bool, amsgrad) = false;             ///< the AMSGrad variant (the largest second moment so far)
};

/// Adam (see the top of this file).
class Adam : public Optimizer {
 public:
  /// One group of `params` with `defaults`.
  Adam(std::vector<Tensor> params, AdamOptions defaults = AdamOptions());
  /// Parameter groups; groups without options take `defaults`.
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
