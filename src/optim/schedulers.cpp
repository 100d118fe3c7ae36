// StepLR, CosineAnnealingLR, LinearWarmup: closed forms, so lrs never drift with steps.
#include "tensorcast/optim/schedulers.h"

#include <charconv>
#include <cmath>
#include <numbers>
#include <string>

namespace tc::optim {

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  for (auto& g : optimizer_.param_groups()) {
    const OptimizerOptions& o = g.options ? *g.options : optimizer_.defaults();
    base_lrs_.push_back(o.get_lr());
  }
}

void LRScheduler::initial_step() {
  last_epoch_ = 0;
  apply();
}

// The largest step count a scheduler keeps: every count up to it is exact as a double
// (the closed forms' argument), and a count from a hostile file cannot overflow on step().
constexpr int64_t kMaxEpoch = int64_t{1} << 53;

void LRScheduler::step() {
  TC_CHECK(last_epoch_ < kMaxEpoch, "lr_scheduler", "step count ", last_epoch_, " would pass its limit ", kMaxEpoch);
  ++last_epoch_;
  apply();
}

void LRScheduler::apply() {
  auto& groups = optimizer_.param_groups();
  TC_CHECK(groups.size() == base_lrs_.size(), "lr_scheduler", "the optimizer has ", groups.size(),
           " parameter groups but the scheduler was built for ", base_lrs_.size());
  for (size_t i = 0; i < groups.size(); ++i) {
    TC_CHECK(groups[i].options != nullptr, "lr_scheduler", "parameter group ", i, " has no options");
    groups[i].options->set_lr(lr_at(last_epoch_, base_lrs_[i]));
  }
}

std::vector<double> LRScheduler::get_last_lr() const {
  std::vector<double> out;
  for (auto& g : optimizer_.param_groups())
    out.push_back(g.options ? g.options->get_lr() : optimizer_.defaults().get_lr());
  return out;
}

StateDict LRScheduler::state_dict() const {
  StateDict sd;
  sd["last_epoch"] = state_int(last_epoch_);
  for (size_t i = 0; i < base_lrs_.size(); ++i) sd["base_lrs." + std::to_string(i)] = state_scalar(base_lrs_[i]);
  return sd;
}

void LRScheduler::load_state_dict(const StateDict& sd) {
  const int64_t epoch = read_state_int(sd, "last_epoch", "lr_scheduler", 0, kMaxEpoch);
  std::vector<double> base(base_lrs_.size());
  for (size_t i = 0; i < base.size(); ++i)
    base[i] = read_state_double(sd, "base_lrs." + std::to_string(i), "lr_scheduler", 0.0);
  for (const auto& entry : sd) {
    const std::string& k = entry.first;  // not a structured binding: clang 14 cannot capture one in a lambda
    const bool known = k == "last_epoch" || (k.rfind("base_lrs.", 0) == 0 && [&] {
                         size_t idx = 0;
                         const char* b = k.data() + 9;
                         const char* e = k.data() + k.size();
                         const auto [end, ec] = std::from_chars(b, e, idx);
                         return b != e && ec == std::errc() && end == e && idx < base.size();
                       }());
    TC_CHECK(known, "lr_scheduler", "unexpected key '", k, "' in the state dict");
  }
  last_epoch_ = epoch;
  base_lrs_ = std::move(base);
  apply();
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  TC_CHECK(step_size > 0, "lr_scheduler", "StepLR: step_size must be positive, got ", step_size);
  initial_step();
}

double StepLR::lr_at(int64_t epoch, double base_lr) const {
  return base_lr * std::pow(gamma_, static_cast<double>(epoch / step_size_));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer), T_max_(T_max), eta_min_(eta_min) {
  TC_CHECK(T_max > 0, "lr_scheduler", "CosineAnnealingLR: T_max must be positive, got ", T_max);
  initial_step();
}

double CosineAnnealingLR::lr_at(int64_t epoch, double base_lr) const {
  const double c = std::cos(std::numbers::pi * static_cast<double>(epoch) / static_cast<double>(T_max_));
  return eta_min_ + (base_lr - eta_min_) * (1.0 + c) / 2.0;
}

LinearWarmup::LinearWarmup(Optimizer& optimizer, int64_t warmup_steps, double start_factor,
                           std::shared_ptr<LRScheduler> after)
    : LRScheduler(optimizer),
      warmup_steps_(warmup_steps),
      start_factor_(start_factor < 0 ? 1.0 / static_cast<double>(warmup_steps) : start_factor),
      after_(std::move(after)) {
  TC_CHECK(warmup_steps > 0, "lr_scheduler", "LinearWarmup: warmup_steps must be positive, got ", warmup_steps);
  TC_CHECK(start_factor_ > 0.0 && start_factor_ <= 1.0, "lr_scheduler",
           "LinearWarmup: start_factor must be in (0, 1], got ", start_factor_);
  initial_step();
}

double LinearWarmup::lr_at(int64_t epoch, double base_lr) const {
  if (after_ && epoch >= warmup_steps_) return after_->lr_at(epoch - warmup_steps_, base_lr);
  const double t = static_cast<double>(std::min(epoch, warmup_steps_)) / static_cast<double>(warmup_steps_);
  return base_lr * (start_factor_ + (1.0 - start_factor_) * t);
}

}  // namespace tc::optim
