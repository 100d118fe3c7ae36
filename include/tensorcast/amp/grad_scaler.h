/// \file
/// tc::amp::GradScaler: dynamic loss scaling with torch.amp.GradScaler's semantics, plus
/// hysteresis (Megatron-LM), scale bounds (DeepSpeed) and a report of skipped steps.
///
/// \code{.cpp}
///   tc::amp::GradScaler scaler;               // init_scale 65536, growth 2, backoff 0.5, interval 2000
///   scaler.scale(loss).backward();
///   scaler.unscale_(opt);                     // optional: to clip gradients
///   bool stepped = scaler.step(opt);          // skipped (false) when a gradient is inf/NaN
///   scaler.update();
/// \endcode
///
/// The scale (0-d float32), the trackers (0-d int32) and the inverse scale live on the device
/// of the first scale()'s output. unscale_ makes one fused pass per gradient dtype that
/// multiplies by the inverse scale and records found-inf; without an explicit unscale_,
/// step() checks the gradients read-only and hands the inverse scale to the optimizer's
/// fused step, so gradients are never rewritten. The optimizer's kernels read found-inf
/// where it lies and change nothing when it is set, and on CUDA update() runs on the device
/// too (PyTorch's _amp_update_scale_): a step reads nothing back to the host. Each skip is
/// counted when its flag arrives (copied back without waiting), by the next step() or a
/// call that reports (steps_taken, steps_skipped, last_step, state_dict), which waits for it.
/// Each optimizer moves READY -> UNSCALED (unscale_) -> STEPPED (step) -> READY (update),
/// and calls out of that order raise PyTorch's messages.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tensorcast/amp/scaler_rules.h"
#include "tensorcast/optim/optimizer.h"
#include "tensorcast/state_dict.h"
#include "tensorcast/tensor.h"

namespace tc::amp {

/// Training without a GradScaler (fp32, bf16) has nothing that notices a diverging run.
/// found_nonfinite: whether any of `tensors` (floating, on the CPU; undefined ones are
/// skipped) holds an inf or NaN, in one multi-tensor read-only pass. first_nonfinite: the
/// index of the first such tensor, or -1 (a per-tensor search, for naming it in an error).
bool found_nonfinite(const std::vector<Tensor>& tensors);
/// The index of the first tensor holding inf/NaN, -1 when none.
int64_t first_nonfinite(const std::vector<Tensor>& tensors);

/// PyTorch's torch.amp.GradScaler for tensorcast's optimizers, with hysteresis, bounds and an overflow report (see
/// the top of this file).
class GradScaler {
 public:
  /// A scaler with `options` (PyTorch's defaults unless set).
  explicit GradScaler(GradScalerOptions options = {});

  /// outputs * scale (differentiable). Disabled: returns the outputs unchanged.
  Tensor scale(const Tensor& output);
  /// Each output times the scale.
  std::vector<Tensor> scale(const std::vector<Tensor>& outputs);
  /// Divides the optimizer's gradients by the scale in place (e.g. before clipping).
  void unscale_(optim::Optimizer& optimizer);
  /// Steps the optimizer unless a gradient is inf/NaN; false when it skipped. On CUDA the
  /// host does not wait for the device's answer: it returns true, and a skip shows in
  /// last_step() and steps_skipped(), which wait for it.
  bool step(optim::Optimizer& optimizer);
  /// Grows or backs off the scale from this iteration's found-inf flags (on CUDA, on the
  /// device: a backoff refused by min_scale raises at a following step() or update()) ...
  void update();
  /// ... or sets it (the trackers are left as they are, as in PyTorch).
  void update(double new_scale);

  double get_scale() const;  ///< one host read; init_scale before the first scale(), 1 when disabled
  /// False for a disabled scaler (scale and step pass through).
  bool is_enabled() const { return options_.enabled(); }
  /// The options, as constructed.
  const GradScalerOptions& options() const { return options_; }
  /// Steps taken since construction (or the loaded state).
  int64_t steps_taken() const;
  /// Steps skipped for an inf/NaN gradient.
  int64_t steps_skipped() const;
  /// A skipped step on CUDA names no gradient (the search would read all of them on the
  /// host): amp::first_nonfinite finds it on request.
  const StepReport& last_step() const;
  int64_t get_growth_tracker() const;      ///< host read; 0 before the first scale()
  int64_t get_hysteresis_tracker() const;  ///< host read; hysteresis before the first scale()

  /// PyTorch's keys ("scale", "growth_factor", "backoff_factor", "growth_interval",
  /// "_growth_tracker") plus "hysteresis", "_hysteresis_tracker", "min_scale",
  /// "max_scale", "clamp_min_scale", "steps_taken", "steps_skipped". Empty when disabled.
  /// load_state_dict accepts PyTorch's five keys alone as well.
  StateDict state_dict() const;
  /// Restores a state_dict() (or PyTorch's; see state_dict()).
  void load_state_dict(const StateDict& sd);

  /// Called with each found_inf (0-d float32, nonzero when a gradient was not finite)
  /// before the scaler decides on it: data-parallel training all-reduces it with MAX, so
  /// every rank skips or steps together (tc::dist::sync_grad_scaler). Empty: local only.
  void set_found_inf_reduction(std::function<void(const Tensor&)> reduce) { reduce_found_inf_ = std::move(reduce); }

 private:
  struct Pending;  // flags on their way back from the device (grad_scaler.cpp)
  void lazy_init(Device device);
  void set_scale(double scale);  ///< scale_ and inv_scale_
  /// Counts the steps whose flags have come back (all of them, waiting, with `wait`); const
  /// so that the reporting calls can settle their answer first. Not thread-safe, like the
  /// rest of the scaler.
  void count_steps(bool wait) const;
  /// Raises the last update()'s refusal (a backoff below min_scale) once its flag is back
  /// (waiting for it with `wait`); only step() and update() raise it.
  void raise_refused(bool wait);
  Pending& pending();
  ScalerState state() const;  ///< what state_dict() saves
  std::vector<Tensor> collect_grads(optim::Optimizer& optimizer, bool allow_fp16) const;
  void report_overflow(const optim::Optimizer& optimizer);

  GradScalerOptions options_;
  Tensor scale_;               ///< 0-d float32, created by the first scale()
  Tensor inv_scale_;           ///< 0-d float32: float(1 / double(scale)), as PyTorch computes it
  Tensor growth_tracker_;      ///< 0-d int32
  Tensor hysteresis_tracker_;  ///< 0-d int32
  Tensor refused_;             ///< 0-d float32 on CUDA: set by an update the rule refused
  int64_t init_growth_tracker_ = 0;
  int64_t init_hysteresis_tracker_;
  /// found_inf per optimizer: 0-d float32, nonzero when a gradient was not finite.
  OptimizerStates<Tensor> per_optimizer_;
  mutable std::shared_ptr<Pending> pending_;
  mutable int64_t steps_taken_ = 0;
  mutable int64_t steps_skipped_ = 0;
  mutable StepReport last_step_;
  std::function<void(const Tensor&)> reduce_found_inf_;
};

}  // namespace tc::amp
