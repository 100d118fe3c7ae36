// NumericsReport: the fp16 range counts against fp16 conversions of the same values, the
// bf16 lost-update count against a float64 ulp reference, the watch node (identity both
// ways, gradients recorded in backward order, sampling) and the overflow step's naming.
#include <cmath>
#include <cstring>
#include <random>

#include "common/testing.h"
#include "tensorcast/amp/autocast.h"
#include "tensorcast/amp/numerics.h"
#include "tensorcast/autograd.h"

namespace tc {
namespace {

using amp::NumericsReport;

Tensor param_with_grad(const std::vector<float>& w, const std::vector<float>& g) {
  Tensor p = tensor(w, {static_cast<int64_t>(w.size())});
  p.requires_grad_(true);
  p.set_grad(tensor(g, {static_cast<int64_t>(g.size())}));
  return p;
}

// Float bit patterns spread over the whole range, both signs, plus each threshold's
// neighbours: the values fp16 rounding decides on.
std::vector<float> probe_values() {
  std::vector<float> v;
  for (uint64_t bits = 0; bits < (1ull << 32); bits += 65537) {
    float f;
    const auto b = static_cast<uint32_t>(bits);
    std::memcpy(&f, &b, 4);
    v.push_back(f);
  }
  for (float t : {0x1p-25f, 0x1p-24f, 0x1p-14f, 65504.0f, 65520.0f, 0.0f}) {
    for (float x = t, k = 0; k < 4; ++k) x = std::nextafter(x, 0.0f), v.push_back(x), v.push_back(-x);
    for (float x = t, k = 0; k < 4; ++k) x = std::nextafter(x, INFINITY), v.push_back(x), v.push_back(-x);
    v.push_back(t);
  }
  v.push_back(INFINITY);
  v.push_back(NAN);
  return v;
}

TEST(NumericsReport, Fp16RangeCountsMatchFp16Conversion) {
  const std::vector<float> v = probe_values();
  // The reference: convert each value to fp16 and look at the result's bits.
  int64_t zero = 0, flush = 0, subnormal = 0, overflow = 0, nonfinite = 0;
  double amax = 0;
  for (float x : v) {
    if (!std::isfinite(x)) {
      ++nonfinite;
      continue;
    }
    amax = std::max(amax, double(std::fabs(x)));
    const uint16_t h = Half(x).bits & 0x7fff;
    if (x == 0)
      ++zero;
    else if (h == 0)
      ++flush;
    else if (h < 0x0400)
      ++subnormal;
    else if (h == 0x7c00)
      ++overflow;
  }
  ASSERT_GT(flush, 10);
  ASSERT_GT(subnormal, 10);
  ASSERT_GT(overflow, 10);
  for (DType dt : {kFloat32, kFloat64}) {
    SCOPED_TRACE(dtype_name(dt));
    NumericsReport report(1);
    report.begin_step(1);
    Tensor p = ones({static_cast<int64_t>(v.size())}, dt).requires_grad_(true);
    p.set_grad(tensor(v, {static_cast<int64_t>(v.size())}).to(dt));
    report.record_gradients({{"w", p}});
    const auto s = report.stats().at(0);
    EXPECT_EQ(s.name, "w");
    EXPECT_EQ(s.kind, "param_grad");
    EXPECT_EQ(s.total, static_cast<int64_t>(v.size()));
    EXPECT_EQ(s.zero, zero);
    EXPECT_EQ(s.flush, flush);
    EXPECT_EQ(s.subnormal, subnormal);
    EXPECT_EQ(s.overflow, overflow);
    EXPECT_EQ(s.nonfinite, nonfinite);
    EXPECT_EQ(s.amax, amax);
  }
}

TEST(NumericsReport, LostBf16UpdatesMatchFloat64Ulps) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> mag(-12, 4), rel(-12, 0);
  std::vector<float> before, after, grad;
  int64_t expected = 0, counted = 0;
  for (int i = 0; i < 20000; ++i) {
    const double w = (i % 2 ? -1 : 1) * std::pow(2.0, mag(rng));
    const double d = (i % 3 ? -1 : 1) * std::abs(w) * std::pow(2.0, rel(rng)) * 0.01;
    const float wf = static_cast<float>(w), af = static_cast<float>(w + d);
    const float g = i % 5 == 0 ? 0.0f : 1.0f;  // elements without a gradient are not counted
    before.push_back(wf);
    after.push_back(af);
    grad.push_back(g);
    if (g == 0) continue;
    ++counted;
    const double ulp = std::pow(2.0, std::floor(std::log2(std::fabs(double(wf)))) - 7);  // bf16: 8 significant bits
    expected += std::fabs(double(af) - double(wf)) < ulp / 2;
  }
  ASSERT_GT(expected, 1000);
  ASSERT_LT(expected, counted - 1000);
  NumericsReport report(1);
  report.begin_step(1);
  Tensor p = param_with_grad(before, grad);
  report.before_update({{"w", p}});
  p.detach().copy_(tensor(after, {static_cast<int64_t>(after.size())}));
  report.after_update({{"w", p}});
  const auto s = report.stats().at(0);
  EXPECT_EQ(s.update_total, counted);
  EXPECT_EQ(s.update_lost, expected);
}

TEST(NumericsReport, WatchIsTheIdentityAndRecordsInBackwardOrder) {
  NumericsReport report(2);
  Tensor x = tensor(std::vector<float>{1, -2, 3}, {3});
  x.requires_grad_(true);
  for (int64_t step = 1; step <= 4; ++step) {
    report.begin_step(step);
    EXPECT_EQ(report.sampling(), step % 2 == 0);
    x.set_grad(Tensor());
    Tensor a = report.watch(x * 2.0, "a");
    Tensor b = report.watch(a * 3.0, "b");
    EXPECT_EQ(b.to_vector(), (std::vector<double>{6, -12, 18}));
    b.sum().backward();
    EXPECT_EQ(x.grad().to_vector(), (std::vector<double>{6, 6, 6}));
  }
  EXPECT_EQ(report.sampled_steps(), 2);
  const auto s = report.stats();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].name, "a");  // listed in forward order
  EXPECT_EQ(s[1].name, "b");
  EXPECT_EQ(s[1].kind, "output_grad");
  EXPECT_EQ(s[1].samples, 2);
  EXPECT_EQ(s[1].amax, 1.0);
  EXPECT_EQ(s[0].amax, 3.0);
  // Tensors without a gradient pass through unwatched.
  const Tensor c = tensor({1.0, 2.0});
  EXPECT_TRUE(report.watch(c, "c").is_same(c));
  EXPECT_EQ(report.stats().size(), 2u);
}

TEST(NumericsReport, OverflowStepNamesTheFirstNonFiniteTensorInBackwardOrder) {
  NumericsReport report(100);  // not a sampled step: the inf/NaN check still runs
  report.begin_step(1);
  // fp16 activations: the gradient reaching "small" is 1e5 x the one reaching "big", past fp16's 65504.
  Tensor x = tensor(std::vector<float>{1e-3f, 2e-3f}, {2}, kFloat16);
  x.requires_grad_(true);
  Tensor small = report.watch(x * 1.0, "small");
  Tensor big = report.watch(small * 1e5, "big");
  big.sum().backward();
  Tensor w = param_with_grad({1.0f}, {INFINITY});
  EXPECT_EQ(report.record_overflow(1, {{"w", w}}), "gradient of the output of layer small");
  // Only parameters non-finite: the parameter is named.
  report.begin_step(2);
  EXPECT_EQ(report.record_overflow(2, {{"ok", param_with_grad({1.0f}, {1.0f})}, {"w", w}}), "gradient of parameter w");
  ASSERT_EQ(report.overflows().size(), 2u);
  EXPECT_EQ(report.overflows()[0].step, 1);
  EXPECT_NE(report.table().find("overflow at step 2: gradient of parameter w"), std::string::npos);
}

TEST(NumericsReport, TableAndSharesAndBadEvery) {
  NumericsReport report(1);
  report.begin_step(1);
  report.record_gradients({{"w", param_with_grad({1.0f, 0.0f, 1e-6f, 1e5f}, {0.5f, 0.0f, 1e-6f, 1e5f})}});
  const auto s = report.stats().at(0);
  EXPECT_EQ(s.share(s.zero), 0.25);
  EXPECT_EQ(s.share(s.subnormal), 0.25);
  EXPECT_EQ(s.share(s.overflow), 0.25);
  EXPECT_NE(report.table().find("w                      parameter"), std::string::npos) << report.table();
  EXPECT_THROW(NumericsReport(0), Error);
}

TEST(NumericsReport, Fp8StatisticsAddUpOverSampledStepsOnly) {
  NumericsReport report(2);
  fp8::LinearStats layer;
  fp8::QuantizationStats& in = layer.roles[fp8::LinearState::kInput];
  in = {/*quantizations=*/1, /*total=*/100, /*saturated=*/3, /*flushed=*/5,
        /*amax=*/2.0f,       224.0f,        224.0f};
  report.begin_step(1);  // not sampled
  report.record_fp8("fc", layer);
  EXPECT_TRUE(report.fp8_stats().empty());
  report.begin_step(2);
  report.record_fp8("fc", layer);
  in.amax = 1.0f, in.scale_min = 64.0f, in.scale_max = 512.0f;
  report.begin_step(4);
  report.record_fp8("fc", layer);
  ASSERT_EQ(report.fp8_stats().size(), 1u);  // the roles never counted have no row
  const NumericsReport::Fp8Stats& f = report.fp8_stats()[0];
  EXPECT_EQ(f.layer, "fc");
  EXPECT_EQ(f.tensor, "input");
  EXPECT_EQ(f.quantizations, 2);
  EXPECT_EQ(f.total, 200);
  EXPECT_EQ(f.share(f.saturated), 0.03);
  EXPECT_EQ(f.share(f.flushed), 0.05);
  EXPECT_EQ(f.amax, 2.0f);        // the largest seen
  EXPECT_EQ(f.scale_min, 64.0f);  // the last step's
  EXPECT_EQ(f.scale_max, 512.0f);
  const std::string table = report.table();
  EXPECT_NE(table.find("fp8 layer"), std::string::npos) << table;
  EXPECT_NE(table.find("64..512"), std::string::npos) << table;
}

}  // namespace
}  // namespace tc
