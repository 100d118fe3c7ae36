/// \file
/// tc::amp::NumericsReport: what mixed precision does to a run's values, per tensor.
///
/// \code{.cpp}
///   tc::amp::NumericsReport report(/*every=*/10);
///   for (...) {
///     report.begin_step(step);
///     auto h = report.watch(conv(x), "0 Conv2d");     // the gradient reaching h is recorded
///     scaler.scale(loss).backward();
///     report.record_gradients(model->named_parameters());
///     report.before_update(model->named_parameters());
///     bool stepped = scaler.step(opt);
///     if (stepped) report.after_update(model->named_parameters());
///     else report.record_overflow(step, model->named_parameters());
///   }
///   std::cout << report.table();
/// \endcode
///
/// On sampled steps (one in `every`) it counts, for each parameter's gradient and each
/// watched layer output's gradient, the largest magnitude and the fractions of values that
/// are zero, would round to zero in fp16, would be fp16 subnormals, or would overflow fp16.
/// The gradients are observed as they are, so with a GradScaler they carry the current
/// loss scale: the fractions are those fp16 would see at that scale. Around the optimizer
/// step it counts the updates bf16 weights would lose (smaller than half a bf16 ulp).
/// Watched gradients are also checked for inf/NaN on every step, so an overflow step can
/// name the first non-finite tensor in backward order. In an fp8 run, record_fp8() adds per
/// linear layer and quantized tensor the amax, the scale and the shares of values saturated
/// or flushed to zero by the cast. Off (no report object), nothing runs.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tensorcast/amp/fp8.h"
#include "tensorcast/tensor.h"

namespace tc::amp {

/// Per-layer statistics of what fp16 and bf16 would do to activations' gradients and parameters' gradients and
/// updates (see the top of this file).
class NumericsReport {
 public:
  using Named = std::vector<std::pair<std::string, Tensor>>;  ///< nn::NamedTensors

  /// Samples every `every`-th step.
  explicit NumericsReport(int64_t every = 10);

  /// Starts a step (1-based numbering is the caller's); sampled when step % every == 0.
  void begin_step(int64_t step);
  /// Whether the current step is sampled.
  bool sampling() const { return sampling_; }

  /// Forward: x itself. Backward: the gradient arriving at x is recorded under `layer`
  /// (counted on sampled steps, checked for inf/NaN on every step).
  Tensor watch(const Tensor& x, const std::string& layer);

  /// After backward, on sampled steps: the parameters' gradients.
  void record_gradients(const Named& params);
  /// Around the optimizer step, on sampled steps: copies the weights, then counts the
  /// elements with a nonzero gradient that moved by less than half a bf16 ulp.
  void before_update(const Named& params);
  /// Counts the updates lost to rounding since before_update().
  void after_update(const Named& params);
  /// A step whose loss or gradients held inf/NaN: remembers it and the first non-finite
  /// tensor (watched gradients in backward order, then parameter gradients); returns its
  /// description ("gradient of layer 8 Linear's output").
  std::string record_overflow(int64_t step, const Named& params);

  /// One tensor's counts over the sampled steps.
  struct TensorStats {
    std::string name;  ///< "0.weight" or "3 ReLU"
    std::string kind;  ///< "param_grad" or "output_grad"
    /// \name Counts
    /// @{

    /// Tensors counted (samples) and their values (total); of those, how many were zero, would
    /// flush to zero or be subnormal in fp16, would overflow fp16, or were not finite.
    int64_t samples = 0, total = 0, zero = 0, flush = 0, subnormal = 0, overflow = 0, nonfinite = 0;
    /// @}
    double amax = 0;  ///< the largest magnitude seen
    /// \name Updates
    /// @{

    /// Parameters only: elements with a nonzero gradient, and those whose update was lost.
    int64_t update_total = 0, update_lost = 0;
    /// @}
    /// count / total (0 before any value was counted).
    double share(int64_t count) const { return total > 0 ? double(count) / double(total) : 0.0; }
    /// update_lost / update_total.
    double lost_share() const { return update_total > 0 ? double(update_lost) / double(update_total) : 0.0; }
  };
  /// A step whose loss or gradients held inf/NaN.
  struct Overflow {
    int64_t step;                 ///< the step's number
    std::string first_nonfinite;  ///< what record_overflow() described
  };
  /// Layer outputs in forward order, then parameters in the order they were passed.
  std::vector<TensorStats> stats() const;
  /// Every overflow recorded, in order.
  const std::vector<Overflow>& overflows() const { return overflows_; }
  /// How many steps were sampled.
  int64_t sampled_steps() const { return sampled_steps_; }

  /// A fixed-width table: one row per tensor, fractions in percent, then the overflow steps.
  std::string table() const;

  /// On sampled steps of an fp8 run, after backward: what the fp8 quantizations of the
  /// linear layer `layer` did in this step (the LinearStats counted inside an
  /// fp8::ObserveGuard, which the caller then clears).
  void record_fp8(const std::string& layer, const fp8::LinearStats& stats);
  /// One quantized tensor of a linear layer over the sampled steps.
  struct Fp8Stats {
    std::string layer;          ///< the Linear's module name ("0", "blocks.1.mlp.fc")
    std::string tensor;         ///< "input", "weight" or "grad_output"
    int64_t quantizations = 0;  ///< tensors quantized over the sampled steps
    int64_t total = 0;          ///< their values
    int64_t saturated = 0;      ///< values saturated (fp8::QuantizationStats)
    int64_t flushed = 0;        ///< nonzero values with a zero code
    float amax = 0;             ///< the largest |x| seen
    float scale_min = 0;        ///< the last sampled step's smallest scale
    float scale_max = 0;        ///< and its largest (equal for one scale per tensor)
    /// count / total (0 before any value was counted).
    double share(int64_t count) const { return total > 0 ? double(count) / double(total) : 0.0; }
  };
  /// Per linear layer in the order first recorded, its tensors in role order.
  const std::vector<Fp8Stats>& fp8_stats() const { return fp8_; }

  /// For the watch node's backward (not for users).
  void on_output_grad(const std::string& layer, const Tensor& grad);

 private:
  TensorStats& entry(const std::string& name, const char* kind);

  int64_t every_;
  bool sampling_ = false;
  int64_t sampled_steps_ = 0;
  std::vector<TensorStats> entries_;
  std::map<std::string, size_t> index_;
  std::vector<std::pair<std::string, bool>> step_outputs_;  ///< this step's watched gradients: name, non-finite
  std::vector<Tensor> weights_before_;
  std::vector<Overflow> overflows_;
  std::vector<Fp8Stats> fp8_;
};

}  // namespace tc::amp
