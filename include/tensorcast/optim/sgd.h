/// \file
/// tc::optim::SGD: stochastic gradient descent with momentum, dampening, Nesterov momentum
/// and L2 weight decay, with torch.optim.SGD's exact update:
/// \verbatim
///   g = grad + weight_decay * p
///   buf = g on the first step, else momentum * buf + (1 - dampening) * g
///   g = nesterov ? g + momentum * buf : buf          (when momentum != 0)
///   p = p - lr * g
/// \endverbatim
///
/// \code{.cpp}
///   tc::optim::SGD opt(params, tc::optim::SGDOptions(0.1).momentum(0.9));
/// \endcode
#pragma once
#include "tensorcast/optim/optimizer.h"

namespace tc::optim {

/// Options of SGD (libtorch's SGDOptions).
struct SGDOptions : OptimizerCloneableOptions<SGDOptions> {
  /// SGD with learning rate lr.
  explicit SGDOptions(double lr) : lr_(lr) {}
  TC_ARG(double, lr);                  ///< learning rate
  TC_ARG(double, momentum) = 0.0;      ///< 0: plain SGD
  TC_ARG(double, dampening) = 0.0;     ///< damping of the gradient's share in the momentum buffer
  TC_ARG(double, weight_decay) = 0.0;  ///< L2 penalty added to the gradient
  TC_ARG(bool, nesterov) = false;      ///< Nesterov momentum (needs momentum > 0 and dampening 0)
};

/// Stochastic gradient descent with momentum (see the top of this file).
class SGD : public Optimizer {
 public:
  /// One group of `params` with `defaults`.
  SGD(std::vector<Tensor> params, SGDOptions defaults);
  /// Parameter groups; groups without options take `defaults`.
  SGD(std::vector<OptimizerParamGroup> groups, SGDOptions defaults);

 protected:
  void check_options(const OptimizerOptions& o) const override;
  std::vector<std::string> required_buffers(const OptimizerOptions& o) const override;
  std::vector<std::string> known_buffers() const override;
  void update(const OptimizerOptions& o, ParamState& state, const detail::StepArgs& args) override;
  void save_options(const OptimizerOptions& o, StateDict& sd, const std::string& prefix) const override;
  std::unique_ptr<OptimizerOptions> load_options(const StateDict& sd, const std::string& prefix) const override;
};

}  // namespace tc::optim
