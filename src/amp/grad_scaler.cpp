// Defines tc::amp::GradScaler: the per-optimizer state machine, lazy scale init, the
// unscale/step/update protocol of torch.amp.GradScaler, and its state dict. The numeric
// work (fused unscale + inf check, scale update) is in backend/cpu/amp_kernels.cpp.
#include "tensorcast/amp/grad_scaler.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "backend/cpu/amp_kernels.h"
#include "profiler/hooks.h"
#include "tensorcast/autograd.h"
#include "tensorcast/ops.h"

namespace tc::amp {
namespace {

constexpr const char* kOp = "GradScaler";

Tensor scalar_f32(double v) { return full({}, v, kFloat32); }
Tensor scalar_i32(int64_t v) { return full({}, static_cast<double>(v), kInt32); }

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
  cpu::amp_non_finite_check(defined, found);
  return found.item_double() != 0.0;
}

int64_t first_nonfinite(const std::vector<Tensor>& tensors) {
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].defined() && is_floating(tensors[i].dtype()) && cpu::has_non_finite(tensors[i]))
      return static_cast<int64_t>(i);
  return -1;
}

GradScaler::GradScaler(GradScalerOptions options)
    : options_(std::move(options)), init_hysteresis_tracker_(options_.hysteresis()) {
  if (!options_.enabled()) return;
  const auto& o = options_;
  // PyTorch asserts the first two; the rest guard the extensions.
  TC_CHECK(o.growth_factor() > 1.0, kOp, "The growth factor must be > 1.0. (got ", o.growth_factor(), ")");
  TC_CHECK(o.backoff_factor() < 1.0, kOp, "The backoff factor must be < 1.0. (got ", o.backoff_factor(), ")");
  TC_CHECK(o.backoff_factor() > 0.0, kOp, "The backoff factor must be > 0.0 (got ", o.backoff_factor(), ")");
  TC_CHECK(o.growth_interval() >= 1 && o.growth_interval() <= INT32_MAX, kOp,
           "growth_interval must be in [1, 2^31), got ", o.growth_interval());
  TC_CHECK(o.hysteresis() >= 1 && o.hysteresis() <= INT32_MAX, kOp, "hysteresis must be >= 1, got ", o.hysteresis());
  TC_CHECK(std::isfinite(o.init_scale()) && o.init_scale() > 0.0, kOp, "init_scale must be finite and positive, got ",
           o.init_scale());
  TC_CHECK(o.min_scale() >= 0.0 && o.max_scale() >= 0.0, kOp, "min_scale and max_scale must be >= 0 (0: no bound)");
  TC_CHECK(o.max_scale() == 0.0 || o.max_scale() >= o.min_scale(), kOp, "max_scale ", o.max_scale(),
           " is below min_scale ", o.min_scale());
}

void GradScaler::lazy_init() {
  scale_ = scalar_f32(options_.init_scale());
  growth_tracker_ = scalar_i32(init_growth_tracker_);
  hysteresis_tracker_ = scalar_i32(init_hysteresis_tracker_);
}

void GradScaler::check_initialized(const char* fn) const {
  TC_CHECK(scale_.defined(), kOp, "Attempted ", fn,
           " but _scale is None (scale() was never called).  This may indicate your script did not use "
           "scaler.scale(loss or outputs) earlier in the iteration.");
}

Tensor GradScaler::scale(const Tensor& output) {
  if (!is_enabled()) return output;
  TC_CHECK(output.defined(), kOp, "scale() got an undefined tensor");
  if (!scale_.defined()) lazy_init();
  return mul(output, scale_);
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
  check_initialized("unscale_()");
  PerOptimizer& st = per_optimizer_[&optimizer];
  TC_CHECK(st.stage != Stage::Unscaled, kOp,
           "unscale_() has already been called on this optimizer since the last update().");
  TC_CHECK(st.stage != Stage::Stepped, kOp, "unscale_() is being called after step().");

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
  for (const auto& [dt, list] : by_dtype) cpu::amp_non_finite_check_and_unscale_(list, found, inv);
  if (reduce_found_inf_) reduce_found_inf_(found);  // every rank, even one without gradients
  // PyTorch records no check for an optimizer without gradients; step() then refuses.
  st.found_inf = any ? found : Tensor();
  st.stage = Stage::Unscaled;
}

bool GradScaler::step(optim::Optimizer& optimizer) {
  if (!is_enabled()) {
    optimizer.step();
    ++steps_taken_;
    last_step_ = {};
    return true;
  }
  check_initialized("step()");
  PerOptimizer& st = per_optimizer_[&optimizer];
  TC_CHECK(st.stage != Stage::Stepped, kOp, "step() has already been called since the last update().");

  const bool fused = st.stage == Stage::Ready;
  Tensor inv;
  if (fused) {
    // Read-only check now; the optimizer multiplies by inv_scale as it reads each
    // gradient, so gradients are read twice (check, update) and never rewritten.
    // fp16 gradients are fine here, as in PyTorch's fused path.
    std::vector<Tensor> grads = collect_grads(optimizer, /*allow_fp16=*/true);
    if (!grads.empty()) {
      st.found_inf = scalar_f32(0.0);
      cpu::amp_non_finite_check(grads, st.found_inf);
      if (reduce_found_inf_) reduce_found_inf_(st.found_inf);
    }
    inv = inv_scale();
  }
  TC_CHECK(st.found_inf.defined(), kOp, "No inf checks were recorded for this optimizer.");

  const bool overflow = *st.found_inf.data_ptr<float>() != 0.0f;  // the host read of the step
  st.stage = Stage::Stepped;
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
      if (!g.defined() || !cpu::has_non_finite(g)) continue;
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
  check_initialized("update()");
  std::vector<Tensor> found;
  for (const auto& [opt, st] : per_optimizer_)
    if (st.found_inf.defined()) found.push_back(st.found_inf);
  TC_CHECK(!found.empty(), kOp, "No inf checks were recorded prior to update().");
  const auto& o = options_;
  cpu::amp_update_scale_(scale_, growth_tracker_, hysteresis_tracker_, found,
                         {o.growth_factor(), o.backoff_factor(), o.growth_interval(), o.hysteresis(), o.min_scale(),
                          o.clamp_min_scale(), o.max_scale()});
  per_optimizer_.clear();
}

void GradScaler::update(double new_scale) {
  if (!is_enabled()) return;
  check_initialized("update()");
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

StateDict GradScaler::state_dict() const {
  if (!is_enabled()) return {};
  const auto& o = options_;
  return {
      {"scale", state_scalar(get_scale())},
      {"growth_factor", state_scalar(o.growth_factor())},
      {"backoff_factor", state_scalar(o.backoff_factor())},
      {"growth_interval", state_int(o.growth_interval())},
      {"_growth_tracker", state_int(get_growth_tracker())},
      {"hysteresis", state_int(o.hysteresis())},
      {"_hysteresis_tracker", state_int(get_hysteresis_tracker())},
      {"min_scale", state_scalar(o.min_scale())},
      {"max_scale", state_scalar(o.max_scale())},
      {"clamp_min_scale", state_int(o.clamp_min_scale() ? 1 : 0)},
      {"steps_taken", state_int(steps_taken_)},
      {"steps_skipped", state_int(steps_skipped_)},
  };
}

void GradScaler::load_state_dict(const StateDict& sd) {
  if (!is_enabled()) return;
  TC_CHECK(!sd.empty(), kOp,
           "The source state dict is empty, possibly because it was saved from a disabled instance of GradScaler.");
  // Every value is checked (finite, in range, integral where a counter) before it is
  // converted or used: a dict read from a file may hold anything.
  constexpr double kMax = std::numeric_limits<double>::max();
  constexpr int64_t kMaxCount = std::numeric_limits<int64_t>::max();
  auto has = [&](const char* key) {
    auto it = sd.find(key);
    return it != sd.end() && it->second.defined();
  };
  auto opt_num = [&](const char* key, double fallback, double lo, double hi) {
    return has(key) ? read_state_double(sd, key, kOp, lo, hi) : fallback;
  };
  auto opt_int = [&](const char* key, int64_t fallback, int64_t lo, int64_t hi) {
    return has(key) ? read_state_int(sd, key, kOp, lo, hi) : fallback;
  };
  // Read everything before changing anything, so a bad dict leaves the scaler intact.
  const double scale = read_state_double(sd, "scale", kOp, std::numeric_limits<double>::min(), kMax);
  const double growth = read_state_double(sd, "growth_factor", kOp, 1.0, kMax);
  const double backoff = read_state_double(sd, "backoff_factor", kOp, 0.0, 1.0);
  // The trackers live in int32 tensors.
  const int64_t interval = read_state_int(sd, "growth_interval", kOp, 1, INT32_MAX);
  const int64_t tracker = read_state_int(sd, "_growth_tracker", kOp, 0, INT32_MAX);
  // A PyTorch dict has no hysteresis: it means 1, PyTorch's rule.
  const int64_t hyst = opt_int("hysteresis", 1, 1, INT32_MAX);
  const int64_t hyst_tracker = opt_int("_hysteresis_tracker", hyst, 0, INT32_MAX);
  const double min_scale = opt_num("min_scale", options_.min_scale(), 0.0, kMax);
  const double max_scale = opt_num("max_scale", options_.max_scale(), 0.0, kMax);
  const bool clamp = opt_num("clamp_min_scale", options_.clamp_min_scale() ? 1.0 : 0.0, -kMax, kMax) != 0.0;
  const int64_t taken = opt_int("steps_taken", steps_taken_, 0, kMaxCount);
  const int64_t skipped = opt_int("steps_skipped", steps_skipped_, 0, kMaxCount);
  TC_CHECK(growth > 1.0 && backoff > 0.0 && backoff < 1.0, kOp, "state dict holds invalid settings (growth_factor ",
           growth, ", backoff_factor ", backoff, ", growth_interval ", interval, ", hysteresis ", hyst, ")");
  TC_CHECK(max_scale == 0.0 || min_scale <= max_scale, kOp, "state dict holds min_scale ", min_scale,
           " above max_scale ", max_scale);

  options_.init_scale(scale).growth_factor(growth).backoff_factor(backoff).growth_interval(interval);
  options_.hysteresis(hyst).min_scale(min_scale).max_scale(max_scale).clamp_min_scale(clamp);
  init_growth_tracker_ = tracker;
  init_hysteresis_tracker_ = hyst_tracker;
  steps_taken_ = taken;
  steps_skipped_ = skipped;
  if (scale_.defined()) {
    scale_.fill_(scale);
    growth_tracker_.fill_(static_cast<double>(tracker));
    hysteresis_tracker_.fill_(static_cast<double>(hyst_tracker));
  }
}

}  // namespace tc::amp
