// tc::optim::Optimizer: the base of SGD, Adam and AdamW, in libtorch's shape
// (parameter groups with per-group options, zero_grad, step, state_dict).
//
// All optimizer state is float32 (float64 for float64 parameters). A parameter may be
// held in bf16/fp16: then the optimizer keeps a float32 *master copy*, updates it in
// float32 and writes the parameter back rounded (to nearest even, or stochastically).
//
// AMP: step(AmpStep) is the fused path the GradScaler uses. Gradients are multiplied by
// `inv_scale` as they are read (no separate unscale pass writes them), and when
// `found_inf` (a 0-d float32 tensor, nonzero = overflow) is set the step changes
// nothing at all: parameters, moments and step counts stay as they were.
#pragma once
#include <memory>
#include <optional>
#include <vector>

#include "tensorcast/state_dict.h"
#include "tensorcast/tensor.h"

namespace tc::optim {

// Per-group hyper-parameters; each optimizer derives its own options type.
struct OptimizerOptions {
  virtual ~OptimizerOptions() = default;
  virtual std::unique_ptr<OptimizerOptions> clone() const = 0;
  virtual double get_lr() const = 0;
  virtual void set_lr(double lr) = 0;
};

struct OptimizerParamGroup {
  std::vector<Tensor> params;
  std::unique_ptr<OptimizerOptions> options;  // null: the optimizer's defaults
  OptimizerParamGroup(std::vector<Tensor> p) : params(std::move(p)) {}  // NOLINT
  OptimizerParamGroup(std::vector<Tensor> p, std::unique_ptr<OptimizerOptions> o)
      : params(std::move(p)), options(std::move(o)) {}
  OptimizerParamGroup(const OptimizerParamGroup& o);
  OptimizerParamGroup(OptimizerParamGroup&&) = default;
};

// How 16-bit parameters are written back from their float32 master copies.
enum class Rounding : uint8_t { NearestEven, Stochastic };

// What the GradScaler hands to a fused step.
struct AmpStep {
  Tensor inv_scale;  // 0-d float32: gradients are multiplied by it while being read
  Tensor found_inf;  // 0-d float32: nonzero means skip the whole step
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Clears gradients: set_to_none drops them (PyTorch's default), else zeroes them.
  void zero_grad(bool set_to_none = true);
  // One update from the parameters' current gradients (parameters without a gradient
  // are skipped). Not recorded by autograd.
  void step();
  // The fused AMP step (see the top of this file).
  void step(const AmpStep& amp);

  std::vector<OptimizerParamGroup>& param_groups() { return groups_; }
  const std::vector<OptimizerParamGroup>& param_groups() const { return groups_; }
  void add_param_group(OptimizerParamGroup group);
  const OptimizerOptions& defaults() const { return *defaults_; }

  // True when the optimizer keeps float32 master copies of 16-bit parameters, so it may
  // take 16-bit gradients from the GradScaler ("Attempting to unscale FP16 gradients"
  // is raised otherwise, as in PyTorch).
  bool has_master_weights() const;
  // Write-back rounding for 16-bit parameters; `seed` makes stochastic rounding repeatable.
  void set_rounding(Rounding r, uint64_t seed = 0);

  // Every tensor of state, named "param_groups.G.lr", "state.I.exp_avg", ... (I indexes
  // parameters in group order). load_state_dict checks names, shapes and dtypes.
  virtual StateDict state_dict() const;
  virtual void load_state_dict(const StateDict& sd);

 protected:
  Optimizer(std::vector<OptimizerParamGroup> groups, std::unique_ptr<OptimizerOptions> defaults);
  // (The protected interface between this base and SGD/Adam/AdamW -- per-parameter
  // update kernels, master copies, state storage -- is defined by the implementation.)

  std::vector<OptimizerParamGroup> groups_;
  std::unique_ptr<OptimizerOptions> defaults_;
};

}  // namespace tc::optim
