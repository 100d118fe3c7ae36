// Learning-rate schedules against their closed forms, per group, through state_dict.
#include <cmath>
#include <limits>
#include <numbers>

#include "common/testing.h"

using namespace tc;
using tc::testing::expect_error;

namespace {
std::vector<Tensor> params() { return {tc::zeros({2}).requires_grad_()}; }
double lr0(const optim::Optimizer& o) { return o.param_groups()[0].options->get_lr(); }
}  // namespace

TEST(LRSchedule, StepLR) {
  optim::SGD opt(params(), optim::SGDOptions(0.1));
  optim::StepLR sched(opt, 3, 0.5);
  for (int e = 0; e < 12; ++e) {
    EXPECT_NEAR(lr0(opt), 0.1 * std::pow(0.5, e / 3), 1e-15) << e;
    EXPECT_EQ(sched.last_epoch(), e);
    sched.step();
  }
  expect_error([&] { optim::StepLR(opt, 0); }, {"[lr_scheduler]", "step_size"});
}

TEST(LRSchedule, CosineAnnealingTwoGroups) {
  std::vector<optim::OptimizerParamGroup> groups;
  groups.emplace_back(params());
  groups.emplace_back(params(), std::make_unique<optim::SGDOptions>(0.02));
  optim::SGD opt(std::move(groups), optim::SGDOptions(0.1));
  optim::CosineAnnealingLR sched(opt, 10, 0.001);
  for (int e = 0; e <= 15; ++e) {
    const double c = (1 + std::cos(std::numbers::pi * e / 10)) / 2;
    EXPECT_NEAR(opt.param_groups()[0].options->get_lr(), 0.001 + (0.1 - 0.001) * c, 1e-15) << e;
    EXPECT_NEAR(opt.param_groups()[1].options->get_lr(), 0.001 + (0.02 - 0.001) * c, 1e-15) << e;
    sched.step();
  }
  EXPECT_EQ(sched.base_lrs(), (std::vector<double>{0.1, 0.02}));
}

TEST(LRSchedule, LinearWarmupConstantAndWrapped) {
  {
    optim::AdamW opt(params(), optim::AdamWOptions(1e-3));
    optim::LinearWarmup warm(opt, 4);  // start factor 1/4
    const double expect[] = {0.25e-3, 0.4375e-3, 0.625e-3, 0.8125e-3, 1e-3, 1e-3, 1e-3};
    for (double v : expect) {
      EXPECT_NEAR(lr0(opt), v, 1e-15);
      warm.step();
    }
  }
  {
    optim::AdamW opt(params(), optim::AdamWOptions(1e-3));
    auto cosine = std::make_shared<optim::CosineAnnealingLR>(opt, 20);
    optim::LinearWarmup sched(opt, 5, 0.1, cosine);
    for (int e = 0; e < 30; ++e) {
      const double want =
          e < 5 ? 1e-3 * (0.1 + 0.9 * e / 5.0) : 1e-3 * (1 + std::cos(std::numbers::pi * (e - 5) / 20)) / 2;
      EXPECT_NEAR(lr0(opt), want, 1e-15) << e;
      EXPECT_NEAR(sched.get_last_lr()[0], want, 1e-15);
      sched.step();
    }
  }
}

TEST(LRSchedule, StateDictResume) {
  optim::SGD a(params(), optim::SGDOptions(0.1));
  optim::CosineAnnealingLR sa(a, 50);
  for (int i = 0; i < 17; ++i) sa.step();
  auto sd = sa.state_dict();
  EXPECT_EQ(sd.at("last_epoch").item<int64_t>(), 17);
  EXPECT_EQ(sd.at("base_lrs.0").item_double(), 0.1);

  optim::SGD b(params(), optim::SGDOptions(0.1));
  optim::CosineAnnealingLR sb(b, 50);
  sb.load_state_dict(sd);
  EXPECT_EQ(lr0(b), lr0(a));
  for (int i = 0; i < 5; ++i) sa.step(), sb.step();
  EXPECT_EQ(lr0(b), lr0(a));  // bit-identical

  auto bad = sd;
  bad["what"] = state_int(1);
  expect_error([&] { sb.load_state_dict(bad); }, {"[lr_scheduler]", "unexpected key 'what'"});
  bad = sd;
  bad.erase("last_epoch");
  expect_error([&] { sb.load_state_dict(bad); }, {"last_epoch"});
  // Values and keys from a file: no exception but tc::Error, nothing changed.
  const double lr_before = lr0(b);
  bad = sd;
  bad["base_lrs.99999999999999999999999"] = state_scalar(0.1);  // std::stoull threw out_of_range here
  expect_error([&] { sb.load_state_dict(bad); }, {"[lr_scheduler]", "unexpected key 'base_lrs.9999"});
  bad = sd;
  bad["last_epoch"] = state_scalar(std::nan(""));
  expect_error([&] { sb.load_state_dict(bad); }, {"[lr_scheduler]", "'last_epoch' is nan, expected an integer"});
  bad = sd;  // a count step() could not advance without overflowing int64 (found by fuzzing)
  bad["last_epoch"] = state_int(std::numeric_limits<int64_t>::max());
  expect_error([&] { sb.load_state_dict(bad); },
               {"[lr_scheduler]", "'last_epoch' is 9223372036854775807, expected an integer in [0, 9007199254740992]"});
  bad = sd;
  bad["base_lrs.0"] = state_scalar(std::numeric_limits<double>::infinity());
  expect_error([&] { sb.load_state_dict(bad); }, {"[lr_scheduler]", "'base_lrs.0' is inf, expected a finite value"});
  EXPECT_EQ(lr0(b), lr_before);
}
