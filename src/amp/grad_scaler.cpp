// Defines tc::amp::GradScaler: the per-optimizer state machine, lazy scale init, the
// unscale/step/update protocol of torch.amp.GradScaler, and its state dict. The numeric
// work (fused unscale + inf check, scale update) is in backend/cpu/amp_kernels.cpp.
#include "tensorcast/amp/grad_scaler.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "backend/cpu/amp_kernels.h"
#include "backend/cuda/amp_kernels.h"
#include "profiler/hooks.h"
#include "tensorcast/autograd.h"
#include "tensorcast/ops.h"

namespace tc::amp {
namespace {

constexpr const char* kOp = kScalerOwner;

Tensor scalar_f32(double v) { return full({}, v, kFloat32); }
Tensor scalar_i32(int64_t v) { return full({}, static_cast<double>(v), kInt32); }

// Raises found (a CPU 0-d float32) if any of grads holds an inf or NaN, and multiplies them
// by inv (a CPU 0-d float32) unless inv is undefined (the read-only check). The scaler's
// state stays on the host. CUDA gradients go through the device kernel per device, into a
// device flag read back once (the step's one sync; the kernel writes nothing for inv 1).
void check_and_unscale(const std::vector<Tensor>& grads, const Tensor& found, const Tensor& inv) {
  std::vector<Tensor> on_cpu;
  std::vector<std::pair<Device, std::vector<Tensor>>> on_cuda;
  for (const Tensor& g : grads) {
    if (g.device().is_cpu()) {
      on_cpu.push_back(g);
      continue;
    }
    auto it = std::find_if(on_cuda.begin(), on_cuda.end(), [&](const auto& e) { return e.first == g.device(); });
    if (it == on_cuda.end())
      on_cuda.push_back({g.device(), {g}});
    else
      it->second.push_back(g);
  }
  if (!on_cpu.empty()) {
    if (inv.defined())
      cpu::amp_non_finite_check_and_unscale_(on_cpu, found, inv);
    else
      cpu::amp_non_finite_check(on_cpu, found);
  }
  for (const auto& [device, list] : on_cuda) {
    const Tensor flag = zeros({}, TensorOptions(kFloat32).device(device));
    gpu::amp_non_finite_check_and_unscale_(
        list, flag, full({}, inv.defined() ? inv.item_double() : 1.0, TensorOptions(kFloat32).device(device)));
    if (flag.item_double() != 0.0) *found.data_ptr<float>() = 1.0f;
  }
}

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

GradScaler::GradScaler(GradScalerOptions options)
    : options_(std::move(options)), init_hysteresis_tracker_(options_.hysteresis()) {
  if (options_.enabled()) check_scaler_settings(options_.init_scale(), rule_of(options_));
}

void GradScaler::lazy_init() {
  scale_ = scalar_f32(options_.init_scale());
  growth_tracker_ = scalar_i32(init_growth_tracker_);
  hysteresis_tracker_ = scalar_i32(init_hysteresis_tracker_);
}

Tensor GradScaler::scale(const Tensor& output) {
  if (!is_enabled()) return output;
  TC_CHECK(output.defined(), kOp, "scale() got an undefined tensor");
  if (!scale_.defined()) lazy_init();
  return mul(output, output.device().is_cpu() ? scale_ : scale_.to(output.device()));
}

std::vector<Tensor> GradScaler::scale(const std::vector<Tensor>& outputs) {
  if (!is_enabled()) return outputs;
  std::vector<Tensor> out;
  out.reserve(outputs.size());
  for (const Tensor& t : outputs) out.push_back(scale(t));
  return out;
}

Tensor GradScaler::inv_scale() const {
  // PyTorch: self._scale.double().reciprocal().float()
  return scalar_f32(static_cast<float>(1.0 / static_cast<double>(*scale_.data_ptr<float>())));
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
  const Tensor inv = inv_scale();
  Tensor found = scalar_f32(0.0);
  // One fused pass per dtype, as PyTorch groups by (device, dtype).
  std::vector<std::pair<DType, std::vector<Tensor>>> by_dtype;
  for (Tensor& g : grads) {
    auto it = std::find_if(by_dtype.begin(), by_dtype.end(), [&](const auto& e) { return e.first == g.dtype(); });
    if (it == by_dtype.end())
      by_dtype.push_back({g.dtype(), {std::move(g)}});
    else
      it->second.push_back(std::move(g));
  }
  for (const auto& [dt, list] : by_dtype) check_and_unscale(list, found, inv);
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
  auto& st = per_optimizer_.for_step(&optimizer);

  const bool fused = st.stage == OptState::Ready;
  Tensor inv;
  if (fused) {
    // Read-only check now; the optimizer multiplies by inv_scale as it reads each
    // gradient, so gradients are read twice (check, update) and never rewritten.
    // fp16 gradients are fine here, as in PyTorch's fused path.
    std::vector<Tensor> grads = collect_grads(optimizer, /*allow_fp16=*/true);
    if (!grads.empty()) {
      st.found_inf = scalar_f32(0.0);
      st.recorded = true;
      check_and_unscale(grads, st.found_inf, Tensor());
      if (reduce_found_inf_) reduce_found_inf_(st.found_inf);
    }
    inv = inv_scale();
  }
  per_optimizer_.check_recorded(st);

  const bool overflow = *st.found_inf.data_ptr<float>() != 0.0f;  // the host read of the step
  st.stage = OptState::Stepped;
  last_step_ = {};
  if (overflow) {
    // The optimizer is not called at all, so nothing of its state can change.
    ++steps_skipped_;
    last_step_.skipped = true;
    report_overflow(optimizer);
    return false;
  }
  if (fused)
    optimizer.step(optim::AmpStep{inv, st.found_inf});
  else
    optimizer.step();
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
  // PyTorch adds the found_inf flags up; any nonzero sum is an overflow.
  float found = 0.0f;
  per_optimizer_.for_each_found_inf([&](const Tensor& f) { found += *f.data_ptr<float>(); });
  update_scale(*scale_.data_ptr<float>(), *growth_tracker_.data_ptr<int32_t>(),
               *hysteresis_tracker_.data_ptr<int32_t>(), found != 0.0f, rule_of(options_));
  per_optimizer_.clear();
}

void GradScaler::update(double new_scale) {
  if (!is_enabled()) return;
  check_scale_initialized(scale_.defined(), "update");
  scale_.fill_(new_scale);
  per_optimizer_.clear();
}

double GradScaler::get_scale() const {
  if (!is_enabled()) return 1.0;
  return scale_.defined() ? scale_.item_double() : options_.init_scale();
}

int64_t GradScaler::get_growth_tracker() const {
  if (!is_enabled()) return 0;
  return growth_tracker_.defined() ? *growth_tracker_.data_ptr<int32_t>() : init_growth_tracker_;
}

int64_t GradScaler::get_hysteresis_tracker() const {
  if (!is_enabled()) return options_.hysteresis();
  return hysteresis_tracker_.defined() ? *hysteresis_tracker_.data_ptr<int32_t>() : init_hysteresis_tracker_;
}

ScalerState GradScaler::state() const {
  return {get_scale(), rule_of(options_), get_growth_tracker(), get_hysteresis_tracker(), steps_taken_, steps_skipped_};
}

StateDict GradScaler::state_dict() const {
  if (!is_enabled()) return {};
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
    scale_.fill_(st.scale);
    growth_tracker_.fill_(static_cast<double>(st.growth_tracker));
    hysteresis_tracker_.fill_(static_cast<double>(st.hysteresis_tracker));
  }
}

}  // namespace tc::amp
