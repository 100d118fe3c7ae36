/// \file
/// tc::optim::Optimizer: the base of SGD, Adam and AdamW, in libtorch's shape
/// (parameter groups with per-group options, zero_grad, step, state_dict).
///
/// Optimizer state is float32 (float64 for float64 parameters). A parameter may be held in
/// bf16/fp16; set_weight_update chooses how it is updated (all arithmetic is float32 in
/// registers either way):
/// \verbatim
///   MasterFloat32 (default): a float32 *master copy* and float32 state; the master is
///       updated and the parameter written back from it rounded per set_rounding.
///   Pure: no master copy; the state is kept in the parameter's dtype (each element read as
///       float, stored back rounded to nearest even) and each new weight is rounded per
///       set_rounding. Updates below half a 16-bit ulp are lost with nearest-even rounding
///       (a bf16 weight near 1.0 ignores any |update| < 2^-9); stochastic rounding keeps them
///       in expectation.
///   PureKahan: as Pure (nearest-even only), plus a Kahan compensation buffer
///       ("compensation", the parameter's dtype) that carries each update's rounding error to
///       the next step (torchdistx's AnyPrecisionAdamW). With p_old the 16-bit weight and w
///       the float32 result of the optimizer's formula from it:
///         y = c + (w - p_old);  p_new = round16(p_old + y);  c = round16(y - (p_new - p_old))
/// \endverbatim
/// Bytes per element of a bf16/fp16 parameter (parameter + master + state + compensation;
/// the gradient not counted):
/// \verbatim
///                    MasterFloat32        Pure           PureKahan
///   AdamW / Adam     2 + 4 + 8 = 14       2 + 4 = 6      2 + 4 + 2 = 8     (m, v; amsgrad: +4 / +2 / +2)
///   SGD (momentum)   2 + 4 + 4 = 10       2 + 2 = 4      2 + 2 + 2 = 6
/// \endverbatim
/// fp16 state has fp16's range: Adam's v (squared gradients) flushes to zero below about
/// 6e-8 and overflows above 65504, so Pure modes suit bf16 far better than fp16.
///
/// AMP: step(AmpStep) is the fused path the GradScaler uses. Gradients are multiplied by
/// `inv_scale` as they are read (no separate unscale pass writes them), and when
/// `found_inf` (a 0-d float32 tensor, nonzero = overflow) is set the step changes
/// nothing at all: parameters, moments, step counts and state stay as they were. The
/// kernels read both scalars where they lie, so on CUDA the step needs no host read: the
/// host counts the step as taken and, if the flag (copied back without waiting) says it
/// was skipped, undoes that bookkeeping at the next call that looks (step, state_dict,
/// load_state_dict, set_weight_update), as PyTorch's fused optimizers keep their step
/// counts on the device.
#pragma once
#include <functional>
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

/// Per-group hyper-parameters; each optimizer derives its own options type.
struct OptimizerOptions {
  virtual ~OptimizerOptions() = default;
  /// A copy of the derived options.
  virtual std::unique_ptr<OptimizerOptions> clone() const = 0;
  /// The learning rate (what schedulers read).
  virtual double get_lr() const = 0;
  /// Sets the learning rate (what schedulers write).
  virtual void set_lr(double lr) = 0;
};

/// The clone/get_lr/set_lr every options struct needs, written once (libtorch's
/// OptimizerCloneableOptions): `struct SGDOptions : OptimizerCloneableOptions<SGDOptions>`.
/// Derived declares its learning rate with TC_ARG(double, lr).
template <class Derived>
struct OptimizerCloneableOptions : OptimizerOptions {
  /// A copy of the derived options.
  std::unique_ptr<OptimizerOptions> clone() const override {
    return std::make_unique<Derived>(static_cast<const Derived&>(*this));
  }
  /// Derived::lr().
  double get_lr() const override { return static_cast<const Derived&>(*this).lr(); }
  /// Derived::lr(lr).
  void set_lr(double lr) override { static_cast<Derived&>(*this).lr(lr); }
};

/// A group of parameters with its own options (libtorch's OptimizerParamGroup).
struct OptimizerParamGroup {
  std::vector<Tensor> params;                 ///< the parameters updated together
  std::unique_ptr<OptimizerOptions> options;  ///< null: the optimizer's defaults
  /// Parameters with the optimizer's default options.
  OptimizerParamGroup(std::vector<Tensor> p) : params(std::move(p)) {}  // NOLINT
  /// Parameters with their own options.
  OptimizerParamGroup(std::vector<Tensor> p, std::unique_ptr<OptimizerOptions> o)
      : params(std::move(p)), options(std::move(o)) {}
  /// A deep copy (the options are cloned).
  OptimizerParamGroup(const OptimizerParamGroup& o);
  /// Moves the parameters and options.
  OptimizerParamGroup(OptimizerParamGroup&&) = default;
};

/// How a 16-bit parameter's new value is rounded (from its float32 master copy, or in the
/// Pure weight update from the float32 result of the step).
enum class Rounding : uint8_t { NearestEven, Stochastic };

/// How a 16-bit parameter is updated (float32/float64 parameters ignore this); see the top
/// of this file.
enum class WeightUpdate : uint8_t {
  MasterFloat32,  ///< default: float32 master copy and float32 state; the parameter is the master rounded per
                  ///< set_rounding
  Pure,           ///< no master copy: state in the parameter's dtype; each new weight rounded per set_rounding
  PureKahan,      ///< as Pure, plus a Kahan compensation buffer ("compensation", parameter dtype); nearest even only
};
/// "MasterFloat32", "Pure", "PureKahan".
std::string_view weight_update_name(WeightUpdate u);

/// What the GradScaler hands to a fused step.
struct AmpStep {
  Tensor inv_scale;  ///< 0-d float32: gradients are multiplied by it while being read; undefined: already unscaled
  Tensor found_inf;  ///< 0-d float32: nonzero means skip the whole step
};

/// The base of SGD, Adam and AdamW: parameter groups, master weights, the fused update and its state.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// Clears gradients: set_to_none drops them (PyTorch's default), else zeroes them.
  void zero_grad(bool set_to_none = true);
  /// One update from the parameters' current gradients (parameters without a gradient
  /// are skipped). Not recorded by autograd.
  void step();
  /// The fused AMP step (see the top of this file).
  void step(const AmpStep& amp);
  /// The per-parameter tensors state_dict() may hold besides "step": "master",
  /// "compensation" and this optimizer's buffers ("exp_avg", "momentum_buffer", ...).
  std::vector<std::string> state_tensor_names() const;
  /// Calls `hook` at the end of every step(), both forms, including a step an AmpStep's
  /// found_inf skipped (PyTorch's register_step_post_hook). Returns a handle.
  int64_t register_step_post_hook(std::function<void()> hook);
  /// Removes a hook register_step_post_hook returned; unknown handles are ignored.
  void remove_step_post_hook(int64_t handle);

  /// The parameter groups, in order (options may be changed between steps).
  std::vector<OptimizerParamGroup>& param_groups() { return groups_; }
  /// The parameter groups, in order.
  const std::vector<OptimizerParamGroup>& param_groups() const { return groups_; }
  /// Adds parameters with their own options (or the defaults when it has none).
  void add_param_group(OptimizerParamGroup group);
  /// The options a group without its own uses.
  const OptimizerOptions& defaults() const { return *defaults_; }

  /// True when the optimizer keeps float32 master copies of 16-bit parameters
  /// (WeightUpdate::MasterFloat32 and some bf16/fp16 parameter).
  bool has_master_weights() const;
  /// True when some parameter is bf16/fp16, so 16-bit gradients are what the optimizer
  /// expects: a master copy receives them, or a Pure update reads them as float (times the
  /// AMP inverse scale). The GradScaler accepts fp16 gradients only then ("Attempting to
  /// unscale FP16 gradients." otherwise, as in PyTorch).
  bool reads_16bit_grads() const;
  /// The update of 16-bit parameters. Choose it before the first step (or before
  /// load_state_dict): "[optim] ..." when the optimizer already holds state. PureKahan with
  /// Rounding::Stochastic is refused at step time.
  void set_weight_update(WeightUpdate u);
  /// The update of 16-bit parameters (set_weight_update).
  WeightUpdate weight_update() const { return weight_update_; }
  /// Write-back rounding for 16-bit parameters; `seed` makes stochastic rounding repeatable:
  /// the random bits are a hash of (seed, step, parameter index, element index), so results
  /// do not depend on the thread count.
  void set_rounding(Rounding r, uint64_t seed = 0);
  /// The write-back rounding of 16-bit parameters (set_rounding).
  Rounding rounding() const { return rounding_; }

  /// Every tensor of state, named "param_groups.G.lr", "param_groups.G.params" (int64
  /// indices), "state.I.step" (int64), "state.I.exp_avg", "state.I.master" (the float32 copy
  /// of a 16-bit parameter under MasterFloat32), "state.I.compensation" (PureKahan),
  /// "rounding.stochastic", "rounding.seed", "weight_update" (int64: 0 MasterFloat32, 1 Pure,
  /// 2 PureKahan; absent means 0) (I indexes parameters in group order; parameters never
  /// stepped have no "state.I.*"). State buffers of a 16-bit parameter in a Pure mode are in
  /// its dtype. The dict is a snapshot. load_state_dict checks names, shapes, dtypes, option
  /// values and that the dict's weight update is this optimizer's ("[optim] ..." errors) and
  /// changes nothing when it throws; a loaded run continues bit-identically.
  virtual StateDict state_dict() const;
  /// Restores a state_dict() of the same optimizer and parameters (see state_dict()).
  virtual void load_state_dict(const StateDict& sd);

 protected:
  /// Takes the parameter groups and the default options; derived constructors then call init_groups().
  Optimizer(std::vector<OptimizerParamGroup> groups, std::unique_ptr<OptimizerOptions> defaults);

  /// What the base keeps per parameter. Buffers are contiguous, of the parameter's shape,
  /// named as in PyTorch's state, of state_dtype(param).
  struct ParamState {
    int64_t step = 0;     ///< steps taken (float64 parameters too)
    Tensor master;        ///< float32 copy of a 16-bit parameter (MasterFloat32; created at its first step)
    Tensor compensation;  ///< Kahan compensation of a 16-bit parameter (PureKahan; its dtype)
    /// The optimizer's buffers by PyTorch's name ("exp_avg", "momentum_buffer", ...).
    std::vector<std::pair<std::string, Tensor>> buffers;
    /// The buffer `name`, or nullptr.
    Tensor* find(std::string_view name);
  };

  // --- what SGD/Adam/AdamW define
  /// Throws "[optim] ..." when `o` is not this optimizer's options type or out of range.
  virtual void check_options(const OptimizerOptions& o) const = 0;
  /// Buffers a state must hold under `o` (load_state_dict requires them), and every
  /// buffer name this optimizer may keep (anything else is an unexpected key).
  virtual std::vector<std::string> required_buffers(const OptimizerOptions& o) const = 0;
  virtual std::vector<std::string> known_buffers() const = 0;  ///< see required_buffers()
  /// One fused pass over one parameter; `state.step` is already incremented.
  virtual void update(const OptimizerOptions& o, ParamState& state, const detail::StepArgs& args) = 0;
  /// Options <-> "param_groups.G.<name>" entries.
  virtual void save_options(const OptimizerOptions& o, StateDict& sd, const std::string& prefix) const = 0;
  /// The options saved by save_options under `prefix`.
  virtual std::unique_ptr<OptimizerOptions> load_options(const StateDict& sd, const std::string& prefix) const = 0;

  /// Derived constructors call this last: it gives groups without options a copy of the
  /// defaults and validates options and parameters (virtual calls are not possible in
  /// the base constructor).
  void init_groups();
  /// The dtype of `param`'s state buffers: float64 for float64, the parameter's own dtype
  /// for a 16-bit parameter in a Pure mode, else float32.
  DType state_dtype(const Tensor& param) const;
  /// The buffer `name` of `state`, created zero-filled when missing (`created` says so).
  Tensor& state_buffer(ParamState& state, const std::string& name, const Tensor& param, bool* created = nullptr);

  std::vector<OptimizerParamGroup> groups_;     ///< the parameter groups, in order
  std::unique_ptr<OptimizerOptions> defaults_;  ///< the options of groups without their own

 private:
  struct PendingStep;  // an AMP step whose found_inf the host has not read yet (optimizer.cpp)
  void run_step(const AmpStep* amp, PendingStep* pending);
  /// Reads the flag of a pending AMP step (waiting for its copy if needed) and, when the
  /// step was skipped, undoes what the host counted for it.
  void resolve_pending() const;
  void check_group(const OptimizerParamGroup& g, size_t first_index) const;

  /// Keyed by the parameter's TensorImpl: the group holds the Tensor, so the key lives
  /// as long as the entry matters; state_dict numbers parameters in group order. Mutable:
  /// a pending skipped step is undone on first look, from const state_dict() too.
  mutable std::unordered_map<const TensorImpl*, ParamState> state_;
  mutable std::shared_ptr<PendingStep> pending_;
  std::vector<std::pair<int64_t, std::function<void()>>> post_hooks_;
  int64_t next_hook_ = 0;
  void run_post_hooks();
  Rounding rounding_ = Rounding::NearestEven;
  uint64_t seed_ = 0;
  WeightUpdate weight_update_ = WeightUpdate::MasterFloat32;
};

}  // namespace tc::optim
