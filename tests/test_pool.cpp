// Tests for max_pool2d, avg_pool2d and adaptive_avg_pool2d beyond the op table
// (test_op_db.cpp checks forward against independent float64 loops over kernel / stride /
// padding / dilation / ceil_mode / count_include_pad and permuted inputs, and gradcheck,
// in every dtype): values PyTorch gives on small hand-checked inputs, gradients through a
// permuted view, oneDNN's JIT shapes, error messages and the channels-last paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/testing.h"

namespace tc {
namespace {

using testing::all_close;
using testing::gradcheck;
using testing::Tol;
using testing::tol_for;
using testing::uniform;

const std::vector<DType> kAllFloating = {kFloat32, kBFloat16, kFloat16, kFloat64};
std::string name_of(const ::testing::TestParamInfo<DType>& info) { return std::string(dtype_name(info.param)); }

// A tensor whose values are all distinct (multiples of 1/8, exact in every dtype), so the
// position of each window's maximum is unambiguous and stable under gradcheck's steps.
Tensor distinct(const Shape& shape, DType dt, uint64_t seed) {
  const int64_t n = std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>(i - n / 2) / 8.0;
  std::mt19937_64 gen(seed);
  std::shuffle(v.begin(), v.end(), gen);
  return tensor(v, shape, kFloat64).to(dt);
}

Tensor iota(const Shape& shape) {
  const int64_t n = std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<>());
  std::vector<double> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0.0);
  return tensor(v, shape, kFloat32);
}

struct PoolCase {
  Shape x, kernel, stride, padding, dilation;
  bool ceil_mode;
};

std::string describe(const PoolCase& c) {
  return "x" + shape_str(c.x) + " k" + shape_str(c.kernel) + " s" + shape_str(c.stride) + " p" + shape_str(c.padding) +
         " d" + shape_str(c.dilation) + (c.ceil_mode ? " ceil" : "");
}

const std::vector<PoolCase> kMaxCases = {
    {{2, 3, 8, 8}, {2, 2}, {}, {0, 0}, {1, 1}, false},
    {{2, 3, 9, 7}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false},
    {{2, 3, 9, 7}, {3, 2}, {2, 2}, {1, 1}, {1, 1}, true},
    {{2, 2, 10, 9}, {3, 3}, {1, 2}, {1, 0}, {2, 2}, false},  // dilation
    {{2, 2, 10, 9}, {2, 3}, {3, 2}, {0, 1}, {2, 1}, true},   // dilation + ceil
    {{2, 16, 6, 6}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, true},
};

const std::vector<PoolCase> kAvgCases = {
    {{2, 3, 8, 8}, {2, 2}, {}, {0, 0}, {1, 1}, false},     {{2, 3, 9, 7}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, false},
    {{2, 3, 9, 7}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, true},  // ceil window overhangs H + pad
    {{2, 3, 7, 7}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, true},  // overhang without padding
    {{2, 2, 10, 9}, {3, 2}, {1, 3}, {1, 1}, {1, 1}, true},
};

// ------------------------------------------------------------------ values PyTorch gives

TEST(Pool, KnownValues) {
  Tensor x4 = iota({1, 1, 4, 4});
  EXPECT_TRUE(all_close(max_pool2d(x4, {2, 2}), {5, 7, 13, 15}, {0, 0}));
  Tensor x5 = iota({1, 1, 5, 5});
  EXPECT_TRUE(
      all_close(max_pool2d(x5, {2, 2}, {2, 2}, {0, 0}, {1, 1}, true), {6, 8, 9, 16, 18, 19, 21, 23, 24}, {0, 0}));
  // torch.nn.functional.avg_pool2d(arange(9).view(1,1,3,3), 2, ceil_mode=True): the
  // overhanging windows divide by their clipped size even with count_include_pad.
  Tensor x3 = iota({1, 1, 3, 3});
  EXPECT_TRUE(all_close(avg_pool2d(x3, {2, 2}, {}, {0, 0}, true, true), {2, 3.5, 6.5, 8}, {1e-6, 1e-6}));
  // padding=1 with count_include_pad counts the zeros; without, it does not.
  EXPECT_TRUE(all_close(avg_pool2d(x3, {2, 2}, {2, 2}, {1, 1}, false, true), {0, 0.75, 2.25, 6}, {1e-6, 1e-6}));
  EXPECT_TRUE(all_close(avg_pool2d(x3, {2, 2}, {2, 2}, {1, 1}, false, false), {0, 1.5, 4.5, 6}, {1e-6, 1e-6}));
  // adaptive windows of 5 -> 3: [0, 2), [1, 4), [3, 5).
  Tensor r = iota({1, 1, 1, 5});
  EXPECT_TRUE(all_close(adaptive_avg_pool2d(r, {1, 3}), {0.5, 2, 3.5}, {1e-6, 1e-6}));
  EXPECT_TRUE(all_close(adaptive_avg_pool2d(x4, {1, 1}), {7.5}, {1e-6, 1e-6}));
}

// ------------------------------------------------------------------ gradients

Tol grad_tol(DType dt) {
  switch (dt) {
    case DType::Float64:
      return {1e-7, 1e-7};
    case DType::Float32:
      return tol_for(dt, 32);
    default:
      return tol_for(dt, 4);
  }
}

TEST(Pool, MaxPoolGradientOfPermutedInput) {
  Tensor base = distinct({2, 6, 6, 3}, kFloat32, 9).requires_grad_();
  auto f = [](const std::vector<Tensor>& in) {
    return max_pool2d(in[0].permute({0, 3, 1, 2}), {3, 3}, {2, 2}, {1, 1});
  };
  EXPECT_TRUE(gradcheck(f, {base}, grad_tol(kFloat32)));
}

// Shapes large enough for oneDNN's JIT kernels (small ones take its simple / reference
// kernels): forward and gradient against the float64 direct loops on the same values.
TEST(Pool, JitShapesMatchFloat64) {
  const Shape xs = {16, 32, 28, 28};
  const int64_t n = 16 * 32 * 28 * 28;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>(i - n / 2) / 1024.0;  // distinct, float32-exact
  std::shuffle(v.begin(), v.end(), std::mt19937_64(5));
  const Tensor x_distinct = tensor(v, xs, kFloat32);
  const Tensor g = uniform({16, 32, 14, 14}, kBFloat16, -1.0, 1.0, 6);
  struct Run {
    const char* name;
    DType dt;
    std::function<Tensor(const Tensor&)> f;
  };
  const std::vector<Run> runs = {
      {"max float32", kFloat32,
       [](const Tensor& x) {
         return max_pool2d(x, {2, 2});
       }},
      {"avg float32", kFloat32,
       [](const Tensor& x) {
         return avg_pool2d(x, {2, 2});
       }},
      {"avg bfloat16", kBFloat16,
       [](const Tensor& x) {
         return avg_pool2d(x, {3, 3}, {2, 2}, {1, 1}, false, false);
       }},
  };
  for (const Run& r : runs) {
    SCOPED_TRACE(r.name);
    Tensor x = (r.dt == kFloat32 ? x_distinct : uniform(xs, r.dt, -2.0, 2.0, 7)).clone().requires_grad_();
    Tensor x64 = x.detach().to(kFloat64).requires_grad_();
    Tensor y = r.f(x), y64 = r.f(x64);
    y.backward(g.to(r.dt));
    y64.backward(g.to(kFloat64));
    EXPECT_TRUE(all_close(y, y64, tol_for(r.dt, 2)));
    EXPECT_TRUE(all_close(x.grad(), x64.grad(), tol_for(r.dt, 2)));
  }
}

// ------------------------------------------------------------------ errors

using testing::expect_error;

TEST(Pool, ErrorMessages) {
  Tensor x = zeros({2, 3, 8, 8});
  expect_error(
      [&] {
        max_pool2d(zeros({3, 8, 8}), {2, 2});
      },
      "[max_pool2d] expected 4-d input (N, C, H, W), got shape (3, 8, 8)");
  expect_error(
      [&] {
        avg_pool2d(zeros({8, 8}), {2, 2});
      },
      "[avg_pool2d] expected 4-d input (N, C, H, W), got shape (8, 8)");
  expect_error([&] { adaptive_avg_pool2d(zeros({3, 8, 8}), {2, 2}); }, "[adaptive_avg_pool2d] expected 4-d input");
  expect_error(
      [&] {
        max_pool2d(x, {2, 2}, {2, 2}, {2, 2});
      },
      "[max_pool2d] padding (2, 2) should be at most half of kernel size (2, 2)");
  expect_error([&] { max_pool2d(x, {2, 2}, {0, 2}); }, "[max_pool2d] stride must be positive, got (0, 2)");
  expect_error([&] { avg_pool2d(x, {0, 2}); }, "[avg_pool2d] kernel_size must be positive");
  expect_error([&] { max_pool2d(x, {}); }, "[max_pool2d] kernel_size must have 1 or 2 elements, got ()");
  expect_error([&] { max_pool2d(x, {2, 2, 2}); }, "[max_pool2d] kernel_size must have 1 or 2 elements, got (2, 2, 2)");
  expect_error(
      [&] {
        max_pool2d(x, {9, 9});
      },
      "[max_pool2d] output size (0, 0) is too small for input of shape (2, 3, 8, 8)");
  expect_error([&] { max_pool2d(x, {3, 3}, {1, 1}, {0, 0}, {0, 1}); }, "[max_pool2d] dilation must be positive");
  expect_error([&] { adaptive_avg_pool2d(x, {0, 2}); }, "[adaptive_avg_pool2d] output_size must be positive");
  expect_error([&] { max_pool2d(x.to(kInt64), {2, 2}); }, "[max_pool2d] expected a floating dtype, got int64");
}

// ------------------------------------------------------------------ channels-last (NHWC)

// t's values stored channels-last (NHWC memory viewed NCHW), through differentiable ops.
Tensor channels_last(const Tensor& t) { return t.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2}); }

bool has_channels_last_strides(const Tensor& t) {
  const Shape& s = t.sizes();
  return t.strides() == Shape{s[1] * s[2] * s[3], 1, s[3] * s[1], s[1]};
}

class PoolChannelsLast : public ::testing::TestWithParam<DType> {};

// One pooling op on contiguous and channels-last copies of x: equal outputs and input
// gradients (max pooling outputs and float64 bit-exact, oneDNN averages within a few ulps), the
// output and gradient in the input's layout, and output gradients arriving in either
// layout (contiguous, as from a Flatten's reshape, or channels-last, as from a ReLU).
// Max pooling gradients of overlapping windows add in other orders (and, in 16 bits, other
// precisions) in the two kernels, depending on the CPU's ISA, hence grad_tol.
void check_layouts(const Tensor& x, const std::function<Tensor(const Tensor&)>& op, Tol tol, uint64_t seed,
                   Tol grad_tol) {
  Tensor xa = x.clone().detach().requires_grad_();
  Tensor xb = channels_last(x).detach().requires_grad_();
  ASSERT_TRUE(has_channels_last_strides(xb));
  Tensor ya = op(xa), yb = op(xb);
  EXPECT_TRUE(ya.is_contiguous());
  EXPECT_TRUE(has_channels_last_strides(yb)) << shape_str(yb.strides());
  EXPECT_TRUE(all_close(yb, ya, tol));
  const Tensor g = uniform(ya.sizes(), x.dtype(), -1.0, 1.0, seed);
  const Tensor ga = autograd::grad(ya, {xa}, g)[0];
  EXPECT_TRUE(ga.is_contiguous());
  for (const Tensor& gy : {g, channels_last(g)}) {
    Tensor y = op(xb);
    const Tensor gb = autograd::grad(y, {xb}, gy)[0];
    EXPECT_TRUE(has_channels_last_strides(gb)) << shape_str(gb.strides());
    EXPECT_TRUE(all_close(gb, ga, grad_tol));
  }
}

TEST_P(PoolChannelsLast, MaxMatchesNchw) {
  const DType dt = GetParam();
  uint64_t seed = 700;
  for (const PoolCase& c : kMaxCases) {
    SCOPED_TRACE(describe(c));
    check_layouts(
        distinct(c.x, dt, ++seed),
        [&](const Tensor& x) { return max_pool2d(x, c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode); },
        Tol{0, 0}, ++seed, dt == kFloat64 ? Tol{0, 0} : tol_for(dt, 2));
  }
}

TEST_P(PoolChannelsLast, AvgMatchesNchw) {
  const DType dt = GetParam();
  uint64_t seed = 800;
  const Tol tol = dt == kFloat64 ? Tol{0, 0} : tol_for(dt, 2);
  for (const PoolCase& c : kAvgCases)
    for (bool include_pad : {true, false}) {
      SCOPED_TRACE(describe(c) + (include_pad ? " include_pad" : " exclude_pad"));
      check_layouts(
          uniform(c.x, dt, -2.0, 2.0, ++seed),
          [&](const Tensor& x) { return avg_pool2d(x, c.kernel, c.stride, c.padding, c.ceil_mode, include_pad); }, tol,
          ++seed, tol);
    }
}

TEST_P(PoolChannelsLast, Gradcheck) {
  const DType dt = GetParam();
  uint64_t seed = 900;
  for (const PoolCase& c : {kMaxCases[4]}) {  // dilation + ceil_mode
    SCOPED_TRACE(describe(c));
    Tensor x = distinct(c.x, dt, ++seed).requires_grad_();
    auto f = [&](const std::vector<Tensor>& in) {
      return max_pool2d(channels_last(in[0]), c.kernel, c.stride, c.padding, c.dilation, c.ceil_mode);
    };
    EXPECT_TRUE(gradcheck(f, {x}, grad_tol(dt)));
  }
  for (const PoolCase& c : {kAvgCases[1]}) {
    SCOPED_TRACE(describe(c));
    Tensor x = uniform(c.x, dt, -2.0, 2.0, ++seed).requires_grad_();
    auto f = [&](const std::vector<Tensor>& in) {
      return avg_pool2d(channels_last(in[0]), c.kernel, c.stride, c.padding, c.ceil_mode, true);
    };
    EXPECT_TRUE(gradcheck(f, {x}, grad_tol(dt)));
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, PoolChannelsLast, ::testing::ValuesIn(kAllFloating), name_of);

// The training CNN's pooling shapes (oneDNN's JIT nhwc kernels) against the NCHW ones.
TEST(PoolChannelsLastLayout, JitShapesMatchNchw) {
  for (DType dt : {kFloat32, kBFloat16}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    const Tensor x = uniform({16, 32, 28, 28}, dt, -2.0, 2.0, 60);
    check_layouts(
        x,
        [](const Tensor& t) {
          return max_pool2d(t, {2, 2});
        },
        Tol{0, 0}, 61, Tol{0, 0});
    check_layouts(
        x,
        [](const Tensor& t) {
          return avg_pool2d(t, {2, 2});
        },
        tol_for(dt, 2), 62, tol_for(dt, 2));
  }
}

// max_pool2d's double backward on the oneDNN path (float32 and 16-bit CPU tensors, either
// layout): the derivative of its input gradient by the incoming gradient w is v gathered at
// each window's argmax, the same values the float64 path (gradgradcheck in the op table)
// gives. Distinct inputs, so every window has one argmax.
TEST(Pool, MaxPoolDoubleBackwardOnOneDnnMatchesFloat64) {
  std::vector<double> vals(2 * 3 * 7 * 7);
  // Integers below 256 in magnitude: distinct in bfloat16 too.
  for (size_t i = 0; i < vals.size(); ++i) vals[i] = static_cast<double>((i * 37) % vals.size()) - 147.0;
  std::mt19937_64 gen(5);
  std::shuffle(vals.begin(), vals.end(), gen);
  const Tensor x64 = tensor(vals, {static_cast<int64_t>(vals.size())}, kFloat64).reshape({2, 3, 7, 7});
  const Tensor v64 = uniform({2, 3, 7, 7}, kFloat64, -1, 1, 3);
  // d/dw sum(grad_x(sum(maxpool(x) * w)) * v)
  auto second = [&](const Tensor& x, DType dt) {
    const Tensor xin = x.detach().to(dt).requires_grad_();
    const Tensor y = max_pool2d(xin, {3, 3}, {2, 2}, {1, 1});
    const Tensor w = uniform(y.sizes(), dt, 0.5, 1.5, 4).requires_grad_();
    const Tensor gx = autograd::grad({y}, {xin}, {w}, std::nullopt, /*create_graph=*/true)[0];
    return autograd::grad({sum(mul(gx, v64.to(dt)))}, {w})[0].to(kFloat64);
  };
  const Tensor want = second(x64, kFloat64);
  for (DType dt : {kFloat32, kBFloat16}) {
    SCOPED_TRACE(dtype_name(dt));
    EXPECT_TRUE(all_close(second(x64, dt), want, tol_for(dt, 1)));
    EXPECT_TRUE(all_close(second(x64.contiguous(MemoryFormat::ChannelsLast), dt), want, tol_for(dt, 1)));
  }
}

}  // namespace
}  // namespace tc
