// Tests for layer_norm and batch_norm beyond the op table (test_op_db.cpp checks forward
// and running-stat updates against float64 loop references, layouts and gradcheck of
// every differentiable input, in every dtype): large-offset numerics, constant rows,
// thread-count independent weight gradients, hand-computed running stats and errors.
#include <cmath>
#include <optional>
#include <string>
#include <tuple>

#include "common/references.h"
#include "common/testing.h"

namespace tc {
namespace {

using testing::all_close;
using testing::tol_for;
using testing::uniform;

using testing::throws_with;

// ------------------------------------------------------------------ layer_norm

TEST(LayerNorm, LongRowsAndLargeOffsetStayAccurate) {
  // A large common offset defeats the naive E[x^2] - E[x]^2 formula in float32.
  Tensor x = add(uniform({3, 4096}, kFloat32, -1, 1, 5), 1000.0);
  Tensor y = layer_norm(x, {4096});
  EXPECT_TRUE(all_close(y, testing::ref::layer_norm(x, 4096, Tensor(), Tensor(), 1e-5), {2e-4, 2e-4}));
}

TEST(LayerNorm, RowKernelsMatchFloat64AtEveryWidth) {
  // The float kernels' vector loops (16 wide), their scalar tails, the forward's double
  // sums (the AVX-512 rows' one-pass moments for widths of whole vectors, the portable
  // loops' 32 lanes for the others; float16 rows converted around the former) and the
  // backward's float lanes (a long row too), forward and backward, against the same op in
  // float64 (its own scalar loops).
  for (DType dt : {kFloat32, kBFloat16, kFloat16})
    for (int64_t n : {16, 37, 256, 1000, 8192})
      for (int affine = 0; affine < 3; ++affine) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " width " + std::to_string(n) + " affine " + std::to_string(affine));
        const Tensor x = add(uniform({9, n}, kFloat32, -2, 2, 61), 50.0).to(dt);  // an offset the mean must carry
        const Tensor gy = uniform({9, n}, kFloat32, -1, 1, 62).to(dt);
        const Tensor w = affine >= 1 ? uniform({n}, kFloat32, 0.5, 1.5, 63).to(dt) : Tensor();
        const Tensor b = affine == 2 ? uniform({n}, kFloat32, -1, 1, 64).to(dt) : Tensor();
        auto run = [&](DType as) {
          auto leaf = [&](const Tensor& t) { return t.defined() ? t.to(as).detach().requires_grad_() : Tensor(); };
          Tensor xl = leaf(x), wl = leaf(w), bl = leaf(b);
          Tensor y = layer_norm(xl, {n}, wl, bl, 1e-5);
          y.backward(gy.to(as));
          return std::vector<Tensor>{y, xl.grad(), wl.defined() ? wl.grad() : Tensor(),
                                     bl.defined() ? bl.grad() : Tensor()};
        };
        const std::vector<Tensor> got = run(dt), ref = run(kFloat64);
        // float32: a few roundings of O(1) values (the mean's rounding to float32 is scaled
        // by rstd ~ 0.9); 16-bit: the output's rounding.
        const testing::Tol tol = dt == kFloat32 ? testing::Tol{2e-5, 2e-5} : tol_for(dt);
        for (size_t i = 0; i < got.size(); ++i)
          if (ref[i].defined()) EXPECT_TRUE(all_close(got[i], ref[i].to(dt).to(kFloat64), tol)) << "output " << i;
      }
}

TEST(LayerNorm, ConstantRowGivesBiasNotNaN) {
  Tensor x = full({2, 5}, 3.0);
  Tensor b = uniform({5}, kFloat32, -1, 1, 13);
  Tensor y = layer_norm(x, {5}, Tensor(), b);
  EXPECT_TRUE(all_close(y, add(zeros({2, 5}), b), {0, 0}));
}

TEST(LayerNorm, ARowWithInfOrNanIsNan) {
  // As PyTorch: the mean is inf (or NaN), the variance NaN, so every value of the row is
  // NaN, whichever kernel runs the row (widths of whole vectors and not, the fused add).
  for (DType dt : {kFloat32, kBFloat16})
    for (int64_t n : {16, 37, 256})
      for (double bad : {INFINITY, -INFINITY, NAN}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + " width " + std::to_string(n) + " " + std::to_string(bad));
        Tensor x = uniform({3, n}, kFloat32, -1, 1, 15);
        x.narrow(0, 1, 1).narrow(1, n / 2, 1).fill_(bad);
        x = x.to(dt);
        for (const Tensor& y : {layer_norm(x, {n}), std::get<1>(add_layer_norm(x, zeros({n}, dt), {n}))}) {
          const std::vector<double> v = y.to_vector();
          for (int64_t i = 0; i < 3 * n; ++i)
            EXPECT_EQ(std::isnan(v[static_cast<size_t>(i)]), i / n == 1) << "element " << i;
        }
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
  std::vector<double> xhat = testing::ref::layer_norm(x, 128, Tensor(), Tensor(), 1e-5), gv = gy.to_vector();
  std::vector<double> ref(128, 0.0);
  for (size_t i = 0; i < xhat.size(); ++i) ref[i % 128] += gv[i] * xhat[i];
  EXPECT_TRUE(all_close(a, ref, {1e-4, 1e-4}));
}

TEST(LayerNorm, Errors) {
  Tensor x = zeros({2, 3, 4});
  EXPECT_TRUE(throws_with([&] { layer_norm(x, {3}); }, {"[layer_norm]", "(3,)", "(2, 3, 4)"}));
  EXPECT_TRUE(throws_with([&] { layer_norm(x, {2, 3, 4, 1}); }, {"[layer_norm]", "normalized_shape"}));
  EXPECT_TRUE(throws_with([&] { layer_norm(x, {}); }, {"[layer_norm]"}));
  EXPECT_TRUE(throws_with(
      [&] {
        layer_norm(x, {3, 4}, zeros({4}));
      },
      {"[layer_norm]", "weight of shape (4,)", "(3, 4)"}));
  EXPECT_TRUE(throws_with([&] { layer_norm(x, {4}, Tensor(), zeros({3})); }, {"[layer_norm]", "bias of shape (3,)"}));
  EXPECT_TRUE(throws_with([&] { layer_norm(zeros({2, 4}, kInt64), {4}); }, {"[layer_norm]", "int64"}));
}

// add_layer_norm is add, then layer_norm in float32 and the cast to normalized_dtype (as
// autocast's fp32 layer_norm and the next linear's cast), bit for bit: values, and every gradient through both outputs,
// for the residual shapes it reads as rows (same shape, trailing rows, one row) and one it expands, in every floating
// dtype and the autocast mix (float32 stream, 16-bit residual).
TEST(AddLayerNorm, IsAddLayerNormAndCastBitForBit) {
  struct Case {
    DType x, r;
    std::optional<DType> out;
  };
  for (const Case& c :
       {Case{kFloat32, kFloat32, {}}, Case{kFloat32, kBFloat16, kBFloat16}, Case{kFloat32, kFloat16, kFloat16},
        Case{kBFloat16, kBFloat16, {}}, Case{kFloat16, kFloat16, kFloat32}, Case{kFloat64, kFloat64, {}}})
    for (const Shape& rs : {Shape{4, 16, 96}, Shape{16, 96}, Shape{96}, Shape{4, 1, 96}})
      for (bool affine : {true, false}) {
        SCOPED_TRACE(std::string(dtype_name(c.x)) + " + " + std::string(dtype_name(c.r)) + " residual " +
                     shape_str(rs) + (affine ? " affine" : ""));
        const Tensor x0 = uniform({4, 16, 96}, c.x, -2, 2, 1), r0 = uniform(rs, c.r, -1, 1, 2);
        const Tensor w0 = affine ? uniform({96}, kFloat32, 0.5, 1.5, 3) : Tensor();
        const Tensor b0 = affine ? uniform({96}, kFloat32, -1, 1, 4) : Tensor();
        const Tensor gs = uniform({4, 16, 96}, kFloat64, -1, 1, 5), gy = uniform({4, 16, 96}, kFloat64, -1, 1, 6);
        struct Run {
          Tensor sum, y, dx, dr, dw, db;
        };
        auto run = [&](bool fused) {
          Tensor x = x0.detach().requires_grad_(), r = r0.detach().requires_grad_();
          Tensor w = affine ? w0.detach().requires_grad_() : Tensor(),
                 b = affine ? b0.detach().requires_grad_() : Tensor();
          Tensor sum, y;
          if (fused) {
            std::tie(sum, y) = add_layer_norm(x, r, {96}, w, b, 1e-5, c.out);
          } else {
            // autocast's layer_norm: in float32 (float64 sums: float64), then one rounding
            sum = x + r;
            const DType wide = sum.dtype() == kFloat64 ? kFloat64 : kFloat32;
            y = layer_norm(sum.to(wide), {96}, w, b, 1e-5).to(c.out.value_or(sum.dtype()));
          }
          ((sum * gs.to(sum.dtype())).sum() + (y * gy.to(y.dtype())).sum()).backward();
          return Run{
              sum.detach(), y.detach(), x.grad(), r.grad(), affine ? w.grad() : Tensor(), affine ? b.grad() : Tensor()};
        };
        const Run f = run(true), u = run(false);
        EXPECT_TRUE(testing::bits_equal(f.sum, u.sum));
        EXPECT_TRUE(testing::bits_equal(f.y, u.y));
        EXPECT_EQ(f.y.dtype(), c.out.value_or(result_type(x0, r0)));
        EXPECT_TRUE(testing::bits_equal(f.dx, u.dx));
        EXPECT_TRUE(testing::bits_equal(f.dr, u.dr));
        if (affine) {
          EXPECT_TRUE(testing::bits_equal(f.dw, u.dw));
          EXPECT_TRUE(testing::bits_equal(f.db, u.db));
        }
      }
}

// x's gradient when x also feeds another op (a residual stream): layer_norm's backward
// adds what the other consumer already sent into dx's pass, rather than the engine adding
// it after; bit for bit the two gradients taken apart and added, in either order of the
// loss's terms, for a leaf and for an op's output, in float32 and float64 (where the
// kernel adds it) and bfloat16 (where the engine does).
TEST(LayerNorm, BackwardAddsTheGradientAlreadyReceived) {
  for (DType dt : {kFloat32, kFloat64, kBFloat16})
    for (bool leaf : {true, false})
      for (bool ln_first : {true, false}) {
        SCOPED_TRACE(std::string(dtype_name(dt)) + (leaf ? " leaf" : " op output") + (ln_first ? " ln first" : ""));
        const Tensor x0 = uniform({5, 7, 40}, dt, -2, 2, 1), w0 = uniform({40}, dt, 0.5, 1.5, 2);
        const Tensor gy = uniform({5, 7, 40}, dt, -1, 1, 3), go = uniform({5, 7, 40}, dt, -1, 1, 4);
        auto terms = [&](const Tensor& h, const Tensor& w, bool ln, bool other) {
          Tensor loss = zeros({}, TensorOptions(dt));
          if (ln) loss = loss + (layer_norm(h, {40}, w, Tensor(), 1e-5) * gy).sum();
          if (other) loss = loss + (h * 3.0 * go).sum();
          return loss;
        };
        auto grad_of = [&](bool ln, bool other, bool both_orders_first_ln) {
          Tensor x = x0.detach().requires_grad_(), w = w0.detach().requires_grad_();
          const Tensor h = leaf ? x : x * 2.0;
          Tensor loss;
          if (ln && other)
            loss = both_orders_first_ln ? terms(h, w, true, false) + terms(h, w, false, true)
                                        : terms(h, w, false, true) + terms(h, w, true, false);
          else
            loss = terms(h, w, ln, other);
          loss.backward();
          return std::pair{x.grad(), w.grad()};
        };
        const auto [dx, dw] = grad_of(true, true, ln_first);
        const auto [dx_ln, dw_ln] = grad_of(true, false, true);
        const auto [dx_other, unused] = grad_of(false, true, true);
        EXPECT_TRUE(testing::bits_equal(dx, dx_ln + dx_other));
        EXPECT_TRUE(testing::bits_equal(dw, dw_ln));
      }
}

TEST(AddLayerNorm, Errors) {
  const Tensor x = zeros({2, 3, 4});
  EXPECT_TRUE(throws_with(
      [&] {
        add_layer_norm(x, zeros({3, 1, 4}), {4});
      },
      {"[add_layer_norm]", "(3, 1, 4)", "(2, 3, 4)"}));
  EXPECT_TRUE(throws_with(
      [&] {
        add_layer_norm(zeros({1, 3, 4}), zeros({2, 3, 4}), {4});
      },
      {"[add_layer_norm]", "residual of shape (2, 3, 4)", "input of shape (1, 3, 4)"}));
  EXPECT_TRUE(throws_with([&] { add_layer_norm(x, zeros({2, 3, 4}, kInt64), {4}); }, {"[add_layer_norm]", "int64"}));
  EXPECT_TRUE(throws_with([&] { add_layer_norm(x, x, {3}); }, {"[add_layer_norm]", "normalized_shape"}));
  EXPECT_TRUE(throws_with([&] { add_layer_norm(x, x, {4}, Tensor(), Tensor(), 1e-5, kInt32); },
                          {"[add_layer_norm]", "normalized_dtype", "int32"}));
}

// ------------------------------------------------------------------ batch_norm

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

TEST(BatchNorm, Errors) {
  Tensor x = zeros({2, 3, 4});
  EXPECT_TRUE(throws_with([&] { batch_norm(x, Tensor(), Tensor(), zeros({4}), Tensor(), true); },
                          {"[batch_norm]", "weight of shape (4,)", "3 channels", "(2, 3, 4)"}));
  EXPECT_TRUE(throws_with([&] { batch_norm(x, zeros({2}), ones({2}), Tensor(), Tensor(), false); },
                          {"[batch_norm]", "running_mean of shape (2,)"}));
  EXPECT_TRUE(throws_with([&] { batch_norm(x, zeros({3}), Tensor(), Tensor(), Tensor(), false); }, {"[batch_norm]"}));
  EXPECT_TRUE(throws_with(
      [&] {
        batch_norm(zeros({1, 3}), Tensor(), Tensor(), Tensor(), Tensor(), true);
      },
      {"[batch_norm]", "more than 1 value per channel", "(1, 3)"}));
  EXPECT_TRUE(throws_with([&] { batch_norm(zeros({5}), Tensor(), Tensor(), Tensor(), Tensor(), true); },
                          {"[batch_norm]", "(5,)"}));
  // Eval mode with a single sample is fine: it uses the running stats.
  EXPECT_NO_THROW(batch_norm(zeros({1, 3}), zeros({3}), ones({3}), Tensor(), Tensor(), false));
}

}  // namespace
}  // namespace tc
