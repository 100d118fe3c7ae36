// Tests for dropout, embedding, cat and stack beyond the op table (test_op_db.cpp checks
// forward against float64 references, non-contiguous inputs and gradcheck in every dtype):
// dropout statistics and seeded determinism, float32 accumulation of embedding gradients,
// mixed dtypes, legacy empty inputs and error messages.
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

// ------------------------------------------------------------------ dropout

TEST(Dropout, IdentityCasesReturnTheSameTensor) {
  Tensor x = uniform({4, 5}, kFloat32, -1, 1, 1);
  EXPECT_TRUE(dropout(x, 0.0, true).is_same(x));
  EXPECT_TRUE(dropout(x, 0.5, false).is_same(x));
}

TEST(Dropout, ProbabilityOutOfRange) {
  Tensor x = zeros({3});
  EXPECT_TRUE(throws_with([&] { dropout(x, -0.1); }, {"[dropout]", "-0.1"}));
  EXPECT_TRUE(throws_with([&] { dropout(x, 1.5); }, {"[dropout]", "1.5"}));
  EXPECT_TRUE(throws_with([&] { dropout(x, std::nan("")); }, {"[dropout]"}));
}

TEST(Dropout, KeepFractionAndScaling) {
  for (DType dt : testing::kFloatingTypes) {
    SCOPED_TRACE(dtype_name(dt));
    const int64_t n = 100000;
    const double p = 0.3;
    Tensor x = uniform({n}, dt, 1, 2, 2);  // no zeros, so "kept" is exactly "nonzero"
    manual_seed(7);
    Tensor y = dropout(x, p, true);
    EXPECT_EQ(y.dtype(), dt);
    std::vector<double> xv = x.to_vector(), yv = y.to_vector();
    int64_t kept = 0;
    std::vector<double> expected(n);
    for (int64_t i = 0; i < n; ++i) {
      kept += yv[i] != 0.0;
      expected[i] = yv[i] != 0.0 ? xv[i] / (1.0 - p) : 0.0;
    }
    // Binomial(1e5, 0.7): sd = sqrt(1e5 * 0.21) ~ 145; allow 5 sd.
    EXPECT_NEAR(static_cast<double>(kept), 0.7 * n, 5 * std::sqrt(n * 0.21));
    EXPECT_TRUE(all_close(y, expected, tol_for(dt)));
  }
}

TEST(Dropout, PEqualsOneGivesZeros) {
  Tensor x = uniform({100}, kFloat32, 1, 2, 3).requires_grad_();
  Tensor y = dropout(x, 1.0);
  EXPECT_TRUE(testing::equal(y, zeros({100})));
  y.backward(ones({100}));
  EXPECT_TRUE(testing::equal(x.grad(), zeros({100})));
}

TEST(Dropout, SeedDeterminismIndependentOfThreads) {
  Tensor x = uniform({300, 500}, kFloat32, 1, 2, 4);  // large enough to run on several threads
  const int prev = get_num_threads();
  set_num_threads(1);
  manual_seed(123);
  Tensor a = dropout(x, 0.4);
  Tensor a2 = dropout(x, 0.4);  // the generator advanced: a fresh mask
  set_num_threads(2);
  manual_seed(123);
  Tensor b = dropout(x, 0.4);
  set_num_threads(prev);
  manual_seed(124);
  Tensor c = dropout(x, 0.4);
  EXPECT_TRUE(testing::equal(a, b));
  EXPECT_FALSE(testing::equal(a, a2));
  EXPECT_FALSE(testing::equal(a, c));
}

TEST(Dropout, BackwardUsesTheForwardMask) {
  Tensor x = uniform({64, 33}, kFloat32, 1, 2, 5).requires_grad_();
  manual_seed(9);
  Tensor y = dropout(x, 0.25);
  Tensor gy = uniform({64, 33}, kFloat32, -1, 1, 6);
  y.backward(gy);
  std::vector<double> yv = y.to_vector(), gv = gy.to_vector(), expected(yv.size());
  for (size_t i = 0; i < yv.size(); ++i) expected[i] = yv[i] != 0.0 ? gv[i] / 0.75 : 0.0;
  EXPECT_TRUE(all_close(x.grad(), expected, tol_for(kFloat32)));
}

TEST(Dropout, NonContiguousInputMatchesContiguous) {
  Tensor x = uniform({20, 30}, kBFloat16, 1, 2, 8).t();
  ASSERT_FALSE(x.is_contiguous());
  manual_seed(11);
  Tensor a = dropout(x, 0.5);
  manual_seed(11);
  Tensor b = dropout(x.contiguous(), 0.5);
  EXPECT_TRUE(testing::equal(a, b));
}

// ------------------------------------------------------------------ embedding

TEST(Embedding, Bf16GradientAccumulatesInFloat32) {
  // 300 gradients of 0.333984375 (bf16 of 1/3) into one row: float32 accumulation gives
  // 100.195..., rounded once to bf16 -> 100. Summing in bf16 would drift far (spacing 0.5 above 64).
  const int64_t K = 300;
  Tensor w = zeros({4, 2}, kBFloat16).requires_grad_();
  Tensor idx = full({K}, 1.0, kInt64);
  Tensor y = embedding(w, idx);
  y.backward(full({K, 2}, 1.0 / 3.0, kBFloat16));
  const double g = static_cast<double>(BFloat16(1.0f / 3.0f));
  const double sum = static_cast<double>(BFloat16(static_cast<float>(K * g)));
  EXPECT_EQ(w.grad().dtype(), kBFloat16);
  EXPECT_TRUE(all_close(w.grad(), {0, 0, sum, sum, 0, 0, 0, 0}, {0, 0}));
}

TEST(Embedding, Errors) {
  Tensor w = zeros({256, 4});
  try {
    embedding(w, tensor(std::vector<int64_t>{1, 300, 2}));
    ADD_FAILURE() << "no error for index 300";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "[embedding] index 300 is out of range for 256 rows");
  }
  EXPECT_TRUE(throws_with([&] { embedding(w, tensor(std::vector<int64_t>{-1})); }, {"[embedding]", "-1", "256 rows"}));
  EXPECT_TRUE(throws_with([&] { embedding(w, zeros({3})); }, {"[embedding]", "float32"}));
  EXPECT_TRUE(throws_with([&] { embedding(zeros({4}), tensor(std::vector<int64_t>{0})); }, {"[embedding]", "(4,)"}));
}

// ------------------------------------------------------------------ cat and stack

// Concatenation reference: for each outer index, each input's slab in turn.
std::vector<double> cat_ref(const std::vector<Tensor>& ts, int64_t d) {
  std::vector<double> out;
  int64_t outer = 1;
  for (int64_t k = 0; k < d; ++k) outer *= ts[0].size(k);
  std::vector<std::vector<double>> vals;
  for (const Tensor& t : ts) vals.push_back(t.to_vector());
  for (int64_t o = 0; o < outer; ++o)
    for (size_t i = 0; i < ts.size(); ++i) {
      const size_t slab = vals[i].size() / outer;
      out.insert(out.end(), vals[i].begin() + o * slab, vals[i].begin() + (o + 1) * slab);
    }
  return out;
}

TEST(Cat, MixedDtypesPromote) {
  Tensor a = uniform({2, 3}, kBFloat16, -2, 2, 33), b = uniform({2, 2}, kFloat16, -2, 2, 34);
  Tensor c = tensor(std::vector<int64_t>{1, 2, 3, 4}, {2, 2});
  Tensor y = cat({a, b}, 1);
  EXPECT_EQ(y.dtype(), kFloat32);  // bf16 with f16 -> f32
  EXPECT_TRUE(all_close(y, cat_ref({a, b}, 1), {0, 0}));
  Tensor z = cat({c, b}, 1);
  EXPECT_EQ(z.dtype(), kFloat16);  // int64 with f16 -> f16
  EXPECT_TRUE(all_close(z, cat_ref({c, b}, 1), {0, 0}));
  EXPECT_EQ(cat({c, c}, 0).dtype(), kInt64);
}

TEST(Cat, LegacyEmptyOneDimTensorsAreSkipped) {
  Tensor a = uniform({2, 3}, kFloat32, -2, 2, 37);
  Tensor e = zeros({0});
  EXPECT_TRUE(testing::equal(cat({e, a, e}, 1), a));
  EXPECT_EQ(cat({e, e}, 0).sizes(), (Shape{0}));
  // An empty tensor of the right rank takes part normally.
  EXPECT_TRUE(testing::equal(cat({a, zeros({2, 0})}, 1), a));
}

TEST(Cat, GradcheckAllInputsMixedDtypes) {
  auto f = [](const std::vector<Tensor>& in) { return cat({in[0], in[1], in[2]}, 1); };
  EXPECT_TRUE(gradcheck(
      f,
      {uniform({2, 3}, kFloat64, -1, 1, 41).requires_grad_(), uniform({2, 1}, kFloat64, -1, 1, 42).requires_grad_(),
       uniform({2, 2}, kFloat64, -1, 1, 43).requires_grad_()},
      {1e-7, 1e-6}));
  // Each gradient arrives in its own input's dtype.
  EXPECT_TRUE(gradcheck(
      f,
      {uniform({2, 3}, kBFloat16, -1, 1, 44).requires_grad_(), uniform({2, 1}, kFloat32, -1, 1, 45).requires_grad_(),
       uniform({2, 2}, kFloat16, -1, 1, 46).requires_grad_()},
      {1e-2, 1e-2}));
}

TEST(Cat, BackwardSlicesTheGradient) {
  Tensor a = zeros({2, 2}).requires_grad_(), b = zeros({2, 1}, kBFloat16).requires_grad_();
  Tensor gy = tensor({1.0, 2.0, 3.0, 4.0, 5.0, 6.0}).view({2, 3});
  cat({a, b}, 1).backward(gy);
  EXPECT_TRUE(all_close(a.grad(), {1, 2, 4, 5}, {0, 0}));
  EXPECT_EQ(b.grad().dtype(), kBFloat16);
  EXPECT_TRUE(all_close(b.grad(), {3, 6}, {0, 0}));
}

TEST(Cat, Errors) {
  Tensor a = zeros({2, 3}), b = zeros({2, 4}), c = zeros({2, 3, 1});
  EXPECT_TRUE(throws_with(
      [&] {
        cat({a, b}, 0);
      },
      {"[cat]", "dimension 0", "tensor 0 has shape (2, 3)", "tensor 1 has shape (2, 4)"}));
  EXPECT_TRUE(throws_with([&] { cat({a, a, c}, 0); }, {"[cat]", "tensor 2 has shape (2, 3, 1)"}));
  EXPECT_TRUE(throws_with([&] { cat({a, zeros({})}, 0); }, {"[cat]", "position 1"}));
  EXPECT_TRUE(throws_with([&] { cat({}, 0); }, {"[cat]", "non-empty"}));
  EXPECT_TRUE(throws_with([&] { cat({a, a}, 2); }, {"[cat]"}));
}

TEST(Stack, ForwardEveryDim) {
  Tensor a = uniform({2, 3}, kFloat32, -2, 2, 51), b = uniform({2, 3}, kBFloat16, -2, 2, 52);
  std::vector<double> av = a.to_vector(), bv = b.to_vector();
  // dim 0: a then b. dim 2: interleaved elementwise. dim 1: rows interleaved.
  Tensor y0 = stack({a, b}, 0);
  EXPECT_EQ(y0.sizes(), (Shape{2, 2, 3}));
  EXPECT_EQ(y0.dtype(), kFloat32);
  std::vector<double> r0 = av;
  r0.insert(r0.end(), bv.begin(), bv.end());
  EXPECT_TRUE(all_close(y0, r0, {0, 0}));
  std::vector<double> r1, r2;
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 3; ++j) r1.push_back(av[i * 3 + j]);
    for (int j = 0; j < 3; ++j) r1.push_back(bv[i * 3 + j]);
  }
  for (int k = 0; k < 6; ++k) {
    r2.push_back(av[k]);
    r2.push_back(bv[k]);
  }
  Tensor y1 = stack({a, b}, 1), y2 = stack({a, b}, 2);
  EXPECT_EQ(y1.sizes(), (Shape{2, 2, 3}));
  EXPECT_EQ(y2.sizes(), (Shape{2, 3, 2}));
  EXPECT_TRUE(all_close(y1, r1, {0, 0}));
  EXPECT_TRUE(all_close(y2, r2, {0, 0}));
  EXPECT_TRUE(testing::equal(stack({a, b}, -1), y2));
  // 0-d tensors stack into a vector.
  EXPECT_TRUE(all_close(stack({scalar_tensor(1.5), scalar_tensor(-2.0)}), {1.5, -2.0}, {0, 0}));
}

TEST(Stack, Gradcheck) {
  auto f = [](const std::vector<Tensor>& in) { return stack({in[0], in[1]}, 1); };
  EXPECT_TRUE(gradcheck(
      f, {uniform({3, 2}, kFloat64, -1, 1, 53).requires_grad_(), uniform({3, 2}, kFloat32, -1, 1, 54).requires_grad_()},
      {1e-5, 1e-5}));
}

TEST(Stack, Errors) {
  EXPECT_TRUE(throws_with(
      [&] {
        stack({zeros({2, 3}), zeros({3, 2})});
      },
      {"[stack]", "tensor 0 has shape (2, 3)", "tensor 1 has shape (3, 2)"}));
  EXPECT_TRUE(throws_with([&] { stack({}); }, {"[stack]"}));
  EXPECT_TRUE(throws_with([&] { stack({zeros({2}), zeros({2})}, 3); }, {"[stack]"}));
}

}  // namespace
}  // namespace tc
