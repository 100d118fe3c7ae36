// Tests for conv2d beyond the op table (test_op_db.cpp checks forward against an
// independent float64 direct convolution over stride / padding / dilation / groups /
// depthwise / permuted input / bias on and off, and gradcheck of input, weight and bias,
// in every dtype): the float16 round-once fallback, gradients through a permuted view,
// oneDNN's JIT shapes, concurrent use of the primitive cache, error messages, the
// training CNN's two conv blocks forward + backward with a timing log line, and the
// channels-last paths.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/onednn/conv.h"
#include "common/testing.h"
#include "tensorcast/amp/autocast.h"
#include "tensorcast/gemm16.h"
#include "tensorcast/optim/sgd.h"

namespace tc {
namespace {

using testing::all_close;
using testing::gradcheck;
using testing::Tol;
using testing::tol_for;
using testing::uniform;

struct ConvCase {
  Shape x, w;  // input NCHW, weight (O, C/g, kh, kw)
  Shape stride, padding, dilation;
  int64_t groups;
  bool bias;
  bool permuted;  // feed the input as a permuted (non-contiguous) view
};

std::string describe(const ConvCase& c) {
  return "x" + shape_str(c.x) + " w" + shape_str(c.w) + " s" + shape_str(c.stride) + " p" + shape_str(c.padding) +
         " d" + shape_str(c.dilation) + " g" + std::to_string(c.groups) + (c.bias ? " bias" : "") +
         (c.permuted ? " permuted" : "");
}

const std::vector<ConvCase> kCases = {
    {{2, 3, 9, 8}, {4, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true, false},
    {{2, 3, 9, 8}, {4, 3, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1, false, false},
    {{2, 3, 11, 10}, {5, 3, 3, 2}, {2, 3}, {1, 0}, {1, 1}, 1, true, false},     // asymmetric, floor drops columns
    {{2, 2, 10, 9}, {3, 2, 3, 3}, {1, 1}, {2, 2}, {2, 3}, 1, true, false},      // dilation
    {{2, 4, 7, 7}, {6, 2, 3, 3}, {1, 2}, {1, 1}, {1, 1}, 2, true, false},       // groups
    {{2, 4, 8, 8}, {4, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 4, true, false},       // depthwise
    {{2, 8, 6, 6}, {8, 1, 5, 5}, {2, 2}, {2, 2}, {1, 1}, 8, false, true},       // depthwise, permuted
    {{2, 3, 9, 8}, {4, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true, true},        // permuted input
    {{2, 16, 12, 12}, {32, 16, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true, false},  // blocked layouts
};

TEST(Conv2d, Float16RoundsOnceThroughFloat32) {
  Tensor x = uniform({2, 3, 9, 8}, kFloat16, -1.0, 1.0, 3);
  Tensor w = uniform({4, 3, 3, 3}, kFloat16, -1.0, 1.0, 4);
  Tensor b = uniform({4}, kFloat16, -1.0, 1.0, 5);
  cpu::ConvParams p;
  const std::string impl = cpu::dnnl_conv2d_impl(x, w, p);
  std::printf("[ conv ] float16 forward implementation: %s\n", impl.empty() ? "float32 fallback" : impl.c_str());
  if (!impl.empty()) GTEST_SKIP() << "oneDNN has a native float16 convolution here: " << impl;
  Tensor y = conv2d(x, w, b);
  Tensor y32 = conv2d(x.to(kFloat32), w.to(kFloat32), b.to(kFloat32)).to(kFloat16);
  EXPECT_TRUE(testing::equal(y, y32));
}

TEST(Conv2d, Float32PathIsTheFloat32ConvolutionRoundedOnce) {
  // On the float32 path (tensorcast/gemm16.h) a 16-bit convolution, forward and both
  // backward passes, is the float32 one on widened operands, each result rounded once;
  // on the native path it stays within the 16-bit tolerance of it.
  const Gemm16 saved = get_cpu_gemm16();
  for (DType dt : {kBFloat16, kFloat16}) {
    const Tensor x0 = uniform({2, 3, 9, 8}, dt, -1.0, 1.0, 13), w0 = uniform({4, 3, 3, 3}, dt, -1.0, 1.0, 14),
                 b0 = uniform({4}, dt, -1.0, 1.0, 15), g = uniform({2, 4, 9, 8}, dt, -1.0, 1.0, 16);
    auto run = [&](DType t) {
      Tensor x = x0.to(t).detach().requires_grad_(), w = w0.to(t).detach().requires_grad_(),
             b = b0.to(t).detach().requires_grad_();
      Tensor y = conv2d(x, w, b, {1, 1}, {1, 1});
      (y * g.to(t)).sum().backward();
      return std::vector<Tensor>{y.detach(), x.grad(), w.grad(), b.grad()};
    };
    const std::vector<Tensor> ref = run(kFloat32);
    for (Gemm16 m : {Gemm16::kFloat32, Gemm16::kNative}) {
      set_cpu_gemm16(m);
      const std::vector<Tensor> got = run(dt);
      const char* names[] = {"output", "input grad", "weight grad", "bias grad"};
      for (size_t i = 0; i < got.size(); ++i) {
        if (m == Gemm16::kFloat32 && i < 3) {  // (the bias gradient sums a rounded product: not one rounding)
          EXPECT_TRUE(testing::equal(got[i], ref[i].to(dt))) << dtype_name(dt) << " " << names[i];
        } else {
          EXPECT_TRUE(testing::all_close(got[i], ref[i].to_vector(), testing::tol_for(dt, 64)))
              << dtype_name(dt) << " " << gemm16_name(m) << " " << names[i];
        }
      }
    }
  }
  set_cpu_gemm16(saved);
}

// ------------------------------------------------------------------ gradients

Tol grad_tol(DType dt) {
  switch (dt) {
    case DType::Float64:
      return {1e-7, 1e-7};  // central differences of a float64 loss
    case DType::Float32:
      return tol_for(dt, 32);
    default:
      return tol_for(dt, 4);
  }
}

TEST(Conv2d, GradientOfPermutedInputHasInputShape) {
  Tensor base = uniform({2, 5, 5, 3}, kFloat32, -1.0, 1.0, 7).requires_grad_();
  Tensor w = uniform({4, 3, 3, 3}, kFloat32, -1.0, 1.0, 8);
  auto f = [&](const std::vector<Tensor>& in) {
    return conv2d(in[0].permute({0, 3, 1, 2}), in[1], Tensor(), {1, 1}, {1, 1});
  };
  EXPECT_TRUE(gradcheck(f, {base, w}, grad_tol(kFloat32)));
}

// The training CNN's second layer at a smaller batch: oneDNN's blocked JIT kernels for all
// three passes (gradcheck's shapes are small enough to get other kernels), against the
// float64 direct loops on the same values.
TEST(Conv2d, JitShapesMatchFloat64) {
  for (DType dt : {kFloat32, kBFloat16}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Tensor x = uniform({8, 32, 14, 14}, dt, 0.0, 1.0, 41).requires_grad_();
    Tensor w = uniform({64, 32, 3, 3}, dt, -0.1, 0.1, 42).requires_grad_();
    Tensor b = uniform({64}, dt, -0.1, 0.1, 43).requires_grad_();
    Tensor g = uniform({8, 64, 14, 14}, dt, -1.0, 1.0, 44);
    std::vector<Tensor> in64;
    for (const Tensor& t : {x, w, b}) in64.push_back(t.detach().to(kFloat64).requires_grad_());
    Tensor y = conv2d(x, w, b, {1, 1}, {1, 1});
    Tensor y64 = conv2d(in64[0], in64[1], in64[2], {1, 1}, {1, 1});
    y.backward(g);
    y64.backward(g.to(kFloat64));
    // Sums of up to 288 (forward), 576 (data) and 1568 (weights) products: the bound
    // scales with the largest magnitude of each result (float32 accumulation, one rounding).
    auto check = [&](const Tensor& a, const Tensor& ref, const char* what) {
      double m = 0;
      for (double v : ref.to_vector()) m = std::max(m, std::fabs(v));
      const Tol t = dt == kFloat32 ? Tol{1e-5 * m, 1e-5} : Tol{0x1p-8 * m, 0x1p-8};
      EXPECT_TRUE(all_close(a, ref, t)) << what;
    };
    check(y, y64, "output");
    check(x.grad(), in64[0].grad(), "input grad");
    check(w.grad(), in64[1].grad(), "weight grad");
    check(b.grad(), in64[2].grad(), "bias grad");
  }
}

// ------------------------------------------------------------------ cache and threads

TEST(Conv2d, ConcurrentCallsAgreeWithSerial) {
  Tensor x = uniform({2, 8, 10, 10}, kFloat32, -1.0, 1.0, 21);
  Tensor w = uniform({16, 8, 3, 3}, kFloat32, -1.0, 1.0, 22);
  // A configuration no other test uses, so the threads race to create its plan.
  const Shape stride = {1, 2}, padding = {2, 1};
  std::vector<Tensor> got(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < got.size(); ++t)
    threads.emplace_back([&, t] { got[t] = conv2d(x, w, Tensor(), stride, padding); });
  for (auto& th : threads) th.join();
  Tensor expected = conv2d(x, w, Tensor(), stride, padding);
  EXPECT_EQ(expected.sizes(), (Shape{2, 16, 12, 5}));
  for (const Tensor& g : got) EXPECT_TRUE(testing::equal(g, expected));
}

// ------------------------------------------------------------------ errors

using testing::expect_error;

TEST(Conv2d, ErrorMessages) {
  Tensor x = zeros({2, 3, 8, 8}), w = zeros({4, 3, 3, 3});
  expect_error(
      [&] {
        conv2d(zeros({3, 28, 28}), w);
      },
      "[conv2d] expected 4-d input (N, C, H, W), got shape (3, 28, 28)");
  expect_error([&] { conv2d(x, zeros({4, 3, 3})); }, "[conv2d] expected 4-d weight");
  expect_error(
      [&] {
        conv2d(x, zeros({4, 2, 3, 3}));
      },
      "[conv2d] input of shape (2, 3, 8, 8) has 3 channels, but weight of shape (4, 2, 3, 3) with groups=1 "
      "expects 2 channels");
  expect_error(
      [&] {
        conv2d(zeros({2, 4, 8, 8}), zeros({4, 2, 3, 3}), Tensor(), {1, 1}, {0, 0}, {1, 1}, 3);
      },
      "[conv2d] groups=3 must divide the input's 4 channels");
  expect_error(
      [&] {
        conv2d(zeros({2, 4, 8, 8}), zeros({3, 2, 3, 3}), Tensor(), {1, 1}, {0, 0}, {1, 1}, 2);
      },
      "[conv2d] groups=2 must divide the weight's 3 output channels");
  expect_error(
      [&] {
        conv2d(x, zeros({4, 3, 9, 9}));
      },
      "[conv2d] kernel size (9, 9) with dilation (1, 1) is larger than the padded input size (8, 8)");
  expect_error([&] { conv2d(x, w, Tensor(), {1, 1}, {0, 0}, {4, 4}); }, "is larger than the padded input size");
  expect_error([&] { conv2d(x.to(kBFloat16), w); }, "[conv2d] input dtype bfloat16 and weight dtype float32 differ");
  expect_error([&] { conv2d(x, w, Tensor(), {0, 1}); }, "[conv2d] stride must be positive, got (0, 1)");
  expect_error([&] { conv2d(x, w, Tensor(), {1, -2}); }, "[conv2d] stride must be positive");
  expect_error([&] { conv2d(x, w, Tensor(), {1, 1}, {-1, 0}); }, "[conv2d] padding must be non-negative");
  expect_error([&] { conv2d(x, w, zeros({3})); }, "[conv2d] expected bias of shape (4)");
  expect_error([&] { conv2d(x, w, zeros({4}, kFloat64)); },
               "[conv2d] bias dtype float64 and input dtype float32 differ");
  expect_error([&] { conv2d(x.to(kInt64), w.to(kInt64)); }, "[conv2d] expected a floating dtype, got int64");
}

// ------------------------------------------------------------------ the training CNN

// Conv2d(1,32,3,pad 1)-ReLU-MaxPool2d(2)-Conv2d(32,64,3,pad 1)-ReLU-MaxPool2d(2), 128 x 28 x 28.
struct Cnn {
  Tensor w1, b1, w2, b2;
  Tensor forward(const Tensor& x) const {
    Tensor h = max_pool2d(relu(conv2d(x, w1, b1, {1, 1}, {1, 1})), {2, 2});
    return max_pool2d(relu(conv2d(h, w2, b2, {1, 1}, {1, 1})), {2, 2});
  }
};

// Weights and input are bfloat16-exact, so float32 and bfloat16 runs start from the same
// values and differ only by the rounding of activations and gradients.
Cnn make_cnn(DType dt) {
  Cnn m{uniform({32, 1, 3, 3}, kBFloat16, -0.3, 0.3, 31), uniform({32}, kBFloat16, -0.1, 0.1, 32),
        uniform({64, 32, 3, 3}, kBFloat16, -0.06, 0.06, 33), uniform({64}, kBFloat16, -0.1, 0.1, 34)};
  for (Tensor* t : {&m.w1, &m.b1, &m.w2, &m.b2}) {
    *t = t->to(dt);
    t->requires_grad_();
  }
  return m;
}

// ||a - b|| / ||b||: bfloat16 flips a few ReLU / max-pool decisions, so elementwise
// bounds do not fit, but the whole tensor must agree to bfloat16 precision.
double relative_l2(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / den);
}

TEST(Conv2d, TrainingCnnForwardBackward) {
  const Tensor x16 = uniform({128, 1, 28, 28}, kBFloat16, 0.0, 1.0, 30);
  // A positive output gradient keeps the gradient sums from cancelling, so relative errors
  // measure rounding rather than the few max-pool ties bfloat16 resolves differently.
  const Tensor g16 = uniform({128, 64, 7, 7}, kBFloat16, 0.5, 1.5, 35);
  std::vector<std::vector<double>> f32_results;
  for (DType dt : {kFloat32, kBFloat16}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    Cnn m = make_cnn(dt);
    const Tensor x = x16.to(dt), g = g16.to(dt);
    Tensor out;
    auto step = [&] {
      for (Tensor* t : {&m.w1, &m.b1, &m.w2, &m.b2}) t->set_grad(Tensor());
      out = m.forward(x);
      out.backward(g);
    };
    step();  // creates and caches the primitives
    const int steps = 5;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < steps; ++i) step();
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / steps;
    std::printf("[ cnn  ] %s conv-relu-pool x2, batch 128, 28x28: %.2f ms per forward+backward step (%d threads)\n",
                std::string(dtype_name(dt)).c_str(), ms, get_num_threads());
    ASSERT_EQ(out.sizes(), (Shape{128, 64, 7, 7}));
    std::vector<std::vector<double>> results{out.to_vector()};
    for (Tensor* t : {&m.w1, &m.b1, &m.w2, &m.b2}) {
      ASSERT_TRUE(t->grad().defined());
      EXPECT_EQ(t->grad().dtype(), dt);
      EXPECT_EQ(t->grad().sizes(), t->sizes());
      results.push_back(t->grad().to_vector());
    }
    if (dt == kFloat32) {
      f32_results = results;
      continue;
    }
    const char* names[] = {"output", "w1.grad", "b1.grad", "w2.grad", "b2.grad"};
    for (size_t i = 0; i < results.size(); ++i) {
      const double err = relative_l2(results[i], f32_results[i]);
      std::printf("[ cnn  ] bfloat16 vs float32 %s: relative L2 error %.2e\n", names[i], err);
      EXPECT_LT(err, 0.01) << names[i];
    }
  }
}

// ------------------------------------------------------------------ channels-last (NHWC)

// t's values stored channels-last (NHWC memory viewed NCHW), through differentiable ops.
Tensor channels_last(const Tensor& t) { return t.permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2}); }

bool has_channels_last_strides(const Tensor& t) {
  const Shape& s = t.sizes();
  return t.strides() == Shape{s[1] * s[2] * s[3], 1, s[3] * s[1], s[1]};
}

// A leaf holding t's values with t's strides... or channels-last ones.
Tensor leaf(const Tensor& t, bool cl) { return (cl ? channels_last(t) : t.clone()).detach().requires_grad_(); }

class ConvChannelsLast : public ::testing::TestWithParam<DType> {};

// Forward, input / weight / bias gradients of a channels-last input equal the NCHW ones
// (float64: the same direct loops, bit-exact; oneDNN: nhwc vs blocked kernels sum in
// other orders, so a few ulps), outputs and input gradients keep the input's layout, and
// a gradient arriving NCHW for a channels-last output works.
TEST_P(ConvChannelsLast, MatchesNchw) {
  const DType dt = GetParam();
  uint64_t seed = 500;
  for (const ConvCase& c0 : kCases) {
    ConvCase c = c0;
    c.permuted = false;
    SCOPED_TRACE(describe(c));
    const Tensor x = uniform(c.x, dt, -1.0, 1.0, ++seed), w = uniform(c.w, dt, -1.0, 1.0, ++seed);
    const Tensor b = c.bias ? uniform({c.w[0]}, dt, -1.0, 1.0, ++seed) : Tensor();
    Tensor xa = leaf(x, false), wa = leaf(w, false), ba = c.bias ? leaf(b, false) : Tensor();
    Tensor xb = leaf(x, true), wb = leaf(w, false), bb = c.bias ? leaf(b, false) : Tensor();
    ASSERT_TRUE(has_channels_last_strides(xb));
    Tensor ya = conv2d(xa, wa, ba, c.stride, c.padding, c.dilation, c.groups);
    Tensor yb = conv2d(xb, wb, bb, c.stride, c.padding, c.dilation, c.groups);
    EXPECT_TRUE(ya.is_contiguous());
    EXPECT_TRUE(has_channels_last_strides(yb)) << shape_str(yb.strides());
    const Tol tol = dt == kFloat64 ? Tol{0, 0} : dt == kFloat32 ? tol_for(dt, 32) : tol_for(dt, 2);
    EXPECT_TRUE(all_close(yb, ya, tol));
    const Tensor g = uniform(ya.sizes(), dt, -1.0, 1.0, ++seed);
    // autograd::grad: the gradients as the backward formulas return them (a leaf's .grad
    // is stored contiguous by the engine).
    auto inputs = [](const Tensor& x_, const Tensor& w_, const Tensor& b_) {
      return b_.defined() ? std::vector<Tensor>{x_, w_, b_} : std::vector<Tensor>{x_, w_};
    };
    const auto ga = autograd::grad(ya, inputs(xa, wa, ba), g);
    const auto gb = autograd::grad(yb, inputs(xb, wb, bb), g);  // NCHW gradient, NHWC output
    EXPECT_TRUE(ga[0].is_contiguous());
    EXPECT_TRUE(has_channels_last_strides(gb[0])) << shape_str(gb[0].strides());
    const Tol gtol = dt == kFloat64 ? Tol{0, 0} : dt == kFloat32 ? tol_for(dt, 64) : tol_for(dt, 4);
    for (size_t i = 0; i < ga.size(); ++i) EXPECT_TRUE(all_close(gb[i], ga[i], gtol)) << "input " << i;
    // A channels-last output gradient, and .grad of the leaves.
    Tensor yc = conv2d(xb, wb, bb, c.stride, c.padding, c.dilation, c.groups);
    yc.backward(channels_last(g));
    EXPECT_TRUE(all_close(xb.grad(), ga[0], gtol));
    EXPECT_TRUE(all_close(wb.grad(), ga[1], gtol));
  }
}

TEST_P(ConvChannelsLast, Gradcheck) {
  const DType dt = GetParam();
  uint64_t seed = 600;
  for (const ConvCase& c : {ConvCase{{2, 3, 5, 5}, {4, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true, false},
                            ConvCase{{2, 4, 6, 5}, {4, 2, 3, 2}, {2, 1}, {1, 0}, {1, 2}, 2, true, false},
                            ConvCase{{2, 1, 5, 5}, {3, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, true, false}}) {
    SCOPED_TRACE(describe(c));
    Tensor x = uniform(c.x, dt, -1.0, 1.0, ++seed).requires_grad_();
    Tensor w = uniform(c.w, dt, -1.0, 1.0, ++seed).requires_grad_();
    Tensor b = uniform({c.w[0]}, dt, -1.0, 1.0, ++seed).requires_grad_();
    auto f = [&](const std::vector<Tensor>& in) {
      return conv2d(channels_last(in[0]), in[1], in[2], c.stride, c.padding, c.dilation, c.groups);
    };
    EXPECT_TRUE(gradcheck(f, {x, w, b}, grad_tol(dt)));
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ConvChannelsLast, ::testing::Values(kFloat32, kBFloat16, kFloat16, kFloat64),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// A contiguous C=1 input is channels-last memory too: the conv stack runs NHWC from the
// first layer on (as the training CNN does).
TEST(ConvChannelsLastLayout, SingleChannelInputGivesChannelsLastOutput) {
  Tensor x = uniform({2, 1, 6, 6}, kBFloat16, -1.0, 1.0, 1);
  Tensor w = uniform({8, 1, 3, 3}, kBFloat16, -1.0, 1.0, 2);
  Tensor y = conv2d(x, w, Tensor(), {1, 1}, {1, 1});
  EXPECT_TRUE(has_channels_last_strides(y));
  EXPECT_TRUE(has_channels_last_strides(relu(y)));
  Tensor z = max_pool2d(relu(y), {2, 2});
  EXPECT_TRUE(has_channels_last_strides(z));
  // A contiguous multi-channel input keeps NCHW.
  Tensor y2 = conv2d(uniform({2, 8, 6, 6}, kBFloat16, -1.0, 1.0, 3), uniform({4, 8, 3, 3}, kBFloat16, -1.0, 1.0, 4),
                     Tensor(), {1, 1}, {1, 1});
  EXPECT_TRUE(y2.is_contiguous());
}

// conv-relu-pool-conv-relu-pool-flatten-linear in bfloat16 under autocast: fp32 master
// weights, the channels-last path against the all-NCHW one (the same model on the same
// data with each activation made contiguous), then a few SGD steps that lower the loss.
struct ChainNet {
  Tensor w1, b1, w2, b2, w3, b3;
  std::vector<Tensor> params() const { return {w1, b1, w2, b2, w3, b3}; }
  Tensor loss(const Tensor& x, const Tensor& y, bool nchw) const {
    auto lay = [&](const Tensor& t) { return nchw ? t.contiguous() : t; };
    Tensor h = lay(max_pool2d(lay(relu(lay(conv2d(x, w1, b1, {1, 1}, {1, 1})))), {2, 2}));
    h = lay(max_pool2d(lay(relu(lay(conv2d(h, w2, b2, {1, 1}, {1, 1})))), {2, 2}));
    return cross_entropy(linear(h.flatten(1), w3, b3), y);
  }
};

ChainNet make_chain(uint64_t seed) {
  ChainNet m{uniform({8, 3, 3, 3}, kFloat32, -0.3, 0.3, seed),        uniform({8}, kFloat32, -0.1, 0.1, seed + 1),
             uniform({16, 8, 3, 3}, kFloat32, -0.2, 0.2, seed + 2),   uniform({16}, kFloat32, -0.1, 0.1, seed + 3),
             uniform({5, 16 * 3 * 3}, kFloat32, -0.1, 0.1, seed + 4), uniform({5}, kFloat32, -0.1, 0.1, seed + 5)};
  for (Tensor* t : {&m.w1, &m.b1, &m.w2, &m.b2, &m.w3, &m.b3}) t->requires_grad_();
  return m;
}

TEST(ConvChannelsLastLayout, Bf16AutocastChainMatchesNchwAndTrains) {
  // bfloat16-exact input; given to autocast in the compute dtype already, because a cast
  // (Tensor::to) returns contiguous tensors and would hide the channels-last layout.
  const Tensor x16 = uniform({16, 3, 12, 12}, kBFloat16, -1.0, 1.0, 70);
  std::vector<double> labels;
  for (int i = 0; i < 16; ++i) labels.push_back(i % 5);
  const Tensor y = tensor(labels, {16}, kInt64);
  for (DType dt : {kFloat32, kBFloat16}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    ChainNet a = make_chain(80), b = make_chain(80);
    const Tensor x = x16.to(dt);
    {
      amp::AutocastGuard autocast(kCPU, kBFloat16, /*enabled=*/dt != kFloat32);
      Tensor la = a.loss(x, y, /*nchw=*/true);
      Tensor lb = b.loss(channels_last(x), y, /*nchw=*/false);
      la.backward();
      lb.backward();
      const Tol tol = dt == kFloat32 ? tol_for(kFloat32, 64) : tol_for(kBFloat16, 4);
      EXPECT_TRUE(all_close(lb, la, tol));
      const auto pa = a.params(), pb = b.params();
      for (size_t i = 0; i < pa.size(); ++i) {
        SCOPED_TRACE("param " + std::to_string(i));
        // bfloat16: float32 accumulation in other orders may round a few activations to
        // the neighbouring bfloat16, so compare the whole tensor as well as elementwise.
        if (dt == kFloat32) EXPECT_TRUE(all_close(pb[i].grad(), pa[i].grad(), tol_for(kFloat32, 256)));
        EXPECT_LT(relative_l2(pb[i].grad().to_vector(), pa[i].grad().to_vector()), dt == kFloat32 ? 1e-5 : 1e-2);
      }
    }
    // Training on the channels-last path lowers the loss.
    optim::SGD opt(b.params(), optim::SGDOptions(0.1).momentum(0.9));
    const Tensor xcl = channels_last(x);
    double first = 0, last = 0;
    for (int step = 0; step < 15; ++step) {
      opt.zero_grad();
      Tensor l;
      {
        amp::AutocastGuard autocast(kCPU, kBFloat16, /*enabled=*/dt != kFloat32);
        l = b.loss(xcl, y, false);
      }
      l.backward();
      opt.step();
      (step == 0 ? first : last) = l.item<double>();
    }
    std::printf("[ cnn  ] %s channels-last chain: loss %.4f -> %.4f\n", std::string(dtype_name(dt)).c_str(), first,
                last);
    EXPECT_LT(last, 0.7 * first);
  }
}

}  // namespace
}  // namespace tc
