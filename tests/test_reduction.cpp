// Tests for the reductions beyond the op table (test_op_db.cpp checks every reduction's
// forward against float64 references over dims, keepdim and strided views, and gradcheck,
// in every dtype): rigorous summation error bounds on long and outer reductions, 10^7
// elements, thread-count independence, integers, empty and special values, var's offset
// numerics, ties and NaN in max/min, sum_to_size semantics, tie-splitting gradients.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>

#include "common/references.h"
#include "common/testing.h"
#include "tensorcast/tensorcast.h"

namespace tc {
namespace {

using testing::all_close;
using testing::equal;
using testing::tol_for;
using testing::uniform;

using testing::kAllFloat;
using testing::kInf;
using testing::kNaN;

// ---- float64 references (independent of the library's reductions)
// (groups, sum, var and extreme shared with the op table: common/references.h)

std::vector<bool> mask_of(int64_t ndim, std::vector<int64_t> dims) {
  std::vector<bool> m(static_cast<size_t>(ndim), dims.empty());
  for (int64_t d : dims) m[(d + ndim) % ndim] = true;
  return m;
}

double ref_abs_sum(const std::vector<double>& g) {
  double s = 0;
  for (double v : g) s += std::fabs(v);
  return s;
}

// Unit roundoff of the result dtype.
double unit_roundoff(DType dt) {
  switch (dt) {
    case kFloat64:
      return 0x1p-53;
    case kFloat32:
      return 0x1p-24;
    case kBFloat16:
      return 0x1p-8;
    case kFloat16:
      return 0x1p-11;
    default:
      return 0;
  }
}

// A sum accumulated in float32 (float64 for float64) with pairwise summation, then
// rounded once to dt: |err| <= u_acc * c * log2(n) * sum|x| + u_dt * |ref|. We allow
// c*log2(n) = 2 * (log2(n) + 8) (8 lanes and the block cascade) and 1 ulp of dt.
::testing::AssertionResult sums_close(const Tensor& got, const std::vector<double>& ref,
                                      const std::vector<double>& abs_sum, DType dt, int64_t n) {
  const std::vector<double> a = got.to_vector();
  if (a.size() != ref.size()) return ::testing::AssertionFailure() << "size " << a.size() << " != " << ref.size();
  const double u_acc = dt == kFloat64 ? 0x1p-53 : 0x1p-24;
  const double growth = 2.0 * (std::log2(static_cast<double>(std::max<int64_t>(n, 2))) + 8.0);
  for (size_t i = 0; i < a.size(); ++i) {
    const double bound = u_acc * growth * abs_sum[i] + 2.0 * unit_roundoff(dt) * std::fabs(ref[i]) + 1e-300;
    if (!(std::fabs(a[i] - ref[i]) <= bound))
      return ::testing::AssertionFailure() << "[" << i << "] got " << a[i] << ", expected " << ref[i] << " (bound "
                                           << bound << ", dtype " << dtype_name(dt) << ")";
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult check_sum(const Tensor& got, const Tensor& x, const std::vector<bool>& mask) {
  std::vector<double> ref, abs;
  int64_t n = 0;
  for (auto& g : testing::ref::groups(x, mask)) {
    ref.push_back(testing::ref::sum(g));
    abs.push_back(ref_abs_sum(g));
    n = static_cast<int64_t>(g.size());
  }
  return sums_close(got, ref, abs, x.dtype(), n);
}

using testing::expect_error;

// ------------------------------------------------------------------ sum / mean

TEST(Sum, OuterReductionLikeBiasGradient) {
  // (N, C) -> (C) and (A, N, C) -> (A, C) run the row-buffer path; C = 300 is not a
  // multiple of the 256-column chunk, N = 3000 exceeds a block of rows.
  for (DType dt : kAllFloat) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Tensor x = uniform({3000, 300}, dt, -2, 2, 5);
    EXPECT_TRUE(check_sum(sum(x, {0}), x, mask_of(2, {0})));
    Tensor y = uniform({3, 700, 260}, dt, -2, 2, 6);
    EXPECT_TRUE(check_sum(sum(y, {1}), y, mask_of(3, {1})));
    EXPECT_TRUE(check_sum(sum(y, {0, 1}), y, mask_of(3, {0, 1})));
  }
}

TEST(Sum, TenMillionFloat32) {
  const int64_t n = 10'000'000;
  EXPECT_EQ(sum(ones({n})).item_double(), 1e7);
  // U[0, 1): a plain float32 running sum is off by ~1e-4 relative here; pairwise is ~1e-7.
  Tensor x = rand({n});
  const std::vector<double> v = x.to_vector();
  const double ref = std::accumulate(v.begin(), v.end(), 0.0);
  EXPECT_NEAR(sum(x).item_double(), ref, 1e-6 * ref);
  EXPECT_NEAR(mean(x).item_double(), ref / n, 1e-6 * ref / n);
  // Column sums over 10^7 / 4 rows take the outer path.
  Tensor c = sum(x.view({n / 4, 4}), {0});
  std::vector<double> cref(4, 0.0);
  for (int64_t i = 0; i < n; ++i) cref[i % 4] += v[i];
  for (int j = 0; j < 4; ++j) EXPECT_NEAR(c.to_vector()[j], cref[j], 1e-6 * cref[j]) << j;
}

TEST(Sum, Bf16Million) {
  // fp32 pairwise accumulation (error ~ log2(n) * 2^-24 * sum|x|, about 1e-4 here) then a
  // single bf16 rounding (2^-8 relative): checked by sums_close's bound.
  Tensor x = uniform({1000, 1000}, kBFloat16, -2, 2, 21);
  EXPECT_TRUE(check_sum(sum(x), x, mask_of(2, {})));
  EXPECT_TRUE(check_sum(sum(x, {0}), x, mask_of(2, {0})));
  EXPECT_TRUE(check_sum(sum(x, {1}), x, mask_of(2, {1})));
  // All-positive values: the bound is then tight relative to the result itself.
  Tensor p = uniform({1000, 1000}, kBFloat16, 0, 1, 22);
  const auto g = testing::ref::groups(p, mask_of(2, {}))[0];
  EXPECT_NEAR(sum(p).item_double(), testing::ref::sum(g), 0x1p-8 * testing::ref::sum(g));
}

TEST(Sum, IsIndependentOfThreadCount) {
  Tensor x = rand({3'000'000});
  Tensor y = rand({20000, 64});
  const int saved = get_num_threads();
  set_num_threads(1);
  Tensor a = sum(x), b = sum(y, {0}), c = sum(y, {1});
  set_num_threads(std::max(2, saved));
  EXPECT_TRUE(equal(sum(x), a));
  EXPECT_TRUE(equal(sum(y, {0}), b));
  EXPECT_TRUE(equal(sum(y, {1}), c));
  set_num_threads(saved);
}

TEST(Sum, IntegersAreExactInt64) {
  // 2^53 + 1 is not a double: a float path would lose the 1s.
  const int64_t big = (int64_t{1} << 53) + 1;
  Tensor a = tensor(std::vector<int64_t>{big, 1, 1, -3}, {2, 2});
  Tensor s = sum(a);
  EXPECT_EQ(s.dtype(), kInt64);
  EXPECT_EQ(s.data_ptr<int64_t>()[0], big - 1);
  Tensor s0 = sum(a, {0});
  EXPECT_EQ(s0.data_ptr<int64_t>()[0], big + 1);
  EXPECT_EQ(s0.data_ptr<int64_t>()[1], -2);
  Tensor i32 = tensor(std::vector<int32_t>{2000000000, 2000000000, 5}, {3});
  EXPECT_EQ(sum(i32).dtype(), kInt64);
  EXPECT_EQ(sum(i32).data_ptr<int64_t>()[0], 4000000005);
  Tensor u8 = full({300}, 255, kUInt8);
  EXPECT_EQ(sum(u8).data_ptr<int64_t>()[0], 300 * 255);
  Tensor b = tensor(std::vector<double>{1, 0, 1, 1}, {4}, kBool);
  EXPECT_EQ(sum(b).dtype(), kInt64);
  EXPECT_EQ(sum(b).data_ptr<int64_t>()[0], 3);
  expect_error([&] { mean(i32); }, "[mean]");
}

TEST(Sum, EmptyAndSpecialValues) {
  for (DType dt : kAllFloat) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Tensor e = zeros({3, 0, 2}, dt);
    EXPECT_TRUE(equal(sum(e, {1}), zeros({3, 2}, dt)));
    EXPECT_EQ(sum(e).item_double(), 0.0);
    EXPECT_EQ(sum(e, {0}).sizes(), (Shape{0, 2}));
    EXPECT_TRUE(all_close(mean(e, {1}), std::vector<double>(6, kNaN), {0, 0}));
    EXPECT_TRUE(std::isnan(mean(e).item_double()));
    EXPECT_TRUE(all_close(sum(tensor({1.0, kInf, 2.0}, dt)), {kInf}, {0, 0}));
    EXPECT_TRUE(all_close(sum(tensor({1.0, kInf, -kInf}, dt)), {kNaN}, {0, 0}));
    EXPECT_TRUE(all_close(sum(tensor({1.0, kNaN, 2.0}, dt)), {kNaN}, {0, 0}));
  }
  // float16 overflows to inf only on the final rounding (fp32 accumulation).
  Tensor h = full({4}, 30000, kFloat16);
  EXPECT_EQ(sum(h).item_double(), kInf);
  EXPECT_EQ(mean(h).item_double(), 30000.0);
  Tensor z = scalar_tensor(2.5, kBFloat16);
  EXPECT_EQ(sum(z).item_double(), 2.5);
  EXPECT_EQ(sum(z, {0}).item_double(), 2.5);
  EXPECT_EQ(sum(z, {-1}, true).dim(), 0);
}

TEST(Sum, BadDims) {
  Tensor x = zeros({2, 3});
  expect_error([&] { sum(x, {2}); }, "[sum]");
  expect_error([&] { sum(x, {-3}); }, "[sum]");
  expect_error([&] { sum(x, {1, -1}); }, "appears multiple times");
  expect_error([&] { mean(x, {0, 0}); }, "[mean]");
  expect_error([&] { var(x, {5}); }, "[var]");
  expect_error([&] { sum(Tensor()); }, "[sum]");
}

// ------------------------------------------------------------------ var

TEST(Var, MatchesFloat64Reference) {
  for (DType dt : kAllFloat) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    // Offset data (mean 4.5, spread 1) and a non-contiguous view.
    Tensor x = uniform({5, 8, 6}, dt, 4, 5, 9).permute({2, 0, 1});
    for (int64_t corr : {0, 1, 2}) {
      for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{{}, {0}, {1}, {2}, {0, 2}}) {
        const auto m = mask_of(3, dims);
        std::vector<double> ref;
        for (auto& g : testing::ref::groups(x, m)) ref.push_back(testing::ref::var(g, corr));
        Tensor got = var(x, dims, corr, dims.size() == 1);
        EXPECT_EQ(got.dtype(), dt);
        EXPECT_TRUE(all_close(got, ref, tol_for(dt, 8))) << "correction " << corr;
      }
    }
  }
  // Offset 100 with spread 1: the one-pass E[x^2] - E[x]^2 in fp32 is off by ~1e-3
  // relative here; the two-pass form keeps ~1e-6.
  Tensor y = uniform({4096}, kFloat32, 99, 101, 4);
  EXPECT_TRUE(all_close(var(y, {0}), {testing::ref::var(y.to_vector(), 1)}, {0, 1e-5}));
}

TEST(Var, CorrectionAtOrAboveCountGivesInfOrNan) {
  for (DType dt : kAllFloat) {
    Tensor one = tensor({3.0}, dt);
    EXPECT_TRUE(std::isnan(var(one, {0}).item_double()));  // 0 / 0
    Tensor two = tensor({1.0, 2.0}, dt);
    EXPECT_EQ(var(two, {0}, 2).item_double(), kInf);  // 0.5 / 0
    EXPECT_EQ(var(two, {0}, 5).item_double(), kInf);  // divisor clamps at 0
    EXPECT_TRUE(std::isnan(var(zeros({0}, dt), {0}).item_double()));
    EXPECT_TRUE(std::isnan(var(tensor({1.0, kNaN}, dt), {0}).item_double()));
  }
  expect_error([] { var(zeros({3}, kInt64), {0}); }, "[var]");
  expect_error([] { var(zeros({3}), {0}, -1); }, "[var]");
}

// ------------------------------------------------------------------ max / min

struct RefMinMax {
  std::vector<double> v;
  std::vector<double> i;
};

// The values and indices of max / min over `mask` (testing::ref::extreme of each group).
RefMinMax ref_minmax(const Tensor& x, const std::vector<bool>& mask, bool is_max) {
  RefMinMax r;
  for (auto& g : testing::ref::groups(x, mask)) {
    const auto [value, index] = testing::ref::extreme(g, is_max);
    r.v.push_back(value);
    r.i.push_back(static_cast<double>(index));
  }
  return r;
}

TEST(MaxMin, AlongDimMatchesReference) {
  for (DType dt : kAllFloat) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    // Few distinct values: many ties, which must resolve to the first index.
    Tensor base = div(randint(0, 5, {7, 300, 4}).to(dt), 4.0);
    for (const Tensor& x : {base, base.transpose(0, 1), base.slice(1, 3, 300, 7)}) {
      for (int64_t d = -3; d < 3; ++d) {
        for (bool is_max : {true, false}) {
          auto [v, i] = is_max ? max(x, d) : min(x, d);
          const RefMinMax r = ref_minmax(x, mask_of(3, {d}), is_max);
          EXPECT_EQ(v.dtype(), dt);
          EXPECT_EQ(i.dtype(), kInt64);
          EXPECT_TRUE(all_close(v, r.v, {0, 0}));
          EXPECT_TRUE(all_close(i, r.i, {0, 0})) << "dim " << d << (is_max ? " max" : " min");
          EXPECT_TRUE(all_close(is_max ? argmax(x, d) : argmin(x, d), r.i, {0, 0}));
        }
      }
    }
  }
}

TEST(MaxMin, LongRowsAndKeepdim) {
  // A 1-d reduction long enough to be split across work items.
  Tensor x = randn({200000, 2}).t();
  auto [v, i] = max(x, 1, true);
  EXPECT_EQ(v.sizes(), (Shape{2, 1}));
  const RefMinMax r = ref_minmax(x, mask_of(2, {1}), true);
  EXPECT_TRUE(all_close(v, r.v, {0, 0}));
  EXPECT_TRUE(all_close(i, r.i, {0, 0}));
  Tensor flat = randn({300000});
  const RefMinMax rf = ref_minmax(flat, mask_of(1, {}), false);
  EXPECT_EQ(argmin(flat).item_double(), rf.i[0]);
  EXPECT_EQ(min(flat).item_double(), rf.v[0]);
}

TEST(MaxMin, NanPropagatesWithItsIndex) {
  for (DType dt : kAllFloat) {
    Tensor x = tensor({1.0, kNaN, 5.0, kNaN, 2.0, 3.0, 9.0, -1.0}, dt).view({2, 4});
    auto [v, i] = max(x, 1);
    EXPECT_TRUE(all_close(v, {kNaN, 9.0}, {0, 0}));
    EXPECT_TRUE(all_close(i, {1, 2}, {0, 0}));
    auto [vn, in] = min(x, 1);
    EXPECT_TRUE(all_close(vn, {kNaN, -1.0}, {0, 0}));
    EXPECT_TRUE(all_close(in, {1, 3}, {0, 0}));
    EXPECT_TRUE(std::isnan(max(x).item_double()));
    EXPECT_TRUE(std::isnan(min(x).item_double()));
    EXPECT_EQ(argmax(x).item_double(), 1);
    EXPECT_EQ(argmin(x).item_double(), 1);
    // NaN late in a long row, after the block-level maximum was found.
    Tensor y = zeros({5000}, dt);
    y.narrow(0, 4000, 1).fill_(kNaN);
    y.narrow(0, 10, 1).fill_(7.0);
    EXPECT_EQ(argmax(y).item_double(), 4000);
    EXPECT_EQ(argmin(y).item_double(), 4000);
    Tensor z = full({3}, -kInf, dt);
    EXPECT_EQ(max(z).item_double(), -kInf);
    EXPECT_EQ(argmax(z).item_double(), 0);
  }
}

TEST(MaxMin, AllElementsAndArgOverFlattened) {
  for (DType dt : kAllFloat) {
    Tensor x = uniform({13, 17}, dt, -3, 3, 31).t();  // flattened order follows the view
    const RefMinMax rmax = ref_minmax(x, mask_of(2, {}), true), rmin = ref_minmax(x, mask_of(2, {}), false);
    EXPECT_EQ(max(x).item_double(), rmax.v[0]);
    EXPECT_EQ(min(x).item_double(), rmin.v[0]);
    EXPECT_EQ(argmax(x).item_double(), rmax.i[0]);
    EXPECT_EQ(argmin(x).item_double(), rmin.i[0]);
    EXPECT_EQ(argmax(x, std::nullopt, true).sizes(), (Shape{1, 1}));
    EXPECT_EQ(argmax(x).dim(), 0);
  }
  // Integers compare exactly (no float round trip).
  const int64_t big = (int64_t{1} << 60) + 1;
  Tensor a = tensor(std::vector<int64_t>{big - 1, big, 3, big - 2}, {4});
  EXPECT_EQ(max(a).data_ptr<int64_t>()[0], big);
  EXPECT_EQ(std::get<1>(max(a, 0)).data_ptr<int64_t>()[0], 1);
  EXPECT_EQ(min(tensor(std::vector<int32_t>{4, -7, 2}, {3})).data_ptr<int32_t>()[0], -7);
  EXPECT_EQ(argmax(tensor(std::vector<double>{0, 1, 1}, {3}, kBool)).item_double(), 1);
}

TEST(MaxMin, ZeroSizeAndBadDims) {
  Tensor x = zeros({3, 0});
  expect_error([&] { max(x, 1); }, "cannot reduce over a zero-size dimension");
  expect_error([&] { min(x, 1); }, "[min]");
  expect_error([&] { max(x); }, "[max]");
  expect_error([&] { argmax(x); }, "[argmax]");
  expect_error([&] { argmin(x, 1); }, "[argmin]");
  auto [v, i] = max(zeros({0, 4}), 1);  // nothing to reduce into: empty result
  EXPECT_EQ(v.sizes(), (Shape{0}));
  expect_error([&] { max(zeros({2, 3}), 2); }, "[max]");
  expect_error([&] { argmax(zeros({2, 3}), -3); }, "[argmax]");
  Tensor s = scalar_tensor(4.0);
  auto [sv, si] = max(s, 0);
  EXPECT_EQ(sv.dim(), 0);
  EXPECT_EQ(sv.item_double(), 4.0);
  EXPECT_EQ(si.item_double(), 0.0);
}

// ------------------------------------------------------------------ sum_to_size

TEST(SumToSize, ReducesBroadcastDims) {
  for (DType dt : kAllFloat) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Tensor x = uniform({2, 3, 4}, dt, -2, 2, 41);
    struct Case {
      Shape size;
      std::vector<int64_t> dims;
    };
    for (const Case& c : std::vector<Case>{
             {{4}, {0, 1}}, {{3, 1}, {0, 2}}, {{1, 4}, {0, 1}}, {{2, 1, 4}, {1}}, {{1, 1, 1}, {}}, {{3, 4}, {0}}}) {
      Tensor s = sum_to_size(x, c.size);
      EXPECT_EQ(s.sizes(), c.size);
      EXPECT_TRUE(check_sum(s, x, mask_of(3, c.dims))) << shape_str(c.size);
    }
    EXPECT_TRUE(sum_to_size(x, {2, 3, 4}).is_same(x));  // no work when nothing to reduce
    Tensor y = uniform({1, 3}, dt);
    EXPECT_TRUE(equal(sum_to_size(y, {3}), y.view({3})));
    EXPECT_TRUE(check_sum(sum_to_size(x.transpose(0, 2), {1, 3, 2}), x.transpose(0, 2), mask_of(3, {0})));
  }
  expect_error([] { sum_to_size(zeros({2, 3}), {2}); }, "not expandable");
  expect_error([] { sum_to_size(zeros({3}), {2, 3}); }, "[sum_to_size]");
}

// ------------------------------------------------------------------ backward

TEST(Backward, FullMaxSplitsTiesEvenly) {
  for (DType dt : kAllFloat) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Tensor x = tensor({1.0, 3.0, 3.0, 2.0, 3.0, -1.0}, dt).view({2, 3}).requires_grad_();
    max(x).backward(scalar_tensor(1.5, dt));
    EXPECT_EQ(x.grad().dtype(), dt);
    EXPECT_TRUE(all_close(x.grad(), {0, 0.5, 0.5, 0, 0.5, 0}, {0, 0}));
    Tensor y = tensor({2.0, -4.0, -4.0, 0.0}, dt).requires_grad_();
    min(y).backward();
    EXPECT_TRUE(all_close(y.grad(), {0, 0.5, 0.5, 0}, {0, 0}));
    // Along a dim, ties send the whole gradient to the first index.
    Tensor z = tensor({5.0, 5.0, 1.0, 1.0}, dt).view({2, 2}).requires_grad_();
    sum(std::get<0>(max(z, 1))).backward();
    EXPECT_TRUE(all_close(z.grad(), {1, 0, 1, 0}, {0, 0}));
    // A NaN maximum: the gradient goes to the NaN elements.
    Tensor n = tensor({1.0, kNaN, 2.0, kNaN}, dt).requires_grad_();
    max(n).backward();
    EXPECT_TRUE(all_close(n.grad(), {0, 0.5, 0, 0.5}, {0, 0}));
  }
}

TEST(Backward, BiasGradientThroughBroadcastAdd) {
  // add's backward sums the broadcast gradient with sum_to_size: (N, C) -> (C).
  for (DType dt : kAllFloat) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Tensor b = uniform({300}, dt, -1, 1, 61).requires_grad_();
    Tensor x = uniform({500, 300}, dt, -1, 1, 62);
    Tensor w = uniform({500, 300}, dt, -1, 1, 63);
    sum(mul(add(x, b), w)).backward();
    EXPECT_EQ(b.grad().dtype(), dt);
    EXPECT_TRUE(check_sum(b.grad(), w, mask_of(2, {0})));
  }
}

}  // namespace
}  // namespace tc
