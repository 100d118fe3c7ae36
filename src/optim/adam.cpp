// tc::optim::Adam and tc::optim::AdamW: option checks, state-dict names and the one fused
// update both run (see adam.h and adamw.h for the formulas).
#include "tensorcast/optim/adam.h"

#include <cmath>

#include "backend/optim_fns.h"
#include "optim/fused.h"
#include "optim/options_io.h"
#include "tensorcast/ops.h"
#include "tensorcast/optim/adamw.h"

namespace tc::optim {
namespace {

using detail::AdamKernel;
using detail::AdamScalars;

struct AdamConfig {
  double lr, beta1, beta2, eps, weight_decay;
  bool amsgrad, decoupled;
};

template <class O>
AdamConfig config(const O& o, bool decoupled) {
  return {o.lr(), std::get<0>(o.betas()), std::get<1>(o.betas()), o.eps(), o.weight_decay(), o.amsgrad(), decoupled};
}

template <class O>
void check_adam(const O& o) {
  const auto [b1, b2] = o.betas();
  TC_CHECK(o.lr() >= 0.0, "optim", "invalid learning rate: ", o.lr(), " (must be >= 0)");
  TC_CHECK(o.eps() >= 0.0, "optim", "invalid epsilon value: ", o.eps(), " (must be >= 0)");
  TC_CHECK(b1 >= 0.0 && b1 < 1.0, "optim", "invalid beta parameter at index 0: ", b1, " (must be in [0, 1))");
  TC_CHECK(b2 >= 0.0 && b2 < 1.0, "optim", "invalid beta parameter at index 1: ", b2, " (must be in [0, 1))");
  TC_CHECK(o.weight_decay() >= 0.0, "optim", "invalid weight_decay value: ", o.weight_decay(), " (must be >= 0)");
}

std::vector<std::string> adam_required(bool amsgrad) {
  if (amsgrad) return {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
  return {"exp_avg", "exp_avg_sq"};
}

template <class O>
void save_adam(const O& o, StateDict& sd, const std::string& prefix) {
  detail::put_double(sd, prefix + "lr", o.lr());
  sd[prefix + "betas"] = tensor(std::vector<double>{std::get<0>(o.betas()), std::get<1>(o.betas())}, {2}, kFloat64);
  detail::put_double(sd, prefix + "eps", o.eps());
  detail::put_double(sd, prefix + "weight_decay", o.weight_decay());
  detail::put_bool(sd, prefix + "amsgrad", o.amsgrad());
}

template <class O>
std::unique_ptr<OptimizerOptions> load_adam(const StateDict& sd, const std::string& prefix) {
  auto o = std::make_unique<O>(detail::get_double(sd, prefix + "lr"));
  const Tensor& betas = state_at(sd, prefix + "betas", "optim");
  TC_CHECK(betas.numel() == 2, "optim", "state dict entry '", prefix, "betas' should hold 2 values, got shape ",
           shape_str(betas.sizes()));
  const auto b = betas.to_vector();
  o->betas(Betas(b[0], b[1]))
      .eps(detail::get_double(sd, prefix + "eps"))
      .weight_decay(detail::get_double(sd, prefix + "weight_decay"))
      .amsgrad(detail::get_bool(sd, prefix + "amsgrad"));
  return o;
}

// The update itself is AdamKernel (backend/optim_fns.h).
template <class C>
AdamScalars<C> make_scalars(const AdamConfig& c, int64_t step) {
  // Bias corrections in double on the host, as Python floats are in PyTorch.
  const double bc1 = 1.0 - std::pow(c.beta1, static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(c.beta2, static_cast<double>(step));
  AdamScalars<C> k;
  k.lerp_w = static_cast<C>(1.0 - c.beta1);
  k.lerp_w1 = C(1) - k.lerp_w;
  k.beta2 = static_cast<C>(c.beta2);
  k.one_minus_beta2 = static_cast<C>(1.0 - c.beta2);
  k.bc2_sqrt = static_cast<C>(std::sqrt(bc2));
  k.eps = static_cast<C>(c.eps);
  k.neg_step_size = static_cast<C>(-(c.lr / bc1));
  k.wd = static_cast<C>(c.weight_decay);
  k.decay = static_cast<C>(1.0 - c.lr * c.weight_decay);
  return k;
}

// Turns the runtime flags into template arguments, one at a time.
template <class C, bool... Flags>
void run_adam(const AdamScalars<C>& k, const detail::StepArgs& args, const detail::StateBuffers& b, const bool* flags) {
  if constexpr (sizeof...(Flags) == 4) {
    detail::fused_for_each<C>(args, b, AdamKernel<C, Flags...>{k});
  } else {
    if (flags[sizeof...(Flags)])
      run_adam<C, Flags..., true>(k, args, b, flags);
    else
      run_adam<C, Flags..., false>(k, args, b, flags);
  }
}

void adam_update(const AdamConfig& c, const detail::StateBuffers& b, int64_t step, const detail::StepArgs& args) {
  const bool wd = c.weight_decay != 0.0;
  const bool lerp_high = std::fabs(static_cast<float>(1.0 - c.beta1)) >= 0.5f;
  const bool flags[4] = {wd && !c.decoupled, wd && c.decoupled, c.amsgrad, lerp_high};
  if (const auto& fused_step = backend::kernels_for(args.device).fused_adam_step)
    fused_step(detail::device_step(args, b), make_scalars<float>(c, step), flags);
  else if (args.weight_dtype == kFloat64)
    run_adam<double>(make_scalars<double>(c, step), args, b, flags);
  else
    run_adam<float>(make_scalars<float>(c, step), args, b, flags);
}

}  // namespace

// ------------------------------------------------------------------------------ Adam

Adam::Adam(std::vector<Tensor> params, AdamOptions defaults)
    : Adam(std::vector<OptimizerParamGroup>{OptimizerParamGroup(std::move(params))}, std::move(defaults)) {}

Adam::Adam(std::vector<OptimizerParamGroup> groups, AdamOptions defaults)
    : Optimizer(std::move(groups), std::make_unique<AdamOptions>(std::move(defaults))) {
  init_groups();
}

void Adam::check_options(const OptimizerOptions& base) const {
  const auto* o = dynamic_cast<const AdamOptions*>(&base);
  TC_CHECK(o != nullptr, "optim", "Adam parameter groups take AdamOptions");
  check_adam(*o);
}

std::vector<std::string> Adam::required_buffers(const OptimizerOptions& o) const {
  return adam_required(static_cast<const AdamOptions&>(o).amsgrad());
}
std::vector<std::string> Adam::known_buffers() const { return adam_required(true); }

void Adam::update(const OptimizerOptions& base, ParamState& state, const detail::StepArgs& args) {
  const auto& o = static_cast<const AdamOptions&>(base);
  // raw_data() right away: creating a later buffer may move the earlier Tensor handles.
  const detail::StateBuffers b{state_buffer(state, "exp_avg", *args.param).raw_data(),
                               state_buffer(state, "exp_avg_sq", *args.param).raw_data(),
                               o.amsgrad() ? state_buffer(state, "max_exp_avg_sq", *args.param).raw_data() : nullptr};
  adam_update(config(o, false), b, state.step, args);
}

void Adam::save_options(const OptimizerOptions& o, StateDict& sd, const std::string& prefix) const {
  save_adam(static_cast<const AdamOptions&>(o), sd, prefix);
}
std::unique_ptr<OptimizerOptions> Adam::load_options(const StateDict& sd, const std::string& prefix) const {
  return load_adam<AdamOptions>(sd, prefix);
}

// ----------------------------------------------------------------------------- AdamW

AdamW::AdamW(std::vector<Tensor> params, AdamWOptions defaults)
    : AdamW(std::vector<OptimizerParamGroup>{OptimizerParamGroup(std::move(params))}, std::move(defaults)) {}

AdamW::AdamW(std::vector<OptimizerParamGroup> groups, AdamWOptions defaults)
    : Optimizer(std::move(groups), std::make_unique<AdamWOptions>(std::move(defaults))) {
  init_groups();
}

void AdamW::check_options(const OptimizerOptions& base) const {
  const auto* o = dynamic_cast<const AdamWOptions*>(&base);
  TC_CHECK(o != nullptr, "optim", "AdamW parameter groups take AdamWOptions");
  check_adam(*o);
}

std::vector<std::string> AdamW::required_buffers(const OptimizerOptions& o) const {
  return adam_required(static_cast<const AdamWOptions&>(o).amsgrad());
}
std::vector<std::string> AdamW::known_buffers() const { return adam_required(true); }

void AdamW::update(const OptimizerOptions& base, ParamState& state, const detail::StepArgs& args) {
  const auto& o = static_cast<const AdamWOptions&>(base);
  // raw_data() right away: creating a later buffer may move the earlier Tensor handles.
  const detail::StateBuffers b{state_buffer(state, "exp_avg", *args.param).raw_data(),
                               state_buffer(state, "exp_avg_sq", *args.param).raw_data(),
                               o.amsgrad() ? state_buffer(state, "max_exp_avg_sq", *args.param).raw_data() : nullptr};
  adam_update(config(o, true), b, state.step, args);
}

void AdamW::save_options(const OptimizerOptions& o, StateDict& sd, const std::string& prefix) const {
  save_adam(static_cast<const AdamWOptions&>(o), sd, prefix);
}
std::unique_ptr<OptimizerOptions> AdamW::load_options(const StateDict& sd, const std::string& prefix) const {
  return load_adam<AdamWOptions>(sd, prefix);
}

}  // namespace tc::optim
