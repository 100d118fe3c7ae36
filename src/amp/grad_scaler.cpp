// Defines tc::amp::GradScaler: the per-optimizer state machine, lazy scale init, the
// unscale/step/update protocol of torch.amp.GradScaler, and its state dict. The numeric
// work (fused unscale + inf check, scale update) is in backend/cpu/loops/amp_kernels.cpp and
// backend/cuda/amp_kernels.cu; the rule itself in scaler_rules.h.
#include "tensorcast/amp/grad_scaler.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "backend/cpu/loops/amp_kernels.h"  // has_non_finite, on the host
#include "backend/kernels.h"
#include "core/async_read.h"
#include "profiler/hooks.h"
#include "tensorcast/autograd.h"
#include "tensorcast/ops.h"

namespace tc::amp {
namespace {

constexpr const char* kOp = kScalerOwner;

Tensor scalar_f32(double v, Device d = Device(kCPU)) { return full({}, v, TensorOptions(kFloat32).device(d)); }
Tensor scalar_i32(int64_t v, Device d) { return full({}, static_cast<double>(v), TensorOptions(kInt32).device(d)); }

// Raises found (0-d float32) if any of grads holds an inf or NaN, and multiplies them by inv
// (0-d float32 on found's device) unless inv is undefined (the read-only check). Gradients
// on found's device are checked there with no host read (one launch per list on CUDA);
// those on another device through a flag of their own, added into found.
void check_and_unscale(const std::vector<Tensor>& grads, const Tensor& found, const Tensor& inv) {
  std::vector<std::pair<Device, std::vector<Tensor>>> by_device;
  for (const Tensor& g : grads) {
    auto it = std::find_if(by_device.begin(), by_device.end(), [&](const auto& e) { return e.first == g.device(); });
    if (it == by_device.end())
      by_device.push_back({g.device(), {g}});
    else
      it->second.push_back(g);
  }
  for (const auto& [device, list] : by_device) {
    const bool here = device == found.device();
    const Tensor flag = here ? found : scalar_f32(0.0, device);
    const Tensor factor = !inv.defined() ? Tensor() : here ? inv : inv.to(device);
    backend::kernels_for(device).amp_non_finite_check_and_unscale_(list, flag, factor);
    if (!here) Tensor(found).copy_(add(found, flag.to(found.device())));
  }
}

// Whether the scale lives in device memory and is updated there, with no host read (the
// device's kernel), rather than read and updated on the host.
bool updates_on_device(Device device) { return static_cast<bool>(backend::kernels_for(device).amp_update_scale_); }

// has_non_finite for a tensor on any device (off the fast path: the overflow report).
bool has_non_finite_anywhere(const Tensor& t) {
  return cpu::has_non_finite(t.device().is_cpu() ? t : t.detach().to(Device(kCPU)));
}

}  // namespace

bool found_nonfinite(const std::vector<Tensor>& tensors) {
  std::vector<Tensor> defined;
  for (const Tensor& t : tensors)
    if (t.defined()) {
      TC_CHECK(is_floating(t.dtype()), "found_nonfinite", "expected floating tensors, got ", dtype_name(t.dtype()));
      defined.push_back(t);
    }
  if (defined.empty()) return false;
  const Tensor found = scalar_f32(0.0);
  check_and_unscale(defined, found, Tensor());
  return found.item_double() != 0.0;
}

int64_t first_nonfinite(const std::vector<Tensor>& tensors) {
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].defined() && is_floating(tensors[i].dtype()) && has_non_finite_anywhere(tensors[i]))
      return static_cast<int64_t>(i);
  return -1;
}

// Flags on their way back from the device: one per step() not yet counted, and the last
// update()'s refusal flag.
struct GradScaler::Pending {
  std::vector<detail::AsyncScalarRead> steps;
  std::optional<detail::AsyncScalarRead> refused;
};

GradScaler::GradScaler(GradScalerOptions options)
    : options_(std::move(options)), init_hysteresis_tracker_(options_.hysteresis()) {
  if (options_.enabled()) check_scaler_settings(options_.init_scale(), rule_of(options_));
}

void GradScaler::lazy_init(Device device) {
  scale_ = scalar_f32(0.0, device);
  inv_scale_ = scalar_f32(0.0, device);
  set_scale(options_.init_scale());
  growth_tracker_ = scalar_i32(init_growth_tracker_, device);
  hysteresis_tracker_ = scalar_i32(init_hysteresis_tracker_, device);
  if (updates_on_device(device)) refused_ = scalar_f32(0.0, device);
}

void GradScaler::set_scale(double scale) {
  const float s = static_cast<float>(scale);
  scale_.fill_(s);
  inv_scale_.fill_(static_cast<float>(1.0 / static_cast<double>(s)));  // PyTorch: scale.double().reciprocal().float()
}

GradScaler::Pending& GradScaler::pending() {
  if (!pending_) pending_ = std::make_shared<Pending>();
  return *pending_;
}

void GradScaler::count_steps(bool wait) const {
  if (!pending_) return;
  auto& steps = pending_->steps;
  size_t done = 0;
  for (; done < steps.size() && (wait || steps[done].ready()); ++done) {
    last_step_ = {};
    if (steps[done].value() != 0.0f) {
      ++steps_skipped_;
      last_step_.skipped = true;
    } else {
      ++steps_taken_;
    }
  }
  steps.erase(steps.begin(), steps.begin() + static_cast<std::ptrdiff_t>(done));
}

void GradScaler::raise_refused(bool wait) {
  if (!pending_ || !pending_->refused || !(wait || pending_->refused->ready())) return;
  const bool refused = pending_->refused->value() != 0.0f;
  pending_->refused.reset();
  // The refused update changed nothing, so scale_ is the scale it started from.
  if (refused) fail_below_min_scale(static_cast<float>(scale_.item_double()), rule_of(options_));
}

int64_t GradScaler::steps_taken() const {
  count_steps(/*wait=*/true);
  return steps_taken_;
}

int64_t GradScaler::steps_skipped() const {
  count_steps(/*wait=*/true);
  return steps_skipped_;
}

const StepReport& GradScaler::last_step() const {
  count_steps(/*wait=*/true);
  return last_step_;
}

Tensor GradScaler::scale(const Tensor& output) {
  if (!is_enabled()) return output;
  TC_CHECK(output.defined(), kOp, "scale() got an undefined tensor");
  if (!scale_.defined()) lazy_init(output.device());
  return mul(output, output.device() == scale_.device() ? scale_ : scale_.to(output.device()));
}

std::vector<Tensor> GradScaler::scale(const std::vector<Tensor>& outputs) {
  if (!is_enabled()) return outputs;
  std::vector<Tensor> out;
  out.reserve(outputs.size());
  for (const Tensor& t : outputs) out.push_back(scale(t));
  return out;
}

std::vector<Tensor> GradScaler::collect_grads(optim::Optimizer& optimizer, bool allow_fp16) const {
  std::vector<Tensor> grads;
  for (const auto& group : optimizer.param_groups())
    for (const Tensor& p : group.params) {
      const Tensor& g = p.grad();
      if (!g.defined()) continue;
      TC_CHECK(allow_fp16 || g.dtype() != kFloat16, kOp, "Attempting to unscale FP16 gradients.");
      grads.push_back(g);
    }
  return grads;
}

void GradScaler::unscale_(optim::Optimizer& optimizer) {
  profiler::detail::Scope rec("GradScaler.unscale_");
  if (!is_enabled()) return;
  check_scale_initialized(scale_.defined(), "unscale_");
  auto& st = per_optimizer_.for_unscale(&optimizer);

  // fp16 gradients are refused unless the optimizer expects 16-bit gradients: fp32 master
  // weights receive them, or a pure 16-bit update reads them as float (PyTorch refuses them
  // for its fp32-parameter optimizers).
  std::vector<Tensor> grads = collect_grads(optimizer, optimizer.reads_16bit_grads());
  const bool any = !grads.empty();
  Tensor found = scalar_f32(0.0, scale_.device());
  // One fused pass per dtype, as PyTorch groups by (device, dtype).
  std::vector<std::pair<DType, std::vector<Tensor>>> by_dtype;
  for (Tensor& g : grads) {
    auto it = std::find_if(by_dtype.begin(), by_dtype.end(), [&](const auto& e) { return e.first == g.dtype(); });
    if (it == by_dtype.end())
      by_dtype.push_back({g.dtype(), {std::move(g)}});
    else
      it->second.push_back(std::move(g));
  }
  for (const auto& [dt, list] : by_dtype) check_and_unscale(list, found, inv_scale_);
  if (reduce_found_inf_) reduce_found_inf_(found);  // every rank, even one without gradients
  // PyTorch records no check for an optimizer without gradients; step() then refuses.
  st.recorded = any;
  st.found_inf = any ? found : Tensor();
  st.stage = OptState::Unscaled;
}

bool GradScaler::step(optim::Optimizer& optimizer) {
  if (!is_enabled()) {
    optimizer.step();
    ++steps_taken_;
    last_step_ = {};
    return true;
  }
  check_scale_initialized(scale_.defined(), "step");
  // Earlier steps' flags that have arrived (on CUDA while later work is queued: nothing
  // waits here, so a second optimizer's step() does not wait for the first one's), and the
  // last update()'s refusal once known.
  count_steps(/*wait=*/false);
  raise_refused(/*wait=*/false);
  auto& st = per_optimizer_.for_step(&optimizer);

  const bool fused = st.stage == OptState::Ready;
  if (fused) {
    // Read-only check now; the optimizer multiplies by inv_scale as it reads each
    // gradient, so gradients are read twice (check, update) and never rewritten.
    // fp16 gradients are fine here, as in PyTorch's fused path.
    std::vector<Tensor> grads = collect_grads(optimizer, /*allow_fp16=*/true);
    if (!grads.empty()) {
      st.found_inf = scalar_f32(0.0, scale_.device());
      st.recorded = true;
      check_and_unscale(grads, st.found_inf, Tensor());
      if (reduce_found_inf_) reduce_found_inf_(st.found_inf);
    }
  }
  per_optimizer_.check_recorded(st);
  st.stage = OptState::Stepped;
  // The optimizer reads found_inf where it lies and changes nothing when it is set.
  optimizer.step(optim::AmpStep{fused ? inv_scale_ : Tensor(), st.found_inf});
  last_step_ = {};
  if (updates_on_device(scale_.device())) {
    pending().steps.emplace_back(st.found_inf);
    return true;
  }
  if (*st.found_inf.data_ptr<float>() != 0.0f) {
    ++steps_skipped_;
    last_step_.skipped = true;
    report_overflow(optimizer);
    return false;
  }
  ++steps_taken_;
  return true;
}

void GradScaler::report_overflow(const optim::Optimizer& optimizer) {
  // After an explicit unscale_ the gradients are already multiplied by inv_scale, which
  // keeps inf as inf and NaN as NaN, so the search finds the same tensor.
  const auto& groups = optimizer.param_groups();
  for (size_t gi = 0; gi < groups.size(); ++gi)
    for (size_t pi = 0; pi < groups[gi].params.size(); ++pi) {
      const Tensor& g = groups[gi].params[pi].grad();
      if (!g.defined() || !has_non_finite_anywhere(g)) continue;
      last_step_.group = static_cast<int64_t>(gi);
      last_step_.param = static_cast<int64_t>(pi);
      last_step_.first_nonfinite =
          detail::concat("group ", gi, " param ", pi, " (shape ", shape_str(groups[gi].params[pi].sizes()), ")");
      return;
    }
  if (reduce_found_inf_) last_step_.first_nonfinite = "a gradient on another rank (this rank's are finite)";
}

void GradScaler::update() {
  profiler::detail::Scope rec("GradScaler.update");
  if (!is_enabled()) return;
  check_scale_initialized(scale_.defined(), "update");
  raise_refused(/*wait=*/true);  // the previous update's, before this one replaces it (one iteration old)
  if (updates_on_device(scale_.device())) {
    // PyTorch adds the found_inf flags up; any nonzero sum is an overflow.
    Tensor total;
    per_optimizer_.for_each_found_inf([&](const Tensor& f) {
      const Tensor here = f.device() == scale_.device() ? f : f.to(scale_.device());
      total = total.defined() ? add(total, here) : here;
    });
    backend::kernels_for(scale_.device())
        .amp_update_scale_(scale_, growth_tracker_, hysteresis_tracker_, inv_scale_, total, refused_,
                           rule_of(options_));
    pending().refused.emplace(refused_);
  } else {
    float found = 0.0f;
    per_optimizer_.for_each_found_inf([&](const Tensor& f) { found += *f.data_ptr<float>(); });
    float& scale = *scale_.data_ptr<float>();
    update_scale(scale, *growth_tracker_.data_ptr<int32_t>(), *hysteresis_tracker_.data_ptr<int32_t>(), found != 0.0f,
                 rule_of(options_));
    set_scale(scale);
  }
  per_optimizer_.clear();
}

void GradScaler::update(double new_scale) {
  if (!is_enabled()) return;
  check_scale_initialized(scale_.defined(), "update");
  if (pending_) pending_->refused.reset();  // the new scale replaces whatever was refused
  set_scale(new_scale);
  per_optimizer_.clear();
}

double GradScaler::get_scale() const {
  if (!is_enabled()) return 1.0;
  return scale_.defined() ? scale_.item_double() : options_.init_scale();
}

int64_t GradScaler::get_growth_tracker() const {
  if (!is_enabled()) return 0;
  return growth_tracker_.defined() ? growth_tracker_.item<int64_t>() : init_growth_tracker_;
}

int64_t GradScaler::get_hysteresis_tracker() const {
  if (!is_enabled()) return options_.hysteresis();
  return hysteresis_tracker_.defined() ? hysteresis_tracker_.item<int64_t>() : init_hysteresis_tracker_;
}

ScalerState GradScaler::state() const {
  return {get_scale(), rule_of(options_), get_growth_tracker(), get_hysteresis_tracker(), steps_taken_, steps_skipped_};
}

StateDict GradScaler::state_dict() const {
  if (!is_enabled()) return {};
  count_steps(/*wait=*/true);
  StateDict sd;
  write_scaler_state(
      state(), [&](const char* key, double v) { sd[key] = state_scalar(v); },
      [&](const char* key, int64_t v) { sd[key] = state_int(v); });
  return sd;
}

namespace {

// read_scaler_state's view of a StateDict: entries are checked by read_state_double/int.
struct StateDictReader {
  const StateDict& sd;
  bool empty() const { return sd.empty(); }
  bool has(const char* key) const {
    auto it = sd.find(key);
    return it != sd.end() && it->second.defined();
  }
  double real(const char* key, double lo, double hi) const { return read_state_double(sd, key, kOp, lo, hi); }
  int64_t integer(const char* key, int64_t lo, int64_t hi) const { return read_state_int(sd, key, kOp, lo, hi); }
};

}  // namespace

void GradScaler::load_state_dict(const StateDict& sd) {
  if (!is_enabled()) return;
  pending_.reset();  // the loaded counts replace those of earlier steps
  StateDictReader reader{sd};
  const ScalerState st = read_scaler_state(reader, state());
  const ScaleRule& r = st.rule;
  options_.init_scale(st.scale).growth_factor(r.growth_factor).backoff_factor(r.backoff_factor);
  options_.growth_interval(r.growth_interval).hysteresis(r.hysteresis);
  options_.min_scale(r.min_scale).max_scale(r.max_scale).clamp_min_scale(r.clamp_min_scale);
  init_growth_tracker_ = st.growth_tracker;
  init_hysteresis_tracker_ = st.hysteresis_tracker;
  steps_taken_ = st.steps_taken;
  steps_skipped_ = st.steps_skipped;
  if (scale_.defined()) {
    set_scale(st.scale);
    growth_tracker_.fill_(static_cast<double>(st.growth_tracker));
    hysteresis_tracker_.fill_(static_cast<double>(st.hysteresis_tracker));
  }
}

}  // namespace tc::amp
