// Tests for layer_norm and batch_norm: float64 loop references in every floating dtype,
// gradcheck of every differentiable input, running-stat updates, layouts and errors.
#include <cmath>
#include <string>

#include "common/testing.h"

namespace tc {
namespace {

using testing::all_close;
using testing::gradcheck;
using testing::tol_for;
using testing::uniform;

using testing::throws_with;

// ------------------------------------------------------------------ references

// Rows of N = numel(normalized) normalized with biased variance, then the affine map.
std::vector<double> layer_norm_ref(const Tensor& x, int64_t N, const Tensor& w, const Tensor& b, double eps) {
  std::vector<double> xv = x.to_vector(), out(xv.size());
  std::vector<double> wv = w.defined() ? w.to_vector() : std::vector<double>(N, 1.0);
  std::vector<double> bv = b.defined() ? b.to_vector() : std::vector<double>(N, 0.0);
  for (size_t r = 0; r < xv.size() / N; ++r) {
    double m = 0, v = 0;
    for (int64_t j = 0; j < N; ++j) m += xv[r * N + j];
    m /= N;
    for (int64_t j = 0; j < N; ++j) v += (xv[r * N + j] - m) * (xv[r * N + j] - m);
    v /= N;
    for (int64_t j = 0; j < N; ++j) out[r * N + j] = (xv[r * N + j] - m) / std::sqrt(v + eps) * wv[j] + bv[j];
  }
  return out;
}

struct BnStats {
  std::vector<double> mean, var_biased, var_unbiased;
};

BnStats bn_stats_ref(const Tensor& x) {
  const int64_t B = x.size(0), C = x.size(1), S = x.numel() / (B * C);
  std::vector<double> xv = x.to_vector();
  BnStats s{std::vector<double>(C), std::vector<double>(C), std::vector<double>(C)};
  const double n = static_cast<double>(B * S);
  for (int64_t c = 0; c < C; ++c) {
    double m = 0, q = 0;
    for (int64_t i = 0; i < B; ++i)
      for (int64_t j = 0; j < S; ++j) m += xv[(i * C + c) * S + j];
    m /= n;
    for (int64_t i = 0; i < B; ++i)
      for (int64_t j = 0; j < S; ++j) q += (xv[(i * C + c) * S + j] - m) * (xv[(i * C + c) * S + j] - m);
    s.mean[c] = m;
    s.var_biased[c] = q / n;
    s.var_unbiased[c] = q / (n - 1);
  }
  return s;
}

std::vector<double> bn_apply_ref(const Tensor& x, const std::vector<double>& mean, const std::vector<double>& var,
                                 const Tensor& w, const Tensor& b, double eps) {
  const int64_t B = x.size(0), C = x.size(1), S = x.numel() / (B * C);
  std::vector<double> xv = x.to_vector(), out(xv.size());
  std::vector<double> wv = w.defined() ? w.to_vector() : std::vector<double>(C, 1.0);
  std::vector<double> bv = b.defined() ? b.to_vector() : std::vector<double>(C, 0.0);
  for (int64_t i = 0; i < B; ++i)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t j = 0; j < S; ++j) {
        const size_t k = (i * C + c) * S + j;
        out[k] = (xv[k] - mean[c]) / std::sqrt(var[c] + eps) * wv[c] + bv[c];
      }
  return out;
}

// ------------------------------------------------------------------ layer_norm

TEST(LayerNorm, ForwardMatchesReferenceInEveryDtype) {
  for (DType dt : testing::kFloatingTypes) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor x = uniform({4, 3, 8}, dt, -2, 2, 1);
    Tensor w = uniform({3, 8}, dt, 0.5, 1.5, 2);
    Tensor b = uniform({3, 8}, dt, -1, 1, 3);
    Tensor y = layer_norm(x, {3, 8}, w, b, 1e-5);
    EXPECT_EQ(y.dtype(), dt);
    EXPECT_EQ(y.sizes(), x.sizes());
    EXPECT_TRUE(all_close(y, layer_norm_ref(x, 24, w, b, 1e-5), tol_for(dt, 8)));
    // Without the affine parameters, over the last dim only.
    Tensor y2 = layer_norm(x, {8});
    EXPECT_TRUE(all_close(y2, layer_norm_ref(x, 8, Tensor(), Tensor(), 1e-5), tol_for(dt, 8)));
  }
}

TEST(LayerNorm, LongRowsAndLargeOffsetStayAccurate) {
  // A large common offset defeats the naive E[x^2] - E[x]^2 formula in float32.
  Tensor x = add(uniform({3, 4096}, kFloat32, -1, 1, 5), 1000.0);
  Tensor y = layer_norm(x, {4096});
  EXPECT_TRUE(all_close(y, layer_norm_ref(x, 4096, Tensor(), Tensor(), 1e-5), {2e-4, 2e-4}));
}

TEST(LayerNorm, MixedBf16InputWithFloat32Params) {
  Tensor x = uniform({5, 16}, kBFloat16, -2, 2, 7);
  Tensor w = uniform({16}, kFloat32, 0.5, 1.5, 8), b = uniform({16}, kFloat32, -1, 1, 9);
  Tensor y = layer_norm(x, {16}, w, b);
  EXPECT_EQ(y.dtype(), kBFloat16);
  EXPECT_TRUE(all_close(y, layer_norm_ref(x, 16, w, b, 1e-5), tol_for(kBFloat16)));
}

TEST(LayerNorm, NonContiguousInput) {
  Tensor base = uniform({8, 6}, kFloat32, -2, 2, 11);
  Tensor x = base.t();  // (6, 8), strides (1, 6)
  ASSERT_FALSE(x.is_contiguous());
  Tensor w = uniform({8}, kFloat32, 0.5, 1.5, 12);
  EXPECT_TRUE(all_close(layer_norm(x, {8}, w), layer_norm_ref(x, 8, w, Tensor(), 1e-5), tol_for(kFloat32, 8)));
}

TEST(LayerNorm, ConstantRowGivesBiasNotNaN) {
  Tensor x = full({2, 5}, 3.0);
  Tensor b = uniform({5}, kFloat32, -1, 1, 13);
  Tensor y = layer_norm(x, {5}, Tensor(), b);
  EXPECT_TRUE(all_close(y, add(zeros({2, 5}), b), {0, 0}));
}

TEST(LayerNorm, GradcheckAllInputs) {
  auto f = [](const std::vector<Tensor>& in) { return layer_norm(in[0], {3, 4}, in[1], in[2], 1e-5); };
  Tensor x = uniform({2, 3, 4}, kFloat64, -2, 2, 21).requires_grad_();
  Tensor w = uniform({3, 4}, kFloat64, 0.5, 1.5, 22).requires_grad_();
  Tensor b = uniform({3, 4}, kFloat64, -1, 1, 23).requires_grad_();
  EXPECT_TRUE(gradcheck(f, {x, w, b}, {1e-7, 1e-6}));
  EXPECT_TRUE(gradcheck(f, {x.to(kFloat32).detach().requires_grad_(), w.to(kFloat32).detach().requires_grad_(),
                            b.to(kFloat32).detach().requires_grad_()},
                        {2e-4, 2e-4}));
}

TEST(LayerNorm, GradcheckWithoutAffineAndIn16Bit) {
  auto f = [](const std::vector<Tensor>& in) { return layer_norm(in[0], {6}); };
  EXPECT_TRUE(gradcheck(f, {uniform({4, 6}, kFloat64, -2, 2, 31).requires_grad_()}, {1e-7, 1e-6}));
  auto g = [](const std::vector<Tensor>& in) { return layer_norm(in[0], {6}, in[1], in[2]); };
  // 16-bit x with float32 parameters: gradients arrive in each input's dtype.
  for (DType dt : {kBFloat16, kFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    EXPECT_TRUE(gradcheck(g,
                          {uniform({4, 6}, dt, -2, 2, 32).requires_grad_(),
                           uniform({6}, kFloat32, 0.5, 1.5, 33).requires_grad_(),
                           uniform({6}, kFloat32, -1, 1, 34).requires_grad_()},
                          dt == kBFloat16 ? testing::Tol{3e-2, 3e-2} : testing::Tol{5e-3, 5e-3}));
  }
}

TEST(LayerNorm, WeightGradientIsDeterministicAcrossThreadCounts) {
  // Many rows force several partial-sum chunks; the combination order must not depend on threads.
  Tensor x = uniform({512, 128}, kFloat32, -2, 2, 41);
  Tensor gy = uniform({512, 128}, kFloat32, -1, 1, 42);
  auto run = [&](int threads) {
    set_num_threads(threads);
    Tensor w = ones({128}).requires_grad_();
    layer_norm(x, {128}, w).backward(gy);
    return w.grad();
  };
  const int prev = get_num_threads();
  Tensor a = run(1), b = run(2);
  set_num_threads(prev);
  EXPECT_TRUE(testing::equal(a, b));
  // And the value is right: dw_j = sum_r gy[r, j] * xhat[r, j].
  std::vector<double> xhat = layer_norm_ref(x, 128, Tensor(), Tensor(), 1e-5), gv = gy.to_vector();
  std::vector<double> ref(128, 0.0);
  for (size_t i = 0; i < xhat.size(); ++i) ref[i % 128] += gv[i] * xhat[i];
  EXPECT_TRUE(all_close(a, ref, {1e-4, 1e-4}));
}

TEST(LayerNorm, Errors) {
  Tensor x = zeros({2, 3, 4});
  EXPECT_TRUE(throws_with([&] { layer_norm(x, {3}); }, {"[layer_norm]", "(3,)", "(2, 3, 4)"}));
  EXPECT_TRUE(throws_with([&] { layer_norm(x, {2, 3, 4, 1}); }, {"[layer_norm]", "normalized_shape"}));
  EXPECT_TRUE(throws_with([&] { layer_norm(x, {}); }, {"[layer_norm]"}));
  EXPECT_TRUE(throws_with([&] { layer_norm(x, {3, 4}, zeros({4})); }, {"[layer_norm]", "weight of shape (4,)", "(3, 4)"}));
  EXPECT_TRUE(throws_with([&] { layer_norm(x, {4}, Tensor(), zeros({3})); }, {"[layer_norm]", "bias of shape (3,)"}));
  EXPECT_TRUE(throws_with([&] { layer_norm(zeros({2, 4}, kInt64), {4}); }, {"[layer_norm]", "int64"}));
}

// ------------------------------------------------------------------ batch_norm

TEST(BatchNorm, TrainingForwardAndRunningStatsInEveryDtype) {
  for (DType dt : testing::kFloatingTypes) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor x = uniform({4, 3, 5, 2}, dt, -2, 2, 51);
    // Parameters and running stats stay float32 even for 16-bit input (autocast's rule).
    Tensor w = uniform({3}, kFloat32, 0.5, 1.5, 52), b = uniform({3}, kFloat32, -1, 1, 53);
    Tensor rm = uniform({3}, kFloat32, -0.5, 0.5, 54), rv = uniform({3}, kFloat32, 0.5, 1.5, 55);
    std::vector<double> rm0 = rm.to_vector(), rv0 = rv.to_vector();
    Tensor y = batch_norm(x, rm, rv, w, b, /*training=*/true, 0.1, 1e-5);
    EXPECT_EQ(y.dtype(), dt);
    BnStats s = bn_stats_ref(x);
    EXPECT_TRUE(all_close(y, bn_apply_ref(x, s.mean, s.var_biased, w, b, 1e-5), tol_for(dt, 8)));
    std::vector<double> erm(3), erv(3);
    for (int c = 0; c < 3; ++c) {
      erm[c] = 0.9 * rm0[c] + 0.1 * s.mean[c];
      erv[c] = 0.9 * rv0[c] + 0.1 * s.var_unbiased[c];
    }
    EXPECT_EQ(rm.dtype(), kFloat32);
    EXPECT_TRUE(all_close(rm, erm, tol_for(kFloat32, 8)));
    EXPECT_TRUE(all_close(rv, erv, tol_for(kFloat32, 8)));
  }
}

TEST(BatchNorm, HandComputedRunningStats) {
  // Channel 0 holds {1, 3}: mean 2, biased var 1, unbiased 2. Channel 1 holds {2, 6}:
  // mean 4, biased var 4, unbiased 8. From rm = 0, rv = 1 with momentum 0.1:
  // rm = (0.2, 0.4), rv = (0.9 + 0.2, 0.9 + 0.8).
  Tensor x = tensor({1.0, 2.0, 3.0, 6.0}).view({2, 2});
  Tensor rm = zeros({2}), rv = ones({2});
  Tensor y = batch_norm(x, rm, rv, Tensor(), Tensor(), true, 0.1, 0.0);
  EXPECT_TRUE(all_close(y, {-1, -1, 1, 1}, tol_for(kFloat32)));
  EXPECT_TRUE(all_close(rm, {0.2, 0.4}, tol_for(kFloat32)));
  EXPECT_TRUE(all_close(rv, {1.1, 1.7}, tol_for(kFloat32)));
  EXPECT_FALSE(rm.requires_grad());
  // A second step compounds: rm = 0.9 * 0.2 + 0.1 * 2.
  batch_norm(x, rm, rv, Tensor(), Tensor(), true, 0.1, 0.0);
  EXPECT_TRUE(all_close(rm, {0.38, 0.76}, tol_for(kFloat32)));
  EXPECT_TRUE(all_close(rv, {0.99 + 0.2, 1.53 + 0.8}, tol_for(kFloat32)));
}

TEST(BatchNorm, EvalUsesRunningStatsAndLeavesThemAlone) {
  for (DType dt : testing::kFloatingTypes) {
    SCOPED_TRACE(dtype_name(dt));
    Tensor x = uniform({3, 4, 5}, dt, -2, 2, 61);
    Tensor w = uniform({4}, kFloat32, 0.5, 1.5, 62), b = uniform({4}, kFloat32, -1, 1, 63);
    Tensor rm = uniform({4}, kFloat32, -0.5, 0.5, 64), rv = uniform({4}, kFloat32, 0.5, 1.5, 65);
    Tensor rm0 = rm.clone(), rv0 = rv.clone();
    Tensor y = batch_norm(x, rm, rv, w, b, /*training=*/false, 0.1, 1e-3);
    EXPECT_TRUE(all_close(y, bn_apply_ref(x, rm.to_vector(), rv.to_vector(), w, b, 1e-3), tol_for(dt, 8)));
    EXPECT_TRUE(testing::equal(rm, rm0));
    EXPECT_TRUE(testing::equal(rv, rv0));
  }
}

TEST(BatchNorm, WithoutRunningStatsAlwaysUsesBatchStats) {
  Tensor x = uniform({6, 3}, kFloat32, -2, 2, 71);
  BnStats s = bn_stats_ref(x);
  std::vector<double> ref = bn_apply_ref(x, s.mean, s.var_biased, Tensor(), Tensor(), 1e-5);
  EXPECT_TRUE(all_close(batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), false), ref, tol_for(kFloat32, 8)));
  EXPECT_TRUE(all_close(batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true), ref, tol_for(kFloat32, 8)));
}

TEST(BatchNorm, NonContiguousInput) {
  Tensor base = uniform({2, 5, 3}, kFloat32, -2, 2, 81);
  Tensor x = base.permute({0, 2, 1});  // (2, 3, 5), channels are not contiguous rows
  ASSERT_FALSE(x.is_contiguous());
  BnStats s = bn_stats_ref(x);
  Tensor w = uniform({3}, kFloat32, 0.5, 1.5, 82);
  EXPECT_TRUE(all_close(batch_norm(x, Tensor(), Tensor(), w, Tensor(), true),
                        bn_apply_ref(x, s.mean, s.var_biased, w, Tensor(), 1e-5), tol_for(kFloat32, 8)));
}

TEST(BatchNorm, GradcheckTraining) {
  auto f = [](const std::vector<Tensor>& in) {
    return batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], /*training=*/true, 0.1, 1e-5);
  };
  for (Shape shape : {Shape{5, 3}, Shape{2, 3, 4}, Shape{2, 3, 2, 2}}) {
    SCOPED_TRACE(shape_str(shape));
    Tensor x = uniform(shape, kFloat64, -2, 2, 91).requires_grad_();
    Tensor w = uniform({3}, kFloat64, 0.5, 1.5, 92).requires_grad_();
    Tensor b = uniform({3}, kFloat64, -1, 1, 93).requires_grad_();
    EXPECT_TRUE(gradcheck(f, {x, w, b}, {1e-7, 1e-6}));
    EXPECT_TRUE(gradcheck(f, {x.to(kFloat32).detach().requires_grad_(), w.to(kFloat32).detach().requires_grad_(),
                              b.to(kFloat32).detach().requires_grad_()},
                          {2e-4, 2e-4}));
  }
}

TEST(BatchNorm, GradcheckTrainingUpdatesStatsButGradientIgnoresThem) {
  // With running stats given, training output and gradient depend on batch stats only.
  Tensor rm = zeros({3}), rv = ones({3});
  auto f = [&](const std::vector<Tensor>& in) { return batch_norm(in[0], rm, rv, in[1], in[2], true, 0.1, 1e-5); };
  EXPECT_TRUE(gradcheck(f,
                        {uniform({4, 3, 2}, kFloat64, -2, 2, 94).requires_grad_(),
                         uniform({3}, kFloat64, 0.5, 1.5, 95).requires_grad_(),
                         uniform({3}, kFloat64, -1, 1, 96).requires_grad_()},
                        {1e-7, 1e-6}));
}

TEST(BatchNorm, GradcheckEval) {
  Tensor rm = uniform({3}, kFloat32, -0.5, 0.5, 101), rv = uniform({3}, kFloat32, 0.5, 1.5, 102);
  auto f = [&](const std::vector<Tensor>& in) { return batch_norm(in[0], rm, rv, in[1], in[2], false, 0.1, 1e-5); };
  Tensor x = uniform({2, 3, 4}, kFloat64, -2, 2, 103).requires_grad_();
  Tensor w = uniform({3}, kFloat64, 0.5, 1.5, 104).requires_grad_();
  Tensor b = uniform({3}, kFloat64, -1, 1, 105).requires_grad_();
  EXPECT_TRUE(gradcheck(f, {x, w, b}, {1e-7, 1e-6}));
}

TEST(BatchNorm, Bf16InputWithFloat32ParamsGradients) {
  auto f = [](const std::vector<Tensor>& in) { return batch_norm(in[0], Tensor(), Tensor(), in[1], in[2], true); };
  EXPECT_TRUE(gradcheck(f,
                        {uniform({4, 3, 3}, kBFloat16, -2, 2, 111).requires_grad_(),
                         uniform({3}, kFloat32, 0.5, 1.5, 112).requires_grad_(),
                         uniform({3}, kFloat32, -1, 1, 113).requires_grad_()},
                        {3e-2, 3e-2}));
}

TEST(BatchNorm, Errors) {
  Tensor x = zeros({2, 3, 4});
  EXPECT_TRUE(throws_with([&] { batch_norm(x, Tensor(), Tensor(), zeros({4}), Tensor(), true); },
                          {"[batch_norm]", "weight of shape (4,)", "3 channels", "(2, 3, 4)"}));
  EXPECT_TRUE(throws_with([&] { batch_norm(x, zeros({2}), ones({2}), Tensor(), Tensor(), false); },
                          {"[batch_norm]", "running_mean of shape (2,)"}));
  EXPECT_TRUE(throws_with([&] { batch_norm(x, zeros({3}), Tensor(), Tensor(), Tensor(), false); }, {"[batch_norm]"}));
  EXPECT_TRUE(throws_with([&] { batch_norm(zeros({1, 3}), Tensor(), Tensor(), Tensor(), Tensor(), true); },
                          {"[batch_norm]", "more than 1 value per channel", "(1, 3)"}));
  EXPECT_TRUE(throws_with([&] { batch_norm(zeros({5}), Tensor(), Tensor(), Tensor(), Tensor(), true); },
                          {"[batch_norm]", "(5,)"}));
  // Eval mode with a single sample is fine: it uses the running stats.
  EXPECT_NO_THROW(batch_norm(zeros({1, 3}), zeros({3}), ones({3}), Tensor(), Tensor(), false));
}

}  // namespace
}  // namespace tc
