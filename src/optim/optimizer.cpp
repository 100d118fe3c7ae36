// tc::optim::Optimizer: parameter groups, zero_grad, the step driver (state creation,
// master copies or compensation buffers, the AMP skip and inverse scale), write-back
// rounding and weight-update settings.
// The update formulas live in sgd.cpp and adam.cpp; state_dict in optimizer_state.cpp.
#include "tensorcast/optim/optimizer.h"

#include <limits>
#include <unordered_set>

#include "amp/state.h"
#include "core/async_read.h"
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

std::string_view weight_update_name(WeightUpdate u) {
  switch (u) {
    case WeightUpdate::MasterFloat32:
      return "MasterFloat32";
    case WeightUpdate::Pure:
      return "Pure";
    case WeightUpdate::PureKahan:
      return "PureKahan";
  }
  return "unknown";
}

bool Optimizer::reads_16bit_grads() const {
  for (const auto& g : groups_)
    for (const auto& p : g.params)
      if (is_reduced_float(p.dtype())) return true;
  return false;
}

bool Optimizer::has_master_weights() const {
  return weight_update_ == WeightUpdate::MasterFloat32 && reads_16bit_grads();
}

void Optimizer::set_weight_update(WeightUpdate u) {
  resolve_pending();
  TC_CHECK(u == WeightUpdate::MasterFloat32 || u == WeightUpdate::Pure || u == WeightUpdate::PureKahan, "optim",
           "set_weight_update: invalid WeightUpdate value ", static_cast<int>(u));
  if (u == weight_update_) return;
  TC_CHECK(state_.empty(), "optim", "set_weight_update(", weight_update_name(u),
           ") after the optimizer has built its state with WeightUpdate::", weight_update_name(weight_update_),
           "; choose the weight update before the first step");
  weight_update_ = u;
}

void Optimizer::set_rounding(Rounding r, uint64_t seed) {
  rounding_ = r;
  seed_ = seed;
}

DType Optimizer::state_dtype(const Tensor& param) const {
  if (param.dtype() == kFloat64) return kFloat64;
  if (is_reduced_float(param.dtype()) && weight_update_ != WeightUpdate::MasterFloat32) return param.dtype();
  return kFloat32;
}

Tensor& Optimizer::state_buffer(ParamState& state, const std::string& name, const Tensor& param, bool* created) {
  if (created) *created = false;
  if (Tensor* t = state.find(name)) return *t;
  state.buffers.emplace_back(name, zeros(param.sizes(), TensorOptions(state_dtype(param)).device(param.device())));
  if (created) *created = true;
  return state.buffers.back().second;
}

// What the host did for each parameter of an AMP step before knowing whether the device
// skipped it, so that a skip can be undone: its step count, and the state the step created
// (a new entry, a master copy, buffers appended after the first `buffers_before`).
struct Optimizer::PendingStep {
  struct Param {
    const TensorImpl* key;
    bool new_state, new_master, counted;
    size_t buffers_before;
  };
  tc::detail::AsyncScalarRead found_inf;
  std::vector<Param> params;
};

void Optimizer::resolve_pending() const {
  if (!pending_) return;
  const std::shared_ptr<PendingStep> p = std::move(pending_);
  if (p->found_inf.value() == 0.0f) return;
  for (auto it = p->params.rbegin(); it != p->params.rend(); ++it) {
    auto entry = state_.find(it->key);
    if (entry == state_.end()) continue;
    if (it->new_state) {
      state_.erase(entry);
      continue;
    }
    ParamState& s = entry->second;
    if (it->counted) --s.step;
    if (it->new_master) s.master = Tensor();
    s.buffers.resize(it->buffers_before);
  }
}

void Optimizer::step() {
  resolve_pending();
  run_step(nullptr, nullptr);
  run_post_hooks();
}

int64_t Optimizer::register_step_post_hook(std::function<void()> hook) {
  TC_CHECK(hook != nullptr, "optim", "register_step_post_hook: the hook is empty");
  post_hooks_.emplace_back(next_hook_, std::move(hook));
  return next_hook_++;
}

void Optimizer::remove_step_post_hook(int64_t handle) {
  std::erase_if(post_hooks_, [handle](const auto& h) { return h.first == handle; });
}

void Optimizer::run_post_hooks() {
  const auto hooks = post_hooks_;  // a hook may remove hooks
  for (const auto& [id, hook] : hooks) hook();
}

void Optimizer::step(const AmpStep& amp) {
  const Tensor& found = amp.found_inf;
  TC_CHECK(found.defined() && found.numel() == 1 && found.dtype() == kFloat32, "optim",
           "AmpStep.found_inf must be a one-element float32 tensor");
  TC_CHECK(
      !amp.inv_scale.defined() ||
          (amp.inv_scale.numel() == 1 && amp.inv_scale.dtype() == kFloat32 && amp.inv_scale.device() == found.device()),
      "optim", "AmpStep.inv_scale must be a one-element float32 tensor on found_inf's device (", found.device(), ")");
  resolve_pending();
  bool one_device = true;
  for (const auto& g : groups_)
    for (const auto& p : g.params) one_device = one_device && (!p.grad().defined() || p.device() == found.device());
  if (!one_device) {
    // Parameters on several devices: the kernels cannot all read the flag, so the host does.
    if (found.item_double() == 0.0) run_step(&amp, nullptr);
    run_post_hooks();
    return;
  }
  // The kernels read found_inf and write nothing when it is set; the host's bookkeeping is
  // settled once the flag is back (at once on the CPU). The flag is final before the step
  // (the scaler's check wrote it), so its copy starts first, and the record is in place
  // before any parameter is counted: a throw midway still leaves it to be undone.
  auto pending = std::make_shared<PendingStep>();
  pending->found_inf = tc::detail::AsyncScalarRead(found);
  pending_ = pending;
  run_step(&amp, pending.get());
  if (found.device().is_cpu()) resolve_pending();
  run_post_hooks();
}

void Optimizer::run_step(const AmpStep* amp, PendingStep* pending) {
  profiler::detail::Scope rec("optimizer.step");
  // Options may have been changed through param_groups() since the last step.
  for (const auto& g : groups_) check_options(*g.options);
  TC_CHECK(
      !(weight_update_ == WeightUpdate::PureKahan && rounding_ == Rounding::Stochastic), "optim",
      "WeightUpdate::PureKahan cannot be combined with Rounding::Stochastic: the compensation buffer carries "
      "the nearest-even rounding error; use Rounding::NearestEven, or WeightUpdate::Pure with stochastic rounding");
  // With `pending` the kernels read inv_scale and found_inf where they lie (the parameters'
  // device); without it the host has read found_inf (zero) and passes inv_scale by value.
  const bool scaled = amp != nullptr && amp->inv_scale.defined();
  const bool on_device = pending != nullptr;
  const auto* inv_ptr = scaled && on_device ? static_cast<const float*>(amp->inv_scale.raw_data()) : nullptr;
  const float inv_value = scaled && !on_device ? static_cast<float>(amp->inv_scale.item_double()) : 1.0f;
  const auto* found_inf = on_device ? static_cast<const float*>(amp->found_inf.raw_data()) : nullptr;
  int64_t index = -1;
  for (auto& g : groups_) {
    for (auto& p : g.params) {
      ++index;
      const Tensor& grad_ref = p.grad();
      if (!grad_ref.defined()) continue;
      TC_CHECK(grad_ref.sizes() == p.sizes(), "optim", "gradient of parameter ", index, " has shape ",
               shape_str(grad_ref.sizes()), " but the parameter has shape ", shape_str(p.sizes()));
      const Tensor grad = grad_ref.contiguous();  // the tensor itself unless it is a strided view
      auto [entry, new_state] = state_.try_emplace(p.impl());
      ParamState& s = entry->second;
      const bool half = is_reduced_float(p.dtype());
      const bool pure = half && weight_update_ != WeightUpdate::MasterFloat32;
      const bool new_master = half && !pure && !s.master.defined();
      if (new_master) s.master = p.to(kFloat32).contiguous().clone();
      if (pure && weight_update_ == WeightUpdate::PureKahan && !s.compensation.defined())
        s.compensation = zeros(p.sizes(), TensorOptions(p.dtype()).device(p.device()));
      // Saturates: a step count loaded from a file may be INT64_MAX (the bias corrections are 1 long before).
      const bool counted = s.step < std::numeric_limits<int64_t>::max();
      if (counted) ++s.step;
      if (pending != nullptr) pending->params.push_back({p.impl(), new_state, new_master, counted, s.buffers.size()});

      detail::StepArgs a;
      a.param = &p;
      a.device = p.device();
      a.numel = p.numel();
      a.grad = static_cast<const char*>(grad.raw_data());
      a.grad_dtype = grad.dtype();
      a.scaled = scaled;
      a.inv_scale = inv_value;
      a.inv_scale_ptr = inv_ptr;
      a.found_inf = found_inf;
      a.weight = pure ? nullptr : half ? s.master.raw_data() : p.raw_data();
      a.weight_dtype = half ? kFloat32 : p.dtype();
      a.param16 = half ? p.raw_data() : nullptr;
      a.param_dtype = p.dtype();
      a.state_dtype = state_dtype(p);
      a.weight_update = half ? weight_update_ : WeightUpdate::MasterFloat32;
      a.compensation = s.compensation.defined() ? s.compensation.raw_data() : nullptr;
      a.rounding = rounding_;
      a.sr_key = detail::rounding_key(seed_, s.step, index);
      // The 16-bit copy autocast's cache holds of the parameter (the next forward's weight)
      // is written in the same pass rather than cast again from the new weights.
      const Tensor copy = p.dtype() == kFloat32 && p.device().is_cpu() ? amp::detail::copy_for_step(p) : Tensor();
      if (copy.defined()) {
        a.copy16 = copy.raw_data();
        a.copy_dtype = copy.dtype();
      }
      update(*g.options, s, a);
      increment_version(p);  // written through raw pointers: other cached 16-bit copies are stale
      if (copy.defined()) amp::detail::copy_stepped(p, copy);
    }
  }
}

}  // namespace tc::optim
