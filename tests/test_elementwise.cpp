// Tests for the pointwise ops in ops.h beyond the op table (test_op_db.cpp checks forward
// against float64 references, broadcasting, non-contiguous inputs and gradcheck of every
// op in every dtype): hand-computed derivatives, dtype promotion, special values, fast
// erf/tanh accuracy, thread-count independence, layouts, bad input.
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "backend/cpu/loops/activation.h"
#include "backend/cpu/loops/fast_math.h"
#include "backend/cpu/x86/activation_kernels.h"
#include "common/testing.h"

namespace tc {
namespace {

using testing::all_close;
using testing::equal;
using testing::gradcheck;
using testing::tol_for;
using testing::uniform;

const std::vector<DType> kTypes = {kFloat32, kBFloat16, kFloat16, kFloat64};

double ref_sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
double ref_gelu(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double ref_gelu_tanh(double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }

// Gradcheck tolerance: the analytic gradient runs in dt from values rounded to dt.
testing::Tol grad_tol(DType dt) {
  if (dt == kFloat64) return {1e-7, 1e-7};
  return tol_for(dt, 8);
}

TEST(Unary, HandComputedBackward) {
  // Independent of tc::sum: backward with an explicit gradient, float64 derivatives.
  struct D {
    std::string name;
    std::function<Tensor(const Tensor&)> op;
    std::function<double(double)> d;
    double lo, hi;
  };
  const std::vector<D> cases = {
      {"exp", [](const Tensor& x) { return exp(x); }, [](double x) { return std::exp(x); }, -2, 2},
      {"log", [](const Tensor& x) { return log(x); }, [](double x) { return 1 / x; }, 0.1, 4},
      {"log1p", [](const Tensor& x) { return log1p(x); }, [](double x) { return 1 / (1 + x); }, -0.5, 3},
      {"sqrt", [](const Tensor& x) { return sqrt(x); }, [](double x) { return 0.5 / std::sqrt(x); }, 0.1, 4},
      {"rsqrt", [](const Tensor& x) { return rsqrt(x); }, [](double x) { return -0.5 * std::pow(x, -1.5); }, 0.1, 4},
      {"reciprocal", [](const Tensor& x) { return reciprocal(x); }, [](double x) { return -1 / (x * x); }, 0.25, 4},
      {"tanh", [](const Tensor& x) { return tanh(x); }, [](double x) { return 1 - std::tanh(x) * std::tanh(x); }, -3,
       3},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); },
       [](double x) { return ref_sigmoid(x) * (1 - ref_sigmoid(x)); }, -6, 6},
      {"relu", [](const Tensor& x) { return relu(x); }, [](double x) { return x > 0 ? 1.0 : 0.0; }, -2, 2},
      {"abs", [](const Tensor& x) { return abs(x); }, [](double x) { return x > 0 ? 1.0 : -1.0; }, -2, 2},
      {"neg", [](const Tensor& x) { return neg(x); }, [](double) { return -1.0; }, -2, 2},
      {"gelu", [](const Tensor& x) { return gelu(x); },
       [](double x) {
         return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-x * x / 2) / std::sqrt(2 * M_PI);
       },
       -3, 3},
      {"gelu_tanh", [](const Tensor& x) { return gelu(x, "tanh"); },
       [](double x) {
         const double k = std::sqrt(2 / M_PI), u = k * (x + 0.044715 * x * x * x), t = std::tanh(u);
         return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
       },
       -3, 3},
      {"silu", [](const Tensor& x) { return silu(x); },
       [](double x) {
         const double s = ref_sigmoid(x);
         return s * (1 + x * (1 - s));
       },
       -4, 4},
      {"pow-1.5", [](const Tensor& x) { return pow(x, -1.5); }, [](double x) { return -1.5 * std::pow(x, -2.5); }, 0.5,
       3},
      {"pow0", [](const Tensor& x) { return pow(x, 0.0); }, [](double) { return 0.0; }, -2, 2},
      {"clamp", [](const Tensor& x) { return clamp(x, -0.5, 0.75); },
       [](double x) { return (x >= -0.5 && x <= 0.75) ? 1.0 : 0.0; }, -2, 2},
      {"s/x", [](const Tensor& x) { return 3.0 / x; }, [](double x) { return -3 / (x * x); }, 0.5, 4},
  };
  for (const D& c : cases) {
    for (DType dt : {kFloat32, kFloat64, kBFloat16}) {
      Tensor x = uniform({50}, dt, c.lo, c.hi, 31).requires_grad_();
      Tensor g = uniform({50}, dt, 0.5, 1.5, 32);
      c.op(x).backward(g);
      ASSERT_TRUE(x.grad().defined()) << c.name;
      EXPECT_EQ(x.grad().dtype(), dt) << c.name;
      std::vector<double> xv = x.to_vector(), gv = g.to_vector(), expected(50);
      for (int i = 0; i < 50; ++i) expected[i] = gv[i] * c.d(xv[i]);
      EXPECT_TRUE(all_close(x.grad(), expected, grad_tol(dt))) << c.name << " " << dtype_name(dt);
    }
  }
}

// ------------------------------------------------------------------ binary ops

TEST(Binary, LargeNonContiguousMultiThreaded) {
  // Enough elements to take the parallel path, with operands of three layouts and dtypes.
  const int orig = get_num_threads();
  Tensor a = uniform({300, 400}, kBFloat16, -2, 2, 51).t();  // (400, 300) transposed
  Tensor b = uniform({400, 1}, kFloat32, -2, 2, 52);         // broadcast column
  Tensor c = uniform({400, 600}, kFloat32, -2, 2, 53).slice(1, 0, 600, 2);
  auto run = [&] { return add(mul(a, b), gelu(c)); };
  set_num_threads(1);
  Tensor r1 = run();
  set_num_threads(2);
  Tensor r2 = run();
  set_num_threads(orig);
  EXPECT_EQ(r1.dtype(), kFloat32);
  EXPECT_TRUE(equal(r1, r2));
  std::vector<double> av = a.contiguous().to_vector(), bv = b.to_vector(), cv = c.contiguous().to_vector(),
                      ref(av.size());
  for (size_t i = 0; i < ref.size(); ++i) ref[i] = av[i] * bv[i / 300] + ref_gelu(cv[i]);
  EXPECT_TRUE(all_close(r1, ref, tol_for(kFloat32, 8)));
  // The same with a 16-bit output and a unary op.
  set_num_threads(1);
  Tensor s1 = sigmoid(a);
  set_num_threads(2);
  Tensor s2 = sigmoid(a);
  set_num_threads(orig);
  EXPECT_TRUE(equal(s1, s2));
}

TEST(Binary, HandComputedBackwardWithBroadcast) {
  // a (3, 1), b (1, 4): y = a * b + a / b; dy/da = sum_j g (b_j + 1/b_j), dy/db = sum_i g (a_i - a_i/b_j^2)
  Tensor a = tensor({1.0, -2.0, 0.5}, kFloat64).reshape({3, 1}).requires_grad_();
  Tensor b = tensor({1.0, 2.0, -4.0, 0.5}, kFloat64).reshape({1, 4}).requires_grad_();
  Tensor g = arange(1, 13, 1, kFloat64).reshape({3, 4});
  add(mul(a, b), div(a, b)).backward(g);
  std::vector<double> av = {1, -2, 0.5}, bv = {1, 2, -4, 0.5}, ga(3, 0), gb(4, 0);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) {
      const double gij = 1 + i * 4 + j;
      ga[i] += gij * (bv[j] + 1 / bv[j]);
      gb[j] += gij * (av[i] - av[i] / (bv[j] * bv[j]));
    }
  EXPECT_TRUE(all_close(a.grad(), ga, {1e-12, 1e-12}));
  EXPECT_TRUE(all_close(b.grad(), gb, {1e-12, 1e-12}));
  // maximum/minimum: the gradient goes to the chosen input, split evenly on ties.
  Tensor x = tensor({1.0, 5.0, 3.0}).requires_grad_();
  Tensor y = tensor({2.0, 4.0, 3.0}).requires_grad_();
  maximum(x, y).backward(tensor({10.0, 20.0, 30.0}));
  EXPECT_TRUE(all_close(x.grad(), {0, 20, 15}, {0, 0}));
  EXPECT_TRUE(all_close(y.grad(), {10, 0, 15}, {0, 0}));
  // pow(a, e) with respect to both.
  Tensor pa = tensor({2.0, 3.0}, kFloat64).requires_grad_();
  Tensor pe = tensor({3.0, 0.5}, kFloat64).requires_grad_();
  pow(pa, pe).backward(ones({2}, kFloat64));
  EXPECT_TRUE(all_close(pa.grad(), {12, 0.5 / std::sqrt(3.0)}, {1e-12, 1e-12}));
  EXPECT_TRUE(all_close(pe.grad(), {8 * std::log(2.0), std::sqrt(3.0) * std::log(3.0)}, {1e-12, 1e-12}));
}

// ------------------------------------------------------------------ where, clamp

TEST(Where, ForwardAndBackward) {
  Tensor c = tensor(std::vector<bool>{true, false, true, false}).reshape({2, 2});
  Tensor a = tensor({1.0, 2.0, 3.0, 4.0}).reshape({2, 2});
  Tensor b = tensor({-1.0, -2.0}, kBFloat16);  // broadcast, promoted to float32
  Tensor y = where(c, a, b);
  EXPECT_EQ(y.dtype(), kFloat32);
  EXPECT_TRUE(all_close(y, {1, -2, 3, -2}, {0, 0}));
  EXPECT_TRUE(all_close(where(gt(a, 2.5), a, zeros({})), {0, 0, 3, 4}, {0, 0}));
  TC_EXPECT_ERROR(where(a, a, b), "[where] condition must be a bool tensor, got float32");
  TC_EXPECT_ERROR(where(c, a, ones({3})), "[where] shapes");
  Tensor ar = a.detach().requires_grad_(), br = b.detach().requires_grad_();
  where(c, ar, br).backward(tensor({1.0, 2.0, 3.0, 4.0}).reshape({2, 2}));
  EXPECT_TRUE(all_close(ar.grad(), {1, 0, 3, 0}, {0, 0}));
  EXPECT_EQ(br.grad().dtype(), kBFloat16);
  EXPECT_TRUE(all_close(br.grad(), {0, 6}, {0, 0}));
  for (DType dt : kTypes) {
    Tensor x = uniform({3, 4}, dt, -2, 2, 71).requires_grad_(), z = uniform({4}, dt, -2, 2, 72).requires_grad_();
    Tensor cond = gt(uniform({3, 4}, kFloat32, -1, 1, 73), 0.0);
    EXPECT_TRUE(
        gradcheck([&](const std::vector<Tensor>& in) { return where(cond, in[0], in[1]); }, {x, z}, grad_tol(dt)))
        << dtype_name(dt);
  }
}

TEST(Clamp, Semantics) {
  Tensor x = tensor({-3.0, -1.0, 0.0, 1.0, 3.0});
  EXPECT_TRUE(all_close(clamp(x, -1.5, 2.0), {-1.5, -1, 0, 1, 2}, {0, 0}));
  // min > max: every element becomes max (torch.clamp).
  EXPECT_TRUE(all_close(clamp(x, 2.0, 1.0), {1, 1, 1, 1, 1}, {0, 0}));
  TC_EXPECT_ERROR(clamp(x, std::nullopt, std::nullopt), "[clamp] at least one of min and max");
  // Integer input with fractional bounds gives float.
  Tensor i = tensor({-3.0, 0.0, 3.0}, kInt64);
  EXPECT_EQ(clamp(i, -1.0, 1.0).dtype(), kInt64);
  EXPECT_EQ(clamp(i, -1.5, 1.5).dtype(), kFloat32);
  EXPECT_TRUE(all_close(clamp(i, -1.5, 1.5), {-1.5, 0, 1.5}, {0, 0}));
}

// ------------------------------------------------------------------ comparisons

TEST(Compare, TensorAndScalar) {
  Tensor a = tensor({1.0, 2.0, 3.0, NAN});
  Tensor b = tensor({2.0, 2.0, 2.0, 2.0});
  EXPECT_EQ(eq(a, b).dtype(), kBool);
  EXPECT_TRUE(all_close(eq(a, b), {0, 1, 0, 0}, {0, 0}));
  EXPECT_TRUE(all_close(ne(a, b), {1, 0, 1, 1}, {0, 0}));
  EXPECT_TRUE(all_close(lt(a, b), {1, 0, 0, 0}, {0, 0}));
  EXPECT_TRUE(all_close(le(a, b), {1, 1, 0, 0}, {0, 0}));
  EXPECT_TRUE(all_close(gt(a, b), {0, 0, 1, 0}, {0, 0}));
  EXPECT_TRUE(all_close(ge(a, b), {0, 1, 1, 0}, {0, 0}));
  EXPECT_TRUE(equal(a == b, eq(a, b)));
  EXPECT_TRUE(equal(a != b, ne(a, b)));
  EXPECT_TRUE(equal(a < b, lt(a, b)));
  EXPECT_TRUE(equal(a <= b, le(a, b)));
  EXPECT_TRUE(equal(a > b, gt(a, b)));
  EXPECT_TRUE(equal(a >= b, ge(a, b)));
  EXPECT_TRUE(all_close(eq(a, 2.0), {0, 1, 0, 0}, {0, 0}));
  EXPECT_TRUE(all_close(ne(a, 2.0), {1, 0, 1, 1}, {0, 0}));
  EXPECT_TRUE(all_close(lt(a, 2.0), {1, 0, 0, 0}, {0, 0}));
  EXPECT_TRUE(all_close(le(a, 2.0), {1, 1, 0, 0}, {0, 0}));
  EXPECT_TRUE(all_close(a > 2.0, {0, 0, 1, 0}, {0, 0}));
  EXPECT_TRUE(all_close(a >= 2.0, {0, 1, 1, 0}, {0, 0}));
  EXPECT_TRUE(all_close(a == 2.0, {0, 1, 0, 0}, {0, 0}));
  EXPECT_TRUE(all_close(a != 2.0, {1, 0, 1, 1}, {0, 0}));
  EXPECT_TRUE(all_close(a < 2.0, {1, 0, 0, 0}, {0, 0}));
  EXPECT_TRUE(all_close(a <= 2.0, {1, 1, 0, 0}, {0, 0}));
  // Broadcasting and mixed dtypes.
  Tensor m = gt(arange(6, kInt64).reshape({2, 3}), tensor({0.5, 3.5, 4.5}));
  EXPECT_TRUE(all_close(m, {0, 0, 0, 1, 1, 1}, {0, 0}));
  // Integer tensors against fractional and large scalars compare exactly.
  EXPECT_TRUE(all_close(lt(tensor({2.0, 3.0}, kInt32), 2.5), {1, 0}, {0, 0}));
  EXPECT_TRUE(all_close(eq(tensor(std::vector<int64_t>{16777217}), 16777217.0), {1}, {0, 0}));
  // A scalar takes a floating tensor's dtype: bf16(0.1) == 0.1.
  EXPECT_TRUE(all_close(eq(full({1}, 0.1, kBFloat16), 0.1), {1}, {0, 0}));
  EXPECT_TRUE(all_close(eq(full({1}, 0.1, kFloat32), 0.1), {1}, {0, 0}));
  EXPECT_TRUE(all_close(eq(full({1}, 0.1, kFloat64), 0.1), {1}, {0, 0}));
  // No gradient flows through comparisons.
  Tensor r = tensor({1.0}).requires_grad_();
  EXPECT_FALSE(gt(r, 0.0).requires_grad());
  EXPECT_FALSE(eq(r, r).requires_grad());
  TC_EXPECT_ERROR(lt(ones({2}), ones({3})), "[lt] shapes (2,) and (3,) cannot be broadcast together");
}

TEST(Compare, IsnanIsfinite) {
  Tensor x = tensor({1.0, NAN, INFINITY, -INFINITY, -0.0});
  for (DType dt : kTypes) {
    Tensor xd = x.to(dt);
    EXPECT_EQ(isnan(xd).dtype(), kBool);
    EXPECT_TRUE(all_close(isnan(xd), {0, 1, 0, 0, 0}, {0, 0})) << dtype_name(dt);
    EXPECT_TRUE(all_close(isfinite(xd), {1, 0, 0, 0, 1}, {0, 0})) << dtype_name(dt);
  }
  EXPECT_TRUE(all_close(isfinite(arange(3, kInt64)), {1, 1, 1}, {0, 0}));
  EXPECT_TRUE(all_close(isnan(arange(3, kInt32)), {0, 0, 0}, {0, 0}));
}

// ------------------------------------------------------------------ promotion

TEST(Promotion, ResultDtypes) {
  Tensor bf = ones({2}, kBFloat16), hf = ones({2}, kFloat16), f = ones({2}), d = ones({2}, kFloat64);
  Tensor i64 = ones({2}, kInt64), i32 = ones({2}, kInt32), u8 = ones({2}, kUInt8), bo = ones({2}, kBool);
  EXPECT_EQ(add(bf, f).dtype(), kFloat32);
  EXPECT_EQ(add(hf, bf).dtype(), kFloat32);
  EXPECT_EQ(mul(hf, d).dtype(), kFloat64);
  EXPECT_EQ(add(i64, bf).dtype(), kBFloat16);
  EXPECT_EQ(add(u8, i32).dtype(), kInt32);
  EXPECT_EQ(add(bo, u8).dtype(), kUInt8);
  EXPECT_EQ(add(bo, bo).dtype(), kBool);
  EXPECT_EQ(maximum(i32, hf).dtype(), kFloat16);
  EXPECT_EQ(where(gt(f, 0.0), i64, bf).dtype(), kBFloat16);
  // Division is true division.
  EXPECT_EQ(div(i64, i64).dtype(), kFloat32);
  EXPECT_TRUE(all_close(div(tensor({7.0}, kInt64), tensor({2.0}, kInt64)), {3.5}, {0, 0}));
  EXPECT_TRUE(all_close(div(tensor({7.0}, kInt64), 2.0), {3.5}, {0, 0}));
  // Scalars: a floating scalar keeps a floating tensor's dtype; with integers it is float.
  EXPECT_EQ(add(bf, 2.5).dtype(), kBFloat16);
  EXPECT_EQ(mul(hf, 1e-3).dtype(), kFloat16);
  EXPECT_EQ(add(i64, 2.0).dtype(), kInt64);
  EXPECT_EQ(add(i32, 2.5).dtype(), kFloat32);
  EXPECT_TRUE(all_close(add(tensor({1.0, 2.0}, kInt64), 0.5), {1.5, 2.5}, {0, 0}));
  EXPECT_EQ(mul(u8, 3.0).dtype(), kUInt8);
  EXPECT_EQ(add(bo, 1.0).dtype(), kInt64);  // True + 1 == 2
  EXPECT_TRUE(all_close(add(tensor(std::vector<bool>{true, false}), 1.0), {2, 1}, {0, 0}));
  EXPECT_EQ((2.0 - i32).dtype(), kInt32);
  EXPECT_EQ(pow(i64, 2.0).dtype(), kInt64);
  EXPECT_EQ(pow(i64, 0.5).dtype(), kFloat32);
  EXPECT_EQ(exp(i64).dtype(), kFloat32);
  EXPECT_EQ(sqrt(u8).dtype(), kFloat32);
  EXPECT_EQ(abs(i32).dtype(), kInt32);
  EXPECT_EQ(relu(i64).dtype(), kInt64);
  EXPECT_EQ(neg(i64).dtype(), kInt64);
  // Integer arithmetic is exact, scalars included.
  Tensor big = tensor(std::vector<int64_t>{1, 2});
  EXPECT_EQ(add(big, 16777217.0).data_ptr<int64_t>()[0], 16777218);  // 2^24 + 1 is not a float
  EXPECT_EQ(mul(tensor(std::vector<int32_t>{100000}), 30000.0).dtype(), kInt32);
  EXPECT_TRUE(all_close(add(i32, i32), {2, 2}, {0, 0}));
  EXPECT_TRUE(all_close(sub(tensor({5.0}, kUInt8), tensor({2.0}, kUInt8)), {3}, {0, 0}));
  EXPECT_TRUE(all_close(abs(tensor({-3.0, 4.0}, kInt64)), {3, 4}, {0, 0}));
  TC_EXPECT_ERROR(sub(bo, bo), "[sub]");
  TC_EXPECT_ERROR(neg(bo), "[neg]");
  // Mixed-precision values: bf16 + f32 computes in f32 without rounding to bf16.
  Tensor x = tensor({1.0}, kBFloat16), y = tensor({0x1p-12});
  EXPECT_EQ(add(x, y).item<double>(), 1.0 + 0x1p-12);
}

// ------------------------------------------------------------------ special values

TEST(Special, NanInfSignedZero) {
  for (DType dt : kTypes) {
    Tensor s = tensor({NAN, INFINITY, -INFINITY, -0.0, 1.0}, dt);
    EXPECT_TRUE(all_close(relu(s), {NAN, INFINITY, 0, 0, 1}, {0, 0})) << dtype_name(dt);
    EXPECT_TRUE(all_close(clamp(s, -1.0, 2.0), {NAN, 2, -1, 0, 1}, {0, 0})) << dtype_name(dt);
    Tensor z = full({5}, 0.5, dt);
    EXPECT_TRUE(all_close(maximum(s, z), {NAN, INFINITY, 0.5, 0.5, 1}, {0, 0})) << dtype_name(dt);
    EXPECT_TRUE(all_close(maximum(z, s), {NAN, INFINITY, 0.5, 0.5, 1}, {0, 0})) << dtype_name(dt);
    EXPECT_TRUE(all_close(minimum(z, s), {NAN, 0.5, -INFINITY, -0.0, 0.5}, {0, 0})) << dtype_name(dt);
    EXPECT_TRUE(all_close(exp(s), {NAN, INFINITY, 0, 1, std::exp(1.0)}, tol_for(dt))) << dtype_name(dt);
    EXPECT_TRUE(all_close(abs(s), {NAN, INFINITY, INFINITY, 0, 1}, {0, 0})) << dtype_name(dt);
    EXPECT_TRUE(std::signbit(neg(full({1}, 0.0, dt)).item<double>())) << dtype_name(dt);
    EXPECT_FALSE(std::signbit(abs(full({1}, -0.0, dt)).item<double>())) << dtype_name(dt);
    EXPECT_TRUE(all_close(log(tensor({0.0, -1.0, 1.0}, dt)), {-INFINITY, NAN, 0}, {0, 0})) << dtype_name(dt);
    EXPECT_TRUE(all_close(sqrt(tensor({-1.0, 0.0, INFINITY}, dt)), {NAN, 0, INFINITY}, {0, 0})) << dtype_name(dt);
    EXPECT_TRUE(all_close(reciprocal(tensor({0.0, -0.0}, dt)), {INFINITY, -INFINITY}, {0, 0})) << dtype_name(dt);
    EXPECT_TRUE(all_close(rsqrt(tensor({0.0}, dt)), {INFINITY}, {0, 0})) << dtype_name(dt);
    EXPECT_TRUE(all_close(div(tensor({1.0, -1.0, 0.0}, dt), 0.0), {INFINITY, -INFINITY, NAN}, {0, 0}));
    EXPECT_TRUE(all_close(log1p(tensor({-1.0}, dt)), {-INFINITY}, {0, 0})) << dtype_name(dt);
    Tensor sg = sigmoid(tensor({-100.0, 100.0, -1000.0, 1000.0}, dt));
    EXPECT_TRUE(all_close(isfinite(sg), {1, 1, 1, 1}, {0, 0})) << dtype_name(dt);
    EXPECT_TRUE(all_close(sg, {std::exp(-100.0), 1, 0, 1}, {1e-30, 0})) << dtype_name(dt);
    EXPECT_TRUE(all_close(tanh(tensor({-100.0, 100.0}, dt)), {-1, 1}, {0, 0})) << dtype_name(dt);
    EXPECT_TRUE(all_close(silu(tensor({-100.0, 100.0}, dt)), {-100 * std::exp(-100.0), 100}, {1e-30, 0}));
    EXPECT_TRUE(all_close(gelu(tensor({-100.0, 100.0}, dt)), {0, 100}, {0, 0})) << dtype_name(dt);
    EXPECT_TRUE(all_close(gelu(tensor({-100.0, 100.0}, dt), "tanh"), {0, 100}, {0, 0})) << dtype_name(dt);
    EXPECT_TRUE(all_close(add(s, 1.0), {NAN, INFINITY, -INFINITY, 1, 2}, {0, 0})) << dtype_name(dt);
    EXPECT_TRUE(all_close(mul(s, 0.0), {NAN, NAN, NAN, 0, 0}, {0, 0})) << dtype_name(dt);
  }
  // Overflow to inf in fp16, not in bf16.
  EXPECT_TRUE(all_close(mul(full({1}, 300.0, kFloat16), full({1}, 300.0, kFloat16)), {INFINITY}, {0, 0}));
  EXPECT_TRUE(all_close(mul(full({1}, 300.0, kBFloat16), full({1}, 300.0, kBFloat16)), {90112}, {0, 0}));
  // Gradients of sigmoid/tanh at large |x| are finite zeros, not NaN.
  Tensor x = tensor({-100.0, 100.0}).requires_grad_();
  sigmoid(x).backward(ones({2}));
  EXPECT_TRUE(all_close(x.grad(), {0, 0}, {1e-30, 0}));
}

// ------------------------------------------------------------------ fast tanh, normal cdf and GELU

// Inputs for the fast_tanh and fast_normal_cdf_pdf sweeps: every 1/4096 on [-10, 10], a stride through
// all float bit patterns (both signs, denormals to FLT_MAX), and the edge values.
std::vector<float> math_sweep() {  // ~1.1M values
  std::vector<float> v;
  for (int i = -40960; i <= 40960; ++i) v.push_back(static_cast<float>(i) / 4096.0f);
  for (uint64_t b = 0; b < 0x100000000ull; b += 4093) v.push_back(std::bit_cast<float>(static_cast<uint32_t>(b)));
  for (float f : {0.0f, -0.0f, FLT_MIN, -FLT_MIN, FLT_TRUE_MIN, -FLT_TRUE_MIN, 1e-40f, -1e-40f, FLT_MAX, -FLT_MAX, 0.9f,
                  -0.9f, std::nextafter(0.9f, 0.0f), 4.0f, std::nextafter(4.0f, 0.0f), 9.5f, 1e-20f})
    v.push_back(f);
  return v;
}

TEST(FastMath, NormalCdfPdfErrors) {
  // Against double erfc and exp: the density and the lower tail of the cdf relative to
  // themselves (in ulps; error growing as z^2 = v^2 / 2, from rounding z^2 before the exp),
  // the upper half of the cdf absolutely. The measured worst cases are the documented ones.
  double worst_pdf = 0, worst_tail = 0, worst_upper = 0;
  for (float v : math_sweep()) {
    if (!std::isfinite(v)) continue;
    float cdf = 0, pdf = 0;
    cpu::fast_normal_cdf_pdf(v, cdf, pdf);
    const double x = v, c = 0.5 * std::erfc(-x / std::sqrt(2.0)), p = std::exp(-x * x / 2) / std::sqrt(2 * M_PI);
    auto ulps = [](double got, double ref) {
      return std::fabs(got - ref) / std::ldexp(1.0, std::max(std::ilogb(ref), -126) - 23);
    };
    const double allow = 8 + 0.5 * x * x;  // ulps
    if (p >= FLT_MIN) {
      worst_pdf = std::max(worst_pdf, ulps(pdf, p) / allow);
    } else {
      EXPECT_LE(pdf, 2 * FLT_MIN) << v;
    }
    // The last binades above FLT_MIN come from denormal intermediates: absolutely there.
    if (x < 0 && c >= 0x1p-110) worst_tail = std::max(worst_tail, ulps(cdf, c) / allow);
    if (x < 0 && c < 0x1p-110) EXPECT_LE(std::fabs(cdf - c), 0x1p-120) << v;
    if (x >= 0) worst_upper = std::max(worst_upper, std::fabs(cdf - c));
    EXPECT_TRUE(cdf >= 0 && cdf <= 1 && pdf >= 0) << v;
  }
  EXPECT_LE(worst_pdf, 1.0);   // within 8 + v^2/2 ulps (measured: 0.81 of it, at v = -8.13)
  EXPECT_LE(worst_tail, 1.0);  // within 8 + v^2/2 ulps (measured: 0.78 of it, at v = -8.04)
  EXPECT_LE(worst_upper, 2e-7);
  float cdf = 0, pdf = 0;
  cpu::fast_normal_cdf_pdf(NAN, cdf, pdf);
  EXPECT_TRUE(std::isnan(cdf) && std::isnan(pdf));
  cpu::fast_normal_cdf_pdf(INFINITY, cdf, pdf);
  EXPECT_TRUE(cdf == 1.0f && pdf == 0.0f);
  cpu::fast_normal_cdf_pdf(-INFINITY, cdf, pdf);
  EXPECT_TRUE(cdf == 0.0f && pdf == 0.0f);
  cpu::fast_normal_cdf_pdf(0.0f, cdf, pdf);
  EXPECT_EQ(cdf, 0.5f);
  EXPECT_NEAR(pdf, 0.3989422804014327, 3e-8);
}

TEST(FastMath, TanhMaxUlpError) {
  double worst = 0, at = 0;
  for (float x : math_sweep()) {
    if (std::isnan(x)) continue;
    const float y = cpu::fast_tanh(x);
    const double ref = std::tanh(static_cast<double>(x));
    const double ulp = std::ldexp(1.0, std::max(std::ilogb(ref), -126) - 23);
    const double err = ref == 0 ? std::fabs(y) : std::fabs(y - ref) / ulp;
    if (err > worst) worst = err, at = x;
    EXPECT_EQ(std::bit_cast<uint32_t>(cpu::fast_tanh(-x)), std::bit_cast<uint32_t>(y) ^ 0x80000000u) << x;
  }
  EXPECT_LE(worst, 1.5) << "ulps at x = " << at;  // documented: 1.0 ulp over every float
  EXPECT_TRUE(std::isnan(cpu::fast_tanh(NAN)));
  EXPECT_EQ(cpu::fast_tanh(INFINITY), 1.0f);
  EXPECT_EQ(cpu::fast_tanh(-INFINITY), -1.0f);
  EXPECT_EQ(cpu::fast_tanh(FLT_TRUE_MIN), FLT_TRUE_MIN);
  EXPECT_TRUE(std::signbit(cpu::fast_tanh(-0.0f)) && cpu::fast_tanh(-0.0f) == 0.0f);
  EXPECT_EQ(cpu::fast_tanh(0.3), std::tanh(0.3));
}

double ref_gelu_grad(double x) {
  return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-x * x / 2) / std::sqrt(2 * M_PI);
}
double ref_gelu_tanh_grad(double x) {
  const double k = std::sqrt(2 / M_PI), u = k * (x + 0.044715 * x * x * x), t = std::tanh(u);
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
}

TEST(Gelu, Float32MatchesFloat64ReferenceTightly) {
  // Every 1/1024 on [-10, 10] (long enough for the threaded, vectorized path) plus edges.
  std::vector<float> xs;
  for (int i = -10240; i <= 10240; ++i) xs.push_back(static_cast<float>(i) / 1024.0f);
  for (float f : {1e-30f, -1e-30f, FLT_TRUE_MIN, 0.9f * std::sqrt(2.0f), 4.0f * std::sqrt(2.0f)}) xs.push_back(f);
  const int64_t n = static_cast<int64_t>(xs.size());
  for (const char* approx : {"none", "tanh"}) {
    const bool th = std::string(approx) == "tanh";
    Tensor x = tensor(xs).requires_grad_();
    Tensor y = gelu(x, approx);
    ASSERT_EQ(y.dtype(), kFloat32);
    Tensor g = tensor(std::vector<float>(xs.size(), 1.0f));
    y.backward(g);
    const std::vector<double> yv = y.to_vector(), dv = x.grad().to_vector();
    double fwd = 0, bwd = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double v = xs[i];
      const double ry = th ? ref_gelu_tanh(v) : ref_gelu(v);
      const double rd = th ? ref_gelu_tanh_grad(v) : ref_gelu_grad(v);
      fwd = std::max(fwd, std::fabs(yv[i] - ry) / std::max(1.0, std::fabs(ry)));
      bwd = std::max(bwd, std::fabs(dv[i] - rd) / std::max(1.0, std::fabs(rd)));
    }
    // Abs error below 1, relative above: a few float ulps, far tighter than tol_for.
    EXPECT_LE(fwd, 4e-7) << approx;
    EXPECT_LE(bwd, 6e-7) << approx;
    // Special values: NaN propagates, +inf passes through, large negative gives 0.
    Tensor s = gelu(tensor({NAN, INFINITY, -100.0, 100.0, -0.0}, kFloat32), approx);
    EXPECT_TRUE(all_close(s, {NAN, INFINITY, 0, 100, 0}, {0, 0})) << approx;
  }
}

TEST(Gelu, Float64KeepsStdErf) {
  std::vector<double> xs;
  for (int i = -400; i <= 400; ++i) xs.push_back(i / 37.0);
  Tensor x = tensor(xs).requires_grad_();
  Tensor y = gelu(x);
  y.backward(ones_like(y));
  const std::vector<double> yv = y.to_vector(), dv = x.grad().to_vector();
  for (size_t i = 0; i < xs.size(); ++i) {
    const double v = xs[i];
    EXPECT_DOUBLE_EQ(yv[i], 0.5 * v * (1.0 + std::erf(v * M_SQRT1_2))) << v;
    const double cdf = 0.5 * (1.0 + std::erf(v * M_SQRT1_2));
    const double pdf = std::exp(-0.5 * v * v) * 0.3989422804014327;
    EXPECT_DOUBLE_EQ(dv[i], cdf + v * pdf) << v;
  }
}

TEST(Gelu, BFloat16IsRoundedFloat32) {
  Tensor xf = uniform({64, 129}, kFloat32, -6, 6, 41);
  Tensor xb = xf.to(kBFloat16);
  Tensor gb = uniform({64, 129}, kFloat32, -2, 2, 42).to(kBFloat16);
  for (const char* approx : {"none", "tanh"}) {
    Tensor x16 = xb.detach().requires_grad_();
    Tensor x32 = xb.to(kFloat32).detach().requires_grad_();
    Tensor y16 = gelu(x16, approx), y32 = gelu(x32, approx);
    EXPECT_EQ(y16.dtype(), kBFloat16);
    y16.backward(gb);
    y32.backward(gb.to(kFloat32));
    auto one_ulp = [](const Tensor& a, const Tensor& b32) {  // a (bf16) within 1 bf16 ulp of b32 rounded
      const std::vector<double> av = a.to_vector(), bv = b32.to(kBFloat16).to_vector();
      for (size_t i = 0; i < av.size(); ++i) {
        const double ulp = bv[i] == 0 ? 0x1p-133 : std::ldexp(1.0, std::ilogb(bv[i]) - 7);
        if (std::fabs(av[i] - bv[i]) > ulp) return false;
      }
      return true;
    };
    EXPECT_TRUE(one_ulp(y16, y32)) << approx;
    EXPECT_EQ(x16.grad().dtype(), kBFloat16);
    EXPECT_TRUE(one_ulp(x16.grad(), x32.grad())) << approx;
  }
}

// The bfloat16 backward of gelu (a derivative table per bit pattern where the CPU has
// AVX-512) is the float32 loop's dx rounded once, bit for bit: every x pattern (and 37
// more: a partial vector), each against a few gradients (zeros, NaN and huge ones among
// them), both approximations, through the op and the kernel's gather and scalar forms.
TEST(Gelu, BFloat16BackwardIsTheFloat32LoopRoundedForEveryPattern) {
  const int64_t n = 65536 + 37;
  Tensor x = empty({n}, TensorOptions(kBFloat16));
  auto* xb = static_cast<uint16_t*>(x.raw_data());
  for (int64_t i = 0; i < n; ++i) xb[i] = static_cast<uint16_t>(i);
  const Tensor x32 = x.to(kFloat32);
  for (uint64_t seed : {1, 2, 3}) {
    Tensor g = uniform({n}, kFloat32, -3, 3, seed).to(kBFloat16);
    auto* gb = static_cast<uint16_t*>(g.raw_data());
    gb[7] = 0x0000;     // +0
    gb[99] = 0x7fc0;    // NaN
    gb[1000] = 0x7f7f;  // the largest finite bfloat16
    for (bool tanh_form : {false, true}) {
      SCOPED_TRACE(std::string(tanh_form ? "tanh" : "erf") + " seed " + std::to_string(seed));
      Tensor want32 = empty({n});
      cpu::gelu_backward(want32, g.to(kFloat32), x32, tanh_form);
      const Tensor want = want32.to(kBFloat16);
      Tensor got = empty({n}, TensorOptions(kBFloat16));
      cpu::gelu_backward(got, g, x, tanh_form);
      EXPECT_TRUE(testing::bits_equal(got, want));
      const CpuFeatures& f = cpu_features();
      if (!tanh_form || !(f.avx512f && f.avx512bw && f.avx512vl)) continue;
      // Both forms of the kernel, from the float32 loop's derivatives (its dx for g = 1).
      const Tensor d32 = empty({65536});
      cpu::gelu_backward(d32, ones({65536}), x32.narrow(0, 0, 65536), true);
      for (bool gather : {true, false}) {
        Tensor out = empty({n}, TensorOptions(kBFloat16));
        cpu::detail::lookup_grad_times_bf16_avx512(d32.data_ptr<float>(), xb, gb,
                                                   static_cast<uint16_t*>(out.raw_data()), n, gather);
        EXPECT_TRUE(testing::bits_equal(out, want)) << (gather ? "gathers" : "scalar loads");
      }
    }
  }
}

namespace {

// act(x) and act'(x) in float64: the reference for the 16-bit tables.
void activation_reference(cpu::Activation act, double x, double& y, double& d) {
  if (act == cpu::Activation::kRelu) {
    y = x > 0 ? x : 0;
    d = x > 0 ? 1 : 0;
  } else if (act == cpu::Activation::kGelu) {
    const double cdf = 0.5 * std::erfc(-x * M_SQRT1_2);
    y = x * cdf;
    d = cdf + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
  } else {
    const double k = std::sqrt(2 / M_PI), t = std::tanh(k * (x + 0.044715 * x * x * x));
    y = 0.5 * x * (1 + t);
    d = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
  }
}

// The spacing of dtype dt's values at |v| (bfloat16: 8 significant bits, float16: 11).
double unit_at(double v, DType dt) {
  const int bits = dt == kBFloat16 ? 8 : 11, min_exp = dt == kBFloat16 ? -126 : -14;
  return std::ldexp(1.0, std::max(v == 0 ? min_exp : std::ilogb(v), min_exp) - (bits - 1));
}

}  // namespace

TEST(Activation, SixteenBitTablesAreTheFloat32LoopForEveryBitPattern) {
  // bfloat16 and float16 activations are looked up, one entry per bit pattern: for every
  // pattern (and 37 more, past the loops' last full vector) the training forward's y and
  // act'(h), the forward alone and the gelu op give the float32 loop's results rounded
  // once, bit for bit (NaN stays NaN); and each finite one is within a unit of the dtype of
  // the float64 value (plus the float32 loop's own error: the tanh form's 1 + tanh loses
  // its digits for large negative h, as PyTorch's float32 kernel does).
  const int64_t n = 65536 + 37;
  for (DType dt : {kBFloat16, kFloat16}) {
    for (cpu::Activation act : {cpu::Activation::kRelu, cpu::Activation::kGelu, cpu::Activation::kGeluTanh}) {
      SCOPED_TRACE(std::string(dtype_name(dt)) + " activation " + std::to_string(static_cast<int>(act)));
      Tensor h = empty({n}, TensorOptions(dt));
      auto* bits = static_cast<uint16_t*>(h.raw_data());
      for (int64_t i = 0; i < n; ++i) bits[i] = static_cast<uint16_t>(i);
      const Tensor x64 = h.to(kFloat64);
      Tensor d32 = h.to(kFloat32), y32 = empty({n}), d = h.clone();
      const Tensor y = empty({n}, TensorOptions(dt)), y_alone = empty({n}, TensorOptions(dt));
      cpu::activation_and_derivative(y, d, act);  // d: h, then act'(h)
      cpu::activation_value(y_alone, h, act);
      cpu::activation_and_derivative(y32, d32, act);
      const Tensor y_op = act == cpu::Activation::kRelu ? y : gelu(h, act == cpu::Activation::kGelu ? "none" : "tanh");
      const Tensor want_y = y32.to(dt), want_d = d32.to(dt), gy64 = y.to(kFloat64), gd64 = d.to(kFloat64);
      const auto* gy = static_cast<const uint16_t*>(y.raw_data());
      const auto* gd = static_cast<const uint16_t*>(d.raw_data());
      const auto* ga = static_cast<const uint16_t*>(y_alone.raw_data());
      const auto* go = static_cast<const uint16_t*>(y_op.raw_data());
      const auto* wy = static_cast<const uint16_t*>(want_y.raw_data());
      const auto* wd = static_cast<const uint16_t*>(want_d.raw_data());
      const double* xv = x64.data_ptr<double>();
      const double* yv = gy64.data_ptr<double>();
      const double* dv = gd64.data_ptr<double>();
      const uint16_t exp_mask = dt == kBFloat16 ? 0x7f80 : 0x7c00;
      auto is_nan = [&](uint16_t b) { return (b & 0x7fff) > exp_mask; };
      auto same = [&](uint16_t a, uint16_t b) { return a == b || (is_nan(a) && is_nan(b)); };
      int64_t mismatches = 0, far = 0;
      for (int64_t i = 0; i < n; ++i) {
        if (!(same(gy[i], wy[i]) && same(gd[i], wd[i]) && same(ga[i], gy[i]) && same(go[i], gy[i])) &&
            ++mismatches <= 5)
          ADD_FAILURE() << "input bits 0x" << std::hex << bits[i] << ": y 0x" << gy[i] << " (alone 0x" << ga[i]
                        << ", op 0x" << go[i] << ") want 0x" << wy[i] << ", d 0x" << gd[i] << " want 0x" << wd[i];
        if (!std::isfinite(xv[i])) continue;
        double ry, rd;
        activation_reference(act, xv[i], ry, rd);
        const double loop_error = 0x1p-23 * std::max(1.0, std::fabs(xv[i]));
        const bool near = std::fabs(yv[i] - ry) <= unit_at(ry, dt) + loop_error &&
                          std::fabs(dv[i] - rd) <= unit_at(rd, dt) + loop_error;
        if (!near && ++far <= 5)
          ADD_FAILURE() << "x " << xv[i] << ": y " << yv[i] << " want " << ry << ", d " << dv[i] << " want " << rd;
      }
      EXPECT_EQ(mismatches, 0);
      EXPECT_EQ(far, 0);
    }
  }
}

// Both AVX-512 lookup forms (gathers, chosen on Intel; scalar loads, on AMD) on any CPU
// with AVX-512: every 16-bit pattern and 37 more (a partial last vector and chunk) give
// the table's entry split in halves, out of place and in place (d = h, y = h).
TEST(Activation, BothAvx512LookupFormsReadTheTable) {
  const CpuFeatures& f = cpu_features();
  if (!(f.avx512f && f.avx512bw && f.avx512vl)) GTEST_SKIP() << "no AVX-512 on this CPU";
  const int64_t n = 65536 + 37;
  std::vector<uint32_t> table(65536);
  uint64_t state = 12345;
  for (uint32_t& t : table)
    t = static_cast<uint32_t>((state = state * 6364136223846793005ull + 1442695040888963407ull) >> 32);
  std::vector<uint16_t> h(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) h[static_cast<size_t>(i)] = static_cast<uint16_t>(i * 40503);
  for (bool gather : {true, false}) {
    for (int64_t len : {n, int64_t{5}, int64_t{64}, int64_t{100}}) {
      std::vector<uint16_t> y(h.size()), d(h.size()), d_in_place(h), y_alone(h.size()), y_in_place(h);
      cpu::detail::lookup_value_grad_avx512(table.data(), h.data(), y.data(), d.data(), len, gather);
      cpu::detail::lookup_value_grad_avx512(table.data(), d_in_place.data(), y_alone.data(), d_in_place.data(), len,
                                            gather);
      int64_t bad = 0;
      for (int64_t i = 0; i < len; ++i) {
        const uint32_t t = table[h[static_cast<size_t>(i)]];
        const auto lo = static_cast<uint16_t>(t), hi = static_cast<uint16_t>(t >> 16);
        const size_t u = static_cast<size_t>(i);
        bad += y[u] != lo || d[u] != hi || d_in_place[u] != hi || y_alone[u] != lo;
      }
      cpu::detail::lookup_value_avx512(table.data(), h.data(), y_alone.data(), len, gather);
      cpu::detail::lookup_value_avx512(table.data(), y_in_place.data(), y_in_place.data(), len, gather);
      for (int64_t i = 0; i < len; ++i) {
        const auto lo = static_cast<uint16_t>(table[h[static_cast<size_t>(i)]]);
        bad += y_alone[static_cast<size_t>(i)] != lo || y_in_place[static_cast<size_t>(i)] != lo;
      }
      for (int64_t i = len; i < n; ++i) bad += y[static_cast<size_t>(i)] != 0 || d[static_cast<size_t>(i)] != 0;
      EXPECT_EQ(bad, 0) << (gather ? "gathers" : "scalar loads") << ", " << len << " values";
    }
  }
}

// ------------------------------------------------------------------ bad input

TEST(BadInput, ErrorsNameTheOp) {
  Tensor u;
  TC_EXPECT_ERROR(add(ones({2}), ones({3})), "[add] shapes (2,) and (3,) cannot be broadcast together");
  TC_EXPECT_ERROR(mul(ones({2, 3}), ones({3, 2})), "[mul] shapes (2, 3) and (3, 2) cannot be broadcast together");
  TC_EXPECT_ERROR(sub(ones({2}), ones({3})), "shapes (2,) and (3,)");
  TC_EXPECT_ERROR(div(ones({2}), ones({3})), "[div] shapes");
  TC_EXPECT_ERROR(pow(ones({2}), ones({3})), "[pow] shapes");
  TC_EXPECT_ERROR(maximum(ones({2}), ones({3})), "[maximum] shapes");
  TC_EXPECT_ERROR(minimum(ones({4}), ones({3})), "[minimum] shapes");
  TC_EXPECT_ERROR(eq(ones({2}), ones({3})), "[eq] shapes");
  TC_EXPECT_ERROR(add(u, ones({2})), "[add] got an undefined tensor");
  TC_EXPECT_ERROR(mul(ones({2}), u), "[mul] got an undefined tensor");
  TC_EXPECT_ERROR(exp(u), "[exp] got an undefined tensor");
  TC_EXPECT_ERROR(relu(u), "[relu]");
  TC_EXPECT_ERROR(add(u, 1.0), "[add]");
  TC_EXPECT_ERROR(gt(u, 1.0), "[gt]");
  TC_EXPECT_ERROR(where(u, ones({1}), ones({1})), "[where]");
  TC_EXPECT_ERROR(clamp(u, 0.0, 1.0), "[clamp]");
  TC_EXPECT_ERROR(isnan(u), "[isnan]");
  TC_EXPECT_ERROR(gelu(ones({1}), "fast"), "[gelu] approximate must be \"none\" or \"tanh\", got \"fast\"");
  TC_EXPECT_ERROR(ones({2, 3}).transpose(0, 2), "[transpose] dimension 2 out of range");
  TC_EXPECT_ERROR(ones({2, 3}).select(5, 0), "[select] dimension 5 out of range");
  TC_EXPECT_ERROR(ones({2, 3}).squeeze(-3), "[squeeze] dimension -3 out of range");
}

TEST(BadInput, InPlaceAliasingAndOutput) {
  // x.add_(x) reads and writes the same elements: fine for elementwise ops.
  Tensor x = tensor({1.0, 2.0});
  x.add_(x);
  EXPECT_TRUE(all_close(x, {2, 4}, {0, 0}));
  x.mul_(x);
  EXPECT_TRUE(all_close(x, {4, 16}, {0, 0}));
}

// ------------------------------------------------------------------ layouts

// Pointwise ops keep a dense non-contiguous layout (channels-last here, as PyTorch's
// empty_like preserving the memory format): ReLU between a channels-last convolution and
// its pooling must not turn the activations back into NCHW.
Tensor channels_last_of(const Tensor& t) { return t.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2}); }

bool has_channels_last_strides(const Tensor& t) {
  const Shape& s = t.sizes();
  return t.strides() == Shape{s[1] * s[2] * s[3], 1, s[3] * s[1], s[1]};
}

TEST(ElementwiseLayout, ReluKeepsChannelsLast) {
  for (DType dt : {kFloat32, kBFloat16, kFloat16, kFloat64}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    const Tensor x = uniform({2, 5, 4, 3}, dt, -1.0, 1.0, 11);
    Tensor xc = channels_last_of(x).detach().requires_grad_();
    Tensor y = relu(xc);
    EXPECT_TRUE(has_channels_last_strides(y)) << shape_str(y.strides());
    EXPECT_TRUE(equal(y, relu(x)));
    // relu's backward (grad, out) pair in one layout gives that layout too.
    const Tensor g = channels_last_of(uniform({2, 5, 4, 3}, dt, -1.0, 1.0, 12));
    const Tensor gx = autograd::grad(y, {xc}, g)[0];
    EXPECT_TRUE(has_channels_last_strides(gx)) << shape_str(gx.strides());
    Tensor xa = x.clone().detach().requires_grad_();
    EXPECT_TRUE(equal(gx, autograd::grad(relu(xa), {xa}, g.contiguous())[0]));
    // A contiguous gradient for a channels-last output: mixed layouts, contiguous result.
    Tensor y2 = relu(xc);
    const Tensor gx2 = autograd::grad(y2, {xc}, g.contiguous())[0];
    EXPECT_TRUE(gx2.is_contiguous());
    EXPECT_TRUE(equal(gx2, gx));
  }
}

TEST(ElementwiseLayout, BinaryAndTernaryOps) {
  const Tensor a = uniform({2, 6, 3, 4}, kFloat32, 0.5, 2.0, 21), b = uniform({2, 6, 3, 4}, kFloat32, 0.5, 2.0, 22);
  const Tensor ac = channels_last_of(a), bc = channels_last_of(b);
  Tensor m = mul(ac, bc);  // one shared layout
  EXPECT_TRUE(has_channels_last_strides(m));
  EXPECT_TRUE(equal(m, mul(a, b)));
  Tensor s = mul(ac, 3.0);  // a scalar operand
  EXPECT_TRUE(has_channels_last_strides(s));
  EXPECT_TRUE(equal(s, mul(a, 3.0)));
  EXPECT_TRUE(mul(ac, b).is_contiguous());  // mixed layouts
  EXPECT_TRUE(equal(mul(ac, b), mul(a, b)));
  const Tensor bias = uniform({6, 1, 1}, kFloat32, -1.0, 1.0, 23);
  Tensor bb = add(ac, bias);  // broadcasting keeps contiguous outputs
  EXPECT_TRUE(bb.is_contiguous());
  EXPECT_TRUE(equal(bb, add(a, bias)));
  // map3: div's gradient with respect to b is computed from (g, out, b).
  Tensor acl = ac.detach().requires_grad_(), bcl = bc.detach().requires_grad_();
  const Tensor g = channels_last_of(uniform({2, 6, 3, 4}, kFloat32, -1.0, 1.0, 24));
  const auto grads = autograd::grad(div(acl, bcl), {acl, bcl}, g);
  EXPECT_TRUE(has_channels_last_strides(grads[1])) << shape_str(grads[1].strides());
  Tensor a2 = a.clone().detach().requires_grad_(), b2 = b.clone().detach().requires_grad_();
  const auto ref = autograd::grad(div(a2, b2), {a2, b2}, g.contiguous());
  EXPECT_TRUE(equal(grads[0], ref[0]));
  EXPECT_TRUE(equal(grads[1], ref[1]));
}

TEST(ElementwiseLayout, OtherDenseAndNonDenseLayouts) {
  const Tensor m = uniform({5, 7}, kFloat32, -1.0, 1.0, 31);
  Tensor e = exp(m.t());  // a transposed dense matrix keeps its transposed strides
  EXPECT_EQ(e.strides(), (Shape{1, 7}));
  EXPECT_TRUE(equal(e, exp(m.t().contiguous())));
  Tensor sl = exp(m.slice(1, 0, 7, 2));  // not dense: contiguous output
  EXPECT_TRUE(sl.is_contiguous());
  EXPECT_TRUE(equal(sl, exp(m.slice(1, 0, 7, 2).contiguous())));
  Tensor c = exp(m);
  EXPECT_TRUE(c.is_contiguous());
}

}  // namespace
}  // namespace tc
