// tc::optim::SGD: option checks, state-dict names and the fused update (see sgd.h).
#include "tensorcast/optim/sgd.h"

#include "backend/optim_fns.h"
#include "optim/fused.h"
#include "optim/options_io.h"

namespace tc::optim {

SGD::SGD(std::vector<Tensor> params, SGDOptions defaults)
    : SGD(std::vector<OptimizerParamGroup>{OptimizerParamGroup(std::move(params))}, std::move(defaults)) {}

SGD::SGD(std::vector<OptimizerParamGroup> groups, SGDOptions defaults)
    : Optimizer(std::move(groups), std::make_unique<SGDOptions>(std::move(defaults))) {
  init_groups();
}

void SGD::check_options(const OptimizerOptions& base) const {
  const auto* o = dynamic_cast<const SGDOptions*>(&base);
  TC_CHECK(o != nullptr, "optim", "SGD parameter groups take SGDOptions");
  TC_CHECK(o->lr() >= 0.0, "optim", "invalid learning rate: ", o->lr(), " (must be >= 0)");
  TC_CHECK(o->momentum() >= 0.0, "optim", "invalid momentum value: ", o->momentum(), " (must be >= 0)");
  TC_CHECK(o->weight_decay() >= 0.0, "optim", "invalid weight_decay value: ", o->weight_decay(), " (must be >= 0)");
  TC_CHECK(!o->nesterov() || (o->momentum() > 0.0 && o->dampening() == 0.0), "optim",
           "Nesterov momentum requires a momentum and zero dampening (momentum ", o->momentum(), ", dampening ",
           o->dampening(), ")");
}

// The momentum buffer is created by the first step that uses momentum (PyTorch's `None`
// until then), so a state without one is valid.
std::vector<std::string> SGD::required_buffers(const OptimizerOptions&) const { return {}; }
std::vector<std::string> SGD::known_buffers() const { return {"momentum_buffer"}; }

namespace {

using detail::SGDKernel;
using detail::SGDScalars;

template <class C, bool... Flags>
void run_sgd(const SGDScalars<C>& k, const detail::StepArgs& args, const detail::StateBuffers& b, const bool* flags) {
  if constexpr (sizeof...(Flags) == 4) {
    detail::fused_for_each<C>(args, b, SGDKernel<C, Flags...>{k});
  } else {
    if (flags[sizeof...(Flags)])
      run_sgd<C, Flags..., true>(k, args, b, flags);
    else
      run_sgd<C, Flags..., false>(k, args, b, flags);
  }
}

template <class C>
SGDScalars<C> make_scalars(const SGDOptions& o) {
  // Scalars are rounded to the compute type, as PyTorch's kernels do with Python floats.
  return {static_cast<C>(-o.lr()), static_cast<C>(o.weight_decay()), static_cast<C>(o.momentum()),
          static_cast<C>(1.0 - o.dampening())};
}

}  // namespace

void SGD::update(const OptimizerOptions& base, ParamState& state, const detail::StepArgs& args) {
  const auto& o = static_cast<const SGDOptions&>(base);
  const bool use_momentum = o.momentum() != 0.0;
  bool first = false;
  const detail::StateBuffers b{use_momentum ? state_buffer(state, "momentum_buffer", *args.param, &first).raw_data()
                                            : nullptr};
  const bool flags[4] = {o.weight_decay() != 0.0, use_momentum, first, o.nesterov()};
  if (const auto& fused_step = backend::kernels_for(args.device).fused_sgd_step)
    fused_step(detail::device_step(args, b), make_scalars<float>(o), flags);
  else if (args.weight_dtype == kFloat64)
    run_sgd<double>(make_scalars<double>(o), args, b, flags);
  else
    run_sgd<float>(make_scalars<float>(o), args, b, flags);
}

void SGD::save_options(const OptimizerOptions& base, StateDict& sd, const std::string& prefix) const {
  const auto& o = static_cast<const SGDOptions&>(base);
  detail::put_double(sd, prefix + "lr", o.lr());
  detail::put_double(sd, prefix + "momentum", o.momentum());
  detail::put_double(sd, prefix + "dampening", o.dampening());
  detail::put_double(sd, prefix + "weight_decay", o.weight_decay());
  detail::put_bool(sd, prefix + "nesterov", o.nesterov());
}

std::unique_ptr<OptimizerOptions> SGD::load_options(const StateDict& sd, const std::string& prefix) const {
  auto o = std::make_unique<SGDOptions>(detail::get_double(sd, prefix + "lr"));
  o->momentum(detail::get_double(sd, prefix + "momentum"))
      .dampening(detail::get_double(sd, prefix + "dampening"))
      .weight_decay(detail::get_double(sd, prefix + "weight_decay"))
      .nesterov(detail::get_bool(sd, prefix + "nesterov"));
  return o;
}

}  // namespace tc::optim
