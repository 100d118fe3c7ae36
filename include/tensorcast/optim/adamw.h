/// \file
/// tc::optim::AdamW: Adam with decoupled weight decay (torch.optim.AdamW):
/// \verbatim
///   p = p * (1 - lr * weight_decay)      (instead of adding weight_decay * p to the gradient)
///   g = grad
///   m = lerp(m, g, 1 - beta1);  v = beta2 * v + (1 - beta2) * g * g
///   step_size = lr / (1 - beta1^t);  denom = sqrt(v) / sqrt(1 - beta2^t) + eps
///   (amsgrad: v_max = max(v_max, v) replaces v in denom)
///   p = p - step_size * m / denom
/// \endverbatim
///
/// \code{.cpp}
///   tc::optim::AdamW opt(params, tc::optim::AdamWOptions(1e-3).weight_decay(0.01));
/// \endcode
#pragma once
#include "tensorcast/optim/adam.h"

namespace tc::optim {

/// Options of AdamW (libtorch's AdamWOptions).
struct AdamWOptions : OptimizerCloneableOptions<AdamWOptions> {
  /// AdamW with learning rate lr.
  explicit AdamWOptions(double lr = 1e-3) : lr_(lr) {}
  TC_ARG(double, lr);                        ///< learning rate
  TC_ARG(Betas, betas) = Betas(0.9, 0.999);  ///< decay rates of the first and second moments
  TC_ARG(double, eps) = 1e-8;                ///< added to the denominator
  TC_ARG(double, weight_decay) = 1e-2;       ///< PyTorch's AdamW default
  TC_ARG(bool, amsgrad) = false;             ///< the AMSGrad variant (the largest second moment so far)
};

/// AdamW: Adam with decoupled weight decay (see the top of this file).
class AdamW : public Optimizer {
 public:
  /// One group of `params` with `defaults`.
  AdamW(std::vector<Tensor> params, AdamWOptions defaults = AdamWOptions());
  /// Parameter groups; groups without options take `defaults`.
  AdamW(std::vector<OptimizerParamGroup> groups, AdamWOptions defaults = AdamWOptions());

 protected:
  void check_options(const OptimizerOptions& o) const override;
  std::vector<std::string> required_buffers(const OptimizerOptions& o) const override;
  std::vector<std::string> known_buffers() const override;
  void update(const OptimizerOptions& o, ParamState& state, const detail::StepArgs& args) override;
  void save_options(const OptimizerOptions& o, StateDict& sd, const std::string& prefix) const override;
  std::unique_ptr<OptimizerOptions> load_options(const StateDict& sd, const std::string& prefix) const override;
};

}  // namespace tc::optim
