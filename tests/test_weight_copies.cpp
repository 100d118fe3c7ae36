// The 16-bit weight copies an optimizer step writes: with the autocast cache kept across
// regions, a training loop's step writes each parameter's cached copy in the same pass as
// the parameter, so the next forward casts nothing. Checked against the cast the forward
// would have made (bit for bit), against the same loop with the cache cleared at every
// region's exit (losses and weights bit for bit), and in the cases where the copy must not
// be written: a skipped step, a graph that still reads the copy, a region of another dtype.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/testing.h"
#include "tensorcast/tensorcast.h"

namespace {

using namespace tc;
using amp::AutocastGuard;
using tc::testing::uniform;

// The cache kept across regions, training copies included (on), or cleared at every
// region's exit (off).
struct AcrossRegions {
  explicit AcrossRegions(bool on)
      : prev(amp::is_autocast_cache_across_regions()), prev_training(amp::autocast_cache_keeps_training_copies()) {
    amp::clear_autocast_cache();
    amp::reset_autocast_cache_stats();
    amp::set_autocast_cache_across_regions(on);
    amp::set_autocast_cache_keeps_training_copies(on);
  }
  ~AcrossRegions() {
    amp::set_autocast_cache_across_regions(prev);
    amp::set_autocast_cache_keeps_training_copies(prev_training);
    amp::clear_autocast_cache();
  }
  bool prev, prev_training;
};

Tensor param(const Shape& s, uint64_t seed) { return uniform(s, kFloat32, -1, 1, seed).requires_grad_(true); }

// A two-layer perceptron trained under autocast; `bits` true compares copies after every step.
struct Net {
  Tensor w1 = param({32, 16}, 1), b1 = param({32}, 2), w2 = param({8, 32}, 3), b2 = param({8}, 4);
  std::vector<Tensor> params() const { return {w1, b1, w2, b2}; }
  Tensor loss(const Tensor& x, DType dt) const {
    AutocastGuard g(kCPU, dt);
    const Tensor y = linear(gelu(linear(x, w1, b1)), w2, b2);
    return y.to(kFloat32).pow(2.0).mean();
  }
};

enum class Opt { kSgd, kAdamW };

std::unique_ptr<optim::Optimizer> make_opt(Opt o, const std::vector<Tensor>& p) {
  if (o == Opt::kSgd) return std::make_unique<optim::SGD>(p, optim::SGDOptions(0.05).momentum(0.9).weight_decay(1e-3));
  return std::make_unique<optim::AdamW>(p, optim::AdamWOptions(1e-2));
}

// The cache's copy of p (the one the next forward reads), taken without changing it.
Tensor cached_copy(const Tensor& p, DType dt) {
  AutocastGuard g(kCPU, dt);
  NoGradGuard ng;
  return amp::cached_cast(dt, p);
}

struct Trained {
  std::vector<double> losses;
  std::vector<Tensor> weights;
};

Trained train(Opt o, DType dt, bool across, int steps, bool check_copies) {
  AcrossRegions a(across);
  Net net;
  auto opt = make_opt(o, net.params());
  Trained r;
  for (int s = 0; s < steps; ++s) {
    const Tensor x = uniform({24, 16}, kFloat32, -2, 2, 100 + s);
    opt->zero_grad();
    const Tensor loss = net.loss(x, dt);
    loss.backward();
    opt->step();
    r.losses.push_back(loss.item_double());
    if (check_copies) {
      for (const Tensor& p : net.params()) {
        const Tensor c = cached_copy(p, dt);
        EXPECT_TRUE(tc::testing::equal(c, p.detach().to(dt))) << "step " << s << ", parameter " << shape_str(p.sizes());
      }
    }
  }
  for (const Tensor& p : net.params()) r.weights.push_back(p.detach().clone());
  return r;
}

TEST(WeightCopies, TheStepWritesTheCastTheForwardWouldMake) {
  for (DType dt : {kBFloat16, kFloat16}) {
    for (Opt o : {Opt::kSgd, Opt::kAdamW}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + (o == Opt::kSgd ? " SGD" : " AdamW"));
      const Trained kept = train(o, dt, true, 6, true);
      const auto s = amp::autocast_cache_stats();
      EXPECT_EQ(s.misses, 4);       // the first forward's casts, and no other
      EXPECT_EQ(s.stepped, 4 * 6);  // every parameter at every step
      EXPECT_EQ(s.stale_replaced, 0);
      const Trained cleared = train(o, dt, false, 6, false);
      ASSERT_EQ(kept.losses.size(), cleared.losses.size());
      for (size_t i = 0; i < kept.losses.size(); ++i) EXPECT_EQ(kept.losses[i], cleared.losses[i]) << "step " << i;
      for (size_t i = 0; i < kept.weights.size(); ++i)
        EXPECT_TRUE(tc::testing::equal(kept.weights[i], cleared.weights[i])) << "parameter " << i;
    }
  }
}

// The step writes the copy through raw pointers, so it bumps the copy's version: what was
// made from its old values (a product kernel's packed tiles of it) reads as stale.
TEST(WeightCopies, TheStepBumpsTheCopysVersion) {
  AcrossRegions a(true);
  Net net;
  auto opt = make_opt(Opt::kAdamW, net.params());
  for (int s = 0; s < 3; ++s) {
    opt->zero_grad();
    net.loss(uniform({24, 16}, kFloat32, -2, 2, 200 + s), kBFloat16).backward();
    const void* memory = nullptr;
    int64_t version = 0;
    {
      const Tensor before = cached_copy(net.w1, kBFloat16);  // (held, it would be left to its holder)
      memory = before.raw_data();
      version = before._version();
    }
    opt->step();
    const Tensor after = cached_copy(net.w1, kBFloat16);
    EXPECT_EQ(after.raw_data(), memory) << "step " << s << ": the step wrote the cached copy";
    EXPECT_GT(after._version(), version) << "step " << s;
  }
}

// Rounding to nearest even at the ties, signed zeros, subnormals, values past the 16-bit
// range, inf and NaN: the step's copy is the cast's, bit for bit.
TEST(WeightCopies, TheCopyRoundsAsTheCastAtEveryEdge) {
  for (DType dt : {kBFloat16, kFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    AcrossRegions a(true);
    const std::vector<float> edge = {0.0f,
                                     -0.0f,
                                     1.0f + 0x1p-8f,
                                     1.0f + 0x3p-8f,
                                     1.0f + 0x1p-11f,
                                     1.0f + 0x3p-11f,
                                     0x1p-130f,
                                     -0x1p-140f,
                                     0x1p-25f,
                                     6.5504e4f,
                                     6.5520e4f,
                                     3.4e38f,
                                     -3.4e38f,
                                     std::numeric_limits<float>::infinity(),
                                     std::numeric_limits<float>::quiet_NaN()};
    Tensor w = tensor(edge).requires_grad_(true);
    {
      AutocastGuard g(kCPU, dt);
      NoGradGuard ng;
      (void)amp::cached_cast(dt, w);  // the entry the step will write
    }
    // SGD with lr 1 and a zero gradient keeps every value (w + -1 * 0): the copy is rewritten
    // from the same weights, so any difference is the copy's rounding.
    w.set_grad(zeros({static_cast<int64_t>(edge.size())}));
    optim::SGD opt({w}, optim::SGDOptions(1.0));
    opt.step();
    EXPECT_EQ(amp::autocast_cache_stats().stepped, 1);
    EXPECT_TRUE(tc::testing::equal(cached_copy(w, dt), w.detach().to(dt)));
    // And from values the step moves onto the ties.
    w.set_grad(tensor(std::vector<float>(edge.size(), 0x1p-9f)));
    opt.step();
    EXPECT_TRUE(tc::testing::equal(cached_copy(w, dt), w.detach().to(dt)));
  }
}

// The GradScaler skips a step whose gradients are not finite: the parameter and its copy
// keep their values and the copy stays current (served, not cast again).
TEST(WeightCopies, ASkippedStepLeavesTheCopyCurrent) {
  AcrossRegions a(true);
  Net net;
  optim::AdamW opt(net.params(), optim::AdamWOptions(1e-2));
  amp::GradScaler scaler(amp::GradScalerOptions().init_scale(1024.0));
  const Tensor x = uniform({24, 16}, kFloat32, -2, 2, 7);
  scaler.scale(net.loss(x, kFloat16)).backward();
  net.w1.grad().data_ptr<float>()[3] = std::numeric_limits<float>::infinity();
  const Tensor before = net.w1.detach().clone();
  amp::reset_autocast_cache_stats();
  EXPECT_FALSE(scaler.step(opt));
  EXPECT_TRUE(tc::testing::equal(net.w1.detach(), before));
  for (const Tensor& p : net.params())
    EXPECT_TRUE(tc::testing::equal(cached_copy(p, kFloat16), p.detach().to(kFloat16)));
  const auto s = amp::autocast_cache_stats();
  EXPECT_EQ(s.misses, 0);
  EXPECT_EQ(s.stale_replaced, 0);
}

// A step between a forward and its backward: the graph saved the 16-bit weight the forward
// used, and its backward must read those values, so the step writes a new buffer for the
// cache instead (PyTorch's separate cast gives the same).
TEST(WeightCopies, ACopyAGraphStillReadsIsNotWritten) {
  Tensor ref_grad;
  for (bool across : {false, true}) {
    AcrossRegions a(across);
    Tensor w = param({8, 16}, 5);
    const Tensor x = uniform({4, 16}, kFloat32, -1, 1, 6).requires_grad_(true);
    Tensor y;
    {
      AutocastGuard g(kCPU, kBFloat16);
      y = linear(x, w);
    }
    w.set_grad(uniform({8, 16}, kFloat32, -1, 1, 8));
    optim::SGD opt({w}, optim::SGDOptions(0.5));
    opt.step();
    y.to(kFloat32).sum().backward();  // dL/dx = ones W: the forward's W, not the stepped one
    if (!across) {
      ref_grad = x.grad().clone();
      continue;
    }
    EXPECT_TRUE(tc::testing::equal(x.grad(), ref_grad));
    EXPECT_EQ(amp::autocast_cache_stats().stepped, 1);
    EXPECT_TRUE(tc::testing::equal(cached_copy(w, kBFloat16), w.detach().to(kBFloat16)));
  }
}

// Across regions without training copies: a copy that took autograd history ends with its
// region (as the graph would free it), so the step finds none to write; a copy an
// evaluation forward made under no-grad is kept, and the step writes it.
TEST(WeightCopies, WithoutTrainingCopiesOnlyNoGradCopiesAreKept) {
  AcrossRegions a(true);
  amp::set_autocast_cache_keeps_training_copies(false);
  Net net;
  optim::SGD opt(net.params(), optim::SGDOptions(0.1));
  const Tensor x = uniform({24, 16}, kFloat32, -2, 2, 7);
  net.loss(x, kBFloat16).backward();
  EXPECT_EQ(amp::autocast_cache_stats().size, 0);
  opt.step();
  EXPECT_EQ(amp::autocast_cache_stats().stepped, 0);
  {
    NoGradGuard ng;
    (void)net.loss(x, kBFloat16);  // an evaluation forward
  }
  EXPECT_EQ(amp::autocast_cache_stats().size, 4);
  opt.zero_grad();
  net.loss(x, kBFloat16).backward();  // attaches the kept copies, then drops them at the exit
  EXPECT_EQ(amp::autocast_cache_stats().size, 0);
  {
    NoGradGuard ng;
    (void)net.loss(x, kBFloat16);
  }
  opt.step();
  EXPECT_EQ(amp::autocast_cache_stats().stepped, 4);
  for (const Tensor& p : net.params())
    EXPECT_TRUE(tc::testing::equal(cached_copy(p, kBFloat16), p.detach().to(kBFloat16)));
}

// One entry per parameter: a region of another 16-bit dtype casts again.
TEST(WeightCopies, ARegionOfAnotherDtypeCastsAgain) {
  AcrossRegions a(true);
  const Tensor w = param({8, 16}, 5);
  const Tensor x = uniform({4, 16}, kFloat32, -1, 1, 6);
  for (DType dt : {kBFloat16, kFloat16, kBFloat16}) {
    AutocastGuard g(kCPU, dt);
    NoGradGuard ng;
    const Tensor y = linear(x, w);
    EXPECT_EQ(y.dtype(), dt);
    EXPECT_TRUE(tc::testing::equal(y, linear(x.to(dt), w.detach().to(dt))));
  }
  EXPECT_EQ(amp::autocast_cache_stats().stale_replaced, 2);
}

}  // namespace
