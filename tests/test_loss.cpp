// Tests for the losses: cross_entropy, nll_loss, mse_loss, binary_cross_entropy_with_logits,
// beyond the op table (test_op_db.cpp checks forward against float64 references, strided
// inputs and gradcheck in every dtype). Here: PyTorch's definitions of weights,
// ignore_index, label smoothing and reductions in every combination, forward and backward;
// many rows across threads, int32 targets, all-ignored and empty batches, IEEE edge cases
// and huge logits, large accurate sums, errors.
#include <cmath>
#include <limits>
#include <string>

#include "common/references.h"
#include "common/testing.h"

namespace tc {
namespace {

using testing::all_close;
using testing::gradcheck;
using testing::Tol;
using testing::tol_for;
using testing::uniform;

using testing::kAllFloat;
const std::vector<Reduction> kReductions = {kNone, kMean, kSum};
using testing::kInf;
using testing::kNaN;

const char* red_name(Reduction r) { return r == kNone ? "none" : r == kMean ? "mean" : "sum"; }

// Gradient tolerance. 16-bit: the incoming gradient and the result each round once
// (2^-9 / 2^-12 relative), so a couple of ulps relative plus a small absolute floor.
Tol grad_tol(DType dt) {
  if (dt == kBFloat16) return {0x1p-8, 0x1p-7};
  if (dt == kFloat16) return {0x1p-11, 0x1p-10};
  if (dt == kFloat64) return {1e-7, 1e-7};  // central differences in float64 carry ~1e-9 noise
  return tol_for(dt, 8);
}

using testing::expect_error;

// ----------------------------------------------------------------- class-index helpers
// (the float64 reference is testing::ref::class_loss, common/references.h)

using testing::random_targets;

int64_t numel_of(const Shape& s) {
  int64_t n = 1;
  for (int64_t v : s) n *= v;
  return n;
}

Shape target_shape(const Shape& s) {
  if (s.size() == 1) return {};
  Shape t = s;
  t.erase(t.begin() + 1);
  return t;
}

Tensor class_loss(bool nll, const Tensor& x, const Tensor& t, const Tensor& w, int64_t ignore, Reduction red,
                  double eps) {
  return nll ? nll_loss(x, t, w, ignore, red) : cross_entropy(x, t, w, ignore, red, eps);
}

class ClassLossTest : public ::testing::TestWithParam<bool> {};  // param: nll_loss?

TEST_P(ClassLossTest, ForwardMatchesReference) {
  const bool nll = GetParam();
  const std::vector<Shape> shapes = {{6, 10}, {2, 4, 3, 5}, {7}, {1, 1}};
  for (DType dt : kAllFloat)
    for (const Shape& s : shapes)
      for (int64_t ignore : {int64_t{-100}, int64_t{0}})
        for (bool weighted : {false, true})
          for (double eps : nll ? std::vector<double>{0.0} : std::vector<double>{0.0, 0.1, 1.0})
            for (Reduction red : kReductions) {
              const int64_t c = s.size() == 1 ? s[0] : s[1];
              Tensor x = uniform(s, dt, -4, 4, 5);
              const Shape ts = target_shape(s);
              auto tv = random_targets(numel_of(ts), c, ignore, 6);
              if (ts.empty() && ignore == 0) tv[0] = c - 1;  // keep one unbatched target live
              Tensor t = tensor(tv).reshape(ts);
              Tensor w = weighted ? uniform({c}, kFloat32, 0.25, 2, 8) : Tensor();
              std::vector<double> wv = weighted ? w.to_vector() : std::vector<double>{};
              Tensor y = class_loss(nll, x, t, w, ignore, red, eps);
              ASSERT_EQ(y.dtype(), dt);
              ASSERT_EQ(y.sizes(), red == kNone ? ts : Shape{});
              EXPECT_TRUE(
                  all_close(y, testing::ref::class_loss(x.to_vector(), s, tv, wv, ignore, red, eps, nll), tol_for(dt)))
                  << dtype_name(dt) << " " << shape_str(s) << " ignore " << ignore << " weighted " << weighted
                  << " eps " << eps << " " << red_name(red);
            }
}

TEST_P(ClassLossTest, ManyRowsSplitAcrossThreads) {
  // Enough rows for several intra-op chunks, (N, C) and spatial (N, C, L) layouts.
  const bool nll = GetParam();
  for (const Shape& s : std::vector<Shape>{{3000, 40}, {20, 40, 150}}) {
    Tensor x = uniform(s, kBFloat16, -6, 6, 23);
    const Shape ts = target_shape(s);
    auto tv = random_targets(numel_of(ts), 40, -100, 24);
    Tensor t = tensor(tv).reshape(ts);
    for (Reduction red : {kNone, kMean})
      EXPECT_TRUE(all_close(class_loss(nll, x, t, Tensor(), -100, red, 0.05),
                            testing::ref::class_loss(x.to_vector(), s, tv, {}, -100, red, nll ? 0.0 : 0.05, nll),
                            tol_for(kBFloat16)))
          << shape_str(s) << " " << red_name(red);
  }
}

TEST_P(ClassLossTest, Int32TargetsMatchInt64) {
  const bool nll = GetParam();
  Tensor x = uniform({5, 7}, kFloat32, -2, 2, 9);
  Tensor t = tensor(std::vector<int64_t>{0, 6, 3, -100, 2});
  Tensor a = class_loss(nll, x, t, Tensor(), -100, kNone, 0);
  Tensor b = class_loss(nll, x, t.to(kInt32), Tensor(), -100, kNone, 0);
  EXPECT_TRUE(testing::equal(a, b));
  EXPECT_TRUE(all_close(a, testing::ref::class_loss(x.to_vector(), {5, 7}, {0, 6, 3, -100, 2}, {}, -100, kNone, 0, nll),
                        tol_for(kFloat32)));
}

TEST_P(ClassLossTest, AllIgnoredAndEmpty) {
  const bool nll = GetParam();
  for (DType dt : kAllFloat) {
    Tensor x = uniform({3, 4}, dt, -1, 1, 1);
    Tensor t = full({3}, -100, kInt64);
    EXPECT_TRUE(std::isnan(class_loss(nll, x, t, Tensor(), -100, kMean, 0).item<double>())) << dtype_name(dt);
    EXPECT_EQ(class_loss(nll, x, t, Tensor(), -100, kSum, 0).item<double>(), 0.0);
    EXPECT_TRUE(all_close(class_loss(nll, x, t, Tensor(), -100, kNone, 0), {0, 0, 0}, {0, 0}));
    // Zero samples: mean is 0/0 = NaN, sum is 0, none is empty (PyTorch).
    Tensor xe = zeros({0, 4}, dt);
    Tensor te = zeros({0}, kInt64);
    EXPECT_TRUE(std::isnan(class_loss(nll, xe, te, Tensor(), -100, kMean, 0).item<double>()));
    EXPECT_EQ(class_loss(nll, xe, te, Tensor(), -100, kSum, 0).item<double>(), 0.0);
    EXPECT_EQ(class_loss(nll, xe, te, Tensor(), -100, kNone, 0).sizes(), Shape{0});
  }
}

TEST_P(ClassLossTest, BadInputsThrow) {
  const bool nll = GetParam();
  const std::string op = nll ? "[nll_loss]" : "[cross_entropy]";
  Tensor x = zeros({4, 10});
  auto run = [&](const Tensor& xx, const Tensor& t, const Tensor& w = Tensor()) {
    class_loss(nll, xx, t, w, -100, kMean, 0);
  };
  expect_error(
      [&] {
        run(x, tensor(std::vector<int64_t>{0, 12, 1, 2}));
      },
      {op + " target 12 is out of bounds for 10 classes"});
  expect_error([&] { run(x, tensor(std::vector<int64_t>{0, -1, 1, 2})); }, {op, "target -1 is out of bounds"});
  expect_error([&] { run(x, tensor(std::vector<int64_t>{0, 10, 1, 2}).to(kInt32)); }, {op, "target 10"});
  expect_error([&] { run(x, zeros({4})); }, {op, "int64", "float32"});
  expect_error([&] { run(x, zeros({4}, kUInt8)); }, {op, "uint8"});
  expect_error([&] { run(x, zeros({5}, kInt64)); }, {op, "(4,)", "(4, 10)", "(5,)"});
  expect_error([&] { run(x, zeros({4, 1}, kInt64)); }, {op, "(4, 1)"});
  expect_error([&] { run(x, zeros({4}, kInt64), ones({9})); }, {op, "weight", "(10,)", "(9,)"});
  expect_error([&] { run(x, zeros({4}, kInt64), ones({10}, kInt64)); }, {op, "weight", "int64"});
  expect_error([&] { run(zeros({4, 10}, kInt64), zeros({4}, kInt64)); }, {op, "int64", "(4, 10)"});
  expect_error([&] { run(scalar_tensor(1.0), zeros({}, kInt64)); }, {op, "0-d"});
  // An in-range ignore_index is skipped, not checked.
  EXPECT_NO_THROW(class_loss(nll, x, tensor(std::vector<int64_t>{3, 3, 1, 2}), Tensor(), 3, kMean, 0));
  if (!nll)
    expect_error([&] { cross_entropy(x, zeros({4}, kInt64), Tensor(), -100, kMean, 1.5); },
                 {"[cross_entropy]", "label_smoothing"});
}

TEST_P(ClassLossTest, BackwardMatchesNumericalGradient) {
  const bool nll = GetParam();
  struct Case {
    Shape shape;
    bool weighted;
    int64_t ignore;
    Reduction red;
    double eps;
    bool transpose;
  };
  const std::vector<Case> cases = {
      {{6, 5}, false, -100, kMean, 0.0, false}, {{6, 5}, true, -100, kMean, 0.0, false},
      {{6, 5}, true, 2, kSum, 0.2, false},      {{2, 3, 4}, true, -100, kNone, 0.1, false},
      {{5}, false, -100, kMean, 0.0, false},    {{5, 6}, true, -100, kMean, 0.3, true},
  };
  for (DType dt : kAllFloat)
    for (const Case& k : cases) {
      const int64_t c = k.shape.size() == 1 ? k.shape[0] : k.shape[1];
      Tensor x = uniform(k.shape, dt, -3, 3, 15).requires_grad_();
      const Shape ts = target_shape(k.shape);
      Tensor t = tensor(random_targets(numel_of(ts), c, k.ignore, 16)).reshape(ts);
      Tensor w = k.weighted ? uniform({c}, kFloat32, 0.5, 2, 17) : Tensor();
      const double eps = nll ? 0.0 : k.eps;
      auto f = [&](const std::vector<Tensor>& in) {
        const Tensor xi = k.transpose ? in[0].t().contiguous().t() : in[0];  // column-major logits
        return class_loss(nll, xi, t, w, k.ignore, k.red, eps);
      };
      EXPECT_TRUE(gradcheck(f, {x}, grad_tol(dt))) << dtype_name(dt) << " " << shape_str(k.shape) << " weighted "
                                                   << k.weighted << " " << red_name(k.red) << " eps " << eps;
    }
}

INSTANTIATE_TEST_SUITE_P(, ClassLossTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "nll_loss" : "cross_entropy"; });

TEST(CrossEntropy, GradientIsSoftmaxMinusOneHot) {
  // The fused backward against the textbook formula, with ignored rows getting zero.
  for (DType dt : kAllFloat) {
    Tensor x = uniform({4, 6}, dt, -2, 2, 31).requires_grad_();
    std::vector<int64_t> tv = {5, -100, 0, 3};
    Tensor w = tensor({0.5, 1, 2, 1, 1, 3}, kFloat32);
    cross_entropy(x, tensor(tv), w, -100, kMean).backward();
    const std::vector<double> xv = x.to_vector(), wv = w.to_vector();
    const double denom = wv[5] + wv[0] + wv[3];
    std::vector<double> expect(24, 0.0);
    for (int r = 0; r < 4; ++r) {
      if (tv[r] < 0) continue;
      double s = 0;
      for (int k = 0; k < 6; ++k) s += std::exp(xv[r * 6 + k]);
      for (int k = 0; k < 6; ++k)
        expect[r * 6 + k] = wv[tv[r]] * (std::exp(xv[r * 6 + k]) / s - (k == tv[r] ? 1 : 0)) / denom;
    }
    ASSERT_EQ(x.grad().dtype(), dt);
    EXPECT_TRUE(all_close(x.grad(), expect, tol_for(dt, 8))) << dtype_name(dt);
  }
}

TEST(CrossEntropy, HugeAndNonFiniteLogits) {
  for (DType dt : kAllFloat) {
    // 1e4 logits would overflow exp in every dtype without the max subtraction.
    Tensor x = tensor({10000.0, 0.0, -10000.0, 10000.0, 9998.0, -10000.0}, dt).view({2, 3});
    Tensor t = tensor(std::vector<int64_t>{1, 0});
    std::vector<double> ref = testing::ref::class_loss(x.to_vector(), {2, 3}, {1, 0}, {}, -100, kNone, 0, false);
    EXPECT_TRUE(all_close(cross_entropy(x, t, Tensor(), -100, kNone), ref, tol_for(dt))) << dtype_name(dt);
    EXPECT_EQ(ref[0], x.to_vector()[0]);  // the logit gap itself (10000 rounds to 9984 in bf16)
    Tensor xg = x.detach().requires_grad_();
    cross_entropy(xg, t, Tensor(), -100, kSum).backward();
    for (double g : xg.grad().to_vector()) EXPECT_TRUE(std::isfinite(g)) << dtype_name(dt);
    // -inf on a non-target class is a mask: exact; -inf on the target: +inf loss;
    // NaN poisons only its own row; +inf logit gives NaN (inf - inf), as PyTorch.
    Tensor xn = tensor({0.0, -kInf, 1.0, 0.0, -kInf, 1.0, kNaN, 0.0, 1.0, kInf, 0.0, 1.0}, dt).view({4, 3});
    Tensor tn = tensor(std::vector<int64_t>{2, 1, 0, 0});
    const double l0 = std::log1p(std::exp(-1.0));
    EXPECT_TRUE(all_close(cross_entropy(xn, tn, Tensor(), -100, kNone), {l0, kInf, kNaN, kNaN}, tol_for(dt)))
        << dtype_name(dt);
  }
}

TEST(CrossEntropy, MatchesNllOfLogSoftmax) {
  Tensor x = uniform({8, 12}, kFloat64, -5, 5, 41);
  Tensor t = tensor(random_targets(8, 12, -100, 42));
  Tensor w = uniform({12}, kFloat64, 0.5, 1.5, 43);
  EXPECT_NEAR(cross_entropy(x, t, w).item<double>(), nll_loss(log_softmax(x, 1), t, w).item<double>(), 1e-12);
}

// ----------------------------------------------------------------- mse_loss

TEST(MseLoss, LargeSumIsAccurateAndThreadIndependent) {
  // 1M elements: float32 running sums would drift; chunked float64 partial sums do not,
  // and the result must not depend on the number of threads.
  Tensor a = uniform({1 << 20}, kFloat32, -1, 1, 61), b = zeros({1 << 20});
  double ref = 0;
  for (double v : a.to_vector()) ref += v * v;
  const int threads = get_num_threads();
  const double s1 = mse_loss(a, b, kSum).item<double>();
  set_num_threads(1);
  const double s2 = mse_loss(a, b, kSum).item<double>();
  set_num_threads(threads);
  EXPECT_EQ(s1, s2);
  EXPECT_NEAR(s1, ref, ref * 2e-6);
}

TEST(MseLoss, EmptyAndErrors) {
  EXPECT_TRUE(std::isnan(mse_loss(zeros({0, 3}), zeros({0, 3})).item<double>()));
  EXPECT_EQ(mse_loss(zeros({0, 3}), zeros({0, 3}), kSum).item<double>(), 0.0);
  expect_error([] { mse_loss(zeros({2, 3}), zeros({4})); }, {"[mse_loss]", "(2, 3)", "(4,)"});
  expect_error([] { mse_loss(zeros({2, 3}), zeros({2, 3}, kInt64)); }, {"[mse_loss]", "int64"});
  // inf - inf is NaN, as in PyTorch.
  EXPECT_TRUE(std::isnan(mse_loss(tensor({kInf}), tensor({kInf})).item<double>()));
}

// ----------------------------------------------------------------- binary_cross_entropy_with_logits

TEST(BceWithLogits, HugeLogitsAreStable) {
  for (DType dt : kAllFloat) {
    Tensor x = tensor({10000.0, 10000.0, -10000.0, -10000.0, 0.0}, dt);
    Tensor t = tensor({1.0, 0.0, 1.0, 0.0, 1.0}, dt);
    Tensor pw = tensor({3.0}, dt);
    EXPECT_TRUE(all_close(binary_cross_entropy_with_logits(x, t, Tensor(), Tensor(), kNone),
                          {0.0, 10000.0, 10000.0, 0.0, std::log(2.0)}, tol_for(dt)))
        << dtype_name(dt);
    EXPECT_TRUE(all_close(binary_cross_entropy_with_logits(x, t, Tensor(), pw, kNone),
                          {0.0, 10000.0, 30000.0, 0.0, 3 * std::log(2.0)}, tol_for(dt)))
        << dtype_name(dt);
    Tensor xg = x.detach().requires_grad_();
    binary_cross_entropy_with_logits(xg, t, Tensor(), Tensor(), kSum).backward();
    EXPECT_TRUE(all_close(xg.grad(), {0.0, 1.0, -1.0, 0.0, -0.5}, tol_for(dt))) << dtype_name(dt);
  }
}

TEST(BceWithLogits, Errors) {
  const std::string op = "[binary_cross_entropy_with_logits]";
  expect_error([] { binary_cross_entropy_with_logits(zeros({2, 3}), zeros({3})); }, {op, "(3,)", "(2, 3)"});
  expect_error([] { binary_cross_entropy_with_logits(zeros({2, 3}), zeros({2, 3}, kInt64)); }, {op, "int64"});
  expect_error(
      [] {
        binary_cross_entropy_with_logits(zeros({2, 3}), zeros({2, 3}), ones({4}));
      },
      {op, "weight", "(4,)"});
  expect_error(
      [] {
        binary_cross_entropy_with_logits(zeros({2, 3}), zeros({2, 3}), Tensor(), ones({2, 2}));
      },
      {op, "pos_weight", "(2, 2)"});
  EXPECT_TRUE(std::isnan(binary_cross_entropy_with_logits(zeros({0}), zeros({0})).item<double>()));
}

}  // namespace
}  // namespace tc
