// GradScaler: the fused unscale/inf-check kernel, scale/tracker traces against independent
// reference implementations of PyTorch's and Megatron-LM's algorithms, skipped steps that
// change nothing, state-dict round trips, the extensions (bounds, report) and every misuse.
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <set>

#include "backend/cpu/loops/amp_kernels.h"
#include "common/testing.h"
#include "core/tensor_impl.h"
#include "tensorcast/amp/grad_scaler.h"
#include "tensorcast/optim/adam.h"
#include "tensorcast/optim/sgd.h"

namespace tc {
namespace {

using amp::GradScaler;
using amp::GradScalerOptions;
using testing::kInf;
using testing::kNaN;

// ------------------------------------------------------------------ kernel

Tensor f32(double v) { return full({}, v, kFloat32); }

// The reference of one unscaled element: float(value) * float(inv_scale), rounded to dt
// (float64 data computes in double, as PyTorch's opmath type).
double unscaled(double v, float inv, DType dt) {
  if (dt == kFloat64) return v * static_cast<double>(inv);
  const float r = static_cast<float>(v) * inv;
  return scalar_tensor(r, kFloat32).to(dt).item_double();
}

TEST(AmpKernel, UnscalesEveryDtypeAndFindsNothing) {
  for (DType dt : testing::kAllFloat) {
    SCOPED_TRACE(dtype_name(dt));
    // Sizes straddle the thread split and the 16-bit stack blocks.
    std::vector<Tensor> grads = {testing::uniform({1000, 301}, dt, -100, 100, 1),
                                 testing::uniform({7}, dt, -100, 100, 2), testing::uniform({0}, dt, -1, 1, 3),
                                 testing::uniform({3, 1025}, dt, -100, 100, 4)};
    std::vector<Tensor> before;
    for (auto& g : grads) before.push_back(g.clone());
    Tensor found = f32(0.0);
    const float inv = static_cast<float>(1.0 / 3.0);  // not a power of two: rounding matters
    cpu::amp_non_finite_check_and_unscale_(grads, found, f32(inv));
    EXPECT_EQ(found.item_double(), 0.0);
    for (size_t k = 0; k < grads.size(); ++k) {
      std::vector<double> want;
      for (double v : before[k].to_vector()) want.push_back(unscaled(v, inv, dt));
      EXPECT_TRUE(testing::all_close(grads[k], want, {0, 0})) << "tensor " << k;
    }
  }
}

TEST(AmpKernel, FindsInfAndNaNAnywhere) {
  const std::vector<double> bad = {kInf, -kInf, kNaN};
  for (DType dt : testing::kAllFloat)
    for (double b : bad)
      for (int64_t pos : {int64_t{0}, int64_t{1} << 17, int64_t{300000} - 1}) {
        SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " value " << b << " at " << pos);
        Tensor small = testing::uniform({5}, dt);
        Tensor big = zeros({300000}, dt);
        static_cast<void>(big.narrow(0, pos, 1).fill_(b));
        Tensor found = f32(0.0);
        cpu::amp_non_finite_check_and_unscale_({small, big}, found, f32(0.5));
        EXPECT_EQ(found.item_double(), 1.0);
        // Non-finite values stay non-finite; the rest is scaled all the same.
        EXPECT_FALSE(std::isfinite(big.narrow(0, pos, 1).item_double()));
        Tensor found2 = f32(0.0);
        cpu::amp_non_finite_check({big}, found2);
        EXPECT_EQ(found2.item_double(), 1.0);
        EXPECT_FALSE(cpu::has_non_finite(small));
        EXPECT_TRUE(cpu::has_non_finite(big));
      }
}

TEST(AmpKernel, LargestFiniteIsFiniteAndFlagOnlyRises) {
  for (DType dt : testing::kAllFloat) {
    Tensor g = full({1000}, traits(dt).max, dt);
    Tensor found = f32(0.0);
    cpu::amp_non_finite_check({g}, found);
    EXPECT_EQ(found.item_double(), 0.0) << dtype_name(dt);
    Tensor raised = f32(1.0);  // accumulates: a clean list does not clear it
    cpu::amp_non_finite_check({g}, raised);
    EXPECT_EQ(raised.item_double(), 1.0);
  }
}

TEST(AmpKernel, CheckOnlyAndUnitInvScaleWriteNothing) {
  for (DType dt : testing::kFloatingTypes) {
    Tensor g = testing::uniform({4096}, dt, -1e3, 1e3, 7);
    static_cast<void>(g.narrow(0, 10, 1).fill_(kNaN));
    Tensor ref = g.clone();
    Tensor found = f32(0.0);
    cpu::amp_non_finite_check({g}, found);
    cpu::amp_non_finite_check_and_unscale_({g}, found, f32(1.0));
    EXPECT_EQ(std::memcmp(g.raw_data(), ref.raw_data(), g.nbytes()), 0) << dtype_name(dt);
  }
}

TEST(AmpKernel, StridedGradientIsUnscaledInPlace) {
  Tensor base = testing::uniform({64, 48}, kFloat32, -4, 4, 9);
  Tensor view = base.t();  // non-contiguous
  Tensor ref = base.clone();
  Tensor found = f32(0.0);
  cpu::amp_non_finite_check_and_unscale_({view}, found, f32(0.25));
  EXPECT_TRUE(testing::equal(base, mul(ref, 0.25)));
  EXPECT_EQ(found.item_double(), 0.0);
}

// ------------------------------------------------------------------ reference algorithms

// PyTorch's _amp_update_scale_ (the scale is stored as float32).
struct TorchRef {
  double scale, growth, backoff;
  int64_t interval, tracker = 0;
  void update(bool found_inf) {
    if (found_inf) {
      scale = static_cast<float>(scale * backoff);
      tracker = 0;
    } else if (tracker + 1 == interval) {
      const float ns = static_cast<float>(scale * growth);
      if (std::isfinite(ns)) scale = ns;
      tracker = 0;
    } else {
      ++tracker;
    }
  }
};

// Megatron-LM's DynamicGradScaler.update (megatron/core/optimizer/grad_scaler.py).
struct MegatronRef {
  double scale, growth, backoff;
  int64_t interval, hysteresis, tracker = 0, hyst_tracker;
  MegatronRef(double s, double g, double b, int64_t i, int64_t h)
      : scale(s), growth(g), backoff(b), interval(i), hysteresis(h), hyst_tracker(h) {}
  void update(bool found_inf) {
    if (found_inf) {
      tracker = 0;
      hyst_tracker -= 1;
      if (hyst_tracker <= 0) scale = static_cast<float>(scale * backoff);
    } else {
      tracker += 1;
      if (tracker == interval) {
        tracker = 0;
        hyst_tracker = hysteresis;
        scale = static_cast<float>(scale * growth);
      }
    }
  }
};

// A small model whose loss gradients are known: loss = sum_k sum(p_k * c_k).
struct Toy {
  std::vector<Tensor> params;
  std::vector<Tensor> coef;
  explicit Toy(DType dt = kFloat32) {
    const std::vector<Shape> shapes = {{4, 3}, {128, 784}, {5}};
    for (size_t k = 0; k < shapes.size(); ++k) {
      params.push_back(testing::uniform(shapes[k], dt, -1, 1, 10 + k).requires_grad_());
      coef.push_back(testing::uniform(shapes[k], dt, -1, 1, 20 + k));
    }
  }
  Tensor loss() const {
    Tensor l;
    for (size_t k = 0; k < params.size(); ++k) {
      Tensor t = (params[k] * coef[k]).sum().to(kFloat32);
      l = l.defined() ? l + t : t;
    }
    return l;
  }
};

// Puts `value` into element 0 of parameter `k`'s gradient.
void inject(const Tensor& param, double value) {
  static_cast<void>(param.grad().view({-1}).narrow(0, 0, 1).fill_(value));
}

struct TraceStep {
  double scale;
  int64_t tracker;
  bool stepped;
};

// Runs `steps` iterations, injecting inf/NaN on the steps in `bad` (into parameter
// step % 3, alternating inf and NaN), alternating the explicit-unscale and fused paths.
std::vector<TraceStep> run_trace(GradScaler& scaler, optim::Optimizer& opt, Toy& toy, int first, int last,
                                 const std::set<int>& bad) {
  std::vector<TraceStep> out;
  for (int s = first; s < last; ++s) {
    opt.zero_grad();
    scaler.scale(toy.loss()).backward();
    if (bad.count(s)) inject(toy.params[s % 3], s % 2 ? kNaN : kInf);
    if (s % 2) scaler.unscale_(opt);
    const bool stepped = scaler.step(opt);
    scaler.update();
    out.push_back({scaler.get_scale(), scaler.get_growth_tracker(), stepped});
  }
  return out;
}

const std::set<int> kBad = {2, 5, 6, 7, 15, 20, 21, 33, 40, 41, 42, 43, 47};

TEST(GradScalerTrace, MatchesPyTorchAlgorithm) {
  struct Case {
    double init, growth, backoff;
    int64_t interval;
  };
  for (Case c : {Case{65536.0, 2.0, 0.5, 3}, Case{1000.0, 1.7, 0.3, 2}, Case{3.0e38, 2.0, 0.5, 1}}) {
    SCOPED_TRACE(::testing::Message() << "init " << c.init << " growth " << c.growth);
    Toy toy;
    optim::SGD opt(toy.params, optim::SGDOptions(1e-3).momentum(0.9));
    GradScaler scaler(
        GradScalerOptions().init_scale(c.init).growth_factor(c.growth).backoff_factor(c.backoff).growth_interval(
            c.interval));
    TorchRef ref{static_cast<float>(c.init), c.growth, c.backoff, c.interval};
    const auto trace = run_trace(scaler, opt, toy, 0, 50, kBad);
    for (int s = 0; s < 50; ++s) {
      ref.update(kBad.count(s) > 0);
      EXPECT_EQ(trace[s].scale, ref.scale) << "step " << s;
      EXPECT_EQ(trace[s].tracker, ref.tracker) << "step " << s;
      EXPECT_EQ(trace[s].stepped, kBad.count(s) == 0) << "step " << s;
    }
    EXPECT_EQ(scaler.steps_skipped(), static_cast<int64_t>(kBad.size()));
    EXPECT_EQ(scaler.steps_taken(), 50 - static_cast<int64_t>(kBad.size()));
  }
}

TEST(GradScalerTrace, MatchesMegatronAlgorithmWithHysteresis) {
  for (int64_t h : {1, 2, 3}) {
    SCOPED_TRACE(::testing::Message() << "hysteresis " << h);
    Toy toy;
    optim::SGD opt(toy.params, optim::SGDOptions(1e-3));
    GradScaler scaler(GradScalerOptions().init_scale(4096).growth_interval(4).hysteresis(h));
    MegatronRef ref(4096, 2.0, 0.5, 4, h);
    TorchRef torch_ref{4096, 2.0, 0.5, 4};
    const auto trace = run_trace(scaler, opt, toy, 0, 50, kBad);
    for (int s = 0; s < 50; ++s) {
      ref.update(kBad.count(s) > 0);
      torch_ref.update(kBad.count(s) > 0);
      EXPECT_EQ(trace[s].scale, ref.scale) << "step " << s;
      EXPECT_EQ(trace[s].tracker, ref.tracker) << "step " << s;
      // Megatron with hysteresis 1 is PyTorch's algorithm.
      if (h == 1) EXPECT_EQ(trace[s].scale, torch_ref.scale) << "step " << s;
    }
    EXPECT_EQ(scaler.get_hysteresis_tracker(), std::max<int64_t>(ref.hyst_tracker, 0));
  }
}

TEST(GradScalerTrace, StateDictRoundTripMidRunContinuesIdentically) {
  for (int64_t h : {1, 3}) {
    auto make = [&] {
      return GradScalerOptions().init_scale(1024).growth_interval(3).hysteresis(h).min_scale(1).max_scale(8192);
    };
    Toy toy_a, toy_b;
    optim::SGD opt_a(toy_a.params, optim::SGDOptions(1e-3));
    optim::SGD opt_b(toy_b.params, optim::SGDOptions(1e-3));
    GradScaler a(make());
    const auto full_trace = run_trace(a, opt_a, toy_a, 0, 50, kBad);

    GradScaler b(make());
    run_trace(b, opt_b, toy_b, 0, 21, kBad);  // stops inside a hysteresis window
    const StateDict sd = b.state_dict();
    GradScaler c(GradScalerOptions().init_scale(7).growth_interval(100));  // every setting differs
    c.load_state_dict(sd);
    EXPECT_EQ(c.get_scale(), b.get_scale());
    const auto rest = run_trace(c, opt_b, toy_b, 21, 50, kBad);
    for (int s = 21; s < 50; ++s) {
      EXPECT_EQ(rest[s - 21].scale, full_trace[s].scale) << "step " << s;
      EXPECT_EQ(rest[s - 21].tracker, full_trace[s].tracker) << "step " << s;
    }
    EXPECT_EQ(c.steps_taken(), a.steps_taken());
    EXPECT_EQ(c.steps_skipped(), a.steps_skipped());
    EXPECT_EQ(c.get_hysteresis_tracker(), a.get_hysteresis_tracker());
  }
}

TEST(GradScalerStateDict, HasPyTorchKeysAndLoadsAPyTorchDict) {
  GradScaler s;
  for (const char* k : {"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"})
    EXPECT_TRUE(s.state_dict().count(k)) << k;
  EXPECT_EQ(s.state_dict().at("scale").item_double(), 65536.0);
  // PyTorch's five keys alone (what torch.save(scaler.state_dict()) holds).
  StateDict torch_sd = {{"scale", state_scalar(512.0)},
                        {"growth_factor", state_scalar(4.0)},
                        {"backoff_factor", state_scalar(0.25)},
                        {"growth_interval", state_int(10)},
                        {"_growth_tracker", state_int(9)}};
  GradScaler t(GradScalerOptions().hysteresis(5));
  t.load_state_dict(torch_sd);
  EXPECT_EQ(t.get_scale(), 512.0);
  EXPECT_EQ(t.get_growth_tracker(), 9);
  EXPECT_EQ(t.options().hysteresis(), 1);
  Toy toy;
  optim::SGD opt(toy.params, optim::SGDOptions(0.0));
  t.scale(toy.loss()).backward();
  t.step(opt);
  t.update();  // tracker 9 -> 10 = interval: grows by 4
  EXPECT_EQ(t.get_scale(), 2048.0);
  EXPECT_EQ(t.get_growth_tracker(), 0);

  GradScaler disabled(GradScalerOptions().enabled(false));
  EXPECT_TRUE(disabled.state_dict().empty());
  testing::expect_error([&] { t.load_state_dict({}); }, "The source state dict is empty");
  testing::expect_error(
      [&] {
        t.load_state_dict({{"scale", state_scalar(1.0)}});
      },
      {"[GradScaler]", "no entry 'growth_factor'"});
}

TEST(GradScalerState, HostileValuesAreRefusedBeforeAnyCast) {
  // A dict from a file: NaN or huge counters were cast to integers (undefined behaviour).
  const StateDict good = {{"scale", state_scalar(512.0)},
                          {"growth_factor", state_scalar(2.0)},
                          {"backoff_factor", state_scalar(0.5)},
                          {"growth_interval", state_int(10)},
                          {"_growth_tracker", state_int(3)}};
  struct Case {
    std::string key;
    Tensor value;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"growth_interval", state_scalar(kNaN), "'growth_interval' is nan, expected an integer"},
      {"growth_interval", state_scalar(1e19), "'growth_interval' is 1e+19, expected an integer"},
      {"growth_interval", state_int(int64_t{1} << 40), "expected an integer in [1, 2147483647]"},
      {"_growth_tracker", state_scalar(-1.0), "'_growth_tracker' is -1, expected an integer in [0,"},
      {"scale", state_scalar(kInf), "'scale' is inf, expected a finite value"},
      {"scale", state_scalar(0.0), "'scale' is 0, expected a finite value"},
      {"growth_factor", state_scalar(kNaN), "'growth_factor' is nan"},
      {"backoff_factor", state_scalar(1.0), "invalid settings"},
      {"hysteresis", state_scalar(0.5), "'hysteresis' is 0.5, expected an integer"},
      {"steps_taken", state_scalar(-kInf), "'steps_taken' is -inf"},
      // a count the next step would overflow
      {"steps_taken", state_int(INT64_MAX),
       "'steps_taken' is 9223372036854775807, expected an integer in [0, 4611686018427387904]"},
      {"steps_skipped", state_int(int64_t{1} << 62 | 1), "expected an integer in [0, 4611686018427387904]"},
      {"min_scale", state_scalar(1e6), "min_scale 1e+06 above max_scale 1000"},
      {"scale", zeros({0}), "'scale' should hold one value, got shape (0,)"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.key + ": " + c.message);
    GradScaler s(GradScalerOptions().init_scale(64.0).max_scale(1000.0));
    StateDict sd = good;
    sd[c.key] = c.value;
    testing::expect_error([&] { s.load_state_dict(sd); }, {"[GradScaler]", c.message});
    EXPECT_EQ(s.get_scale(), 64.0);  // nothing changed
  }
}

TEST(NonFinite, FoundAndFirstAcrossTensorsOfEveryFloatDtype) {
  for (DType dt : testing::kAllFloat) {
    SCOPED_TRACE(dtype_name(dt));
    std::vector<Tensor> ts = {ones({3, 5}, dt), Tensor(), ones({1000}, dt).slice(0, 0, 1000, 3), ones({}, dt)};
    EXPECT_FALSE(amp::found_nonfinite(ts));
    EXPECT_EQ(amp::first_nonfinite(ts), -1);
    for (double bad : {kInf, -kInf, kNaN}) {
      std::vector<Tensor> c = {ts[0].clone(), Tensor(), ts[2].clone(), ts[3].clone()};
      c[2].narrow(0, 300, 1).fill_(bad);  // deep inside a strided tensor
      EXPECT_TRUE(amp::found_nonfinite(c));
      EXPECT_EQ(amp::first_nonfinite(c), 2);
      c[3].fill_(bad);
      EXPECT_EQ(amp::first_nonfinite(c), 2);
    }
    // The largest finite value is finite.
    std::vector<Tensor> big = {full({4}, dt == kFloat64 ? 1.7e308 : dt == kFloat16 ? 65504.0 : 3.0e38, dt)};
    EXPECT_FALSE(amp::found_nonfinite(big));
  }
  EXPECT_FALSE(amp::found_nonfinite({}));
  testing::expect_error([&] { amp::found_nonfinite({zeros({2}, kInt64)}); }, {"[found_nonfinite]", "floating"});
}

// ------------------------------------------------------------------ skipped steps

// Every tensor of the optimizer's state and the parameters, bit for bit.
void expect_bit_identical(const StateDict& a, const StateDict& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [k, v] : a) {
    ASSERT_TRUE(b.count(k)) << k;
    const Tensor& w = b.at(k);
    ASSERT_EQ(v.sizes(), w.sizes()) << k;
    ASSERT_EQ(v.dtype(), w.dtype()) << k;
    Tensor x = v.contiguous(), y = w.contiguous();
    EXPECT_EQ(std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()), 0) << k;
  }
}

StateDict snapshot(const optim::Optimizer& opt, const Toy& toy) {
  StateDict sd = opt.state_dict();
  for (size_t k = 0; k < toy.params.size(); ++k) sd["param." + std::to_string(k)] = toy.params[k].detach().clone();
  return sd;
}

void check_skip_changes_nothing(optim::Optimizer& opt, Toy& toy, bool explicit_unscale) {
  GradScaler scaler(GradScalerOptions().init_scale(256));
  for (int s = 0; s < 3; ++s) {  // real steps first, so moments and step counts exist
    opt.zero_grad();
    scaler.scale(toy.loss()).backward();
    ASSERT_TRUE(scaler.step(opt));
    scaler.update();
  }
  const StateDict before = snapshot(opt, toy);
  opt.zero_grad();
  scaler.scale(toy.loss()).backward();
  inject(toy.params[1], kInf);
  if (explicit_unscale) scaler.unscale_(opt);
  EXPECT_FALSE(scaler.step(opt));
  scaler.update();
  expect_bit_identical(before, snapshot(opt, toy));
  EXPECT_EQ(scaler.get_scale(), 128.0);
  EXPECT_TRUE(scaler.last_step().skipped);
  EXPECT_EQ(scaler.last_step().first_nonfinite.value_or(""), "group 0 param 1 (shape (128, 784))");
  EXPECT_EQ(scaler.last_step().group, 0);
  EXPECT_EQ(scaler.last_step().param, 1);
  // The next clean step goes ahead.
  opt.zero_grad();
  scaler.scale(toy.loss()).backward();
  EXPECT_TRUE(scaler.step(opt));
  EXPECT_FALSE(scaler.last_step().skipped);
  EXPECT_FALSE(scaler.last_step().first_nonfinite.has_value());
  scaler.update();
}

TEST(GradScalerSkip, SGDMomentumStateIsBitIdentical) {
  for (bool explicit_unscale : {false, true}) {
    Toy toy;
    optim::SGD opt(toy.params, optim::SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(1e-2));
    check_skip_changes_nothing(opt, toy, explicit_unscale);
  }
}

TEST(GradScalerSkip, AdamStateIsBitIdentical) {
  for (bool explicit_unscale : {false, true}) {
    Toy toy;
    optim::Adam opt(toy.params, optim::AdamOptions(1e-2).weight_decay(1e-2).amsgrad(true));
    check_skip_changes_nothing(opt, toy, explicit_unscale);
  }
}

TEST(GradScalerSkip, MasterWeightsStateIsBitIdentical) {
  for (DType dt : {kBFloat16, kFloat16}) {
    Toy toy(dt);
    optim::Adam opt(toy.params, optim::AdamOptions(1e-2));
    ASSERT_TRUE(opt.has_master_weights());
    check_skip_changes_nothing(opt, toy, /*explicit_unscale=*/true);  // fp16 grads allowed here
  }
}

// A skipped first step leaves no state at all (no step count, master copy or moment
// buffer, as PyTorch never calls the optimizer), so the run continues exactly as one that
// never saw it: SGD's first real step must still initialize its momentum buffer from the
// gradient (visible with dampening), Adam's bias corrections must count from 1.
TEST(GradScalerSkip, SkippedFirstStepLeavesNoState) {
  for (int which = 0; which < 3; ++which) {
    SCOPED_TRACE(which);
    auto run = [&](bool skip_first) {
      Toy toy(which == 2 ? kBFloat16 : kFloat32);
      std::unique_ptr<optim::Optimizer> opt;
      if (which == 0)
        opt = std::make_unique<optim::SGD>(toy.params, optim::SGDOptions(0.1).momentum(0.9).dampening(0.5));
      else
        opt = std::make_unique<optim::Adam>(toy.params, optim::AdamOptions(1e-2).amsgrad(true));
      GradScaler scaler(GradScalerOptions().init_scale(256));
      if (skip_first) {
        opt->zero_grad();
        scaler.scale(toy.loss()).backward();
        inject(toy.params[2], kNaN);
        EXPECT_FALSE(scaler.step(*opt));
        scaler.update();
        for (const auto& [key, t] : opt->state_dict()) EXPECT_NE(key.rfind("state.", 0), 0u) << key;
      }
      for (int s = 0; s < 3; ++s) {
        opt->zero_grad();
        scaler.scale(toy.loss()).backward();
        EXPECT_TRUE(scaler.step(*opt));
        // The same scale from here on in both runs: only the optimizer can differ.
        scaler.update(256.0);
      }
      EXPECT_EQ(scaler.steps_skipped(), skip_first ? 1 : 0);
      return snapshot(*opt, toy);
    };
    expect_bit_identical(run(false), run(true));
  }
}

// ------------------------------------------------------------------ equivalences

TEST(GradScalerStep, FusedAndExplicitUnscaleAndUnscaledFp32AreBitIdentical) {
  // A power-of-two scale is exact, so all three paths see the same fp32 gradients.
  Toy t0, t1, t2;
  optim::Adam o0(t0.params, optim::AdamOptions(1e-2));
  optim::Adam o1(t1.params, optim::AdamOptions(1e-2));
  optim::Adam o2(t2.params, optim::AdamOptions(1e-2));
  GradScaler s1(GradScalerOptions().growth_interval(2)), s2(GradScalerOptions().growth_interval(2));
  for (int s = 0; s < 6; ++s) {
    o0.zero_grad();
    t0.loss().backward();
    o0.step();
    o1.zero_grad();
    s1.scale(t1.loss()).backward();
    EXPECT_TRUE(s1.step(o1));  // fused
    s1.update();
    o2.zero_grad();
    s2.scale(t2.loss()).backward();
    s2.unscale_(o2);
    EXPECT_TRUE(s2.step(o2));
    s2.update();
  }
  EXPECT_EQ(s1.get_scale(), 65536.0 * 8);
  for (size_t k = 0; k < t0.params.size(); ++k) {
    EXPECT_TRUE(testing::equal(t1.params[k], t0.params[k])) << k;
    EXPECT_TRUE(testing::equal(t2.params[k], t0.params[k])) << k;
  }
}

TEST(GradScalerStep, UnscaleGroupsMixedDtypes) {
  Tensor a = testing::uniform({33}, kFloat32, -1, 1, 1).requires_grad_();
  Tensor b = testing::uniform({17}, kBFloat16, -1, 1, 2).requires_grad_();
  Tensor c = testing::uniform({9}, kFloat16, -1, 1, 3).requires_grad_();
  optim::SGD opt({a, b, c}, optim::SGDOptions(0.0));
  GradScaler scaler(GradScalerOptions().init_scale(1024));
  scaler.scale((a.sum() + b.sum().to(kFloat32) + c.sum().to(kFloat32)) * 0.5).backward();
  scaler.unscale_(opt);
  for (const Tensor& p : {a, b, c}) EXPECT_TRUE(testing::all_close(p.grad(), full_like(p, 0.5), {0, 0}));
  EXPECT_TRUE(scaler.step(opt));
}

TEST(GradScalerStep, EachOptimizerSkipsOnItsOwnAndUpdateCombinesThem) {
  Toy t1, t2;
  optim::SGD o1(t1.params, optim::SGDOptions(0.1));
  optim::SGD o2(t2.params, optim::SGDOptions(0.1));
  GradScaler scaler(GradScalerOptions().init_scale(64));
  o1.zero_grad();
  o2.zero_grad();
  scaler.scale(t1.loss() + t2.loss()).backward();
  inject(t2.params[0], kNaN);
  const Tensor before = t1.params[0].detach().clone();
  EXPECT_TRUE(scaler.step(o1));
  EXPECT_FALSE(scaler.step(o2));
  EXPECT_FALSE(testing::equal(t1.params[0], before));
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 32.0);
  EXPECT_EQ(scaler.steps_taken(), 1);
  EXPECT_EQ(scaler.steps_skipped(), 1);
}

// ------------------------------------------------------------------ extensions

TEST(GradScalerBounds, MinScaleRaisesOrClamps) {
  Toy toy;
  optim::SGD opt(toy.params, optim::SGDOptions(0.0));
  auto overflow_step = [&](GradScaler& s) {
    opt.zero_grad();
    s.scale(toy.loss()).backward();
    inject(toy.params[0], kInf);
    s.step(opt);
    s.update();
  };
  GradScaler strict(GradScalerOptions().init_scale(4).min_scale(1));
  overflow_step(strict);
  overflow_step(strict);
  EXPECT_EQ(strict.get_scale(), 1.0);
  testing::expect_error([&] { overflow_step(strict); }, {"[GradScaler]", "below min_scale 1", "clamp_min_scale"});
  EXPECT_EQ(strict.get_scale(), 1.0);  // unchanged by the failed update

  GradScaler clamped(GradScalerOptions().init_scale(3).min_scale(1).clamp_min_scale(true));
  for (int i = 0; i < 4; ++i) overflow_step(clamped);
  EXPECT_EQ(clamped.get_scale(), 1.0);
}

TEST(GradScalerBounds, GrowthStopsAtMaxScaleAndNeverReachesInf) {
  Toy toy;
  optim::SGD opt(toy.params, optim::SGDOptions(0.0));
  auto clean_step = [&](GradScaler& s) {
    opt.zero_grad();
    s.scale(toy.loss()).backward();
    s.step(opt);
    s.update();
  };
  GradScaler capped(GradScalerOptions().init_scale(100).growth_interval(1).max_scale(1000));
  for (int i = 0; i < 6; ++i) clean_step(capped);
  EXPECT_EQ(capped.get_scale(), 1000.0);
  GradScaler huge(GradScalerOptions().init_scale(2e38).growth_interval(1));
  clean_step(huge);
  EXPECT_EQ(huge.get_scale(), static_cast<double>(2e38f));  // 4e38 is not a float: no growth
}

TEST(GradScalerApi, UpdateWithNewScaleAndScaleOfVectors) {
  Toy toy;
  optim::SGD opt(toy.params, optim::SGDOptions(0.0));
  GradScaler scaler;
  EXPECT_EQ(scaler.get_scale(), 65536.0);  // before the first scale(): init_scale
  auto outs = scaler.scale(std::vector<Tensor>{f32(1.5), full({2}, 2.0, kBFloat16)});
  EXPECT_EQ(outs[0].item_double(), 1.5 * 65536);
  EXPECT_EQ(outs[1].dtype(), kBFloat16);  // a 0-d scale does not widen the output
  scaler.update(3.0);
  EXPECT_EQ(scaler.get_scale(), 3.0);
  EXPECT_EQ(scaler.scale(f32(2.0)).item_double(), 6.0);
}

TEST(GradScalerApi, DisabledIsAPassThrough) {
  Toy toy;
  optim::SGD opt(toy.params, optim::SGDOptions(0.1));
  GradScaler scaler(GradScalerOptions().enabled(false).growth_factor(0.5));  // not validated when disabled
  EXPECT_FALSE(scaler.is_enabled());
  Tensor loss = toy.loss();
  EXPECT_TRUE(scaler.scale(loss).is_same(loss));
  loss.backward();
  const Tensor before = toy.params[0].detach().clone();
  scaler.unscale_(opt);
  EXPECT_TRUE(scaler.step(opt));
  EXPECT_FALSE(testing::equal(toy.params[0], before));
  scaler.update();
  scaler.update(8.0);
  EXPECT_EQ(scaler.get_scale(), 1.0);
}

// ------------------------------------------------------------------ misuse

TEST(GradScalerMisuse, StateMachineErrorsCarryPyTorchMessages) {
  Toy toy;
  optim::SGD opt(toy.params, optim::SGDOptions(0.1));
  GradScaler scaler;
  // scale() never called
  for (auto fn : std::vector<std::function<void()>>{[&] { scaler.unscale_(opt); }, [&] { scaler.step(opt); },
                                                    [&] { scaler.update(); }, [&] { scaler.update(2.0); }})
    testing::expect_error(fn, {"[GradScaler] Attempted", "but _scale is None.  This may indicate",
                               "did not use scaler.scale(loss or outputs)"});

  scaler.scale(toy.loss()).backward();
  scaler.unscale_(opt);
  testing::expect_error([&] { scaler.unscale_(opt); },
                        "[GradScaler] unscale_() has already been called on this optimizer since the last update().");
  scaler.step(opt);
  testing::expect_error([&] { scaler.unscale_(opt); }, "[GradScaler] unscale_() is being called after step().");
  testing::expect_error([&] { scaler.step(opt); },
                        "[GradScaler] step() has already been called since the last update().");
  scaler.update();
  // After update() the optimizer is READY again.
  scaler.scale(toy.loss()).backward();
  EXPECT_TRUE(scaler.step(opt));
  testing::expect_error([&] { scaler.step(opt); }, "step() has already been called since the last update().");
  scaler.update();
  // update() without any step/unscale_ since the last one.
  testing::expect_error([&] { scaler.update(); }, "[GradScaler] No inf checks were recorded prior to update.");
  // An optimizer without gradients.
  opt.zero_grad();
  testing::expect_error([&] { scaler.step(opt); }, "[GradScaler] No inf checks were recorded for this optimizer.");
}

TEST(GradScalerMisuse, Fp16GradientsWithoutMasterWeights) {
  Tensor p = zeros({4}).requires_grad_();
  optim::SGD opt({p}, optim::SGDOptions(0.1));
  ASSERT_FALSE(opt.has_master_weights());
  p.impl()->grad = zeros({4}, kFloat16);  // what set_grad refuses; PyTorch can get here
  GradScaler scaler;
  scaler.scale(f32(1.0));
  testing::expect_error([&] { scaler.unscale_(opt); }, "[GradScaler] Attempting to unscale FP16 gradients.");
}

TEST(GradScalerMisuse, BadOptions) {
  testing::expect_error([] { GradScaler s(GradScalerOptions().growth_factor(1.0)); },
                        "The growth factor must be > 1.0.");
  testing::expect_error([] { GradScaler s(GradScalerOptions().backoff_factor(1.0)); },
                        "The backoff factor must be < 1.0.");
  testing::expect_error([] { GradScaler s(GradScalerOptions().backoff_factor(0.0)); }, "[GradScaler]");
  testing::expect_error([] { GradScaler s(GradScalerOptions().growth_interval(0)); }, "growth_interval");
  testing::expect_error([] { GradScaler s(GradScalerOptions().hysteresis(0)); }, "hysteresis");
  testing::expect_error([] { GradScaler s(GradScalerOptions().init_scale(kInf)); }, "init_scale");
  testing::expect_error([] { GradScaler s(GradScalerOptions().min_scale(10).max_scale(5)); }, "below min_scale");
}

}  // namespace
}  // namespace tc
