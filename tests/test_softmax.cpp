// Tests for softmax and log_softmax beyond the op table (test_op_db.cpp checks forward
// against a float64 reference along every dim and on strided views, and gradcheck, in
// every dtype): many rows across threads, IEEE edge cases (-inf masks, NaN, huge logits),
// 0-d and empty inputs, long-row gradients and the explicit backward formula.
#include <cmath>
#include <limits>
#include <string>

#include "backend/cpu/loops/fast_math.h"
#include "common/references.h"
#include "common/testing.h"

namespace tc {
namespace {

using testing::all_close;
using testing::gradcheck;
using testing::tol_for;
using testing::uniform;

using testing::kAllFloat;
using testing::kInf;
using testing::kNaN;

Tensor apply(bool log, const Tensor& x, int64_t dim) { return log ? log_softmax(x, dim) : softmax(x, dim); }

class SoftmaxTest : public ::testing::TestWithParam<bool> {};  // param: log_softmax?

TEST_P(SoftmaxTest, ManyRowsSplitAcrossThreads) {
  // Enough rows that the intra-op threads each take a chunk, in both the contiguous-row
  // path (dim 1) and the grouped strided path (dim 0, rows side by side in memory).
  const bool log = GetParam();
  for (DType dt : {kFloat32, kBFloat16}) {
    Tensor x = uniform({700, 300}, dt, -8, 8, 17);
    for (int64_t d : {0, 1})
      EXPECT_TRUE(all_close(apply(log, x, d), testing::ref::softmax(x.to_vector(), {700, 300}, d, log), tol_for(dt)))
          << dtype_name(dt) << " dim " << d;
  }
}

TEST_P(SoftmaxTest, HugeLogitsAreStable) {
  const bool log = GetParam();
  for (DType dt : kAllFloat) {
    Tensor x = tensor({10000.0, 9999.0, -10000.0, 0.0, 9996.0, 10000.0}, dt).view({2, 3});
    const std::vector<double> v = x.to_vector();
    Tensor y = apply(log, x, 1);
    std::vector<double> ref = testing::ref::softmax(v, {2, 3}, 1, log);
    for (double r : ref) ASSERT_TRUE(std::isfinite(r));
    EXPECT_TRUE(all_close(y, ref, tol_for(dt))) << dtype_name(dt);
    // fp16 cannot hold exp(10000): the max subtraction is what makes this finite.
    Tensor yt = apply(log, x.t(), 0);
    EXPECT_TRUE(all_close(yt.t().contiguous(), ref, tol_for(dt))) << dtype_name(dt);
  }
}

TEST_P(SoftmaxTest, IeeeEdgeCases) {
  const bool log = GetParam();
  for (DType dt : kAllFloat) {
    // Row 0: a -inf mask; row 1: NaN poisons only its own row; row 2: all -inf -> NaN
    // (0/0, as PyTorch); row 3: +inf -> NaN (inf - inf).
    Tensor x = tensor({0.0, -kInf, 1.0, 2.0, kNaN, 3.0, -kInf, -kInf, -kInf, kInf, 1.0, 2.0}, dt).view({4, 3});
    Tensor y = apply(log, x, 1);
    const double e = std::log1p(std::exp(-1.0));  // log(1 + e^-1)
    // Row 0 is (0, -inf, 1): lse = 1 + log(1 + e^-1).
    std::vector<double> expect(12, kNaN);
    expect[0] = log ? -1.0 - e : 1 / (1 + std::exp(1.0));
    expect[1] = log ? -kInf : 0.0;
    expect[2] = log ? -e : 1 / (1 + std::exp(-1.0));
    EXPECT_TRUE(all_close(y, expect, tol_for(dt))) << dtype_name(dt);  // NaN matches NaN, inf exactly
    const std::vector<double> got = y.to_vector();
    EXPECT_EQ(got[1], log ? -kInf : 0.0);  // masked entries are exactly zero (-inf in log space)
  }
}

TEST_P(SoftmaxTest, ZeroDimAndEmpty) {
  const bool log = GetParam();
  Tensor s = apply(log, scalar_tensor(3.5), 0);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.item<double>(), log ? 0.0 : 1.0);
  for (const Shape& shape : std::vector<Shape>{{0, 5}, {3, 0}, {2, 0, 4}})
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
      Tensor y = apply(log, zeros(shape, kBFloat16), d);
      EXPECT_EQ(y.sizes(), shape);
      EXPECT_EQ(y.numel(), 0);
    }
}

TEST_P(SoftmaxTest, BadInputsThrow) {
  const bool log = GetParam();
  const std::string op = log ? "[log_softmax]" : "[softmax]";
  try {
    apply(log, zeros({2, 3}), 2);
    FAIL() << "expected an error for dim 2";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(op), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("out of range"), std::string::npos) << e.what();
  }
  EXPECT_THROW(apply(log, zeros({2, 3}), -3), Error);
  try {
    apply(log, zeros({2, 3}, kInt64), 1);
    FAIL() << "expected an error for int64 input";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(op), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("int64"), std::string::npos) << e.what();
  }
  EXPECT_THROW(apply(log, Tensor(), 0), Error);
}

// Gradient tolerance: float64 and float32 to a few ulps; 16-bit inputs carry the rounding
// of the saved output, the incoming gradient and the result (each 2^-9 / 2^-12 relative).
testing::Tol grad_tol(DType dt) {
  if (dt == kBFloat16) return {0x1p-7, 0x1p-7};
  if (dt == kFloat16) return {0x1p-10, 0x1p-10};
  if (dt == kFloat64) return {1e-7, 1e-7};  // central differences in float64 carry ~1e-9 noise
  return tol_for(dt, 8);
}

TEST_P(SoftmaxTest, BackwardMatchesNumericalGradient) {
  const bool log = GetParam();
  for (DType dt : kAllFloat) {
    for (int64_t d : {0, 1, -1}) {
      Tensor x = uniform({3, 5, 4}, dt, -3, 3, 11).requires_grad_();
      EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& in) { return apply(log, in[0], d); }, {x}, grad_tol(dt)))
          << dtype_name(dt) << " dim " << d;
    }
    // A strided input: the backward must read the view's rows correctly too.
    Tensor xt = uniform({6, 4}, dt, -3, 3, 12).requires_grad_();
    EXPECT_TRUE(gradcheck([&](const std::vector<Tensor>& in) { return apply(log, in[0].t(), 1); }, {xt}, grad_tol(dt)))
        << dtype_name(dt) << " transposed";
    ASSERT_TRUE(gradcheck([&](const std::vector<Tensor>& in) { return apply(log, in[0], 1); },
                          {uniform({2, 300}, dt, -5, 5, 13).requires_grad_()}, grad_tol(dt),
                          /*eps=*/1e-4))  // a large weighted sum: a wider step keeps rounding noise down
        << dtype_name(dt) << " long rows";
  }
}

TEST_P(SoftmaxTest, BackwardFormulaExplicit) {
  // An independent check of the formula with a non-uniform incoming gradient:
  // softmax: y (g - <g, y>); log_softmax: g - exp(y) sum(g).
  const bool log = GetParam();
  for (DType dt : kAllFloat) {
    Tensor x = uniform({3, 6}, dt, -2, 2, 21).requires_grad_();
    Tensor g = uniform({3, 6}, dt, -1, 1, 22);
    Tensor y = apply(log, x, 1);
    y.backward(g);
    std::vector<double> yr = testing::ref::softmax(x.to_vector(), {3, 6}, 1, false);  // softmax probabilities
    std::vector<double> gv = g.to_vector(), expect(18);
    for (int r = 0; r < 3; ++r) {
      double dot = 0, sum = 0;
      for (int k = 0; k < 6; ++k) {
        dot += gv[r * 6 + k] * yr[r * 6 + k];
        sum += gv[r * 6 + k];
      }
      for (int k = 0; k < 6; ++k) {
        const int i = r * 6 + k;
        expect[i] = log ? gv[i] - yr[i] * sum : yr[i] * (gv[i] - dot);
      }
    }
    ASSERT_EQ(x.grad().dtype(), dt);
    EXPECT_TRUE(all_close(x.grad(), expect, tol_for(dt, 8))) << dtype_name(dt);
  }
}

// The vectorizable exp and log1p behind the float kernels, against libm in float64.
TEST(FastMath, ExpAndLog1pAreAccurate) {
  double worst_exp = 0, worst_log = 0;
  for (float v = -87.0f; v < 88.0f; v += 0.0137f) {
    const double ref = std::exp(static_cast<double>(v));
    worst_exp = std::max(worst_exp, std::fabs(cpu::fast_exp(v) - ref) / ref);
  }
  for (float e = 0; e <= 1.0f; e += 0.000731f) {
    const double ref = std::log1p(static_cast<double>(e));
    if (e > 0) worst_log = std::max(worst_log, std::fabs(cpu::fast_log1p_unit(e) - ref) / ref);
  }
  EXPECT_LT(worst_exp, 3 * 0x1p-24);
  EXPECT_LT(worst_log, 3 * 0x1p-24);
  EXPECT_EQ(cpu::fast_log1p_unit(1e-30f), 1e-30f);  // tiny e survives 1 + e
  EXPECT_EQ(cpu::fast_exp(0.0f), 1.0f);
  EXPECT_EQ(cpu::fast_exp(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(cpu::fast_exp(-100.0f), 0.0f);  // below FLT_MIN: flushed
  EXPECT_EQ(cpu::fast_exp(std::numeric_limits<float>::infinity()), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(cpu::fast_exp(std::numeric_limits<float>::quiet_NaN())));
}

INSTANTIATE_TEST_SUITE_P(, SoftmaxTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "log_softmax" : "softmax"; });

}  // namespace
}  // namespace tc
