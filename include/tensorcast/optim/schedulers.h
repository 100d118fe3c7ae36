/// \file
/// Learning-rate schedules with PyTorch's semantics, computed in closed form per step:
///
/// \code{.cpp}
///   tc::optim::AdamW opt(model->parameters(), tc::optim::AdamWOptions(1e-3));
///   tc::optim::CosineAnnealingLR sched(opt, /*T_max=*/total_steps);
///   for (...) { ...; opt.step(); sched.step(); }
/// \endcode
///
/// A scheduler records each parameter group's lr at construction as its base lr and sets
/// the lr for epoch 0 at once (as PyTorch's constructor does); step() advances last_epoch
/// and writes lr(last_epoch, base) into every group through options->set_lr. Because
/// each lr is a function of (epoch, base) alone, a resumed run gets exactly the same lrs.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "tensorcast/optim/optimizer.h"
#include "tensorcast/state_dict.h"

namespace tc::optim {

/// The base of the learning-rate schedules: sets every group's lr from its base lr and the epoch (step count).
class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  void step();  ///< last_epoch += 1, then set the lrs
  /// Steps taken (0 right after construction).
  int64_t last_epoch() const noexcept { return last_epoch_; }
  /// Each group's lr at construction.
  const std::vector<double>& base_lrs() const noexcept { return base_lrs_; }
  std::vector<double> get_last_lr() const;  ///< the lrs the groups hold now
  /// The schedule itself: the lr at `epoch` for a group whose base lr is `base_lr`.
  virtual double lr_at(int64_t epoch, double base_lr) const = 0;

  /// "last_epoch" (int64) and "base_lrs.G" (float64), for checkpoints. load_state_dict
  /// restores them and writes the lrs for last_epoch into the optimizer.
  StateDict state_dict() const;
  /// Restores a state_dict() and writes its lrs into the optimizer.
  void load_state_dict(const StateDict& sd);

 protected:
  /// Schedules `optimizer`'s groups from their current lrs.
  explicit LRScheduler(Optimizer& optimizer);
  /// Derived constructors call this last (lr_at is virtual): sets epoch 0's lrs.
  void initial_step();

 private:
  void apply();
  Optimizer& optimizer_;
  std::vector<double> base_lrs_;
  int64_t last_epoch_ = 0;
};

/// lr = base * gamma ^ floor(epoch / step_size).
class StepLR : public LRScheduler {
 public:
  /// lr = base_lr * gamma^(epoch / step_size).
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

/// lr = eta_min + (base - eta_min) * (1 + cos(pi * epoch / T_max)) / 2 (PyTorch's closed
/// form; past T_max it follows the cosine back up, as PyTorch's does).
class CosineAnnealingLR : public LRScheduler {
 public:
  /// Cosine from base_lr to eta_min over T_max epochs.
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0.0);
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  int64_t T_max_;
  double eta_min_;
};

/// Linear warmup over `warmup_steps` steps, as torch.optim.lr_scheduler.LinearLR:
/// \verbatim
///   factor(e) = start_factor + (1 - start_factor) * min(e, warmup_steps) / warmup_steps,
/// \endverbatim
/// then constant (lr = base), or, when `after` is given, the `after` schedule shifted by
/// the warmup (epoch e >= warmup_steps gets after.lr_at(e - warmup_steps, base)), as
/// SequentialLR([LinearLR, after], milestones=[warmup_steps]). start_factor defaults to
/// 1 / warmup_steps, so the first step already moves. `after` must be built on the same
/// optimizer before this scheduler (so it records the true base lrs); only this one is
/// stepped.
class LinearWarmup : public LRScheduler {
 public:
  /// Warms up over warmup_steps, then hands over to `after` (if any).
  LinearWarmup(Optimizer& optimizer, int64_t warmup_steps, double start_factor = -1.0,
               std::shared_ptr<LRScheduler> after = nullptr);
  /// As above with the default start factor.
  LinearWarmup(Optimizer& optimizer, int64_t warmup_steps, std::shared_ptr<LRScheduler> after)
      : LinearWarmup(optimizer, warmup_steps, -1.0, std::move(after)) {}
  double lr_at(int64_t epoch, double base_lr) const override;

 private:
  int64_t warmup_steps_;
  double start_factor_;
  std::shared_ptr<LRScheduler> after_;
};

}  // namespace tc::optim
