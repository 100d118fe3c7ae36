/// \file
/// The rules of dynamic loss scaling that do not depend on the tensor type, in one place:
/// torch.amp.GradScaler's per-optimizer protocol with its error messages, the scale-update
/// rule (PyTorch's, plus Megatron-LM's hysteresis and DeepSpeed-style bounds), the checks of
/// the settings, and the state dict's keys and validation. tc::amp::GradScaler (tc::Tensor)
/// and tc::torch_amp::GradScaler (torch::Tensor, libtensorcast_torch) are both built on it.
///
/// Header-only and free of tensors, so the libtorch adapter shares it without linking the
/// tensorcast core (whose oneDNN and OpenMP would meet libtorch's own in one process).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>

#include "tensorcast/arg.h"
#include "tensorcast/error.h"

namespace tc::amp {

/// The name that GradScaler's error messages start with.
inline constexpr const char* kScalerOwner = "GradScaler";

/// The scale-update rule. hysteresis = 1 with no bounds is exactly PyTorch's
/// _amp_update_scale_; more hysteresis is Megatron-LM's DynamicGradScaler; a min/max scale of
/// 0 means "no bound".
struct ScaleRule {
  double growth_factor = 2.0;      ///< scale multiplier after growth_interval clean steps
  double backoff_factor = 0.5;     ///< scale multiplier on an overflow
  int64_t growth_interval = 2000;  ///< clean steps between growths
  int64_t hysteresis = 1;          ///< overflows tolerated before backing off (1: PyTorch)
  double min_scale = 0.0;          ///< 0: unbounded; the lower bound of the scale
  bool clamp_min_scale = false;    ///< at min_scale stay there instead of raising
  double max_scale = 0.0;          ///< 0: unbounded; the upper bound of the scale

  /// True when the rule is PyTorch's (no hysteresis, no bounds).
  bool is_pytorch_rule() const { return hysteresis == 1 && min_scale == 0.0 && max_scale == 0.0; }
};

/// A scaler's settings: torch.amp.GradScaler's, then tensorcast's extensions.
struct GradScalerOptions {
  TC_ARG(double, init_scale) = 65536.0;     ///< the first scale
  TC_ARG(double, growth_factor) = 2.0;      ///< scale multiplier after growth_interval clean steps
  TC_ARG(double, backoff_factor) = 0.5;     ///< scale multiplier on an overflow (inf/NaN gradient)
  TC_ARG(int64_t, growth_interval) = 2000;  ///< clean steps between growths
  TC_ARG(bool, enabled) = true;             ///< false: scale() and step() pass through, as PyTorch's
  // Beyond PyTorch:
  TC_ARG(int64_t, hysteresis) = 1;        ///< overflows tolerated since the last growth before backing off (Megatron)
  TC_ARG(double, min_scale) = 0.0;        ///< 0: unbounded; backing off below this raises, unless clamp_min_scale
  TC_ARG(bool, clamp_min_scale) = false;  ///< at min_scale, stay there instead of raising
  TC_ARG(double, max_scale) = 0.0;        ///< 0: unbounded; growth stops at this value
};

/// The ScaleRule of these options.
inline ScaleRule rule_of(const GradScalerOptions& o) {
  return {o.growth_factor(), o.backoff_factor(),  o.growth_interval(), o.hysteresis(),
          o.min_scale(),     o.clamp_min_scale(), o.max_scale()};
}

/// What happened on the last step(), for logs and reports.
struct StepReport {
  bool skipped = false;  ///< whether the step was skipped (an inf/NaN gradient)
  /// Only on skipped steps (the search runs off the fast path): the first parameter, in
  /// group order, whose gradient holds inf/NaN, e.g. "group 0 param 3 (shape (128, 784))".
  std::optional<std::string> first_nonfinite;
  int64_t group = -1;  ///< its group and index in the group, -1 when none
  int64_t param = -1;  ///< its index in the group, -1 when none
};

/// The constructor's checks: PyTorch asserts the first two; the rest guard the extensions.
inline void check_scaler_settings(double init_scale, const ScaleRule& r) {
  constexpr const char* kOp = kScalerOwner;
  TC_CHECK(r.growth_factor > 1.0, kOp, "The growth factor must be > 1.0. (got ", r.growth_factor, ")");
  TC_CHECK(r.backoff_factor < 1.0, kOp, "The backoff factor must be < 1.0. (got ", r.backoff_factor, ")");
  TC_CHECK(r.backoff_factor > 0.0, kOp, "The backoff factor must be > 0.0 (got ", r.backoff_factor, ")");
  TC_CHECK(r.growth_interval >= 1 && r.growth_interval <= INT32_MAX, kOp, "growth_interval must be in [1, 2^31), got ",
           r.growth_interval);
  TC_CHECK(r.hysteresis >= 1 && r.hysteresis <= INT32_MAX, kOp, "hysteresis must be >= 1, got ", r.hysteresis);
  TC_CHECK(std::isfinite(init_scale) && init_scale > 0.0, kOp, "init_scale must be finite and positive, got ",
           init_scale);
  TC_CHECK(r.min_scale >= 0.0 && r.max_scale >= 0.0, kOp, "min_scale and max_scale must be >= 0 (0: no bound)");
  TC_CHECK(r.max_scale == 0.0 || r.max_scale >= r.min_scale, kOp, "max_scale ", r.max_scale, " is below min_scale ",
           r.min_scale);
}

/// One update of the scale (stored as float32, as PyTorch's) and its int32 trackers, from
/// whether any gradient of the iteration was inf/NaN. Returns false, changing nothing, when a
/// backoff would go below min_scale and clamp_min_scale is off. constexpr (no library calls)
/// so that the CUDA scaler's one-thread kernel runs this very code on the device.
constexpr bool try_update_scale(float& scale, int32_t& growth_tracker, int32_t& hysteresis_tracker, bool found_inf,
                                const ScaleRule& r) {
  if (found_inf) {
    // Megatron: each overflow uses up one unit of hysteresis; the scale backs off once none
    // is left (at once when hysteresis is 1, PyTorch's rule). The tracker stops at 0 so that a
    // long run of overflows cannot wrap it around.
    const int32_t h = hysteresis_tracker - 1 > 0 ? hysteresis_tracker - 1 : 0;
    float next = scale;
    if (h <= 0) {
      next = static_cast<float>(scale * r.backoff_factor);  // float * double, as PyTorch's kernel
      if (r.min_scale > 0.0 && next < r.min_scale) {
        if (!r.clamp_min_scale) return false;
        next = static_cast<float>(r.min_scale);
      }
    }
    scale = next;
    hysteresis_tracker = h;
    growth_tracker = 0;
    return true;
  }
  // PyTorch tests `== growth_interval`; `>=` differs only for a tracker loaded above the
  // interval, which PyTorch would then never grow from.
  const int64_t successful = static_cast<int64_t>(growth_tracker) + 1;
  if (successful >= r.growth_interval) {
    float next = static_cast<float>(scale * r.growth_factor);
    if (r.max_scale > 0.0 && next > r.max_scale) {
      const float bound = static_cast<float>(r.max_scale);
      next = scale < bound ? bound : scale;  // std::max(scale, bound)
    }
    const float big = std::numeric_limits<float>::max();
    if (next >= -big && next <= big) scale = next;  // PyTorch: never grow into inf (or NaN)
    growth_tracker = 0;
    hysteresis_tracker = static_cast<int32_t>(r.hysteresis);  // Megatron: growth restores the hysteresis
  } else {
    growth_tracker = static_cast<int32_t>(successful);
  }
  return true;
}

/// The error of a backoff below min_scale (clamp_min_scale off), from the scale it started at.
[[noreturn]] inline void fail_below_min_scale(float scale, const ScaleRule& r) {
  TC_FAIL(kScalerOwner, "the loss scale ", scale, " would back off to ", static_cast<float>(scale * r.backoff_factor),
          ", below min_scale ", r.min_scale,
          ": gradients keep overflowing at the smallest allowed scale (set clamp_min_scale(true) to stay at "
          "min_scale instead)");
}

/// try_update_scale, throwing (and changing nothing) where it refuses.
inline void update_scale(float& scale, int32_t& growth_tracker, int32_t& hysteresis_tracker, bool found_inf,
                         const ScaleRule& r) {
  if (!try_update_scale(scale, growth_tracker, hysteresis_tracker, found_inf, r)) fail_below_min_scale(scale, r);
}

/// PyTorch's assertion when unscale_/step/update come before the first scale().
inline void check_scale_initialized(bool initialized, const char* funcname) {
  TC_CHECK(initialized, kScalerOwner, "Attempted ", funcname,
           " but _scale is None.  This may indicate your script did not use scaler.scale(loss or outputs) earlier "
           "in the iteration.");
}

/// Each optimizer moves READY -> UNSCALED (unscale_) -> STEPPED (step) -> READY (update), as
/// in torch.amp.GradScaler (keyed by the optimizer's address, as PyTorch keys by id()); calls
/// out of that order raise PyTorch's messages. FoundInf is what one inf check records.
enum class OptState : uint8_t { Ready, Unscaled, Stepped };

/// Per optimizer, where it is in the unscale_/step/update cycle and its inf check (PyTorch's per-optimizer state).
template <class FoundInf>
class OptimizerStates {
 public:
  /// One optimizer's state in the cycle.
  struct Entry {
    OptState stage = OptState::Ready;  ///< where the optimizer is in the cycle
    bool recorded = false;             ///< an inf check ran (PyTorch: found_inf_per_device is not empty)
    FoundInf found_inf{};              ///< the inf check's flag
  };

  /// The entry of an optimizer about to be unscaled; throws PyTorch's message when out of order.
  Entry& for_unscale(const void* optimizer) {
    Entry& e = map_[optimizer];
    TC_CHECK(e.stage != OptState::Unscaled, kScalerOwner,
             "unscale_() has already been called on this optimizer since the last update().");
    TC_CHECK(e.stage != OptState::Stepped, kScalerOwner, "unscale_() is being called after step().");
    return e;
  }
  /// The entry of an optimizer about to step; throws PyTorch's message when out of order.
  Entry& for_step(const void* optimizer) {
    Entry& e = map_[optimizer];
    TC_CHECK(e.stage != OptState::Stepped, kScalerOwner, "step() has already been called since the last update().");
    return e;
  }
  /// Throws PyTorch's "No inf checks were recorded" unless an inf check ran.
  static void check_recorded(const Entry& e) {
    TC_CHECK(e.recorded, kScalerOwner, "No inf checks were recorded for this optimizer.");
  }
  /// Calls f(found_inf) for every recorded check, for update(); PyTorch's message when none.
  template <class F>
  void for_each_found_inf(F&& f) const {
    bool any = false;
    for (const auto& [opt, e] : map_)
      if (e.recorded) {
        any = true;
        f(e.found_inf);
      }
    TC_CHECK(any, kScalerOwner, "No inf checks were recorded prior to update.");
  }
  /// Forgets every optimizer (at update()).
  void clear() { map_.clear(); }

 private:
  std::unordered_map<const void*, Entry> map_;
};

/// Everything a scaler saves. PyTorch's dict has the first five keys; tensorcast adds the
/// rest, and a dict with PyTorch's five alone loads (hysteresis 1, the other extras kept).
struct ScalerState {
  double scale = 65536.0;          ///< the current loss scale
  ScaleRule rule;                  ///< growth, backoff and bounds
  int64_t growth_tracker = 0;      ///< clean steps since the last growth or backoff
  int64_t hysteresis_tracker = 1;  ///< overflows left before a backoff
  int64_t steps_taken = 0;         ///< steps taken since construction
  int64_t steps_skipped = 0;       ///< steps skipped for an inf/NaN gradient
};

/// Calls real(key, double) and integer(key, int64_t) for every entry, in PyTorch's order first.
template <class Real, class Integer>
void write_scaler_state(const ScalerState& s, Real&& real, Integer&& integer) {
  real("scale", s.scale);
  real("growth_factor", s.rule.growth_factor);
  real("backoff_factor", s.rule.backoff_factor);
  integer("growth_interval", s.rule.growth_interval);
  integer("_growth_tracker", s.growth_tracker);
  integer("hysteresis", s.rule.hysteresis);
  integer("_hysteresis_tracker", s.hysteresis_tracker);
  real("min_scale", s.rule.min_scale);
  real("max_scale", s.rule.max_scale);
  integer("clamp_min_scale", s.rule.clamp_min_scale ? 1 : 0);
  integer("steps_taken", s.steps_taken);
  integer("steps_skipped", s.steps_skipped);
}

/// Reads a dict that may come from a file (and so hold anything) through `dict`, which has
/// \verbatim
///   bool empty(); bool has(key); double real(key, lo, hi); int64_t integer(key, lo, hi)
/// \endverbatim
/// (the last two throw naming the key when the entry is missing, of the wrong kind or out of
/// [lo, hi]). Every value is checked before anything is returned, so a bad dict changes
/// nothing. `current` supplies the extras a PyTorch dict does not hold.
template <class Dict>
ScalerState read_scaler_state(Dict& dict, const ScalerState& current) {
  constexpr const char* kOp = kScalerOwner;
  TC_CHECK(!dict.empty(), kOp,
           "The source state dict is empty, possibly because it was saved from a disabled instance of GradScaler.");
  constexpr double kMax = std::numeric_limits<double>::max();
  // Step counts go on being incremented: 2^62 leaves them room no run can use up.
  constexpr int64_t kMaxCount = int64_t{1} << 62;
  auto opt_real = [&](const char* key, double fallback, double lo, double hi) {
    return dict.has(key) ? dict.real(key, lo, hi) : fallback;
  };
  auto opt_int = [&](const char* key, int64_t fallback, int64_t lo, int64_t hi) {
    return dict.has(key) ? dict.integer(key, lo, hi) : fallback;
  };
  ScalerState s;
  s.scale = dict.real("scale", std::numeric_limits<double>::min(), kMax);
  s.rule.growth_factor = dict.real("growth_factor", 1.0, kMax);
  s.rule.backoff_factor = dict.real("backoff_factor", 0.0, 1.0);
  // The trackers live in int32 tensors.
  s.rule.growth_interval = dict.integer("growth_interval", 1, INT32_MAX);
  s.growth_tracker = dict.integer("_growth_tracker", 0, INT32_MAX);
  // A PyTorch dict has no hysteresis: it means 1, PyTorch's rule.
  s.rule.hysteresis = opt_int("hysteresis", 1, 1, INT32_MAX);
  s.hysteresis_tracker = opt_int("_hysteresis_tracker", s.rule.hysteresis, 0, INT32_MAX);
  s.rule.min_scale = opt_real("min_scale", current.rule.min_scale, 0.0, kMax);
  s.rule.max_scale = opt_real("max_scale", current.rule.max_scale, 0.0, kMax);
  s.rule.clamp_min_scale = opt_int("clamp_min_scale", current.rule.clamp_min_scale ? 1 : 0, 0, 1) != 0;
  s.steps_taken = opt_int("steps_taken", current.steps_taken, 0, kMaxCount);
  s.steps_skipped = opt_int("steps_skipped", current.steps_skipped, 0, kMaxCount);
  const ScaleRule& r = s.rule;
  TC_CHECK(r.growth_factor > 1.0 && r.backoff_factor > 0.0 && r.backoff_factor < 1.0, kOp,
           "state dict holds invalid settings (growth_factor ", r.growth_factor, ", backoff_factor ", r.backoff_factor,
           ", growth_interval ", r.growth_interval, ", hysteresis ", r.hysteresis, ")");
  TC_CHECK(r.max_scale == 0.0 || r.min_scale <= r.max_scale, kOp, "state dict holds min_scale ", r.min_scale,
           " above max_scale ", r.max_scale);
  return s;
}

}  // namespace tc::amp
