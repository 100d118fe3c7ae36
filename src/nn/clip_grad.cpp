// clip_grad_norm_ / clip_grad_value_.
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "tensorcast/autograd.h"
#include "tensorcast/nn/utils.h"
#include "tensorcast/ops.h"

namespace tc::nn::utils {

double clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double p, bool error_if_nonfinite) {
  return clip_grad_norm_combined(parameters, max_norm, p, error_if_nonfinite, nullptr);
}

double clip_grad_norm_combined(const std::vector<Tensor>& parameters, double max_norm, double p,
                               bool error_if_nonfinite, const std::function<double(double)>& combine) {
  TC_CHECK(p > 0 || std::isinf(p), "clip_grad_norm_", "norm_type must be positive or inf, got ", p);
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  for (const Tensor& param : parameters)
    if (param.defined() && param.grad().defined()) grads.push_back(param.grad());
  if (grads.empty() && !combine) return 0.0;

  // Per tensor, reduce in float64 (16-bit gradients would lose the small squares, and the
  // total must be exact enough to compare with max_norm), adding (or taking the max of) the
  // per-tensor results on their device in parameter order: one host read per device, not
  // per tensor, so CUDA gradients cost one sync.
  const bool inf_norm = std::isinf(p);
  std::vector<std::pair<Device, Tensor>> per_device;
  for (const Tensor& g : grads) {
    const Tensor a = tc::abs(g.to(kFloat64));
    const Tensor part = inf_norm   ? tc::max(a)
                        : p == 2.0 ? tc::sum(a * a)
                        : p == 1.0 ? tc::sum(a)
                                   : tc::sum(tc::pow(a, p));
    auto it = std::find_if(per_device.begin(), per_device.end(), [&](const auto& e) { return e.first == g.device(); });
    if (it == per_device.end())
      per_device.emplace_back(g.device(), part);
    else
      it->second = inf_norm ? tc::maximum(it->second, part) : tc::add(it->second, part);
  }
  double total = 0.0;
  for (const auto& [device, acc] : per_device) {
    const double v = acc.item_double();
    total = inf_norm ? (std::isnan(v) || std::isnan(total) ? NAN : std::max(total, v)) : total + v;
  }
  if (combine) total = combine(total);
  if (!inf_norm) total = p == 2.0 ? std::sqrt(total) : p == 1.0 ? total : std::pow(total, 1.0 / p);

  if (!std::isfinite(total)) {
    TC_CHECK(!error_if_nonfinite, "clip_grad_norm_", "the total norm of order ", p,
             " for gradients from `parameters` is non-finite (", total,
             "), so it cannot be clipped; pass error_if_nonfinite=false to return it unclipped");
    return total;
  }
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1.0)
    for (Tensor g : grads) g.mul_(coef);  // a scalar: nothing is read back
  return total;
}

double clip_grad_norm_(const Tensor& parameter, double max_norm, double norm_type, bool error_if_nonfinite) {
  return clip_grad_norm_(std::vector<Tensor>{parameter}, max_norm, norm_type, error_if_nonfinite);
}

void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value) {
  NoGradGuard no_grad;
  for (const Tensor& param : parameters) {
    if (!param.defined() || !param.grad().defined()) continue;
    Tensor g = param.grad();
    g.copy_(tc::clamp(g, -clip_value, clip_value));
  }
}

}  // namespace tc::nn::utils
