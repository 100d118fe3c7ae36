// The FP8 recipes of tensorcast/amp/fp8.h against float64 references of their formulas:
// the scales (torchao's amax_to_scale, TE's delayed update, MX's rounded-up E8M0), the codes
// of each quantization, the scaled GEMM, and the fp8 linear layer's forward and backward.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "common/testing.h"
#include "tensorcast/amp/autocast.h"
#include "tensorcast/amp/fp8.h"
#include "tensorcast/autograd.h"
#include "tensorcast/factories.h"
#include "tensorcast/nn/container.h"
#include "tensorcast/nn/linear.h"
#include "tensorcast/ops.h"

namespace tc::fp8 {
namespace {

// Values spread over many binades (and some zeros), the way activations and gradients are.
std::vector<float> spread(int64_t n, uint32_t seed, float center = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> binade(-12, 6);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = gen() % 17 == 0 ? 0.0f : center * normal(gen) * std::ldexp(1.0f, binade(gen));
  return v;
}

Tensor rows_of(const std::vector<float>& v, int64_t r, int64_t k) { return tensor(v, {r, k}); }

std::vector<float> floats(const Tensor& t) {
  const std::vector<double> d = t.to_vector();
  return {d.begin(), d.end()};
}

uint8_t code(float f, DType dt) {
  return dispatch_float8(dt, "test", [&]<class T>() { return T(f).x; });
}

std::vector<uint8_t> codes(const Tensor& t) {
  const Tensor c = t.contiguous();
  const auto* p = static_cast<const uint8_t*>(c.raw_data());
  return {p, p + c.numel()};
}

// The saturating cast the recipes use, from the scalar conversion.
uint8_t saturated_code(float scaled, DType dt) {
  const float m = static_cast<float>(traits(dt).max);
  return code(std::isnan(scaled) ? scaled : std::fmin(std::fmax(scaled, -m), m), dt);
}

double ref_amax(const std::vector<float>& v, size_t begin, size_t end) {
  double a = 0;
  for (size_t i = begin; i < end; ++i) a = std::fmax(a, std::fabs(static_cast<double>(v[i])));
  return a;
}

TEST(Fp8Scale, AmaxToScaleIsTorchaosFormula) {
  for (DType dt : {kFloat8_e4m3fn, kFloat8_e5m2})
    for (double amax : {0.0, 1e-20, 1e-12, 3e-5, 0.1, 1.0, 3.0, 448.0, 57344.0, 1e30, 3e38}) {
      const double q = traits(dt).max / std::max(amax, 1e-12);
      EXPECT_EQ(amax_to_scale(amax, dt), static_cast<float>(q)) << amax;
      const float p2 = amax_to_scale(amax, dt, true);
      // the largest power of two <= the float32 scale
      const double f = static_cast<float>(q);
      EXPECT_EQ(p2, static_cast<float>(std::exp2(std::floor(std::log2(f))))) << amax;
    }
  TC_EXPECT_ERROR(amax_to_scale(1.0, kBFloat16), "expected float8_e4m3fn or float8_e5m2");
}

TEST(Fp8Scale, DelayedScaleIsTransformerEnginesUpdate) {
  EXPECT_EQ(delayed_scale(2.0f, 7.0f, kFloat8_e4m3fn), 224.0f);
  EXPECT_EQ(delayed_scale(3.0f, 7.0f, kFloat8_e4m3fn), 448.0f / 3.0f);
  EXPECT_EQ(delayed_scale(3.0f, 7.0f, kFloat8_e5m2, 2), (57344.0f / 3.0f) / 4.0f);
  EXPECT_EQ(delayed_scale(0.0f, 7.0f, kFloat8_e4m3fn), 7.0f);  // no information: keep the scale
  EXPECT_EQ(delayed_scale(INFINITY, 7.0f, kFloat8_e4m3fn), 7.0f);
  EXPECT_EQ(delayed_scale(NAN, 7.0f, kFloat8_e4m3fn), 7.0f);
  EXPECT_EQ(delayed_scale(1e-44f, 7.0f, kFloat8_e4m3fn), std::numeric_limits<float>::max());
}

TEST(Fp8Scale, DelayedStateKeepsTheHistoryTransformerEngineKeeps) {
  const Recipe max3 = Recipe::delayed(3, AmaxAlgo::kMax, 1), recent = Recipe::delayed(3, AmaxAlgo::kMostRecent);
  LinearState a(3), b(3);
  EXPECT_EQ(a.scale_of(LinearState::kWeight), 1.0f);  // before any step
  const float amaxes[] = {4.0f, 1.0f, 2.0f, 0.5f, 0.25f, 0.0f};
  // max of the last 3, margin 1: 448 / amax / 2
  const float want_max[] = {56.0f, 56.0f, 56.0f, 112.0f, 112.0f, 448.0f};
  const float want_recent[] = {112.0f, 448.0f, 224.0f, 896.0f, 1792.0f, 1792.0f};  // 0 keeps the last
  for (int i = 0; i < 6; ++i) {
    a.update(LinearState::kWeight, amaxes[i], max3, kFloat8_e4m3fn);
    b.update(LinearState::kGradOutput, amaxes[i], recent, kFloat8_e4m3fn);
    EXPECT_EQ(a.scale_of(LinearState::kWeight), want_max[i]) << i;
    EXPECT_EQ(b.scale_of(LinearState::kGradOutput), want_recent[i]) << i;
  }
  EXPECT_EQ(a.amax_history.to_vector(), (std::vector<double>{0, 0, 0, 0, 0.25, 0.5, 0, 0, 0}));
  EXPECT_EQ(a.scale.to_vector(), (std::vector<double>{1, 448, 1}));  // the other roles untouched
  TC_EXPECT_ERROR(Recipe::delayed(0), "amax_history_len must be at least 1");
  TC_EXPECT_ERROR(a.update(LinearState::kInput, 1.0f, Recipe::delayed(4), kFloat8_e4m3fn),
                  "this layer's amax history holds 3 steps but the recipe asks for 4");
}

TEST(Fp8Scale, MxScaleIsTheSmallestPowerOfTwoAtOrAboveAmaxOverMax) {
  std::mt19937 gen(7);
  std::vector<float> amaxes = {0.0f, 448.0f, 449.0f, 224.0f, 1.0f, 1e-40f, 3.4e38f, 1e-45f};
  for (int i = 0; i < 2000; ++i)
    amaxes.push_back(std::ldexp(1.0f + (gen() % 1000) / 1000.0f, static_cast<int>(gen() % 250) - 140));
  for (float amax : amaxes) {
    const double q = static_cast<double>(amax) / 448.0;
    int e = -127;
    while (e < 127 && std::ldexp(1.0, e) < q) ++e;
    EXPECT_EQ(static_cast<double>(float(mx_scale(amax))), std::ldexp(1.0, e)) << amax;
  }
  EXPECT_EQ(mx_scale(INFINITY).x, 0xff);
  EXPECT_EQ(mx_scale(NAN).x, 0xff);
}

TEST(Fp8Quantize, TensorwiseCodesAreTheScaledSaturatingCast) {
  const int64_t r = 7, k = 48;
  const std::vector<float> v = spread(r * k, 1);
  for (DType dt : {kFloat8_e4m3fn, kFloat8_e5m2})
    for (bool p2 : {false, true}) {
      const Quantized q = quantize_tensorwise(rows_of(v, r, k), dt, p2);
      const float s = amax_to_scale(ref_amax(v, 0, v.size()), dt, p2);
      ASSERT_EQ(q.scale.item<float>(), s);
      const std::vector<uint8_t> got = codes(q.data);
      for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(got[i], saturated_code(v[i] * s, dt)) << i;
      // the largest magnitude lands on (or, rounded down to 2^k, under) the format's max
      const double top = ref_amax(floats(q.data), 0, v.size());
      EXPECT_LE(top, traits(dt).max);
      EXPECT_GT(top, traits(dt).max / (p2 ? 2.01 : 1.07));
    }
  // bf16 input: scaled in float32 as well
  const Quantized qb = quantize_tensorwise(rows_of(v, r, k).to(kBFloat16), kFloat8_e4m3fn);
  const std::vector<float> vb = floats(rows_of(v, r, k).to(kBFloat16));
  const float sb = amax_to_scale(ref_amax(vb, 0, vb.size()), kFloat8_e4m3fn);
  const std::vector<uint8_t> gb = codes(qb.data);
  for (size_t i = 0; i < vb.size(); ++i) ASSERT_EQ(gb[i], saturated_code(vb[i] * sb, kFloat8_e4m3fn));
}

TEST(Fp8Quantize, WithAGivenScaleSaturatesWhatDoesNotFit) {
  const Quantized q = quantize_with_scale(tensor({1.0f, -1000.0f, 500.0f, 1e-4f}), kFloat8_e5m2, 100.0f);
  EXPECT_EQ(floats(q.data), (std::vector<float>{96.0f, -57344.0f, 49152.0f, 0.009765625f}));
  const Quantized e = quantize_with_scale(tensor({1.0f, -1000.0f}), kFloat8_e4m3fn, 1.0f);
  EXPECT_EQ(floats(e.data), (std::vector<float>{1.0f, -448.0f}));
}

TEST(Fp8Quantize, RowwiseScalesEachRowAsTorchao) {
  const int64_t r = 9, k = 40;
  std::vector<float> v = spread(r * k, 2);
  for (int64_t i = 0; i < k; ++i) v[static_cast<size_t>(3 * k + i)] = 0.0f;  // an all-zero row: scale from eps
  const Quantized q = quantize_rowwise(rows_of(v, r, k), kFloat8_e4m3fn);
  ASSERT_EQ(q.scale.sizes(), (Shape{r, 1}));
  const std::vector<float> scales = floats(q.scale);
  const std::vector<uint8_t> got = codes(q.data);
  for (int64_t row = 0; row < r; ++row) {
    const size_t b = static_cast<size_t>(row * k);
    const float s = amax_to_scale(ref_amax(v, b, b + k), kFloat8_e4m3fn, true);
    ASSERT_EQ(scales[static_cast<size_t>(row)], s) << row;
    for (size_t i = b; i < b + k; ++i) ASSERT_EQ(got[i], saturated_code(v[i] * s, kFloat8_e4m3fn));
  }
  // 3-D input: flattened to rows
  EXPECT_EQ(quantize_rowwise(rows_of(v, r, k).reshape({3, 3, k}), kFloat8_e4m3fn).data.sizes(), (Shape{9, k}));
}

TEST(Fp8Quantize, MxBlocksScaleEach32ElementsAndNeverSaturate) {
  const int64_t r = 5, k = 96;
  const std::vector<float> v = spread(r * k, 3, 1000.0f);
  const Quantized q = quantize_mxfp8(rows_of(v, r, k));
  ASSERT_EQ(q.scale.dtype(), kFloat8_e8m0fnu);
  ASSERT_EQ(q.scale.sizes(), (Shape{r, k / 32}));
  const std::vector<uint8_t> got = codes(q.data), sc = codes(q.scale);
  for (size_t blk = 0; blk < sc.size(); ++blk) {
    const size_t b = blk * 32;
    const double amax = ref_amax(v, b, b + 32);
    ASSERT_EQ(sc[blk], mx_scale(static_cast<float>(amax)).x);
    const float s = float(Float8_e8m0fnu(sc[blk], Float8_e8m0fnu::from_bits()));
    for (size_t i = b; i < b + 32; ++i) {
      ASSERT_LE(std::fabs(v[i] / s), 448.0f);  // rounded up: nothing past the range
      ASSERT_EQ(got[i], code(v[i] / s, kFloat8_e4m3fn)) << i;
    }
  }
  // dequantized values are within E4M3's half-ulp of the originals (or its subnormal step)
  const std::vector<float> back = floats(q.dequantize());
  for (size_t i = 0; i < v.size(); ++i) {
    const float s = float(Float8_e8m0fnu(sc[i / 32], Float8_e8m0fnu::from_bits()));
    EXPECT_LE(std::fabs(back[i] - v[i]), std::fmax(std::fabs(v[i]) / 16, s * std::ldexp(1.0f, -10))) << i;
  }
  // A reduced dimension that 32 does not divide: the last block is padded with zeros.
  const std::vector<float> odd = spread(3 * 40, 4, 10.0f);
  const Quantized p = quantize_mxfp8(rows_of(odd, 3, 40));
  ASSERT_EQ(p.data.sizes(), (Shape{3, 64}));
  ASSERT_EQ(p.scale.sizes(), (Shape{3, 2}));
  const std::vector<uint8_t> pc = codes(p.data), ps = codes(p.scale);
  for (size_t row = 0; row < 3; ++row)
    for (size_t i = 0; i < 64; ++i) {
      const size_t blk = row * 2 + i / 32, end = std::min<size_t>((i / 32 + 1) * 32, 40);
      ASSERT_EQ(ps[blk], mx_scale(static_cast<float>(ref_amax(odd, row * 40 + i / 32 * 32, row * 40 + end))).x);
      const float s = float(Float8_e8m0fnu(ps[blk], Float8_e8m0fnu::from_bits()));
      ASSERT_EQ(pc[row * 64 + i], i < 40 ? code(odd[row * 40 + i] / s, kFloat8_e4m3fn) : uint8_t{0}) << row << " " << i;
    }
}

// a (M, K) b (N, K): a b^T from the dequantized operands, in float64.
std::vector<double> ref_mm(const Quantized& a, const Quantized& b) {
  const std::vector<double> da = a.dequantize().to_vector(), db = b.dequantize().to_vector();
  const int64_t m = a.data.size(0), n = b.data.size(0), k = a.data.size(1);
  std::vector<double> out(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p) acc += da[static_cast<size_t>(i * k + p)] * db[static_cast<size_t>(j * k + p)];
      out[static_cast<size_t>(i * n + j)] = acc;
    }
  return out;
}

// |got - want| within float32 accumulation over k terms of magnitude up to `scale`.
void expect_close_to_ref(const Tensor& got, const std::vector<double>& want, int64_t k, const char* what) {
  const std::vector<double> g = got.to_vector();
  ASSERT_EQ(g.size(), want.size()) << what;
  double top = 0;
  for (double w : want) top = std::max(top, std::fabs(w));
  for (size_t i = 0; i < g.size(); ++i)
    ASSERT_NEAR(g[i], want[i], 2e-6 * static_cast<double>(k) * std::max(top, 1e-30)) << what << " " << i;
}

TEST(Fp8Gemm, ScaledMmIsTheProductOfTheDequantizedOperands) {
  const int64_t m = 12, n = 10, k = 64;
  const Tensor a = rows_of(spread(m * k, 4), m, k), b = rows_of(spread(n * k, 5), n, k);
  for (Scaling s : {Scaling::kTensorwise, Scaling::kRowwise, Scaling::kMXFP8}) {
    const Quantized qa = quantize(a, s, kFloat8_e4m3fn, false), qb = quantize(b, s, kFloat8_e5m2, false);
    expect_close_to_ref(scaled_mm(qa, qb), ref_mm(qa, qb), k, std::string(scaling_name(s)).c_str());
  }
  // under a bf16 autocast region the product stays float32
  amp::AutocastGuard bf16(kCPU, kBFloat16);
  const Quantized qa = quantize_tensorwise(a, kFloat8_e4m3fn), qb = quantize_tensorwise(b, kFloat8_e4m3fn);
  EXPECT_EQ(scaled_mm(qa, qb).dtype(), kFloat32);
  expect_close_to_ref(scaled_mm(qa, qb), ref_mm(qa, qb), k, "autocast");
  TC_EXPECT_ERROR(scaled_mm(qa, quantize_mxfp8(b)), "an MXFP8 operand multiplies only another MXFP8 operand");
}

// y = x w^T + b and its gradients through fp8::linear, against float64 products of the
// operands the recipe quantizes (each quantization checked above).
void check_linear(const Recipe& recipe, int64_t m, int64_t n, int64_t k) {
  const Tensor x = rows_of(spread(m * k, 11), m, k).requires_grad_(true);
  const Tensor w = rows_of(spread(n * k, 12, 0.05f), n, k).requires_grad_(true);
  const Tensor b = rows_of(spread(n, 13), 1, n).reshape({n}).requires_grad_(true);
  const Tensor gy = rows_of(spread(m * n, 14, 1e-3f), m, n);
  LinearState state(recipe.amax_history_len);
  const Tensor y = linear(x, w, b, recipe, &state);
  y.backward(gy);
  const bool tw = recipe.scaling != Scaling::kRowwise && recipe.scaling != Scaling::kMXFP8;
  auto q = [&](const Tensor& t, DType dt, float delayed_scale) {
    if (recipe.scaling == Scaling::kDelayed) return quantize_with_scale(t, dt, delayed_scale);
    return quantize(t, recipe.scaling, dt, recipe.power_of_two_scales);
  };
  const float first = 1.0f;  // delayed scaling's first step uses the initial scale
  const Quantized xq = q(x.detach(), recipe.forward_dtype, first), wq = q(w.detach(), recipe.forward_dtype, first);
  std::vector<double> want = ref_mm(xq, wq);
  const std::vector<double> bias = b.detach().to_vector();
  for (size_t i = 0; i < want.size(); ++i) want[i] += bias[i % static_cast<size_t>(n)];
  expect_close_to_ref(y.detach(), want, k, "y");
  const Quantized gq = q(gy, recipe.backward_dtype, first);
  const Quantized wt = tw ? wq.t() : q(w.detach().t(), recipe.forward_dtype, first);
  expect_close_to_ref(x.grad(), ref_mm(gq, wt), n, "dx");
  const Quantized gt = tw ? gq.t() : q(gy.t(), recipe.backward_dtype, first);
  const Quantized xt = tw ? xq.t() : q(x.detach().t(), recipe.forward_dtype, first);
  expect_close_to_ref(w.grad(), ref_mm(gt, xt), m, "dw");
  const std::vector<double> db = b.grad().to_vector(), g = gy.to_vector();
  for (int64_t j = 0; j < n; ++j) {
    double s = 0;
    for (int64_t i = 0; i < m; ++i) s += g[static_cast<size_t>(i * n + j)];
    EXPECT_NEAR(db[static_cast<size_t>(j)], s, 1e-6 * std::fabs(s) + 1e-9);
  }
  // and the whole is close to the exact layer (an E4M3 value is within 1/16 of its input)
  const Tensor exact = x.detach().to(kFloat64).matmul(w.detach().to(kFloat64).t()) + b.detach().to(kFloat64);
  const double err = tc::max((y.detach().to(kFloat64) - exact).abs()).item<double>();
  const double top = tc::max(exact.abs()).item<double>();
  if (recipe.scaling != Scaling::kDelayed) EXPECT_LT(err, 0.1 * top) << scaling_name(recipe.scaling);
}

TEST(Fp8Linear, TensorwiseForwardAndBackward) { check_linear(Recipe::tensorwise(), 16, 24, 40); }
TEST(Fp8Linear, RowwiseForwardAndBackward) { check_linear(Recipe::rowwise(), 16, 24, 40); }
TEST(Fp8Linear, Mxfp8ForwardAndBackward) { check_linear(Recipe::mxfp8(), 64, 32, 96); }
TEST(Fp8Linear, Mxfp8WithPartialBlocks) { check_linear(Recipe::mxfp8(), 20, 12, 40); }
TEST(Fp8Linear, DelayedForwardAndBackwardUseTheHistorysScale) { check_linear(Recipe::delayed(4), 8, 16, 24); }

TEST(Fp8Linear, DelayedStateAdvancesOncePerStep) {
  const Recipe r = Recipe::delayed(2);
  const Tensor x = full({4, 8}, 2.0).requires_grad_(true), w = full({3, 8}, 0.5).requires_grad_(true);
  LinearState st(2);
  linear(x, w, Tensor(), r, &st).sum().backward();
  EXPECT_EQ(st.amax_history.to_vector(), (std::vector<double>{2, 0, 0.5, 0, 1, 0}));
  EXPECT_EQ(st.scale.to_vector(), (std::vector<double>{224, 896, 57344}));
  linear(x, w, Tensor(), r, &st).sum().backward();
  EXPECT_EQ(st.amax_history.to_vector(), (std::vector<double>{2, 2, 0.5, 0.5, 1, 1}));
  TC_EXPECT_ERROR(linear(x, w, Tensor(), r, nullptr), "delayed scaling needs the layer's LinearState");
}

TEST(Fp8Linear, WeightGradientInBf16) {
  Recipe r = Recipe::rowwise();
  r.weight_grad_in_bf16 = true;
  const Tensor x = rows_of(spread(16 * 8, 21), 16, 8).requires_grad_(true);
  const Tensor w = rows_of(spread(4 * 8, 22), 4, 8).requires_grad_(true);
  const Tensor gy = rows_of(spread(16 * 4, 23), 16, 4);
  linear(x, w, Tensor(), r, nullptr).backward(gy);
  const Tensor want = gy.to(kBFloat16).t().matmul(x.detach().to(kBFloat16)).to(kFloat32);
  EXPECT_EQ(w.grad().to_vector(), want.to_vector());
}

TEST(Fp8Linear, TheGuardPutsNnLinearOnTheRecipe) {
  manual_seed(3);
  nn::Linear fc(40, 24);
  const Tensor x = rows_of(spread(16 * 40, 31), 16, 40);
  const Tensor plain = fc->forward(x);
  Tensor direct;
  {
    AutocastGuard fp8(Recipe::tensorwise());
    ASSERT_TRUE(active_recipe().has_value());
    const Tensor y = fc->forward(x);
    direct = linear(x, fc->weight, fc->bias, Recipe::tensorwise());
    EXPECT_EQ(y.to_vector(), direct.to_vector());
    {
      AutocastGuard off(Recipe::tensorwise(), false);
      EXPECT_FALSE(active_recipe().has_value());
      EXPECT_EQ(fc->forward(x).to_vector(), plain.to_vector());
    }
    // under bf16 autocast the output is bf16, as a bf16 linear's
    amp::AutocastGuard bf16(kCPU, kBFloat16);
    EXPECT_EQ(fc->forward(x).dtype(), kBFloat16);
  }
  EXPECT_FALSE(active_recipe().has_value());
  EXPECT_NE(direct.to_vector(), plain.to_vector());  // the fp8 product is not the float32 one
  {
    AutocastGuard fp8(Recipe::delayed());
    EXPECT_EQ(fc->fp8_state, nullptr);
    fc->forward(x);
    ASSERT_NE(fc->fp8_state, nullptr);
    const StateDict sd = fc->state_dict();
    ASSERT_EQ(sd.count("fp8_amax_history"), 1u);
    EXPECT_EQ(sd.at("fp8_amax_history").sizes(), (Shape{3, 1024}));
    EXPECT_NE(sd.at("fp8_scale").to_vector()[0], 1.0);  // the input's scale after one step
  }
}

TEST(Fp8Linear, DelayedStateTravelsInTheStateDict) {
  // A fresh model given the state up front takes a trained one's: the next step is bit-identical.
  manual_seed(5);
  nn::Linear a(32, 16), b(32, 16);
  const Tensor x = rows_of(spread(8 * 32, 41), 8, 32);
  const Recipe r = Recipe::delayed(8);
  AutocastGuard fp8(r);
  for (int i = 0; i < 3; ++i) a->forward(x * (1.0 + i)).sum().backward();
  nn::init_fp8_state(*b, r);
  b->load_state_dict(a->state_dict());
  EXPECT_EQ(b->fp8_state->amax_history.to_vector(), a->fp8_state->amax_history.to_vector());
  EXPECT_EQ(b->forward(x).to_vector(), a->forward(x).to_vector());
  EXPECT_EQ(b->fp8_state->scale.to_vector(), a->fp8_state->scale.to_vector());
}

// The backward GEMMs' operands are quantized along x's first dimension without a transposed
// copy: the codes and scales of quantizing the transpose, bit for bit, from float32 and bf16
// values, with partial MX blocks, a NaN and an infinity.
TEST(Fp8Quantize, ColumnsAreTheTransposesQuantization) {
  const std::vector<float> clean = spread(40 * 24, 83);
  std::vector<float> special = clean;
  special[5] = std::numeric_limits<float>::quiet_NaN();
  special[7 * 24 + 3] = INFINITY;
  const std::vector<std::pair<const std::vector<float>*, DType>> inputs = {
      {&clean, kFloat32}, {&clean, kBFloat16}, {&special, kFloat32}};
  for (const auto& [values, in] : inputs) {
    const Tensor x = rows_of(*values, 40, 24).to(in);
    for (const Scaling s : {Scaling::kTensorwise, Scaling::kRowwise, Scaling::kMXFP8})
      for (const DType dt : {kFloat8_e4m3fn, kFloat8_e5m2}) {
        SCOPED_TRACE(std::string(values == &special ? "nan/inf " : "") + std::string(dtype_name(in)) + " " +
                     std::string(scaling_name(s)) + " " + std::string(dtype_name(dt)));
        const Quantized want = quantize(x.t().contiguous(), s, dt, s == Scaling::kRowwise);
        const Quantized got = quantize_columns(x, s, dt, s == Scaling::kRowwise);
        ASSERT_EQ(got.data.sizes(), want.data.sizes());
        const Tensor gb = got.data.contiguous(), wb = want.data.contiguous();
        EXPECT_EQ(std::memcmp(gb.raw_data(), wb.raw_data(), static_cast<size_t>(gb.numel())), 0);
        const Tensor gs = got.scale.contiguous(), ws = want.scale.contiguous();
        ASSERT_EQ(gs.sizes(), ws.sizes());
        EXPECT_EQ(std::memcmp(gs.raw_data(), ws.raw_data(), static_cast<size_t>(gs.numel()) * element_size(gs.dtype())),
                  0);
      }
  }
}

// The counts of count_quantization against a float64 reference of where each format's
// round-to-nearest-even cast overflows (|v| > 464 in E4M3, >= 61440 in E5M2, where the next
// code would be NaN or infinity) and flushes (|v| <= 2^-10 in E4M3, 2^-17 in E5M2: half the
// smallest subnormal, a tie that goes to the even code 0).
TEST(Fp8Stats, CountsSaturatedAndFlushedValuesAsTheCastDoes) {
  for (const DType dt : {kFloat8_e4m3fn, kFloat8_e5m2}) {
    SCOPED_TRACE(dtype_name(dt));
    const bool e4m3 = dt == kFloat8_e4m3fn;
    const double over = e4m3 ? 464.0 : 61440.0, flush = e4m3 ? 0x1p-10 : 0x1p-17, max = e4m3 ? 448.0 : 57344.0;
    std::vector<float> v = spread(4000, 71, 4.0f);
    // Each threshold's float neighbours, both signs, so that the boundaries are decided.
    for (const double t : {over, flush, max}) {
      float f = static_cast<float>(t);
      for (int k = 0; k < 3; ++k) f = std::nextafter(f, 0.0f);
      for (int k = 0; k < 7; ++k, f = std::nextafter(f, INFINITY)) v.insert(v.end(), {f, -f});
    }
    const float scale = 1.0f;  // the values are already scaled: the reference reads them as the cast does
    int64_t want_saturated = 0, want_flushed = 0;
    double want_amax = 0;
    for (const float x : v) {
      const double a = std::abs(static_cast<double>(x) * scale);
      want_saturated += e4m3 ? a > over : a >= over;
      want_flushed += x != 0.0f && a <= flush;
      want_amax = std::max(want_amax, std::abs(double(x)));
    }
    ASSERT_GT(want_saturated, 0);
    ASSERT_GT(want_flushed, 0);
    const Tensor x = tensor(v, {static_cast<int64_t>(v.size()) / 2, 2});
    const Quantized q = quantize_with_scale(x, dt, scale);
    QuantizationStats stats;
    count_quantization(x, q, dt, stats);
    EXPECT_EQ(stats.quantizations, 1);
    EXPECT_EQ(stats.total, static_cast<int64_t>(v.size()));
    EXPECT_EQ(stats.saturated, want_saturated);
    EXPECT_EQ(stats.flushed, want_flushed);
    EXPECT_EQ(stats.amax, static_cast<float>(want_amax));
    EXPECT_EQ(stats.scale_min, scale);
    EXPECT_EQ(stats.scale_max, scale);
    // A second tensor adds its counts; the amax is the larger one.
    count_quantization(x * 0.5, quantize_with_scale(x * 0.5, dt, scale), dt, stats);
    EXPECT_EQ(stats.quantizations, 2);
    EXPECT_EQ(stats.total, 2 * static_cast<int64_t>(v.size()));
    EXPECT_EQ(stats.amax, static_cast<float>(want_amax));
  }
}

TEST(Fp8Stats, CurrentScalingSaturatesNothingAndMxPaddingIsNotCounted) {
  const Tensor x = rows_of(spread(6 * 40, 73), 6, 40);  // 40 = a block and a partial one
  for (const Recipe& r : {Recipe::tensorwise(), Recipe::rowwise(), Recipe::mxfp8()}) {
    SCOPED_TRACE(scaling_name(r.scaling));
    const Quantized q = quantize(x, r.scaling, kFloat8_e4m3fn, r.power_of_two_scales);
    QuantizationStats stats;
    count_quantization(x, q, kFloat8_e4m3fn, stats);
    EXPECT_EQ(stats.total, 6 * 40);
    EXPECT_EQ(stats.saturated, 0);
    // Flushed: nonzero values with a zero code, counted independently here.
    const std::vector<float> xv = floats(x), codes = floats(q.dequantize());
    int64_t flushed = 0;
    for (int64_t i = 0; i < 6; ++i)
      for (int64_t j = 0; j < 40; ++j)
        flushed += xv[size_t(i * 40 + j)] != 0.0f && codes[size_t(i * q.data.size(1) + j)] == 0.0f;
    EXPECT_EQ(stats.flushed, flushed);
    // The scales as multipliers: MXFP8's are the reciprocals of its E8M0 codes.
    std::vector<float> factors = floats(q.scale);
    if (r.scaling == Scaling::kMXFP8)
      for (float& f : factors) f = 1.0f / f;
    EXPECT_EQ(stats.scale_min, *std::min_element(factors.begin(), factors.end()));
    EXPECT_EQ(stats.scale_max, *std::max_element(factors.begin(), factors.end()));
    if (r.scaling == Scaling::kTensorwise) EXPECT_EQ(stats.scale_min, stats.scale_max);
  }
}

TEST(Fp8Stats, TheObserveGuardCountsALayersThreeTensors) {
  manual_seed(7);
  nn::Sequential model(nn::Linear(24, 16), nn::ReLU(), nn::Linear(16, 8));
  const Tensor x = rows_of(spread(10 * 24, 79), 10, 24);
  AutocastGuard fp8(Recipe::tensorwise());
  model->forward(x).sum().backward();
  EXPECT_TRUE(nn::named_fp8_stats(*model).empty());  // counting is off by default
  {
    ObserveGuard observe;
    EXPECT_TRUE(observing());
    model->forward(x).sum().backward();
  }
  EXPECT_FALSE(observing());
  const auto named = nn::named_fp8_stats(*model);
  ASSERT_EQ(named.size(), 2u);
  EXPECT_EQ(named[0].first, "0");
  EXPECT_EQ(named[1].first, "2");
  const LinearStats& first = *named[0].second;
  EXPECT_EQ(first.roles[LinearState::kInput].total, 10 * 24);
  EXPECT_EQ(first.roles[LinearState::kWeight].total, 16 * 24);
  EXPECT_EQ(first.roles[LinearState::kGradOutput].total, 10 * 16);  // counted in backward
  for (const auto& q : first.roles) EXPECT_EQ(q.quantizations, 1);
  EXPECT_EQ(first.roles[LinearState::kInput].amax, tc::max(x.abs()).item<float>());
  EXPECT_EQ(std::string(role_name(LinearState::kGradOutput)), "grad_output");
  // Outside the guard the layers keep their counts until cleared.
  model->forward(x).sum().backward();
  EXPECT_EQ(first.roles[LinearState::kInput].quantizations, 1);
  named[0].second->clear();
  EXPECT_EQ(first.roles[LinearState::kInput].quantizations, 0);
}

TEST(Fp8Recipe, NamesAndDefaults) {
  EXPECT_EQ(Recipe::named("tensorwise").scaling, Scaling::kTensorwise);
  EXPECT_EQ(Recipe::named("delayed").amax_history_len, 1024);
  EXPECT_EQ(Recipe::named("rowwise").backward_dtype, kFloat8_e4m3fn);
  EXPECT_TRUE(Recipe::named("rowwise").power_of_two_scales);
  EXPECT_EQ(Recipe::named("mxfp8").scaling, Scaling::kMXFP8);
  EXPECT_EQ(Recipe::tensorwise().backward_dtype, kFloat8_e5m2);
  TC_EXPECT_ERROR(Recipe::named("fp4"), "unknown fp8 recipe 'fp4' (expected tensorwise, delayed, rowwise or mxfp8)");
}

}  // namespace
}  // namespace tc::fp8
