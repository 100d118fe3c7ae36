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
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tensorcast/state_dict.h"
#include "tensorcast/tensor.h"

namespace tc::optim {

namespace detail {
struct StepArgs;  // one parameter's fused update (src/optim/fused.h)
}  // namespace detail

// Per-group hyper-parameters; each optimizer derives its own options type.
struct OptimizerOptions {
  virtual ~OptimizerOptions() = default;
  virtual std::unique_ptr<OptimizerOptions> clone() const = 0;
  virtual double get_lr() const = 0;
  virtual void set_lr(double lr) = 0;
};

// The clone/get_lr/set_lr every options struct needs, written once (libtorch's
// OptimizerCloneableOptions): `struct SGDOptions : OptimizerCloneableOptions<SGDOptions>`.
// Derived declares its learning rate with TC_ARG(double, lr).
template <class Derived>
struct OptimizerCloneableOptions : OptimizerOptions {
  std::unique_ptr<OptimizerOptions> clone() const override {
    return std::make_unique<Derived>(static_cast<const Derived&>(*this));
  }
  double get_lr() const override { return static_cast<const Derived&>(*this).lr(); }
  void set_lr(double lr) override { static_cast<Derived&>(*this).lr(lr); }
};

struct OptimizerParamGroup {
  std::vector<Tensor> params;
  std::unique_ptr<OptimizerOptions> options;                            // null: the optimizer's defaults
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
  // Write-back rounding for 16-bit parameters; `seed` makes stochastic rounding repeatable:
  // the random bits are a hash of (seed, step, parameter index, element index), so results
  // do not depend on the thread count.
  void set_rounding(Rounding r, uint64_t seed = 0);
  Rounding rounding() const { return rounding_; }

  // Every tensor of state, named "param_groups.G.lr", "param_groups.G.params" (int64
  // indices), "state.I.step" (int64), "state.I.exp_avg", "state.I.master" (the float32 copy
  // of a 16-bit parameter), "rounding.stochastic", "rounding.seed" (I indexes parameters in
  // group order; parameters never stepped have no "state.I.*"). The dict is a snapshot.
  // load_state_dict checks names, shapes, dtypes and option values ("[optim] ..." errors)
  // and changes nothing when it throws; a loaded run continues bit-identically.
  virtual StateDict state_dict() const;
  virtual void load_state_dict(const StateDict& sd);

 protected:
  Optimizer(std::vector<OptimizerParamGroup> groups, std::unique_ptr<OptimizerOptions> defaults);

  // What the base keeps per parameter. Buffers are float32 (float64 for float64
  // parameters), contiguous, of the parameter's shape, named as in PyTorch's state.
  struct ParamState {
    int64_t step = 0;
    Tensor master;  // float32 copy of a 16-bit parameter (created at its first step)
    std::vector<std::pair<std::string, Tensor>> buffers;
    Tensor* find(std::string_view name);
  };

  // --- what SGD/Adam/AdamW define
  // Throws "[optim] ..." when `o` is not this optimizer's options type or out of range.
  virtual void check_options(const OptimizerOptions& o) const = 0;
  // Buffers a state must hold under `o` (load_state_dict requires them), and every
  // buffer name this optimizer may keep (anything else is an unexpected key).
  virtual std::vector<std::string> required_buffers(const OptimizerOptions& o) const = 0;
  virtual std::vector<std::string> known_buffers() const = 0;
  // One fused pass over one parameter; `state.step` is already incremented.
  virtual void update(const OptimizerOptions& o, ParamState& state, const detail::StepArgs& args) = 0;
  // Options <-> "param_groups.G.<name>" entries.
  virtual void save_options(const OptimizerOptions& o, StateDict& sd, const std::string& prefix) const = 0;
  virtual std::unique_ptr<OptimizerOptions> load_options(const StateDict& sd, const std::string& prefix) const = 0;

  // Derived constructors call this last: it gives groups without options a copy of the
  // defaults and validates options and parameters (virtual calls are not possible in
  // the base constructor).
  void init_groups();
  // The buffer `name` of `state`, created zero-filled when missing (`created` says so).
  Tensor& state_buffer(ParamState& state, const std::string& name, const Tensor& param, bool* created = nullptr);

  std::vector<OptimizerParamGroup> groups_;
  std::unique_ptr<OptimizerOptions> defaults_;

 private:
  void run_step(const AmpStep* amp);
  void check_group(const OptimizerParamGroup& g, size_t first_index) const;

  // Keyed by the parameter's TensorImpl: the group holds the Tensor, so the key lives
  // as long as the entry matters; state_dict numbers parameters in group order.
  std::unordered_map<const TensorImpl*, ParamState> state_;
  Rounding rounding_ = Rounding::NearestEven;
  uint64_t seed_ = 0;
};

}  // namespace tc::optim
