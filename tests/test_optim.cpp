// Optimizers: SGD, Adam and AdamW against float64 reference implementations written here
// from PyTorch's formulas; parameter groups, zero_grad, master weights and rounding, the
// fused AMP step, state_dict round trips and errors; the AdamW step throughput.
#include <chrono>
#include <cmath>
#include <functional>
#include <numeric>

#include "common/testing.h"
#include "optim/fused.h"

using namespace tc;
using tc::testing::bits_equal;
using tc::testing::dicts_equal;
using tc::testing::grad_for;
using tc::testing::make_param;

namespace {

// ---------------------------------------------------------------- float64 references

struct RefSGD {
  double lr, momentum = 0, dampening = 0, wd = 0;
  bool nesterov = false;
  std::vector<double> buf;  // empty until the first step (PyTorch's None)
  void step(std::vector<double>& p, const std::vector<double>& grad) {
    const bool first = buf.empty();
    if (first) buf.assign(p.size(), 0);
    for (size_t i = 0; i < p.size(); ++i) {
      double g = grad[i] + wd * p[i];
      if (momentum != 0) {
        buf[i] = first ? g : momentum * buf[i] + (1 - dampening) * g;
        g = nesterov ? g + momentum * buf[i] : buf[i];
      }
      p[i] -= lr * g;
    }
  }
};

struct RefAdam {
  double lr, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, wd = 0;
  bool amsgrad = false, decoupled = false;
  int64_t t = 0;
  std::vector<double> m, v, vmax;
  void step(std::vector<double>& p, const std::vector<double>& grad) {
    if (m.empty()) m.assign(p.size(), 0), v.assign(p.size(), 0), vmax.assign(p.size(), 0);
    ++t;
    const double bc1 = 1 - std::pow(beta1, t), bc2 = 1 - std::pow(beta2, t);
    for (size_t i = 0; i < p.size(); ++i) {
      if (decoupled) p[i] *= 1 - lr * wd;
      const double g = decoupled ? grad[i] : grad[i] + wd * p[i];
      m[i] = beta1 * m[i] + (1 - beta1) * g;
      v[i] = beta2 * v[i] + (1 - beta2) * g * g;
      vmax[i] = std::max(vmax[i], v[i]);
      const double vv = amsgrad ? vmax[i] : v[i];
      p[i] -= lr / bc1 * m[i] / (std::sqrt(vv) / std::sqrt(bc2) + eps);
    }
  }
};

// ---------------------------------------------------------------- helpers

// Seed base of this file's gradients: grad_for(kGradSeed, p, step) is the same in any run.
constexpr uint64_t kGradSeed = 1000;

tc::testing::Tol tol_f32() { return {2e-6, 2e-5}; }
tc::testing::Tol tol_f64() { return {1e-13, 1e-12}; }

}  // namespace

// ---------------------------------------------------------------- SGD

TEST(SGD, MatchesReferenceForEveryOptionCombination) {
  for (DType dt : {kFloat32, kFloat64}) {
    for (double momentum : {0.0, 0.9}) {
      for (double dampening : {0.0, 0.25}) {
        for (bool nesterov : {false, true}) {
          if (nesterov && (momentum == 0.0 || dampening != 0.0)) continue;
          for (double wd : {0.0, 0.05}) {
            SCOPED_TRACE(::testing::Message() << dtype_name(dt) << " momentum " << momentum << " dampening "
                                              << dampening << " nesterov " << nesterov << " wd " << wd);
            Tensor p = make_param({3, 5}, dt, 7);
            std::vector<double> ref = p.to_vector();
            RefSGD r{0.1, momentum, dampening, wd, nesterov};
            optim::SGD opt(
                {p},
                optim::SGDOptions(0.1).momentum(momentum).dampening(dampening).nesterov(nesterov).weight_decay(wd));
            for (int s = 0; s < 5; ++s) {
              Tensor g = grad_for(kGradSeed, p, s);
              p.set_grad(g);
              opt.step();
              r.step(ref, g.to_vector());
            }
            EXPECT_TRUE(tc::testing::all_close(p, ref, dt == kFloat64 ? tol_f64() : tol_f32()));
          }
        }
      }
    }
  }
}

// ---------------------------------------------------------------- Adam / AdamW

TEST(Adam, MatchesReferenceAdamAndAdamW) {
  for (DType dt : {kFloat32, kFloat64}) {
    for (bool decoupled : {false, true}) {
      for (bool amsgrad : {false, true}) {
        for (double wd : {0.0, 0.1}) {
          for (auto [b1, b2] : {std::pair{0.9, 0.999}, std::pair{0.3, 0.5}}) {  // 0.3: ATen's other lerp formula
            SCOPED_TRACE(::testing::Message() << dtype_name(dt) << (decoupled ? " AdamW" : " Adam") << " amsgrad "
                                              << amsgrad << " wd " << wd << " betas " << b1 << "," << b2);
            Tensor p = make_param({4, 3}, dt, 11);
            std::vector<double> ref = p.to_vector();
            RefAdam r{0.01, b1, b2, 1e-8, wd, amsgrad, decoupled};
            std::unique_ptr<optim::Optimizer> opt;
            if (decoupled)
              opt = std::make_unique<optim::AdamW>(
                  std::vector<Tensor>{p}, optim::AdamWOptions(0.01).betas({b1, b2}).weight_decay(wd).amsgrad(amsgrad));
            else
              opt = std::make_unique<optim::Adam>(
                  std::vector<Tensor>{p}, optim::AdamOptions(0.01).betas({b1, b2}).weight_decay(wd).amsgrad(amsgrad));
            for (int s = 0; s < 6; ++s) {
              // Shrinking gradients make v fall, so amsgrad's maximum matters.
              Tensor g = mul(grad_for(kGradSeed, p, s), 1.0 / (1 + 3 * s));
              p.set_grad(g);
              opt->step();
              r.step(ref, g.to_vector());
            }
            EXPECT_TRUE(tc::testing::all_close(p, ref, dt == kFloat64 ? tol_f64() : tol_f32()));
            const StateDict sd = opt->state_dict();
            EXPECT_EQ(sd.at("state.0.step").item<int64_t>(), 6);
            EXPECT_EQ(sd.at("state.0.exp_avg").dtype(), dt);
            EXPECT_TRUE(tc::testing::all_close(sd.at("state.0.exp_avg"), r.m, dt == kFloat64 ? tol_f64() : tol_f32()));
            EXPECT_TRUE(
                tc::testing::all_close(sd.at("state.0.exp_avg_sq"), r.v, dt == kFloat64 ? tol_f64() : tol_f32()));
            EXPECT_EQ(sd.count("state.0.max_exp_avg_sq"), amsgrad ? 1u : 0u);
          }
        }
      }
    }
  }
}

// The float32 step is PyTorch's single-tensor AdamW op by op, each op rounded to float32,
// bit for bit, on a tensor long enough for the vector loops of every ISA's clone (an FMA
// fusing a product into a sum would change the last bits).
TEST(Adam, Float32StepIsTheSeparateOpsBitForBit) {
  const double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.1;
  Tensor p = make_param({4099}, kFloat32, 5);
  std::vector<float> w(p.numel()), m(p.numel(), 0.0f), v(p.numel(), 0.0f);
  for (int64_t i = 0; i < p.numel(); ++i) w[i] = static_cast<float>(p.to_vector()[i]);
  optim::AdamW opt({p}, optim::AdamWOptions(lr).betas({b1, b2}).eps(eps).weight_decay(wd));
  for (int s = 1; s <= 3; ++s) {
    Tensor g = grad_for(kGradSeed, p, s);
    const std::vector<double> gd = g.to_vector();
    p.set_grad(g);
    opt.step();
    const float decay = static_cast<float>(1.0 - lr * wd), lerp_w = static_cast<float>(1.0 - b1);
    const float beta2 = static_cast<float>(b2), one_minus_b2 = static_cast<float>(1.0 - b2);
    const float bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(b2, s)));
    const float neg_step = static_cast<float>(-(lr / (1.0 - std::pow(b1, s))));
    for (size_t i = 0; i < w.size(); ++i) {
      const volatile float gi = static_cast<float>(gd[i]);  // volatile: no contraction here either
      volatile float t = w[i] * decay;                      // param.mul_(1 - lr wd)
      w[i] = t;
      t = gi - m[i];
      t = lerp_w * t;
      m[i] = m[i] + t;  // exp_avg.lerp_(grad, 1 - beta1), weight < 0.5
      t = v[i] * beta2;
      volatile float q = one_minus_b2 * gi;
      q = q * gi;
      v[i] = t + q;  // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, 1 - beta2)
      volatile float denom = std::sqrt(v[i]) / bc2_sqrt;
      denom = denom + static_cast<float>(eps);
      q = neg_step * m[i];
      q = q / denom;
      w[i] = w[i] + q;  // param.addcdiv_(exp_avg, denom, value=-step_size)
    }
  }
  const std::vector<double> got = p.to_vector();
  int64_t mismatches = 0;
  for (size_t i = 0; i < w.size(); ++i) mismatches += static_cast<float>(got[i]) != w[i];
  EXPECT_EQ(mismatches, 0) << "of " << w.size() << " weights";
}

TEST(Adam, LibtorchStyleOptions) {
  Tensor p = make_param({2}, kFloat32, 1);
  optim::AdamW opt({p}, optim::AdamWOptions(1e-3).weight_decay(0.01));
  const auto& d = static_cast<const optim::AdamWOptions&>(opt.defaults());
  EXPECT_EQ(d.lr(), 1e-3);
  EXPECT_EQ(d.weight_decay(), 0.01);
  EXPECT_EQ(std::get<1>(d.betas()), 0.999);
  EXPECT_EQ(optim::AdamWOptions().weight_decay(), 1e-2);  // PyTorch's AdamW default
  EXPECT_EQ(optim::AdamOptions().weight_decay(), 0.0);
  optim::SGD sgd({p}, optim::SGDOptions(0.1).momentum(0.9));
  EXPECT_EQ(sgd.param_groups()[0].options->get_lr(), 0.1);
}

// ---------------------------------------------------------------- groups, zero_grad, skipping

// Post-step hooks run after the update, in both step() forms, also when found_inf skipped
// it (PyTorch's register_step_post_hook); a removed hook no longer runs.
TEST(Optimizer, StepPostHooksRunAfterEveryStep) {
  Tensor w = make_param({3}, kFloat32, 1);
  optim::SGD opt(std::vector<Tensor>{w}, optim::SGDOptions(0.5));
  std::vector<std::vector<double>> seen;
  const int64_t h = opt.register_step_post_hook([&] { seen.push_back(w.to_vector()); });
  const std::vector<double> before = w.to_vector();
  w.set_grad(ones({3}));
  opt.step();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0][0], static_cast<double>(static_cast<float>(before[0]) - 0.5f));  // the updated weight
  opt.step(optim::AmpStep{Tensor(), full({}, 1.0)});                                 // skipped: found_inf
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1], seen[0]);
  opt.remove_step_post_hook(h);
  opt.remove_step_post_hook(h + 100);  // unknown: ignored
  opt.step();
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_THROW(opt.register_step_post_hook(nullptr), Error);
}

TEST(Optimizer, ParamGroupsUseTheirOwnOptions) {
  Tensor a = make_param({5}, kFloat32, 1), b = make_param({5}, kFloat32, 2), c = make_param({5}, kFloat32, 3);
  std::vector<optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<Tensor>{a});
  groups.emplace_back(std::vector<Tensor>{b},
                      std::make_unique<optim::SGDOptions>(optim::SGDOptions(0.5).momentum(0.5)));
  optim::SGD opt(std::move(groups), optim::SGDOptions(0.1).momentum(0.9));
  opt.add_param_group(optim::OptimizerParamGroup({c}, std::make_unique<optim::SGDOptions>(0.01)));
  ASSERT_EQ(opt.param_groups().size(), 3u);
  EXPECT_EQ(opt.param_groups()[0].options->get_lr(), 0.1);  // defaults copied into the group
  std::vector<double> ra = a.to_vector(), rb = b.to_vector(), rc = c.to_vector();
  RefSGD sa{0.1, 0.9}, sb{0.5, 0.5}, sc{0.01};
  for (int s = 0; s < 4; ++s) {
    if (s == 2) {  // a scheduler changing one group's lr
      opt.param_groups()[0].options->set_lr(0.2);
      sa.lr = 0.2;
    }
    for (auto* t : {&a, &b, &c}) t->set_grad(grad_for(kGradSeed, *t, s));
    sa.step(ra, a.grad().to_vector());
    sb.step(rb, b.grad().to_vector());
    sc.step(rc, c.grad().to_vector());
    opt.step();
  }
  EXPECT_TRUE(tc::testing::all_close(a, ra, tol_f32()));
  EXPECT_TRUE(tc::testing::all_close(b, rb, tol_f32()));
  EXPECT_TRUE(tc::testing::all_close(c, rc, tol_f32()));
  const StateDict sd = opt.state_dict();
  EXPECT_EQ(sd.at("param_groups.0.lr").item_double(), 0.2);
  EXPECT_EQ(sd.at("param_groups.1.lr").item_double(), 0.5);
  EXPECT_EQ(sd.at("param_groups.2.params").to_vector(), std::vector<double>{2});
}

TEST(Optimizer, ZeroGradBothModes) {
  Tensor p = make_param({3, 2}, kFloat32, 1);
  optim::SGD opt({p}, optim::SGDOptions(0.1));
  p.set_grad(grad_for(kGradSeed, p, 0));
  const void* storage = p.grad().raw_data();
  opt.zero_grad(false);
  ASSERT_TRUE(p.grad().defined());
  EXPECT_EQ(p.grad().raw_data(), storage);  // zeroed in place
  EXPECT_EQ(p.grad().to_vector(), std::vector<double>(6, 0.0));
  opt.zero_grad();  // set_to_none, PyTorch's default
  EXPECT_FALSE(p.grad().defined());
}

TEST(Optimizer, ParametersWithoutGradAreSkipped) {
  Tensor a = make_param({4}, kFloat32, 1), b = make_param({4}, kFloat32, 2);
  const Tensor b0 = b.detach().clone();
  optim::Adam opt({a, b}, optim::AdamOptions(0.1));
  a.set_grad(grad_for(kGradSeed, a, 0));
  opt.step();
  EXPECT_TRUE(bits_equal(b, b0));
  const StateDict sd = opt.state_dict();
  EXPECT_EQ(sd.count("state.0.step"), 1u);
  EXPECT_EQ(sd.count("state.1.step"), 0u);
  EXPECT_EQ(sd.count("state.1.exp_avg"), 0u);
}

TEST(Optimizer, NonContiguousGradient) {
  Tensor p = make_param({3, 4}, kFloat32, 1);
  Tensor q = p.detach().clone();
  Tensor gt = grad_for(kGradSeed, p, 0).t().contiguous().t();  // (3, 4) with transposed strides
  ASSERT_FALSE(gt.is_contiguous());
  optim::SGD a({p}, optim::SGDOptions(0.1)), b({q}, optim::SGDOptions(0.1));
  p.set_grad(gt);
  q.set_grad(gt.contiguous());
  a.step();
  b.step();
  EXPECT_TRUE(bits_equal(p, q));
}

// ---------------------------------------------------------------- master weights

TEST(MasterWeights, SixteenBitParamsKeepFloat32Masters) {
  for (DType dt : {kBFloat16, kFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor p = make_param({6, 7}, dt, 3);
    Tensor p32 = p.detach().to(kFloat32).clone().requires_grad_(true);
    optim::AdamW opt({p}, optim::AdamWOptions(0.01).weight_decay(0.1));
    optim::AdamW ref({p32}, optim::AdamWOptions(0.01).weight_decay(0.1));
    EXPECT_TRUE(opt.has_master_weights());
    EXPECT_FALSE(ref.has_master_weights());
    for (int s = 0; s < 5; ++s) {
      Tensor g = grad_for(kGradSeed, p, s);  // 16-bit gradient, exact in float32
      p.set_grad(g);
      p32.set_grad(g.to(kFloat32));
      opt.step();
      ref.step();
    }
    const StateDict sd = opt.state_dict();
    const Tensor& master = sd.at("state.0.master");
    EXPECT_EQ(master.dtype(), kFloat32);
    EXPECT_EQ(sd.at("state.0.exp_avg").dtype(), kFloat32);
    EXPECT_TRUE(bits_equal(master, p32.detach()));  // the master is exactly the float32 run
    EXPECT_EQ(p.dtype(), dt);
    EXPECT_TRUE(bits_equal(p, master.to(dt)));  // the parameter is the master rounded to nearest
  }
}

TEST(MasterWeights, StochasticRoundingIsUnbiased) {
  const int n = 200000;
  // Values between two bf16 neighbours (ulp 2^-7 at 1), negative ones, and bf16 subnormals.
  for (float x : {1.0f + 0.3f * 0x1p-7f, -2.0f - 0.77f * 0x1p-6f, 3.1f, 1e-39f}) {
    double sum = 0;
    const uint16_t b = BFloat16(x).bits;  // the neighbours are one magnitude step either side
    const double ulp = std::max(std::abs(float(BFloat16::from_bits(b)) - float(BFloat16::from_bits(b - 1))),
                                std::abs(float(BFloat16::from_bits(b + 1)) - float(BFloat16::from_bits(b))));
    for (int i = 0; i < n; ++i)
      sum += float(BFloat16::from_bits(optim::detail::bf16_stochastic(x, optim::detail::element_bits(42, i))));
    const double mean = sum / n;
    // A Bernoulli choice between neighbours one ulp apart: sd of the mean <= ulp / (2 sqrt n).
    EXPECT_NEAR(mean, x, 5 * ulp / (2 * std::sqrt(double(n)))) << "bf16 x=" << x;
  }
  for (float x : {1.0f + 0.3f * 0x1p-10f, -0.1f, 3e-7f /* fp16 subnormal */, 65500.0f}) {
    double sum = 0;
    for (int i = 0; i < n; ++i)
      sum += float(Half::from_bits(optim::detail::half_stochastic(x, optim::detail::element_bits(7, i))));
    const uint16_t b = Half(x).bits;  // the neighbours are one magnitude step either side
    const double ulp = std::max(std::abs(float(Half::from_bits(b)) - float(Half::from_bits(b - 1))),
                                std::abs(float(Half::from_bits(b + 1)) - float(Half::from_bits(b))));
    EXPECT_NEAR(sum / n, x, 5 * ulp / (2 * std::sqrt(double(n)))) << "fp16 x=" << x;
  }
}

TEST(MasterWeights, TinyUpdatesMoveParametersOnlyWithStochasticRounding) {
  const int64_t n = 100000;
  const float tiny = 0x1p-9f;  // a quarter of bf16's ulp at 1.0
  for (auto mode : {optim::Rounding::NearestEven, optim::Rounding::Stochastic}) {
    Tensor p = ones({n}, kBFloat16).requires_grad_(true);
    optim::SGD opt({p}, optim::SGDOptions(1.0));
    opt.set_rounding(mode, 1234);
    p.set_grad(full({n}, -tiny, kBFloat16));
    opt.step();
    const std::vector<double> v = p.to_vector();
    const double mean = std::accumulate(v.begin(), v.end(), 0.0) / n;
    EXPECT_EQ(opt.state_dict().at("state.0.master").to_vector()[0], 1.0 + tiny);
    if (mode == optim::Rounding::NearestEven) {
      EXPECT_EQ(mean, 1.0);  // the update is lost in the parameter (kept in the master)
    } else {
      // p = 1 + 2^-7 with probability 1/4: mean 1 + 2^-9, sd of the mean 2^-7 * sqrt(3/16 / n).
      EXPECT_NEAR(mean, 1.0 + tiny, 5 * 0x1p-7 * std::sqrt(3.0 / 16 / n));
      EXPECT_GT(mean, 1.0);
    }
  }
}

TEST(MasterWeights, StochasticRoundingIsRepeatableAndThreadIndependent) {
  const int threads = get_num_threads();
  auto run = [](uint64_t seed, int nthreads) {
    set_num_threads(nthreads);
    Tensor p = make_param({300, 700}, kFloat16, 5);
    optim::Adam opt({p}, optim::AdamOptions(1e-3));
    opt.set_rounding(optim::Rounding::Stochastic, seed);
    for (int s = 0; s < 3; ++s) {
      p.set_grad(grad_for(kGradSeed, p, s));
      opt.step();
    }
    return p.detach().clone();
  };
  const Tensor a = run(9, 1), b = run(9, std::max(2, threads)), c = run(10, 1);
  set_num_threads(threads);
  EXPECT_TRUE(bits_equal(a, b));
  EXPECT_FALSE(bits_equal(a, c));
}

// ---------------------------------------------------------------- the fused AMP step

TEST(AmpStep, EqualsStepOnUnscaledGradients) {
  for (float inv : {1.0f / 1024, 1.0f / 3000}) {
    for (DType dt : {kFloat32, kBFloat16}) {
      SCOPED_TRACE(::testing::Message() << "inv_scale " << inv << " " << dtype_name(dt));
      Tensor p = make_param({33, 17}, dt, 2), q = p.detach().clone().requires_grad_(true);
      optim::AdamW fused({p}, optim::AdamWOptions(0.01)), plain({q}, optim::AdamWOptions(0.01));
      const Tensor inv_t = scalar_tensor(inv, kFloat32);
      for (int s = 0; s < 4; ++s) {
        const Tensor g32 = mul(grad_for(kGradSeed, p, s).to(kFloat32), 1.0 / inv);  // the scaled gradient
        p.set_grad(g32.to(dt));
        // What a separate unscale pass computes: the gradient times inv_scale in float32.
        q.set_grad(mul(p.grad().to(kFloat32), inv_t).to(dt));
        fused.step(optim::AmpStep{inv_t, scalar_tensor(0.0, kFloat32)});
        plain.step();
      }
      if (dt == kFloat32) {
        EXPECT_TRUE(bits_equal(p, q));
        EXPECT_TRUE(dicts_equal(fused.state_dict(), plain.state_dict()));
      } else {
        // 16-bit gradients unscaled by a separate pass are rounded to 16 bits once more; the
        // fused read keeps them in float32, so the two agree to bf16 precision only.
        EXPECT_TRUE(tc::testing::all_close(p, q.to_vector(), {1e-2, 1e-2}));
      }
    }
  }
}

TEST(AmpStep, SkippedStepChangesNothing) {
  for (int which = 0; which < 3; ++which) {
    Tensor p = make_param({8, 9}, which == 2 ? kFloat16 : kFloat32, 4);
    std::unique_ptr<optim::Optimizer> opt;
    if (which == 0)
      opt = std::make_unique<optim::SGD>(std::vector<Tensor>{p}, optim::SGDOptions(0.1).momentum(0.9));
    else
      opt = std::make_unique<optim::Adam>(std::vector<Tensor>{p}, optim::AdamOptions(0.1).amsgrad(true));
    opt->set_rounding(optim::Rounding::Stochastic, 3);
    const Tensor inv = scalar_tensor(0.5, kFloat32);
    for (int s = 0; s < 2; ++s) {
      p.set_grad(grad_for(kGradSeed, p, s));
      opt->step(optim::AmpStep{inv, scalar_tensor(0.0, kFloat32)});
    }
    const StateDict before = opt->state_dict();
    const Tensor p0 = p.detach().clone();
    Tensor g = grad_for(kGradSeed, p, 5);
    Tensor bad = g.to(kFloat32);
    static_cast<float*>(bad.raw_data())[3] = std::numeric_limits<float>::infinity();
    p.set_grad(bad.to(p.dtype()));
    opt->step(optim::AmpStep{inv, scalar_tensor(1.0, kFloat32)});
    EXPECT_TRUE(bits_equal(p, p0));
    EXPECT_TRUE(dicts_equal(opt->state_dict(), before));
    // Then a good step proceeds from exactly the same state.
    p.set_grad(g);
    opt->step(optim::AmpStep{inv, scalar_tensor(0.0, kFloat32)});
    EXPECT_EQ(opt->state_dict().at("state.0.step").item<int64_t>(), 3);
  }
}

// ---------------------------------------------------------------- state_dict

namespace {

using tc::testing::RunResult;
using Make = tc::testing::MakeOptimizer;

RunResult run_with_resume(const Make& make, DType dt, int steps, int split) {
  return tc::testing::run_with_resume(make, {make_param({5, 4}, dt, 1), make_param({7}, dt, 2), make_param({3}, dt, 3)},
                                      kGradSeed, steps, split);
}

}  // namespace

TEST(StateDict, RoundTripMidRunContinuesBitIdentically) {
  const std::vector<std::pair<std::string, Make>> makers = {
      {"SGD",
       [](std::vector<Tensor> p) {
         return std::make_unique<optim::SGD>(std::move(p), optim::SGDOptions(0.05).momentum(0.9).nesterov(true));
       }},
      {"Adam",
       [](std::vector<Tensor> p) {
         return std::make_unique<optim::Adam>(std::move(p), optim::AdamOptions(0.01).amsgrad(true).weight_decay(0.01));
       }},
      {"AdamW+SR",
       [](std::vector<Tensor> p) {
         auto o = std::make_unique<optim::AdamW>(std::move(p), optim::AdamWOptions(0.01));
         o->set_rounding(optim::Rounding::Stochastic, 77);
         return o;
       }},
  };
  for (const auto& [name, make] : makers) {
    for (DType dt : {kFloat32, kBFloat16}) {
      SCOPED_TRACE(name + " " + std::string(dtype_name(dt)));
      const RunResult whole = run_with_resume(make, dt, 7, -1);
      const RunResult resumed = run_with_resume(make, dt, 7, 3);
      for (size_t k = 0; k < whole.params.size(); ++k) EXPECT_TRUE(bits_equal(whole.params[k], resumed.params[k]));
      EXPECT_TRUE(dicts_equal(whole.state, resumed.state));
      EXPECT_EQ(whole.state.count("state.0.master"), dt == kBFloat16 ? 1u : 0u);
    }
  }
}

TEST(StateDict, SavedDictIsASnapshot) {
  Tensor p = make_param({4}, kFloat32, 1);
  optim::Adam opt({p});
  p.set_grad(grad_for(kGradSeed, p, 0));
  opt.step();
  const StateDict sd = opt.state_dict();
  const Tensor m = sd.at("state.0.exp_avg").clone();
  opt.step();
  EXPECT_TRUE(bits_equal(sd.at("state.0.exp_avg"), m));
}

TEST(StateDict, LoadErrors) {
  Tensor p = make_param({4, 2}, kFloat32, 1), q = make_param({3}, kBFloat16, 2);
  optim::Adam opt({p, q}, optim::AdamOptions(0.1));
  p.set_grad(grad_for(kGradSeed, p, 0));
  q.set_grad(grad_for(kGradSeed, q, 0));
  opt.step();
  const StateDict good = opt.state_dict();
  auto with = [&](const std::function<void(StateDict&)>& edit) {
    StateDict sd = good;
    edit(sd);
    return sd;
  };
  using tc::testing::expect_error;
  expect_error([&] { opt.load_state_dict(with([](StateDict& s) { s.erase("state.0.exp_avg"); })); },
               {"[optim]", "state.0.exp_avg"});
  expect_error([&] { opt.load_state_dict(with([](StateDict& s) {
                       s["state.0.exp_avg"] = zeros({2, 4});
                     })); },
               {"[optim]", "state.0.exp_avg", "(2, 4)", "(4, 2)"});
  expect_error(
      [&] {
        opt.load_state_dict(with([](StateDict& s) { s["state.0.exp_avg_sq"] = zeros({4, 2}, kFloat64); }));
      },
      {"[optim]", "state.0.exp_avg_sq", "float64", "float32"});
  expect_error([&] { opt.load_state_dict(with([](StateDict& s) {
                       s["state.0.momentum"] = zeros({4, 2});
                     })); },
               {"[optim]", "unexpected key 'state.0.momentum'"});
  expect_error([&] { opt.load_state_dict(with([](StateDict& s) { s["param_groups.0.foo"] = state_scalar(1); })); },
               {"[optim]", "unexpected key 'param_groups.0.foo'"});
  expect_error([&] { opt.load_state_dict(with([](StateDict& s) { s["state.5.step"] = state_int(1); })); },
               {"[optim]", "parameter 5"});
  expect_error([&] { opt.load_state_dict(with([](StateDict& s) { s["param_groups.1.lr"] = state_scalar(1); })); },
               {"[optim]", "2 parameter groups", "has 1"});
  expect_error([&] { opt.load_state_dict(with([](StateDict& s) { s.erase("state.1.master"); })); },
               {"[optim]", "bfloat16", "master"});
  expect_error([&] { opt.load_state_dict(with([](StateDict& s) { s.erase("param_groups.0.eps"); })); },
               {"[optim]", "param_groups.0.eps"});
  expect_error([&] { opt.load_state_dict(with([](StateDict& s) { s["param_groups.0.lr"] = state_scalar(-1); })); },
               {"[optim]", "learning rate"});
  expect_error(
      [&] {
        opt.load_state_dict(
            with([](StateDict& s) { s["param_groups.0.params"] = tensor(std::vector<int64_t>{0}, {1}); }));
      },
      {"[optim]", "parameter group 0"});
  // A failed load leaves the optimizer as it was.
  EXPECT_TRUE(dicts_equal(opt.state_dict(), good));
  // Loading into a different optimizer type fails on its option names.
  optim::SGD sgd({p, q}, optim::SGDOptions(0.1).momentum(0.9));
  expect_error([&] { sgd.load_state_dict(good); }, "[optim]");
}

// ---------------------------------------------------------------- option and parameter checks

TEST(Optimizer, BadOptionsAndParameters) {
  Tensor p = make_param({2}, kFloat32, 1);
  using tc::testing::expect_error;
  expect_error([&] { optim::SGD({p}, optim::SGDOptions(-0.1)); }, {"[optim]", "invalid learning rate: -0.1"});
  expect_error([&] { optim::SGD({p}, optim::SGDOptions(0.1).momentum(-1)); }, {"[optim]", "momentum"});
  expect_error([&] { optim::SGD({p}, optim::SGDOptions(0.1).nesterov(true)); }, {"[optim]", "Nesterov"});
  expect_error([&] { optim::SGD({p}, optim::SGDOptions(0.1).momentum(0.9).dampening(0.1).nesterov(true)); },
               {"[optim]", "Nesterov"});
  expect_error([&] { optim::Adam({p}, optim::AdamOptions(-1)); }, {"[optim]", "learning rate"});
  expect_error([&] { optim::Adam({p}, optim::AdamOptions().betas({1.0, 0.999})); }, {"[optim]", "beta", "index 0"});
  expect_error([&] { optim::AdamW({p}, optim::AdamWOptions().betas({0.9, -0.1})); }, {"[optim]", "beta", "index 1"});
  expect_error([&] { optim::AdamW({p}, optim::AdamWOptions().eps(-1e-8)); }, {"[optim]", "epsilon"});
  expect_error([&] { optim::Adam({p}, optim::AdamOptions().weight_decay(-1)); }, {"[optim]", "weight_decay"});
  expect_error([&] { optim::SGD({p, p}, optim::SGDOptions(0.1)); }, {"[optim]", "more than once"});
  expect_error([&] { optim::SGD({tensor(std::vector<int64_t>{1, 2})}, optim::SGDOptions(0.1)); }, {"[optim]", "int64"});
  expect_error(
      [&] {
        std::vector<optim::OptimizerParamGroup> g;
        g.emplace_back(std::vector<Tensor>{p}, std::make_unique<optim::AdamOptions>());
        optim::SGD(std::move(g), optim::SGDOptions(0.1));
      },
      {"[optim]", "SGDOptions"});
  // Options changed after construction are checked at the next step.
  optim::SGD opt({p}, optim::SGDOptions(0.1));
  opt.param_groups()[0].options->set_lr(-1);
  p.set_grad(grad_for(kGradSeed, p, 0));
  expect_error([&] { opt.step(); }, {"[optim]", "learning rate"});
  // AmpStep tensors must be scalars.
  opt.param_groups()[0].options->set_lr(0.1);
  expect_error([&] { opt.step(optim::AmpStep{scalar_tensor(1.0), zeros({2})}); }, {"[optim]", "found_inf"});
}

// ---------------------------------------------------------------- throughput

TEST(Throughput, FusedAdamWOn10MParameters) {
  const int64_t n = 10'000'000;
  for (DType dt : {kFloat32, kBFloat16}) {
    Tensor p = zeros({n}, dt).requires_grad_(true);
    p.set_grad(full({n}, 1e-3, dt));
    optim::AdamW opt({p}, optim::AdamWOptions(1e-3));
    opt.step();  // creates the state
    const int reps = 5;
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) opt.step();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
    // Bytes moved per element: fp32 params read p, g, m, v and write p, m, v; bf16 params read
    // g and the fp32 master/m/v, write the master, m, v and the bf16 parameter.
    const double bytes = dt == kFloat32 ? 28.0 : 2 + 12 + 12 + 2;
    std::printf("[ throughput ] AdamW step, 10M %s params, %d threads: %.2f ms, %.1f GB/s\n",
                std::string(dtype_name(dt)).c_str(), get_num_threads(), s * 1e3, bytes * n / s / 1e9);
    EXPECT_GT(s, 0.0);
  }
}
