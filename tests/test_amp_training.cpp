// The fp16 claim, end to end: an MLP trained in float16 without loss scaling loses its
// gradients to underflow, with the GradScaler it follows the float32 loss curve, and
// bfloat16 (float32's exponent range) needs no scaler.
//
// The loss is multiplied by a small factor (and the learning rate divided by it) so that
// the typical gradient is ~1e-8: the regime of late training and deep nets where fp16's
// smallest subnormal (6e-8) flushes gradients to zero. The float32 run is unaffected
// (the factor cancels), so it is the reference curve.
#include <cmath>
#include <cstdio>

#include "common/testing.h"
#include "tensorcast/amp/autocast.h"
#include "tensorcast/amp/grad_scaler.h"
#include "tensorcast/optim/sgd.h"

namespace tc {
namespace {

constexpr double kLossFactor = 1e-6;
constexpr double kLr = 0.05;  // the effective learning rate, after the factor cancels
constexpr int kSteps = 150;
constexpr int64_t kBatch = 256, kIn = 32, kHidden = 64, kClasses = 8;

struct Data {
  Tensor x, y;
};

// Labels from a fixed random teacher network, so there is something to learn.
Data make_data() {
  manual_seed(123);
  Tensor x = randn({kBatch, kIn});
  Tensor teacher = randn({kClasses, kIn});
  Tensor y = argmax(matmul(x, teacher.t()), 1);
  return {x, y};
}

struct Mlp {
  Tensor w1, b1, w2, b2;
  Mlp() {
    manual_seed(7);
    w1 = (randn({kHidden, kIn}) * (1.0 / std::sqrt(double(kIn)))).detach().requires_grad_();
    b1 = zeros({kHidden}).requires_grad_();
    w2 = (randn({kClasses, kHidden}) * (1.0 / std::sqrt(double(kHidden)))).detach().requires_grad_();
    b2 = zeros({kClasses}).requires_grad_();
  }
  std::vector<Tensor> params() const { return {w1, b1, w2, b2}; }
  // fp32 master weights; activations and weights cast to `dt` as autocast would; the
  // loss in float32 (autocast's fp32 list).
  Tensor loss(const Data& d, DType dt) const {
    Tensor h = relu(linear(d.x.to(dt), w1.to(dt), b1.to(dt)));
    Tensor logits = linear(h, w2.to(dt), b2.to(dt));
    return cross_entropy(logits.to(kFloat32), d.y) * kLossFactor;
  }
  // The same through the autocast layer: linear runs in `dt`, cross_entropy in fp32.
  Tensor autocast_loss(const Data& d, DType dt) const {
    amp::AutocastGuard autocast(kCPU, dt);
    Tensor logits = linear(relu(linear(d.x, w1, b1)), w2, b2);
    EXPECT_EQ(logits.dtype(), dt);
    return cross_entropy(logits, d.y) * kLossFactor;
  }
};

double zero_fraction(const std::vector<Tensor>& params) {
  double zeros_n = 0, n = 0;
  for (const Tensor& p : params) {
    for (double v : p.grad().to_vector()) zeros_n += v == 0.0;
    n += static_cast<double>(p.numel());
  }
  return zeros_n / n;
}

struct Curve {
  std::vector<double> loss;        // the unscaled loss / kLossFactor, per step
  double first_zero_fraction = 0;  // of the gradients at step 0 (after unscaling)
  int64_t skipped = 0;
};

Curve train(DType dt, bool use_scaler, bool autocast = false,
            amp::GradScalerOptions options = amp::GradScalerOptions()) {
  const Data data = make_data();
  Mlp mlp;
  optim::SGD opt(mlp.params(), optim::SGDOptions(kLr / kLossFactor).momentum(0.9));
  amp::GradScaler scaler(options.enabled(use_scaler));
  Curve run;
  for (int s = 0; s < kSteps; ++s) {
    opt.zero_grad();
    Tensor loss = autocast ? mlp.autocast_loss(data, dt) : mlp.loss(data, dt);
    run.loss.push_back(loss.item_double() / kLossFactor);
    scaler.scale(loss).backward();
    scaler.unscale_(opt);  // so the zero count sees the gradients the optimizer gets
    if (s == 0) run.first_zero_fraction = zero_fraction(mlp.params());
    scaler.step(opt);
    scaler.update();
  }
  run.skipped = scaler.steps_skipped();
  return run;
}

double max_gap(const Curve& a, const Curve& b) {
  double m = 0;
  for (size_t i = 0; i < a.loss.size(); ++i) m = std::max(m, std::fabs(a.loss[i] - b.loss[i]));
  return m;
}

TEST(AmpTraining, Fp16NeedsTheScalerBf16DoesNot) {
  const Curve fp32 = train(kFloat32, false);
  const Curve fp16 = train(kFloat16, false);
  const Curve fp16_scaled = train(kFloat16, true);
  const Curve bf16 = train(kBFloat16, false);
  // A scale far too large at first: the fp16 activation gradients overflow (the weight
  // gradients would not: linear writes them in fp32), the scaler skips and backs off.
  const Curve fp16_backoff =
      train(kFloat16, true, false, amp::GradScalerOptions().init_scale(0x1p48).growth_interval(20));

  std::printf("loss at steps 0 / %d / %d (zero-gradient fraction at step 0, skipped steps)\n", kSteps / 2, kSteps - 1);
  for (auto [name, r] : {std::pair{"fp32", &fp32},
                         {"fp16, no scaler", &fp16},
                         {"fp16 + GradScaler", &fp16_scaled},
                         {"bf16, no scaler", &bf16},
                         {"fp16, init 2^48", &fp16_backoff}})
    std::printf("  %-18s %.4f / %.4f / %.4f  (zero grads %5.1f%%, skipped %lld)\n", name, r->loss[0],
                r->loss[kSteps / 2], r->loss.back(), 100 * r->first_zero_fraction, static_cast<long long>(r->skipped));
  std::printf("max |loss - fp32 loss| over %d steps: fp16+scaler %.4f, bf16 %.4f\n", kSteps, max_gap(fp16_scaled, fp32),
              max_gap(bf16, fp32));

  // The float32 reference learns.
  EXPECT_LT(fp32.loss.back(), 0.5 * fp32.loss[0]);
  // Without scaling, fp16 loses (nearly) all gradients and does not learn.
  EXPECT_GT(fp16.first_zero_fraction, 0.9);
  EXPECT_GT(fp16.loss.back(), 0.9 * fp16.loss[0]);
  // With the scaler, fp16 keeps its gradients and tracks the fp32 curve.
  EXPECT_LT(fp16_scaled.first_zero_fraction, 0.05);
  EXPECT_LT(max_gap(fp16_scaled, fp32), 0.02 + 0.02 * fp32.loss[0]);
  // bf16 keeps its gradients without a scaler (coarser mantissa: looser tolerance).
  EXPECT_LT(bf16.first_zero_fraction, 0.05);
  EXPECT_LT(max_gap(bf16, fp32), 0.05 + 0.05 * fp32.loss[0]);
  EXPECT_LT(bf16.loss.back(), 0.5 * bf16.loss[0]);
  // Overflowing steps are skipped (the loss stays put), then training proceeds normally.
  EXPECT_GT(fp16_backoff.skipped, 0);
  EXPECT_LT(fp16_backoff.skipped, 20);
  EXPECT_EQ(fp16_backoff.loss[1], fp16_backoff.loss[0]);
  EXPECT_LT(fp16_backoff.loss.back(), 2 * fp32.loss.back() + 0.01);
}

TEST(AmpTraining, UnderAutocastTheScalerRescuesFp16) {
  const Curve fp32 = train(kFloat32, false);
  const Curve fp16 = train(kFloat16, false, /*autocast=*/true);
  const Curve fp16_scaled = train(kFloat16, true, /*autocast=*/true);
  const Curve bf16 = train(kBFloat16, false, /*autocast=*/true);
  std::printf("autocast: final loss fp32 %.4f, fp16 %.4f (zero grads %.1f%%), fp16+scaler %.4f, bf16 %.4f\n",
              fp32.loss.back(), fp16.loss.back(), 100 * fp16.first_zero_fraction, fp16_scaled.loss.back(),
              bf16.loss.back());
  EXPECT_GT(fp16.first_zero_fraction, 0.9);
  EXPECT_LT(fp16_scaled.first_zero_fraction, 0.05);
  EXPECT_LT(max_gap(fp16_scaled, fp32), 0.02 + 0.02 * fp32.loss[0]);
  EXPECT_LT(max_gap(bf16, fp32), 0.05 + 0.05 * fp32.loss[0]);
}

}  // namespace
}  // namespace tc
