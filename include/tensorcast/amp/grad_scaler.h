// tc::amp::GradScaler: dynamic loss scaling with torch.amp.GradScaler's semantics, plus
// hysteresis (Megatron-LM), scale bounds (DeepSpeed) and a report of skipped steps.
//
//   tc::amp::GradScaler scaler;               // init_scale 65536, growth 2, backoff 0.5, interval 2000
//   scaler.scale(loss).backward();
//   scaler.unscale_(opt);                     // optional: to clip gradients
//   bool stepped = scaler.step(opt);          // skipped (false) when a gradient is inf/NaN
//   scaler.update();
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tensorcast/optim/optimizer.h"
#include "tensorcast/state_dict.h"
#include "tensorcast/tensor.h"

namespace tc::amp {

struct GradScalerOptions {
  TC_ARG(double, init_scale) = 65536.0;
  TC_ARG(double, growth_factor) = 2.0;
  TC_ARG(double, backoff_factor) = 0.5;
  TC_ARG(int64_t, growth_interval) = 2000;
  TC_ARG(bool, enabled) = true;
  // Beyond PyTorch:
  TC_ARG(int64_t, hysteresis) = 1;     // overflows tolerated since the last growth before backing off (Megatron)
  TC_ARG(double, min_scale) = 0.0;     // backing off below this raises, unless clamp_min_scale
  TC_ARG(bool, clamp_min_scale) = false;
  TC_ARG(double, max_scale) = 0.0;     // 0: unbounded; growth stops at this value
};

// What happened on the last step, for logs and reports.
struct StepReport {
  bool skipped = false;
  std::optional<std::string> first_nonfinite;  // "group G param I" (only on skipped steps)
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  Tensor scale(const Tensor& output);
  std::vector<Tensor> scale(const std::vector<Tensor>& outputs);
  void unscale_(optim::Optimizer& optimizer);
  bool step(optim::Optimizer& optimizer);
  void update();
  void update(double new_scale);

  double get_scale() const;  // one host read
  bool is_enabled() const;
  int64_t steps_taken() const;
  int64_t steps_skipped() const;
  const StepReport& last_step() const;

  StateDict state_dict() const;
  void load_state_dict(const StateDict& sd);
};

}  // namespace tc::amp
