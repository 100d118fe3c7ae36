// Pure 16-bit optimizer updates (WeightUpdate::Pure and PureKahan): bit-exact against a
// scalar reference written here that emulates every 16-bit rounding (its own
// round-to-nearest-even, computed in double), the lost-update property that motivates Kahan
// compensation, thread-count independence, state-dict round trips and errors, the
// GradScaler with fp16 pure parameters, and the memory the modes hold.
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>

#include "common/testing.h"
#include "optim/fused.h"

using namespace tc;
using optim::Rounding;
using optim::WeightUpdate;
using tc::testing::bits_equal;
using tc::testing::dicts_equal;
using tc::testing::expect_error;
using tc::testing::grad_for;
using tc::testing::make_param;

namespace {

// ---------------------------------------------------------------- emulated 16-bit storage

// Round to nearest even into a binary format with `mant` stored mantissa bits, smallest
// normal exponent `emin` and largest finite `maxv`, by scaling in double (exact: the scale
// is a power of two and every float fits in a double), independent of tensorcast's
// conversions. Values past the largest finite after rounding become inf, as in IEEE.
double round_format(double x, int mant, int emin, double maxv) {
  if (std::isnan(x) || std::isinf(x) || x == 0.0) return x;
  int e;
  std::frexp(x, &e);  // |x| in [2^(e-1), 2^e)
  const double ulp = std::ldexp(1.0, std::max(e - 1, emin) - mant);
  const double r = std::nearbyint(x / ulp) * ulp;  // the default rounding mode: nearest even
  return std::fabs(r) > maxv ? std::copysign(std::numeric_limits<double>::infinity(), x) : r;
}

struct Format {
  DType dt;
  float round(float x) const {
    if (dt == kBFloat16) return static_cast<float>(round_format(x, 7, -126, 0x1.fep127));
    return static_cast<float>(round_format(x, 10, -14, 65504.0));
  }
  double ulp_at(double x) const {  // the spacing of the format just below |x|
    int e;
    std::frexp(x, &e);
    if (std::ldexp(1.0, e - 1) == std::fabs(x)) --e;
    return std::ldexp(1.0, e - 1 - (dt == kBFloat16 ? 7 : 10));
  }
};

std::vector<float> to_floats(const Tensor& t) {
  std::vector<float> v;
  for (double d : t.to_vector()) v.push_back(static_cast<float>(d));
  return v;
}

// The weight store of the modes (p: the 16-bit weight as float, w: the step's float result).
struct WeightStore {
  Format f;
  WeightUpdate mode;
  std::vector<float> c;  // PureKahan compensation (16-bit values)
  void store(std::vector<float>& p, const std::vector<float>& w) {
    if (c.empty()) c.assign(p.size(), 0.0f);
    for (size_t i = 0; i < p.size(); ++i) {
      if (mode == WeightUpdate::Pure) {
        p[i] = f.round(w[i]);
      } else {
        const float pold = p[i];
        const float y = c[i] + (w[i] - pold);
        const float pn = f.round(pold + y);
        c[i] = f.round(y - (pn - pold));
        p[i] = pn;
      }
    }
  }
};

// torch.optim.SGD in float32 registers (the operation order of sgd.cpp's kernel), state
// stored through the emulated 16-bit rounding.
struct RefSGD16 {
  double lr, momentum = 0, dampening = 0, wd = 0;
  bool nesterov = false;
  WeightStore ws;
  std::vector<float> buf;
  void step(std::vector<float>& p, const std::vector<float>& g) {
    const bool first = buf.empty();
    if (first) buf.assign(p.size(), 0.0f);
    const float neg_lr = static_cast<float>(-lr), fwd = static_cast<float>(wd), fm = static_cast<float>(momentum),
                omd = static_cast<float>(1.0 - dampening);
    std::vector<float> w(p.size());
    for (size_t i = 0; i < p.size(); ++i) {
      float d = g[i];
      if (wd != 0) d = d + fwd * p[i];
      if (momentum != 0) {
        const float m = first ? d : buf[i] * fm + omd * d;
        buf[i] = ws.f.round(m);
        d = nesterov ? d + fm * m : m;
      }
      w[i] = p[i] + neg_lr * d;
    }
    ws.store(p, w);
  }
};

// torch.optim.Adam/AdamW in float32 registers (adam.cpp's operation order), m, v, v_max
// stored through the emulated 16-bit rounding.
struct RefAdam16 {
  double lr, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, wd = 0;
  bool amsgrad = false, decoupled = false;
  WeightStore ws;
  int64_t t = 0;
  std::vector<float> m, v, vmax;
  void step(std::vector<float>& p, const std::vector<float>& g) {
    if (m.empty()) m.assign(p.size(), 0), v.assign(p.size(), 0), vmax.assign(p.size(), 0);
    ++t;
    const double bc1 = 1.0 - std::pow(beta1, static_cast<double>(t));
    const double bc2 = 1.0 - std::pow(beta2, static_cast<double>(t));
    const float lerp_w = static_cast<float>(1.0 - beta1), lerp_w1 = 1.0f - lerp_w;
    const float b2 = static_cast<float>(beta2), omb2 = static_cast<float>(1.0 - beta2);
    const float bc2_sqrt = static_cast<float>(std::sqrt(bc2)), feps = static_cast<float>(eps);
    const float nss = static_cast<float>(-(lr / bc1)), fwd = static_cast<float>(wd);
    const float decay = static_cast<float>(1.0 - lr * wd);
    const bool high = std::fabs(lerp_w) >= 0.5f;
    std::vector<float> w(p.size());
    for (size_t i = 0; i < p.size(); ++i) {
      float x = p[i];
      if (decoupled && wd != 0) x = x * decay;
      float gi = g[i];
      if (!decoupled && wd != 0) gi = gi + fwd * x;
      const float mi = high ? gi - (gi - m[i]) * lerp_w1 : m[i] + lerp_w * (gi - m[i]);
      const float vi = v[i] * b2 + omb2 * gi * gi;
      m[i] = ws.f.round(mi);
      v[i] = ws.f.round(vi);
      float vd = vi;
      if (amsgrad) {
        vd = vmax[i] > vi ? vmax[i] : vi;
        vmax[i] = ws.f.round(vd);
      }
      const float denom = std::sqrt(vd) / bc2_sqrt + feps;
      w[i] = x + nss * mi / denom;
    }
    ws.store(p, w);
  }
};

// Seed base of this file's gradients: grad_for(kGradSeed, p, step) is the same in any run.
constexpr uint64_t kGradSeed = 5000;

// The 16-bit tensor holds exactly the reference's values.
::testing::AssertionResult equals_exactly(const Tensor& t, const std::vector<float>& ref) {
  const std::vector<double> v = t.to_vector();
  if (v.size() != ref.size()) return ::testing::AssertionFailure() << v.size() << " vs " << ref.size() << " values";
  for (size_t i = 0; i < v.size(); ++i)
    if (!(v[i] == static_cast<double>(ref[i]) || (std::isnan(v[i]) && std::isnan(ref[i]))))
      return ::testing::AssertionFailure() << "element " << i << ": " << v[i] << " vs reference " << ref[i];
  return ::testing::AssertionSuccess();
}

const char* mode_name(WeightUpdate u) { return u == WeightUpdate::Pure ? "Pure" : "PureKahan"; }

}  // namespace

// ---------------------------------------------------------------- against the emulation

TEST(PureUpdate, AdamAndAdamWMatchTheEmulatedReferenceBitForBit) {
  for (DType dt : {kBFloat16, kFloat16}) {
    for (WeightUpdate mode : {WeightUpdate::Pure, WeightUpdate::PureKahan}) {
      for (int variant = 0; variant < 3;
           ++variant) {  // AdamW + wd; Adam + L2 + amsgrad; AdamW, betas of the other lerp
        SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " " << mode_name(mode) << " variant " << variant);
        Tensor p = make_param({37, 19}, dt, 11);  // 703 elements: two full blocks and a tail
        std::vector<float> ref = to_floats(p);
        RefAdam16 r{0.01, 0.9, 0.999, 1e-8, 0.1, false, true, {{dt}, mode}};
        std::unique_ptr<optim::Optimizer> opt;
        if (variant == 0) {
          opt = std::make_unique<optim::AdamW>(std::vector<Tensor>{p}, optim::AdamWOptions(0.01).weight_decay(0.1));
        } else if (variant == 1) {
          r.decoupled = false;
          r.amsgrad = true;
          r.wd = 0.05;
          opt = std::make_unique<optim::Adam>(std::vector<Tensor>{p},
                                              optim::AdamOptions(0.01).weight_decay(0.05).amsgrad(true));
        } else {
          r.beta1 = 0.3;
          r.beta2 = 0.5;
          opt = std::make_unique<optim::AdamW>(std::vector<Tensor>{p},
                                               optim::AdamWOptions(0.01).betas({0.3, 0.5}).weight_decay(0.1));
        }
        opt->set_weight_update(mode);
        EXPECT_FALSE(opt->has_master_weights());
        EXPECT_TRUE(opt->reads_16bit_grads());
        for (int s = 0; s < 20; ++s) {
          // Shrinking gradients make v fall, so amsgrad's maximum matters.
          Tensor g = mul(grad_for(kGradSeed, p, s), 1.0 / (1 + s % 5));
          p.set_grad(g);
          opt->step();
          r.step(ref, to_floats(g));
        }
        EXPECT_TRUE(equals_exactly(p, ref));
        const StateDict sd = opt->state_dict();
        EXPECT_TRUE(equals_exactly(sd.at("state.0.exp_avg"), r.m));
        EXPECT_TRUE(equals_exactly(sd.at("state.0.exp_avg_sq"), r.v));
        if (r.amsgrad) EXPECT_TRUE(equals_exactly(sd.at("state.0.max_exp_avg_sq"), r.vmax));
        if (mode == WeightUpdate::PureKahan) EXPECT_TRUE(equals_exactly(sd.at("state.0.compensation"), r.ws.c));
      }
    }
  }
}

TEST(PureUpdate, SGDMatchesTheEmulatedReferenceBitForBit) {
  struct Opts {
    double momentum, dampening, wd;
    bool nesterov;
  };
  for (DType dt : {kBFloat16, kFloat16}) {
    for (WeightUpdate mode : {WeightUpdate::Pure, WeightUpdate::PureKahan}) {
      for (Opts o : {Opts{0.9, 0.0, 0.05, true}, Opts{0.9, 0.25, 0.05, false}, Opts{0.0, 0.0, 0.1, false}}) {
        SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " " << mode_name(mode) << " momentum " << o.momentum
                                          << " dampening " << o.dampening << " nesterov " << o.nesterov);
        Tensor p = make_param({703}, dt, 7);
        std::vector<float> ref = to_floats(p);
        RefSGD16 r{0.05, o.momentum, o.dampening, o.wd, o.nesterov, {{dt}, mode}};
        optim::SGD opt({p}, optim::SGDOptions(0.05)
                                .momentum(o.momentum)
                                .dampening(o.dampening)
                                .weight_decay(o.wd)
                                .nesterov(o.nesterov));
        opt.set_weight_update(mode);
        for (int s = 0; s < 20; ++s) {
          Tensor g = grad_for(kGradSeed, p, s);
          p.set_grad(g);
          opt.step();
          r.step(ref, to_floats(g));
        }
        EXPECT_TRUE(equals_exactly(p, ref));
        const StateDict sd = opt.state_dict();
        if (o.momentum != 0) {
          EXPECT_EQ(sd.at("state.0.momentum_buffer").dtype(), dt);
          EXPECT_TRUE(equals_exactly(sd.at("state.0.momentum_buffer"), r.buf));
        }
        EXPECT_EQ(sd.count("state.0.master"), 0u);
        EXPECT_EQ(sd.count("state.0.compensation"), mode == WeightUpdate::PureKahan ? 1u : 0u);
      }
    }
  }
}

TEST(PureUpdate, StochasticRoundingUsesTheCounterBits) {
  // Pure + stochastic rounding: each new weight is rounded with the bits of (seed, step,
  // parameter index, element index), the same bits as the master copy's write-back.
  const uint64_t seed = 99;
  Tensor a = make_param({300}, kBFloat16, 1), b = make_param({500}, kBFloat16, 2);
  std::vector<float> ra = to_floats(a), rb = to_floats(b);
  optim::SGD opt({a, b}, optim::SGDOptions(0.01));
  opt.set_weight_update(WeightUpdate::Pure);
  opt.set_rounding(Rounding::Stochastic, seed);
  const float neg_lr = static_cast<float>(-0.01);
  for (int s = 0; s < 5; ++s) {
    int64_t index = 0;
    for (auto pr : {std::pair{&a, &ra}, std::pair{&b, &rb}}) {
      Tensor g = grad_for(kGradSeed, *pr.first, s, static_cast<int>(index));
      pr.first->set_grad(g);
      const std::vector<float> gv = to_floats(g);
      const uint64_t key = optim::detail::rounding_key(seed, s + 1, index);
      for (size_t i = 0; i < gv.size(); ++i) {
        const float w = (*pr.second)[i] + neg_lr * gv[i];
        const uint32_t r = optim::detail::element_bits(key, static_cast<int64_t>(i));
        // Add 16 random bits below bf16's mantissa and truncate.
        uint32_t u;
        std::memcpy(&u, &w, 4);
        u = (u + (r & 0xffffu)) & 0xffff0000u;
        std::memcpy(&(*pr.second)[i], &u, 4);
      }
      ++index;
    }
    opt.step();
  }
  EXPECT_TRUE(equals_exactly(a, ra));
  EXPECT_TRUE(equals_exactly(b, rb));
}

TEST(PureUpdate, Float32ParametersIgnoreTheMode) {
  for (WeightUpdate mode : {WeightUpdate::Pure, WeightUpdate::PureKahan}) {
    Tensor p = make_param({50}, kFloat32, 3), q = p.detach().clone().requires_grad_(true);
    Tensor d = make_param({9}, kFloat64, 4), e = d.detach().clone().requires_grad_(true);
    optim::AdamW a({p, d}, optim::AdamWOptions(0.01)), b({q, e}, optim::AdamWOptions(0.01));
    a.set_weight_update(mode);
    EXPECT_FALSE(a.reads_16bit_grads());
    EXPECT_FALSE(a.has_master_weights());
    for (int s = 0; s < 4; ++s) {
      p.set_grad(grad_for(kGradSeed, p, s));
      q.set_grad(grad_for(kGradSeed, q, s));
      d.set_grad(grad_for(kGradSeed, d, s));
      e.set_grad(grad_for(kGradSeed, e, s));
      a.step();
      b.step();
    }
    EXPECT_TRUE(bits_equal(p, q));
    EXPECT_TRUE(bits_equal(d, e));
    StateDict sa = a.state_dict(), sb = b.state_dict();
    EXPECT_EQ(sa.at("weight_update").item<int64_t>(), static_cast<int64_t>(mode));
    sa.erase("weight_update");
    sb.erase("weight_update");
    EXPECT_TRUE(dicts_equal(sa, sb));
  }
}

TEST(PureUpdate, ScaledStepReadsSixteenBitGradientsWithTheInverseScale) {
  // A power-of-two scale is exact: the fused AMP step equals the plain step bit for bit.
  for (WeightUpdate mode : {WeightUpdate::Pure, WeightUpdate::PureKahan}) {
    Tensor p = make_param({40, 30}, kFloat16, 2), q = p.detach().clone().requires_grad_(true);
    optim::AdamW fused({p}, optim::AdamWOptions(0.01)), plain({q}, optim::AdamWOptions(0.01));
    fused.set_weight_update(mode);
    plain.set_weight_update(mode);
    const Tensor inv = scalar_tensor(1.0 / 1024, kFloat32);
    for (int s = 0; s < 5; ++s) {
      const Tensor g = grad_for(kGradSeed, p, s);
      p.set_grad(mul(g, 1024.0));  // exact in fp16
      q.set_grad(g);
      fused.step(optim::AmpStep{inv, scalar_tensor(0.0, kFloat32)});
      plain.step();
    }
    EXPECT_TRUE(bits_equal(p, q));
    EXPECT_TRUE(dicts_equal(fused.state_dict(), plain.state_dict()));
  }
}

// ---------------------------------------------------------------- why Kahan

TEST(PureUpdate, SmallUpdatesAreLostWithoutCompensation) {
  // A bf16 weight of 1.0 and updates of 1e-4 per step, far below half a bf16 ulp at 1.0
  // (2^-9 below 1.0): the float64 result after 1000 steps is 1 - 0.1.
  const int64_t n = 4096;
  const int steps = 1000;
  const double want = 1.0 - steps * 1e-4;
  const double ulp = Format{kBFloat16}.ulp_at(want);  // 2^-8 in [0.5, 1)
  for (int which = 0; which < 4; ++which) {
    Tensor p = ones({n}, kBFloat16).requires_grad_(true);
    optim::SGD opt({p}, optim::SGDOptions(1e-4));
    if (which == 0) opt.set_weight_update(WeightUpdate::Pure);
    if (which == 1) opt.set_weight_update(WeightUpdate::PureKahan);
    if (which == 2) {
      opt.set_weight_update(WeightUpdate::Pure);
      opt.set_rounding(Rounding::Stochastic, 2024);
    }
    // which == 3: the float32 master copy, for comparison.
    p.set_grad(ones({n}, kBFloat16));
    for (int s = 0; s < steps; ++s) opt.step();
    const std::vector<double> v = p.to_vector();
    const double mean = std::accumulate(v.begin(), v.end(), 0.0) / n;
    double worst = 0;
    for (double x : v) worst = std::max(worst, std::fabs(x - want));
    std::printf("[ lost updates ] %-22s mean %.6f (float64 %.6f), worst |error| %.2f ulp\n",
                which == 0   ? "Pure, nearest even"
                : which == 1 ? "PureKahan"
                : which == 2 ? "Pure, stochastic"
                             : "MasterFloat32",
                mean, want, worst / ulp);
    if (which == 0) {
      for (double x : v) ASSERT_EQ(x, 1.0);  // every update rounded away
    } else if (which == 1 || which == 3) {
      EXPECT_LE(worst, ulp);  // within one bf16 ulp of the float64 result, every element
    } else {
      // Unbiased: each step is a Bernoulli choice between neighbours, p ~ 1e-4 / ulp, so an
      // element's error has sd about sqrt(1000 * 0.026) ~ 5 ulps; the mean of 4096 ~ 0.08 ulp.
      EXPECT_NEAR(mean, want, 0.5 * ulp);
      EXPECT_LE(worst, 30 * ulp);
    }
  }
}

// ---------------------------------------------------------------- threads

TEST(PureUpdate, ResultsDoNotDependOnTheThreadCount) {
  const int threads = get_num_threads();
  struct Case {
    DType dt;
    WeightUpdate mode;
    Rounding rounding;
  };
  for (Case c : {Case{kBFloat16, WeightUpdate::Pure, Rounding::Stochastic},
                 Case{kFloat16, WeightUpdate::Pure, Rounding::Stochastic},
                 Case{kBFloat16, WeightUpdate::PureKahan, Rounding::NearestEven},
                 Case{kFloat16, WeightUpdate::PureKahan, Rounding::NearestEven}}) {
    SCOPED_TRACE(::testing::Message() << dtype_name(c.dt) << " " << mode_name(c.mode));
    auto run = [&](int nthreads) {
      set_num_threads(nthreads);
      Tensor p = make_param({300, 700}, c.dt, 5);  // many thread shares of kFusedGrain
      optim::AdamW opt({p}, optim::AdamWOptions(1e-3).amsgrad(true));
      opt.set_weight_update(c.mode);
      opt.set_rounding(c.rounding, 17);
      for (int s = 0; s < 3; ++s) {
        p.set_grad(grad_for(kGradSeed, p, s));
        opt.step();
      }
      return std::pair{p.detach().clone(), opt.state_dict()};
    };
    const auto [a, sa] = run(1);
    const auto [b, sb] = run(std::max(2, threads));
    set_num_threads(threads);
    EXPECT_TRUE(bits_equal(a, b));
    EXPECT_TRUE(dicts_equal(sa, sb));
  }
}

// ---------------------------------------------------------------- state_dict

namespace {

using tc::testing::RunResult;
using Make = tc::testing::MakeOptimizer;

// `steps` steps on a bf16, an fp16 and a float32 parameter, optionally saving and loading
// into a new optimizer (and parameter copies) after `split` steps.
RunResult run_with_resume(const Make& make, int steps, int split) {
  return tc::testing::run_with_resume(
      make, {make_param({5, 60}, kBFloat16, 1), make_param({7}, kFloat16, 2), make_param({3}, kFloat32, 3)}, kGradSeed,
      steps, split);
}

Make adamw(WeightUpdate mode, Rounding r = Rounding::NearestEven) {
  return [=](std::vector<Tensor> p) {
    auto o = std::make_unique<optim::AdamW>(std::move(p), optim::AdamWOptions(0.01).amsgrad(true));
    o->set_weight_update(mode);
    o->set_rounding(r, 5);
    return o;
  };
}

Make sgd(WeightUpdate mode) {
  return [=](std::vector<Tensor> p) {
    auto o = std::make_unique<optim::SGD>(std::move(p), optim::SGDOptions(0.05).momentum(0.9).nesterov(true));
    o->set_weight_update(mode);
    return o;
  };
}

}  // namespace

TEST(PureStateDict, RoundTripMidRunContinuesBitIdentically) {
  const std::vector<std::pair<std::string, Make>> makers = {
      {"AdamW Pure", adamw(WeightUpdate::Pure)},
      {"AdamW Pure+SR", adamw(WeightUpdate::Pure, Rounding::Stochastic)},
      {"AdamW PureKahan", adamw(WeightUpdate::PureKahan)},
      {"SGD Pure", sgd(WeightUpdate::Pure)},
      {"SGD PureKahan", sgd(WeightUpdate::PureKahan)},
  };
  for (const auto& [name, make] : makers) {
    SCOPED_TRACE(name);
    const RunResult whole = run_with_resume(make, 7, -1);
    const RunResult resumed = run_with_resume(make, 7, 3);
    for (size_t k = 0; k < whole.params.size(); ++k) EXPECT_TRUE(bits_equal(whole.params[k], resumed.params[k]));
    EXPECT_TRUE(dicts_equal(whole.state, resumed.state));
    const bool kahan = name.find("Kahan") != std::string::npos;
    EXPECT_EQ(whole.state.at("weight_update").item<int64_t>(), kahan ? 2 : 1);
    const std::string buf = name.rfind("SGD", 0) == 0 ? "momentum_buffer" : "exp_avg";
    const DType dts[] = {kBFloat16, kFloat16, kFloat32};
    for (int k = 0; k < 3; ++k) {
      const std::string pre = "state." + std::to_string(k) + ".";
      EXPECT_EQ(whole.state.count(pre + "master"), 0u);
      EXPECT_EQ(whole.state.at(pre + buf).dtype(), dts[k]);  // float32 state for the float32 parameter
      EXPECT_EQ(whole.state.count(pre + "compensation"), kahan && k < 2 ? 1u : 0u);
      if (kahan && k < 2) EXPECT_EQ(whole.state.at(pre + "compensation").dtype(), dts[k]);
    }
  }
}

TEST(PureStateDict, LoadErrorsChangeNothing) {
  auto setup = [](WeightUpdate mode, std::vector<Tensor>& params) {
    params = {make_param({4, 3}, kBFloat16, 1), make_param({5}, kFloat32, 2)};
    auto opt = adamw(mode)(params);
    for (int s = 0; s < 2; ++s) {
      for (auto& p : params) p.set_grad(grad_for(kGradSeed, p, s));
      opt->step();
    }
    return opt;
  };
  std::vector<Tensor> pm, pk, pp;
  auto master = setup(WeightUpdate::MasterFloat32, pm);
  auto kahan = setup(WeightUpdate::PureKahan, pk);
  auto pure = setup(WeightUpdate::Pure, pp);
  const StateDict sd_master = master->state_dict(), sd_kahan = kahan->state_dict(), sd_pure = pure->state_dict();
  const Tensor k0 = pk[0].detach().clone();

  // A MasterFloat32 dict into a PureKahan optimizer, and the other way round.
  expect_error([&] { kahan->load_state_dict(sd_master); },
               {"[optim]", "WeightUpdate::MasterFloat32", "WeightUpdate::PureKahan", "set_weight_update"});
  expect_error([&] { master->load_state_dict(sd_kahan); },
               {"[optim]", "WeightUpdate::PureKahan", "WeightUpdate::MasterFloat32"});
  expect_error([&] { pure->load_state_dict(sd_kahan); }, {"[optim]", "WeightUpdate::PureKahan", "WeightUpdate::Pure"});
  // A dict saved before "weight_update" existed means MasterFloat32.
  StateDict old = sd_master;
  old.erase("weight_update");
  expect_error([&] { kahan->load_state_dict(old); }, {"[optim]", "WeightUpdate::MasterFloat32"});
  master->load_state_dict(old);
  EXPECT_TRUE(dicts_equal(master->state_dict(), sd_master));

  auto with = [&](const StateDict& base, const std::function<void(StateDict&)>& edit) {
    StateDict sd = base;
    edit(sd);
    return sd;
  };
  expect_error([&] { kahan->load_state_dict(with(sd_kahan, [](StateDict& s) { s.erase("state.0.compensation"); })); },
               {"[optim]", "bfloat16", "PureKahan", "state.0.compensation"});
  expect_error(
      [&] {
        kahan->load_state_dict(with(sd_kahan, [](StateDict& s) { s["state.0.compensation"] = zeros({4, 3}); }));
      },
      {"[optim]", "state.0.compensation", "float32", "bfloat16"});
  expect_error(
      [&] { kahan->load_state_dict(with(sd_kahan, [](StateDict& s) { s["state.1.compensation"] = zeros({5}); })); },
      {"[optim]", "state.1.compensation"});
  expect_error(
      [&] {
        kahan->load_state_dict(with(sd_kahan, [](StateDict& s) { s["state.0.master"] = zeros({4, 3}); }));
      },
      {"[optim]", "master"});
  expect_error(
      [&] {
        kahan->load_state_dict(with(sd_kahan, [](StateDict& s) { s["state.0.exp_avg"] = zeros({4, 3}); }));
      },
      {"[optim]", "state.0.exp_avg", "float32", "bfloat16"});
  expect_error(
      [&] {
        kahan->load_state_dict(with(sd_kahan, [](StateDict& s) { s["state.1.exp_avg"] = zeros({5}, kBFloat16); }));
      },
      {"[optim]", "state.1.exp_avg", "bfloat16", "float32"});
  expect_error([&] { kahan->load_state_dict(with(sd_kahan, [](StateDict& s) { s["weight_update"] = state_int(3); })); },
               {"[optim]", "weight_update"});
  // Nothing changed: the same state, the same parameters, and the next step as planned.
  EXPECT_TRUE(dicts_equal(kahan->state_dict(), sd_kahan));
  EXPECT_TRUE(dicts_equal(pure->state_dict(), sd_pure));
  EXPECT_TRUE(bits_equal(pk[0], k0));
  EXPECT_EQ(kahan->weight_update(), WeightUpdate::PureKahan);
  EXPECT_EQ(master->weight_update(), WeightUpdate::MasterFloat32);
}

TEST(PureStateDict, ModeIsChosenBeforeTheFirstStep) {
  Tensor p = make_param({6}, kBFloat16, 1);
  optim::AdamW opt({p}, optim::AdamWOptions(0.01));
  opt.set_weight_update(WeightUpdate::Pure);
  opt.set_weight_update(WeightUpdate::PureKahan);  // no state yet: fine
  EXPECT_EQ(opt.weight_update(), WeightUpdate::PureKahan);
  p.set_grad(grad_for(kGradSeed, p, 0));
  opt.step();
  opt.set_weight_update(WeightUpdate::PureKahan);  // the same mode: fine
  expect_error([&] { opt.set_weight_update(WeightUpdate::MasterFloat32); },
               {"[optim]", "MasterFloat32", "PureKahan", "before the first step"});
  EXPECT_EQ(opt.weight_update(), WeightUpdate::PureKahan);
  EXPECT_EQ(optim::weight_update_name(WeightUpdate::Pure), "Pure");

  // PureKahan with stochastic rounding: refused at step time, before anything changes.
  const StateDict before = opt.state_dict();
  const Tensor p0 = p.detach().clone();
  opt.set_rounding(Rounding::Stochastic, 1);
  expect_error([&] { opt.step(); }, {"[optim]", "PureKahan", "Rounding::Stochastic"});
  EXPECT_TRUE(bits_equal(p, p0));
  StateDict after = opt.state_dict();
  EXPECT_EQ(after.at("rounding.stochastic").item<int64_t>(), 1);
  after["rounding.stochastic"] = before.at("rounding.stochastic");
  after["rounding.seed"] = before.at("rounding.seed");
  EXPECT_TRUE(dicts_equal(after, before));
  opt.set_rounding(Rounding::NearestEven);
  opt.step();
  EXPECT_EQ(opt.state_dict().at("state.0.step").item<int64_t>(), 2);
}

// ---------------------------------------------------------------- the GradScaler

TEST(PureUpdate, GradScalerSkipsAnOverflowedStepWithFp16PureParameters) {
  for (bool explicit_unscale : {false, true}) {
    SCOPED_TRACE(explicit_unscale ? "explicit unscale_" : "fused");
    Tensor p = make_param({30, 20}, kFloat16, 1), q = make_param({9}, kFloat16, 2);
    optim::AdamW opt({p, q}, optim::AdamWOptions(0.01).amsgrad(true));
    opt.set_weight_update(WeightUpdate::PureKahan);
    EXPECT_TRUE(opt.reads_16bit_grads());
    EXPECT_FALSE(opt.has_master_weights());
    amp::GradScaler scaler(amp::GradScalerOptions().init_scale(256));
    static_cast<void>(scaler.scale(full({}, 1.0, kFloat32)));  // initializes the scale
    auto set_grads = [&](int s) {
      for (auto* t : {&p, &q}) t->set_grad(mul(grad_for(kGradSeed, *t, s), 256.0));  // exact in fp16
    };
    for (int s = 0; s < 3; ++s) {  // real steps first, so moments and compensation exist
      set_grads(s);
      if (explicit_unscale) scaler.unscale_(opt);  // fp16 gradients are accepted
      ASSERT_TRUE(scaler.step(opt));
      scaler.update();
    }
    const StateDict before = opt.state_dict();
    ASSERT_EQ(before.count("state.0.compensation"), 1u);
    const Tensor p0 = p.detach().clone(), q0 = q.detach().clone();
    set_grads(3);
    Tensor bad = q.grad().to(kFloat32);
    static_cast<float*>(bad.raw_data())[4] = std::numeric_limits<float>::infinity();
    q.set_grad(bad.to(kFloat16));
    if (explicit_unscale) scaler.unscale_(opt);
    EXPECT_FALSE(scaler.step(opt));
    scaler.update();
    EXPECT_TRUE(bits_equal(p, p0));
    EXPECT_TRUE(bits_equal(q, q0));
    EXPECT_TRUE(dicts_equal(opt.state_dict(), before));  // moments, steps and compensation
    EXPECT_EQ(scaler.get_scale(), 128.0);
    // The next clean step goes ahead.
    for (auto* t : {&p, &q}) t->set_grad(mul(grad_for(kGradSeed, *t, 4), 128.0));
    EXPECT_TRUE(scaler.step(opt));
    scaler.update();
    EXPECT_EQ(opt.state_dict().at("state.0.step").item<int64_t>(), 4);
  }
}

// ---------------------------------------------------------------- memory

TEST(PureUpdate, StateHoldsSixteenBitValuesOnly) {
  const int64_t n = 1000;
  struct Case {
    WeightUpdate mode;
    int64_t bytes_per_element;  // state created by the first step, beyond the parameter
  };
  for (Case c :
       {Case{WeightUpdate::MasterFloat32, 12}, Case{WeightUpdate::Pure, 4}, Case{WeightUpdate::PureKahan, 6}}) {
    SCOPED_TRACE(optim::weight_update_name(c.mode));
    Tensor p = make_param({n}, kBFloat16, 1);
    p.set_grad(grad_for(kGradSeed, p, 0));
    optim::AdamW opt({p}, optim::AdamWOptions(1e-3));
    opt.set_weight_update(c.mode);
    const int64_t before = memory_stats().current_bytes;
    opt.step();
    EXPECT_EQ(memory_stats().current_bytes - before, c.bytes_per_element * n);  // measured, not guessed
    const StateDict sd = opt.state_dict();
    int64_t values16 = 0, values32 = 0;
    for (const auto& [key, t] : sd) {
      if (key.rfind("state.0.", 0) != 0 || key == "state.0.step") continue;
      EXPECT_EQ(t.numel(), n) << key;
      if (t.dtype() == kBFloat16) values16 += t.numel();
      if (t.dtype() == kFloat32) values32 += t.numel();
    }
    if (c.mode == WeightUpdate::PureKahan) {
      EXPECT_EQ(values16, 3 * n);  // exp_avg, exp_avg_sq, compensation
      EXPECT_EQ(values32, 0);      // no float32 master
      EXPECT_EQ(sd.count("state.0.compensation"), 1u);
    } else if (c.mode == WeightUpdate::Pure) {
      EXPECT_EQ(values16, 2 * n);
      EXPECT_EQ(values32, 0);
    } else {
      EXPECT_EQ(values16, 0);
      EXPECT_EQ(values32, 3 * n);  // master, exp_avg, exp_avg_sq
    }
  }
}

TEST(Throughput, PureAdamWOn10MParameters) {
  const int64_t n = 10'000'000;
  for (WeightUpdate mode : {WeightUpdate::MasterFloat32, WeightUpdate::Pure, WeightUpdate::PureKahan}) {
    Tensor p = zeros({n}, kBFloat16).requires_grad_(true);
    p.set_grad(full({n}, 1e-3, kBFloat16));
    optim::AdamW opt({p}, optim::AdamWOptions(1e-3));
    opt.set_weight_update(mode);
    opt.step();  // creates the state
    const int reps = 5;
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) opt.step();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
    // Bytes moved per element: g read; MasterFloat32 reads and writes the master, m, v and
    // writes p; Pure reads and writes p, m, v; PureKahan also the compensation.
    const double bytes = mode == WeightUpdate::MasterFloat32 ? 2 + 12 + 12 + 2
                         : mode == WeightUpdate::Pure        ? 2 + 12
                                                             : 2 + 16;
    std::printf("[ throughput ] AdamW step, 10M bfloat16 params, %s, %d threads: %.2f ms, %.1f GB/s\n",
                std::string(optim::weight_update_name(mode)).c_str(), get_num_threads(), s * 1e3, bytes * n / s / 1e9);
    EXPECT_GT(s, 0.0);
  }
}
