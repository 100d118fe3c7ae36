/// \file
/// tensorcast for libtorch users: torch.amp's GradScaler and autocast context manager in C++
/// (libtensorcast_torch, CMake target tensorcast::torch; docs/libtorch.md).
///
/// \code{.cpp}
///   tc::torch_amp::GradScaler scaler("cpu");           // Python: torch.amp.GradScaler("cpu")
///   for (auto& batch : loader) {
///     opt.zero_grad();
///     torch::Tensor loss;
///     {
///       tc::torch_amp::AutocastGuard autocast(torch::kCPU, torch::kFloat16);  // with torch.autocast(...)
///       loss = torch::nll_loss(model->forward(batch.data), batch.target);
///     }
///     scaler.scale(loss).backward();
///     scaler.step(opt);                                 // skipped when a gradient is inf/NaN
///     scaler.update();
///   }
/// \endcode
///
/// The scaler follows torch.amp.GradScaler line by line: the scale (0-d float32) and growth
/// tracker (0-d int32) live on the gradients' device, created by the first scale();
/// unscale_ runs ATen's _amp_foreach_non_finite_check_and_unscale_ once per (device, dtype)
/// group; step() reads found_inf on the host once; update() runs ATen's _amp_update_scale_ on
/// the device. Each optimizer moves READY -> UNSCALED -> STEPPED -> READY, and calls out of
/// order raise PyTorch's messages. Its state dict is Python's (save/load interchange with
/// `torch.save(scaler.state_dict())`). The rules are tensorcast's own (scaler_rules.h, shared
/// with tc::amp::GradScaler), so it also offers tensorcast's extras: hysteresis, scale bounds,
/// steps taken/skipped and the name of the first parameter with a non-finite gradient.
#pragma once
#include <ATen/core/ivalue.h>
#include <torch/optim/optimizer.h>
#include <torch/ordered_dict.h>
#include <torch/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tensorcast/amp/scaler_rules.h"

namespace tc::torch_amp {

/// The settings (torch.amp.GradScaler's, then hysteresis, min/max scale) and the report of
/// the last step() are tc::amp::GradScaler's. With the extensions at their defaults update()
/// is exactly PyTorch's (on the device, no host read); otherwise it reads the iteration's
/// found_inf on the host once (step() has already synchronized on it) and applies
/// tensorcast's rule. first_nonfinite names the parameter by its name when
/// set_parameter_names() gave one: "fc1.weight (shape [128, 784])".
using amp::GradScalerOptions;
using amp::StepReport;

/// A state dict as Python's: str keys, float/int values (libtorch's untyped dict, what
/// torch::pickle_load returns for a Python dict).
using StateDict = c10::impl::GenericDict;

/// PyTorch's torch.amp.GradScaler for libtorch: the same semantics, state dict and messages, plus tensorcast's
/// extras (hysteresis, bounds, overflow report).
class GradScaler {
 public:
  /// device: "cuda" (PyTorch's default), "cpu", or any device type with autocast support. A
  /// "cuda" scaler without CUDA warns and disables itself, as PyTorch's does.
  explicit GradScaler(const std::string& device = "cuda", GradScalerOptions options = {});

  /// outputs * scale. Disabled: the outputs unchanged.
  torch::Tensor scale(const torch::Tensor& outputs);
  /// Each output times the scale.
  std::vector<torch::Tensor> scale(const std::vector<torch::Tensor>& outputs);
  /// Divides the optimizer's gradients by the scale in place (e.g. before clipping).
  void unscale_(torch::optim::Optimizer& optimizer);
  /// optimizer.step() unless a gradient is inf/NaN (unscaling first if unscale_ was not
  /// called); true when it stepped.
  bool step(torch::optim::Optimizer& optimizer);
  /// Grows or backs off the scale from this iteration's inf checks ...
  void update();
  /// ... or sets it (the trackers stay as they are, as in PyTorch).
  void update(double new_scale);
  void update(const torch::Tensor& new_scale);  ///< 1 element, on the scaler's device, no grad

  double get_scale() const;  ///< one host read; init_scale before the first scale(), 1 when disabled
  /// Clean steps since the last growth or backoff (a host read).
  int64_t get_growth_tracker() const;
  /// Overflows left before a backoff (hysteresis).
  int64_t get_hysteresis_tracker() const;
  /// The scale multiplier after growth_interval clean steps.
  double get_growth_factor() const { return rule_.growth_factor; }
  /// Sets the growth factor (> 1).
  void set_growth_factor(double v);
  /// The scale multiplier on an overflow.
  double get_backoff_factor() const { return rule_.backoff_factor; }
  /// Sets the backoff factor (in (0, 1)).
  void set_backoff_factor(double v);
  /// Clean steps between growths.
  int64_t get_growth_interval() const { return rule_.growth_interval; }
  /// Sets the growth interval (>= 1).
  void set_growth_interval(int64_t v);
  /// False for a disabled scaler (scale and step pass through).
  bool is_enabled() const { return enabled_; }
  /// The device type it scales for ("cuda", "cpu", ...).
  const std::string& device() const { return device_; }
  /// Steps taken since construction (or the loaded state).
  int64_t steps_taken() const { return steps_taken_; }
  /// Steps skipped for an inf/NaN gradient.
  int64_t steps_skipped() const { return steps_skipped_; }
  /// What the last step() did, with the first non-finite gradient when it skipped.
  const StepReport& last_step() const { return last_step_; }
  /// Names for the overflow report, e.g. set_parameter_names(model->named_parameters()).
  void set_parameter_names(const torch::OrderedDict<std::string, torch::Tensor>& named_parameters);

  /// Python's dict first ("scale", "growth_factor", "backoff_factor", "growth_interval",
  /// "_growth_tracker"), then tensorcast's extras ("hysteresis", "_hysteresis_tracker",
  /// "min_scale", "max_scale", "clamp_min_scale", "steps_taken", "steps_skipped"), which
  /// Python's load_state_dict ignores. Empty when disabled. load_state_dict accepts Python's
  /// five keys alone; every value is checked before anything changes.
  StateDict state_dict() const;
  /// Restores a state_dict() (or Python's; see state_dict()).
  void load_state_dict(const StateDict& state);
  /// The state dict in torch.save's format: Python reads it with torch.load(path) and writes
  /// one for load() with torch.save(scaler.state_dict(), path). save() writes a temporary
  /// file and renames it, so a crash leaves the previous file whole.
  void save(const std::string& path) const;
  /// Restores a file written by save() or by Python's torch.save(scaler.state_dict(), path).
  void load(const std::string& path);

 private:
  /// found_inf per device (0-d float32, nonzero when a gradient was not finite).
  using FoundInf = std::vector<torch::Tensor>;

  void lazy_init(const torch::Device& device);
  FoundInf unscale_grads(torch::optim::Optimizer& optimizer, const torch::Tensor& inv_scale,
                         const torch::Tensor& found_inf, bool allow_fp16) const;
  void report_overflow(const torch::optim::Optimizer& optimizer);
  amp::ScalerState state() const;

  std::string device_;
  bool enabled_;
  double init_scale_;
  amp::ScaleRule rule_;
  torch::Tensor scale_;           ///< 0-d float32 on the device, created by the first scale()
  torch::Tensor growth_tracker_;  ///< 0-d int32
  int64_t init_growth_tracker_ = 0;
  int32_t hysteresis_tracker_;  ///< host: only the extras' rule (which reads on the host) uses it
  amp::OptimizerStates<FoundInf> per_optimizer_;
  int64_t steps_taken_ = 0;
  int64_t steps_skipped_ = 0;
  StepReport last_step_;
  std::unordered_map<const c10::TensorImpl*, std::string> names_;
};

/// torch.autocast(device_type, dtype, enabled, cache_enabled) as an RAII guard: the
/// constructor is Python's __enter__ (saves the thread's autocast state for the device, sets
/// it, counts the nesting), the destructor its __exit__ (the outermost guard clears the
/// cast cache; the saved state comes back), also when an exception unwinds. Autocast state
/// is per thread in ATen, so a guard affects only the thread that holds it. An unsupported
/// dtype warns and disables autocast, as Python's does.
class AutocastGuard {
 public:
  /// Enables (or disables) autocast for device_type in this scope, with dtype (default the device type's autocast
  /// dtype) and the cast cache setting; the previous state returns at destruction.
  AutocastGuard(c10::DeviceType device_type, std::optional<c10::ScalarType> dtype = std::nullopt, bool enabled = true,
                std::optional<bool> cache_enabled = std::nullopt);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  c10::DeviceType device_;
  bool prev_enabled_;
  c10::ScalarType prev_dtype_;
  bool prev_cache_enabled_;
};

}  // namespace tc::torch_amp
