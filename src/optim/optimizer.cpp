// tc::optim::Optimizer: parameter groups, zero_grad, the step driver (state creation,
// master copies, the AMP skip and inverse scale) and write-back rounding settings.
// The update formulas live in sgd.cpp and adam.cpp; state_dict in optimizer_state.cpp.
#include "tensorcast/optim/optimizer.h"

#include <unordered_set>

#include "core/tensor_impl.h"
#include "optim/fused.h"
#include "profiler/hooks.h"
#include "tensorcast/ops.h"

namespace tc::optim {

OptimizerParamGroup::OptimizerParamGroup(const OptimizerParamGroup& o)
    : params(o.params), options(o.options ? o.options->clone() : nullptr) {}

Tensor* Optimizer::ParamState::find(std::string_view name) {
  for (auto& [n, t] : buffers)
    if (n == name) return &t;
  return nullptr;
}

Optimizer::Optimizer(std::vector<OptimizerParamGroup> groups, std::unique_ptr<OptimizerOptions> defaults)
    : groups_(std::move(groups)), defaults_(std::move(defaults)) {}

void Optimizer::check_group(const OptimizerParamGroup& g, size_t first_index) const {
  check_options(*g.options);
  for (size_t k = 0; k < g.params.size(); ++k) {
    const Tensor& p = g.params[k];
    const size_t i = first_index + k;
    TC_CHECK(p.defined(), "optim", "parameter ", i, " is an undefined tensor");
    TC_CHECK(p.is_floating_point(), "optim", "parameter ", i, " has dtype ", dtype_name(p.dtype()),
             "; optimizers update floating tensors only");
    TC_CHECK(p.device().type == kCPU, "optim", "parameter ", i, " is on ", p.device(),
             "; this build's optimizers run on the CPU");
    TC_CHECK(p.is_contiguous(), "optim", "parameter ", i, " of shape ", shape_str(p.sizes()),
             " is not contiguous; the fused update needs contiguous parameters");
  }
}

void Optimizer::init_groups() {
  check_options(*defaults_);
  std::unordered_set<const TensorImpl*> seen;
  size_t index = 0;
  for (auto& g : groups_) {
    if (!g.options) g.options = defaults_->clone();
    check_group(g, index);
    for (const auto& p : g.params)
      TC_CHECK(seen.insert(p.impl()).second, "optim", "some parameters appear more than once in the parameter groups");
    index += g.params.size();
  }
}

void Optimizer::add_param_group(OptimizerParamGroup group) {
  if (!group.options) group.options = defaults_->clone();
  size_t index = 0;
  std::unordered_set<const TensorImpl*> seen;
  for (const auto& g : groups_) {
    index += g.params.size();
    for (const auto& p : g.params) seen.insert(p.impl());
  }
  check_group(group, index);
  for (const auto& p : group.params)
    TC_CHECK(seen.insert(p.impl()).second, "optim", "some parameters appear more than once in the parameter groups");
  groups_.push_back(std::move(group));
}

void Optimizer::zero_grad(bool set_to_none) {
  profiler::detail::Scope rec("optimizer.zero_grad");
  for (auto& g : groups_) {
    for (auto& p : g.params) {
      const Tensor& grad = p.grad();
      if (!grad.defined()) continue;
      if (set_to_none)
        p.set_grad(Tensor());
      else
        Tensor(grad).zero_();
    }
  }
}

bool Optimizer::has_master_weights() const {
  for (const auto& g : groups_)
    for (const auto& p : g.params)
      if (is_reduced_float(p.dtype())) return true;
  return false;
}

void Optimizer::set_rounding(Rounding r, uint64_t seed) {
  rounding_ = r;
  seed_ = seed;
}

Tensor& Optimizer::state_buffer(ParamState& state, const std::string& name, const Tensor& param, bool* created) {
  if (created) *created = false;
  if (Tensor* t = state.find(name)) return *t;
  const DType dt = param.dtype() == kFloat64 ? kFloat64 : kFloat32;
  state.buffers.emplace_back(name, zeros(param.sizes(), dt));
  if (created) *created = true;
  return state.buffers.back().second;
}

void Optimizer::step() { run_step(nullptr); }

void Optimizer::step(const AmpStep& amp) {
  TC_CHECK(amp.found_inf.defined() && amp.found_inf.numel() == 1, "optim",
           "AmpStep.found_inf must be a one-element tensor");
  TC_CHECK(amp.inv_scale.defined() && amp.inv_scale.numel() == 1, "optim",
           "AmpStep.inv_scale must be a one-element tensor");
  // The one host read of the step: an overflow leaves parameters, moments and step counts untouched.
  if (amp.found_inf.item_double() != 0.0) return;
  run_step(&amp);
}

void Optimizer::run_step(const AmpStep* amp) {
  profiler::detail::Scope rec("optimizer.step");
  // Options may have been changed through param_groups() since the last step.
  for (const auto& g : groups_) check_options(*g.options);
  const float inv_scale = amp ? static_cast<float>(amp->inv_scale.item_double()) : 1.0f;
  int64_t index = -1;
  for (auto& g : groups_) {
    for (auto& p : g.params) {
      ++index;
      const Tensor& grad_ref = p.grad();
      if (!grad_ref.defined()) continue;
      TC_CHECK(grad_ref.sizes() == p.sizes(), "optim", "gradient of parameter ", index, " has shape ",
               shape_str(grad_ref.sizes()), " but the parameter has shape ", shape_str(p.sizes()));
      const Tensor grad = grad_ref.contiguous();  // the tensor itself unless it is a strided view
      ParamState& s = state_[p.impl()];
      const bool half = is_reduced_float(p.dtype());
      if (half && !s.master.defined()) s.master = p.to(kFloat32).contiguous().clone();
      ++s.step;

      detail::StepArgs a;
      a.param = &p;
      a.numel = p.numel();
      a.grad = static_cast<const char*>(grad.raw_data());
      a.grad_dtype = grad.dtype();
      a.scaled = amp != nullptr;
      a.inv_scale = inv_scale;
      a.weight = half ? s.master.raw_data() : p.raw_data();
      a.weight_dtype = half ? kFloat32 : p.dtype();
      a.param16 = half ? p.raw_data() : nullptr;
      a.param_dtype = p.dtype();
      a.rounding = rounding_;
      a.sr_key = detail::rounding_key(seed_, s.step, index);
      update(*g.options, s, a);
    }
  }
}

}  // namespace tc::optim
