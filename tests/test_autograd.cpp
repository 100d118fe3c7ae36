// Tests for the autograd engine: leaves, accumulation, retain_graph, grad mode, detach,
// root-gradient errors, diamonds, deep chains, mixed-precision gradient dtypes,
// autograd::grad, in-place checks, and freeing of saved tensors (no leaks).
#include <cmath>
#include <string>
#include <vector>

#include "common/testing.h"

namespace tc {
namespace {

using testing::all_close;

Tensor leaf(std::initializer_list<double> v, DType dt = kFloat32) { return tensor(v, dt).requires_grad_(); }

TEST(Autograd, RequiresGradAndLeaves) {
  Tensor x = ones({2});
  EXPECT_FALSE(x.requires_grad());
  EXPECT_TRUE(x.is_leaf());
  EXPECT_TRUE(x.requires_grad_().requires_grad());
  EXPECT_TRUE(x.is_leaf());
  Tensor y = mul(x, 3.0);
  EXPECT_TRUE(y.requires_grad());
  EXPECT_FALSE(y.is_leaf());
  ASSERT_NE(y.grad_fn(), nullptr);
  EXPECT_EQ(y.grad_fn()->name, "mul");
  EXPECT_FALSE(y.grad().defined());
  // Ops on tensors that do not require grad record nothing.
  Tensor z = mul(ones({2}), 3.0);
  EXPECT_FALSE(z.requires_grad());
  EXPECT_EQ(z.grad_fn(), nullptr);
  TC_EXPECT_ERROR(y.requires_grad_(false), "[requires_grad_] you can only change requires_grad flags of leaf");
  TC_EXPECT_ERROR(ones({2}, kInt64).requires_grad_(), "[requires_grad_] only tensors of floating point dtype");
  x.requires_grad_(false);
  EXPECT_FALSE(x.requires_grad());
  // Integer and bool results never carry a gradient.
  Tensor c = gt(leaf({1, 2}), 1.5);
  EXPECT_FALSE(c.requires_grad());
  EXPECT_FALSE(leaf({1.5}).to(kInt64).requires_grad());
}

TEST(Autograd, AccumulatesAcrossBackwardCalls) {
  Tensor x = leaf({1, 2, 3});
  mul(x, x).backward(ones({3}));  // 2x
  EXPECT_TRUE(all_close(x.grad(), {2, 4, 6}, {0, 0}));
  Tensor g1 = x.grad();
  mul(x, 5.0).backward(tensor({1.0, 2.0, 3.0}));
  EXPECT_TRUE(all_close(x.grad(), {7, 14, 21}, {0, 0}));
  x.set_grad(Tensor());
  EXPECT_FALSE(x.grad().defined());
  mul(x, 5.0).backward(ones({3}));
  EXPECT_TRUE(all_close(x.grad(), {5, 5, 5}, {0, 0}));
  TC_EXPECT_ERROR(x.set_grad(ones({2})), "[set_grad]");
  TC_EXPECT_ERROR(x.set_grad(ones({3}, kFloat64)), "[set_grad]");
}

TEST(Autograd, GradientDoesNotAliasUserTensors) {
  Tensor x = leaf({1, 2});
  Tensor g = tensor({3.0, 4.0});
  x.backward(g);  // the leaf is the root
  EXPECT_TRUE(all_close(x.grad(), {3, 4}, {0, 0}));
  g.fill_(100);  // the user's tensor is not the gradient
  EXPECT_TRUE(all_close(x.grad(), {3, 4}, {0, 0}));
  Tensor y = leaf({1, 2});
  Tensor h = ones({2});
  add(y, zeros({2})).backward(h);
  Tensor gy = y.grad();
  gy.fill_(7);
  EXPECT_TRUE(all_close(h, {1, 1}, {0, 0}));
}

TEST(Autograd, RetainGraph) {
  Tensor x = leaf({1, 2});
  Tensor y = mul(exp(x), x);  // d/dx = e^x (1 + x)
  y.backward(ones({2}), /*retain_graph=*/true);
  const double g0 = std::exp(1.0) * 2, g1 = std::exp(2.0) * 3;
  EXPECT_TRUE(all_close(x.grad(), {g0, g1}, {1e-5, 1e-6}));
  y.backward(ones({2}));  // retained: works, accumulates
  EXPECT_TRUE(all_close(x.grad(), {2 * g0, 2 * g1}, {1e-5, 1e-6}));
  TC_EXPECT_ERROR(y.backward(ones({2})), "retain_graph");
  TC_EXPECT_ERROR(y.backward(ones({2})), "second time");
}

TEST(Autograd, NoGradGuard) {
  Tensor x = leaf({1, 2});
  EXPECT_TRUE(is_grad_enabled());
  {
    NoGradGuard ng;
    EXPECT_FALSE(is_grad_enabled());
    Tensor y = mul(x, 2.0);
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(y.grad_fn(), nullptr);
    EXPECT_EQ(x.t().grad_fn(), nullptr);  // views too
    {
      NoGradGuard nested;
      EXPECT_FALSE(is_grad_enabled());
    }
    EXPECT_FALSE(is_grad_enabled());
    x.mul_(3.0);  // in-place on a leaf is allowed without grad mode
  }
  EXPECT_TRUE(is_grad_enabled());
  EXPECT_TRUE(all_close(x, {3, 6}, {0, 0}));
  set_grad_enabled(false);
  EXPECT_FALSE(mul(x, x).requires_grad());
  set_grad_enabled(true);
  EXPECT_TRUE(mul(x, x).requires_grad());
}

TEST(Autograd, DetachStopsGradient) {
  Tensor x = leaf({2, 3});
  Tensor y = mul(x, x.detach());  // d/dx = x (detached factor is a constant)
  y.backward(ones({2}));
  EXPECT_TRUE(all_close(x.grad(), {2, 3}, {0, 0}));
}

TEST(Autograd, RootGradientErrors) {
  Tensor x = leaf({1, 2});
  Tensor y = mul(x, 2.0);
  TC_EXPECT_ERROR(y.backward(), "[backward] grad can be implicitly created only for scalar outputs");
  TC_EXPECT_ERROR(y.backward(ones({3})), "[backward] gradient has shape (3,) but the output has shape (2,)");
  TC_EXPECT_ERROR(ones({2}).backward(ones({2})), "[backward] element 0 of tensors does not require grad");
  TC_EXPECT_ERROR(Tensor().backward(), "[backward]");
  // A one-element output needs no explicit gradient, and a float64 gradient is cast.
  Tensor s = mul(x.select(0, 1), 4.0);
  s.backward();
  EXPECT_TRUE(all_close(x.grad(), {0, 4}, {0, 0}));
  mul(x, 1.0).backward(tensor({0.5, 0.25}, kFloat64));
  EXPECT_EQ(x.grad().dtype(), kFloat32);
  EXPECT_TRUE(all_close(x.grad(), {0.5, 4.25}, {0, 0}));
}

TEST(Autograd, DiamondGraph) {
  // a = 2x, b = x^2, z = a * b + x = 2x^3 + x -> dz/dx = 6x^2 + 1
  Tensor x = leaf({1, -2, 0.5}, kFloat64);
  Tensor a = mul(x, 2.0);
  Tensor b = mul(x, x);
  Tensor z = add(mul(a, b), x);
  z.backward(ones({3}, kFloat64));
  EXPECT_TRUE(all_close(x.grad(), {7, 25, 2.5}, {1e-12, 1e-12}));
  // Two paths into an intermediate node: c = y + y with y = 3x.
  Tensor x2 = leaf({1});
  Tensor y = mul(x2, 3.0);
  add(y, y).backward(ones({1}));
  EXPECT_TRUE(all_close(x2.grad(), {6}, {0, 0}));
}

TEST(Autograd, DeepChainIsIterative) {
  // 10,000 recorded ops: neither backward nor the graph's destruction may recurse per node.
  const int n = 10000;
  Tensor x = leaf({1.0}, kFloat64);
  Tensor y = x;
  for (int i = 0; i < n; ++i) y = mul(y, 1.0001);
  EXPECT_NEAR(y.item<double>(), std::pow(1.0001, n), 1e-9);
  y.backward();
  EXPECT_NEAR(x.grad().item<double>(), std::pow(1.0001, n), 1e-9);
  y = Tensor();  // frees the chain
  // A longer chain of mixed ops, retained and freed without backward.
  Tensor z = leaf({0.5});
  for (int i = 0; i < 100000; ++i) z = add(z, 0.0);
  z = Tensor();
  SUCCEED();
}

TEST(Autograd, MixedPrecisionGradDtypes) {
  // An fp32 leaf cast to bf16 and used there: the gradient reaching it is fp32.
  Tensor w = leaf({1.5, -2.0, 0.25});
  Tensor wb = w.to(kBFloat16);
  EXPECT_EQ(wb.dtype(), kBFloat16);
  EXPECT_TRUE(wb.requires_grad());
  Tensor xb = tensor({2.0, 3.0, 4.0}, kBFloat16);
  Tensor y = mul(wb, xb);
  EXPECT_EQ(y.dtype(), kBFloat16);
  y.backward(ones({3}, kBFloat16));
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().dtype(), kFloat32);
  EXPECT_TRUE(all_close(w.grad(), {2, 3, 4}, {0, 0}));
  // A bf16 leaf in an op promoted to fp32: its gradient is bf16.
  Tensor h = leaf({1, 2}, kBFloat16);
  Tensor f = tensor({3.0, 5.0});
  Tensor o = mul(h, f);
  EXPECT_EQ(o.dtype(), kFloat32);
  o.backward(ones({2}));
  EXPECT_EQ(h.grad().dtype(), kBFloat16);
  EXPECT_TRUE(all_close(h.grad(), {3, 5}, {0, 0}));
  // fp16 leaf through to(fp32) and back.
  Tensor p = leaf({0.5, 1.0}, kFloat16);
  mul(p.to(kFloat32), 4.0).to(kFloat64).backward(ones({2}, kFloat64));
  EXPECT_EQ(p.grad().dtype(), kFloat16);
  EXPECT_TRUE(all_close(p.grad(), {4, 4}, {0, 0}));
  // Gradients accumulate in the leaf dtype when two dtypes reach the same leaf.
  Tensor q = leaf({1.0, 2.0});
  add(mul(q.to(kBFloat16), 2.0), mul(q, 3.0)).backward(ones({2}));
  EXPECT_EQ(q.grad().dtype(), kFloat32);
  EXPECT_TRUE(all_close(q.grad(), {5, 5}, {0, 0}));
}

TEST(Autograd, GradFunction) {
  Tensor x = leaf({1, 2, 3});
  Tensor w = leaf({4, 5, 6});
  Tensor y = mul(mul(x, x), w);  // dy/dx = 2 x w, dy/dw = x^2
  std::vector<Tensor> g = autograd::grad(y, {x, w}, ones({3}), /*retain_graph=*/true);
  ASSERT_EQ(g.size(), 2u);
  EXPECT_TRUE(all_close(g[0], {8, 20, 36}, {0, 0}));
  EXPECT_TRUE(all_close(g[1], {1, 4, 9}, {0, 0}));
  EXPECT_FALSE(x.grad().defined());
  EXPECT_FALSE(w.grad().defined());
  // Only x asked for: w's .grad() is still untouched.
  std::vector<Tensor> gx = autograd::grad(y, {x}, tensor({1.0, 0.0, 2.0}), true);
  EXPECT_TRUE(all_close(gx[0], {8, 0, 72}, {0, 0}));
  EXPECT_FALSE(w.grad().defined());
  EXPECT_FALSE(x.grad().defined());
  // With respect to an intermediate tensor.
  Tensor x2 = mul(x, x);
  Tensor z = mul(x2, 3.0);
  std::vector<Tensor> gi = autograd::grad(z, {x2}, ones({3}), true);
  EXPECT_TRUE(all_close(gi[0], {3, 3, 3}, {0, 0}));
  EXPECT_FALSE(x.grad().defined());
  // An input that the output does not depend on is an error, or undefined with allow_unused.
  Tensor u = leaf({1, 1});
  TC_EXPECT_ERROR(autograd::grad(z, {u}, ones({3}), true), "[autograd::grad] input 0 (shape (2,)) was not used");
  std::vector<Tensor> gu = autograd::grad(z, {x2, u}, ones({3}), true, false, /*allow_unused=*/true);
  EXPECT_TRUE(gu[0].defined());
  EXPECT_FALSE(gu[1].defined());
  // Dtype of the returned gradient is the input's.
  Tensor hb = leaf({2}, kBFloat16);
  std::vector<Tensor> gh = autograd::grad(mul(hb, tensor({3.0})), {hb});
  EXPECT_EQ(gh[0].dtype(), kBFloat16);
  EXPECT_TRUE(all_close(gh[0], {3}, {0, 0}));
  TC_EXPECT_ERROR(autograd::grad(ones({1}), {x}), "[autograd::grad]");
  TC_EXPECT_ERROR(autograd::grad(y, {ones({1})}, ones({3})), "[autograd::grad]");
  TC_EXPECT_ERROR(autograd::grad(y, {x}), "[autograd::grad] grad can be implicitly created only for scalar");
}

TEST(Autograd, InPlaceOnLeafRequiringGradIsRefused) {
  Tensor x = leaf({1, 2});
  TC_EXPECT_ERROR(x.fill_(0), "[fill_] a leaf tensor that requires grad");
  TC_EXPECT_ERROR(x.add_(ones({2})), "[add_]");
  TC_EXPECT_ERROR(x.mul_(2.0), "[mul_]");
  TC_EXPECT_ERROR(x.zero_(), "[fill_]");
  TC_EXPECT_ERROR(x.copy_(ones({2})), "[copy_]");
  EXPECT_TRUE(all_close(x, {1, 2}, {0, 0}));
  {
    NoGradGuard ng;
    x.add_(ones({2}));
  }
  EXPECT_TRUE(all_close(x, {2, 3}, {0, 0}));
}

TEST(Autograd, NoLeakAfterForwardBackward) {
  const int64_t before = memory_stats().current_bytes;
  {
    Tensor w = randn({64, 32}).requires_grad_();
    Tensor b = zeros({32}).requires_grad_();
    Tensor x = randn({16, 64, 1});
    Tensor h = add(mul(x, w), b);         // (16, 64, 32)
    Tensor y = mul(sigmoid(h), tanh(h));  // saves outputs and inputs
    Tensor z = div(exp(y.select(0, 0)), add(y.select(0, 1), 3.0));
    z = maximum(relu(z), pow(z, 2.0));
    z.backward(ones(z.sizes()));
    EXPECT_TRUE(w.grad().defined());
    EXPECT_TRUE(b.grad().defined());
  }
  EXPECT_EQ(memory_stats().current_bytes, before);
  {
    // Retained graph, never backwarded twice: still freed with the tensors.
    Tensor w = randn({1000}).requires_grad_();
    Tensor y = mul(exp(w), w);
    y.backward(ones({1000}), true);
  }
  EXPECT_EQ(memory_stats().current_bytes, before);
  {
    // autograd::grad as well.
    Tensor w = randn({1000}).requires_grad_();
    Tensor y = mul(sqrt(add(mul(w, w), 1.0)), w);
    auto g = autograd::grad(y, {w}, ones({1000}));
    EXPECT_EQ(g[0].numel(), 1000);
  }
  EXPECT_EQ(memory_stats().current_bytes, before);
}

TEST(Autograd, BackwardReleasesSavedTensors) {
  const int64_t n = 100000;
  Tensor x = randn({n}).requires_grad_();
  Tensor y = mul(x, 2.0);
  Tensor z = mul(y, y);  // saves y (n floats) twice
  y = Tensor();
  const int64_t held = memory_stats().current_bytes;
  z.backward(ones({n}));
  // y's storage was only held by z's node; backward releases it (-n floats) and makes
  // x.grad (+n floats). Were the saved tensors kept, this would be held + n floats.
  EXPECT_TRUE(x.grad().defined());
  EXPECT_EQ(memory_stats().current_bytes, held);
}

// A post-accumulate-grad hook sees the complete .grad() of its leaf, once per backward,
// in the order leaves complete; queued callbacks run after the whole graph.
TEST(Autograd, PostAccumulateGradHooksAndEndOfBackwardCallbacks) {
  Tensor a = full({2}, 3.0).requires_grad_(), b = full({2}, 5.0).requires_grad_();
  std::vector<std::string> events;
  const int64_t ha = autograd::register_post_accumulate_grad_hook(a, [&](const Tensor& leaf) {
    events.push_back("a grad " + std::to_string(leaf.grad().to_vector()[0]));
    autograd::queue_callback([&] { events.push_back("end"); });
  });
  autograd::register_post_accumulate_grad_hook(
      b, [&](const Tensor& leaf) { events.push_back("b grad " + std::to_string(leaf.grad().to_vector()[0])); });
  sum(a * b + a).backward();  // da = b + 1 = 6, db = a = 3
  ASSERT_EQ(events.size(), 3u) << ::testing::PrintToString(events);
  EXPECT_EQ(events.back(), "end");
  EXPECT_NE(std::find(events.begin(), events.end(), "a grad 6.000000"), events.end());
  EXPECT_NE(std::find(events.begin(), events.end(), "b grad 3.000000"), events.end());
  sum(a * 2.0).backward();  // accumulates: 6 + 2 = 8; the hook sees the sum
  EXPECT_EQ(events[3], "a grad 8.000000");
  EXPECT_EQ(events.back(), "end");
  autograd::remove_post_accumulate_grad_hook(a, ha);
  const size_t before = events.size();
  sum(a * 2.0).backward();
  EXPECT_EQ(events.size(), before);  // removed
  // autograd::grad never writes .grad(), so it calls no hook
  autograd::grad(sum(b * 2.0), {b});
  EXPECT_EQ(events.size(), before);
  EXPECT_TRUE(testing::throws_with([] { autograd::queue_callback([] {}); }, {"only be called while backward"}));
  EXPECT_TRUE(testing::throws_with([&] { autograd::register_post_accumulate_grad_hook(a * 2.0, [](const Tensor&) {}); },
                                   {"non-leaf"}));
}

// A callback that throws makes backward throw, after the other callbacks ran.
TEST(Autograd, ThrowingEndOfBackwardCallbackPropagates) {
  Tensor a = full({1}, 1.0).requires_grad_();
  bool second_ran = false;
  autograd::register_post_accumulate_grad_hook(a, [&](const Tensor&) {
    autograd::queue_callback([] { throw Error("[test] boom"); });
    autograd::queue_callback([&] { second_ran = true; });
  });
  EXPECT_TRUE(testing::throws_with([&] { sum(a * 3.0).backward(); }, {"boom"}));
  EXPECT_TRUE(second_ran);
  EXPECT_EQ(a.grad().to_vector(), std::vector<double>{3.0});
}

// Higher-order gradients (PyTorch's create_graph): the gradient is itself differentiable.
TEST(Autograd, CreateGraphGivesDifferentiableGradients) {
  Tensor x = leaf({0.5, -1.0, 2.0});
  // y = sum(x^3): dy/dx = 3 x^2, d(sum dy/dx)/dx = 6 x.
  const Tensor y = sum(mul(mul(x, x), x));
  const std::vector<Tensor> g = autograd::grad({y}, {x}, {}, std::nullopt, /*create_graph=*/true);
  EXPECT_TRUE(g[0].requires_grad());
  EXPECT_TRUE(all_close(g[0], {0.75, 3.0, 12.0}, {0, 0}));
  sum(g[0]).backward();
  EXPECT_TRUE(all_close(x.grad(), {3.0, -6.0, 12.0}, {0, 0}));
  // Without create_graph the gradient carries no graph.
  const Tensor y2 = sum(mul(mul(x, x), x));
  EXPECT_FALSE(autograd::grad(y2, {x})[0].requires_grad());
}

TEST(Autograd, BackwardWithCreateGraphWritesDifferentiableGrad) {
  Tensor w = leaf({1.0, 2.0});
  const Tensor loss = sum(mul(mul(w, w), w));
  loss.backward(Tensor(), std::nullopt, /*create_graph=*/true);  // retain_graph follows create_graph
  ASSERT_TRUE(w.grad().requires_grad());
  EXPECT_TRUE(all_close(w.grad(), {3.0, 12.0}, {0, 0}));
  // The penalty |dL/dw|^2 differentiated: d/dw sum((3 w^2)^2) = 36 w^3.
  const Tensor penalty = sum(mul(w.grad(), w.grad()));
  // retain_graph: the penalty's graph runs through the loss's, which backward uses again below.
  const std::vector<Tensor> h = autograd::grad(penalty, {w}, Tensor(), /*retain_graph=*/true);
  EXPECT_TRUE(all_close(h[0], {36.0, 288.0}, {0, 0}));
  // The graph was retained: a second backward adds to .grad, out of place.
  loss.backward();
  EXPECT_TRUE(all_close(w.grad(), {6.0, 24.0}, {0, 0}));
}

TEST(Autograd, DoubleBackwardOfAnOpWithoutOneIsANamedError) {
  // A backward recorded without Differentiable::kTwice (a custom function's, say).
  Tensor a = leaf({1.0, 4.0});
  const Tensor a2 = mul(a, a);
  const Tensor y = autograd::record("cube_by_hand", mul(a2.detach(), a.detach()), {a},
                                    [a = a.detach()](const Tensor& g, const std::vector<bool>&) {
                                      return std::vector<Tensor>{mul(mul(g, mul(a, a)), 3.0)};
                                    });
  const std::vector<Tensor> g = autograd::grad({sum(mul(y, a2))}, {a}, {}, std::nullopt, /*create_graph=*/true);
  EXPECT_TRUE(all_close(g[0], {5.0, 1280.0}, {0, 0}));  // d(a^5)/da = 5 a^4: the first derivative is right
  TC_EXPECT_ERROR(sum(g[0]).backward(), "[autograd] double backward of cube_by_hand is not implemented");
}

TEST(Autograd, GradOfSeveralOutputsWeighsEach) {
  Tensor x = leaf({1.0, 2.0});
  const Tensor y1 = mul(x, x), y2 = mul(x, 3.0);
  const std::vector<Tensor> g = autograd::grad({y1, y2}, {x}, {tensor({1.0, 1.0}), tensor({2.0, 0.0})});
  EXPECT_TRUE(all_close(g[0], {8.0, 4.0}, {0, 0}));  // 2 x + (6, 0)
  TC_EXPECT_ERROR(autograd::grad({y1, y2}, {x}, {tensor({1.0, 1.0})}), "[autograd::grad] got 1 grad_outputs for 2");
}

}  // namespace
}  // namespace tc
