// tc::InferenceMode (c10::InferenceMode): nothing recorded inside, inference tensors made
// there (factories, op results, views of them), no version counter on them, nesting and
// threads, the errors for inference tensors in recorded ops and in-place ops outside, the
// weight-cast cache, and a model's outputs equal to those under NoGradGuard.
#include <gtest/gtest.h>

#include <thread>

#include "common/testing.h"
#include "tensorcast/tensorcast.h"

namespace {

using namespace tc;
using amp::AutocastGuard;
using tc::testing::bits_equal;
using tc::testing::expect_error;
using tc::testing::make_param;
using tc::testing::uniform;

const std::string kSavedMsg =
    "Inference tensors cannot be saved for backward. To work around you can make a clone to get a normal tensor and "
    "use it in autograd.";
const std::string kInplaceMsg =
    "Inplace update to inference tensor outside InferenceMode is not allowed. You can make a clone to get a normal "
    "tensor before doing inplace update.";

// The exact message of the tc::Error fn throws ("" when it throws none).
template <class F>
std::string error_of(F fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(InferenceMode, GuardSetsAndRestoresTheModes) {
  EXPECT_FALSE(InferenceMode::is_enabled());
  EXPECT_TRUE(is_grad_enabled());
  {
    InferenceMode guard;
    EXPECT_TRUE(InferenceMode::is_enabled());
    EXPECT_FALSE(is_grad_enabled());
    {
      InferenceMode inner;  // nesting
      EXPECT_TRUE(InferenceMode::is_enabled());
      EXPECT_FALSE(is_grad_enabled());
      {
        InferenceMode off(false);  // c10's: disabling inference mode enables grad mode
        EXPECT_FALSE(InferenceMode::is_enabled());
        EXPECT_TRUE(is_grad_enabled());
      }
      EXPECT_TRUE(InferenceMode::is_enabled());
      EXPECT_FALSE(is_grad_enabled());
    }
    EXPECT_TRUE(InferenceMode::is_enabled());
  }
  EXPECT_FALSE(InferenceMode::is_enabled());
  EXPECT_TRUE(is_grad_enabled());
  {
    NoGradGuard no_grad;
    {
      InferenceMode off(false);
      EXPECT_TRUE(is_grad_enabled());
    }
    EXPECT_FALSE(is_grad_enabled());  // the guard restores what it found
  }
  EXPECT_TRUE(is_grad_enabled());
}

TEST(InferenceMode, NothingIsRecorded) {
  const Tensor w = make_param({5, 3}, kFloat32, 1);
  const Tensor b = make_param({5}, kFloat32, 2);
  const Tensor x = uniform({4, 3}, kFloat32);
  InferenceMode guard;
  for (const Tensor& y : {linear(x, w, b), relu(w), w * w, w.sum(), w.to(kBFloat16), w.t(), w.narrow(0, 1, 2)}) {
    EXPECT_EQ(y.grad_fn(), nullptr);
    EXPECT_FALSE(y.requires_grad());
  }
  // Not even where grad mode is turned back on: c10 skips autograd whatever GradMode says.
  set_grad_enabled(true);
  const Tensor y = linear(x, w, b);
  set_grad_enabled(false);
  EXPECT_EQ(y.grad_fn(), nullptr);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_TRUE(y.is_inference());
}

TEST(InferenceMode, TensorsMadeInsideAreInferenceTensors) {
  const Tensor normal = uniform({2, 3}, kFloat32);
  float blob[6] = {1, 2, 3, 4, 5, 6};
  Tensor made, view_of_normal;
  {
    InferenceMode guard;
    for (const Tensor& t :
         {zeros({2, 3}), ones({2}), full({2}, 3.0), arange(4.0), randn({3}), empty({2}), from_blob(blob, {6}),
          normal + 1, exp(normal), normal.clone(), normal.to(kBFloat16), normal.sum(), matmul(normal, normal.t())})
      EXPECT_TRUE(t.is_inference());
    // A view has its base's kind: a view of a normal tensor stays normal (as c10's).
    view_of_normal = normal.view({3, 2});
    EXPECT_FALSE(view_of_normal.is_inference());
    EXPECT_FALSE(normal.detach().is_inference());
    made = ones({2, 3});
    EXPECT_TRUE(made.t().is_inference());
  }
  EXPECT_FALSE(normal.is_inference());
  EXPECT_FALSE(zeros({2}).is_inference());
  EXPECT_FALSE((normal + 1).is_inference());
  // Outside: a view of an inference tensor is one too; a functional op on it gives a normal tensor.
  EXPECT_TRUE(made.view({6}).is_inference());
  EXPECT_TRUE(made.detach().is_inference());
  EXPECT_TRUE(made[0].is_inference());
  const Tensor sum = made * 2;
  EXPECT_FALSE(sum.is_inference());
  EXPECT_EQ(sum.to_vector(), std::vector<double>(6, 2.0));
}

TEST(InferenceMode, NoVersionBumpsOnInferenceTensors) {
  Tensor normal = zeros({2, 3});
  Tensor inf;
  {
    InferenceMode guard;
    inf = zeros({2, 3});
    EXPECT_EQ(inf._version(), 0);
    inf.add_(ones({2, 3}));
    inf.mul_(3.0);
    inf.fill_(2.0);
    inf.view({6}).copy_(arange(6.0));
    inf[1].zero_();
    EXPECT_EQ(inf._version(), 0);
    EXPECT_EQ(inf.to_vector(), (std::vector<double>{0, 1, 2, 0, 0, 0}));
    // A normal tensor written inside InferenceMode still bumps its version (as PyTorch).
    const int64_t v = normal._version();
    normal.add_(ones({2, 3}));
    normal.view({6}).mul_(2.0);
    EXPECT_EQ(normal._version(), v + 2);
  }
  EXPECT_EQ(inf._version(), 0);
  EXPECT_EQ(normal.to_vector(), std::vector<double>(6, 2.0));
}

TEST(InferenceMode, IsThreadLocal) {
  InferenceMode guard;
  bool other_enabled = true, other_grad = false, other_inference = true;
  std::thread([&] {
    other_enabled = InferenceMode::is_enabled();
    other_grad = is_grad_enabled();
    const Tensor w = make_param({3}, kFloat32, 3);
    const Tensor y = w * 2;
    other_inference = y.is_inference() || !y.requires_grad();
  }).join();
  EXPECT_FALSE(other_enabled);
  EXPECT_TRUE(other_grad);
  EXPECT_FALSE(other_inference);  // recorded, and a normal tensor
  EXPECT_TRUE(InferenceMode::is_enabled());
  EXPECT_TRUE(ones({1}).is_inference());
}

TEST(InferenceMode, InferenceTensorInARecordedOpOutsideIsRefused) {
  const Tensor w = make_param({5, 3}, kFloat32, 1);
  Tensor x_inf, w_inf;
  {
    InferenceMode guard;
    x_inf = uniform({4, 3}, kFloat32).clone();
    w_inf = make_param({5, 3}, kFloat32, 4);  // a parameter made inside: allowed, and it requires grad
    EXPECT_TRUE(w_inf.requires_grad());
    EXPECT_TRUE(w_inf.is_inference());
  }
  ASSERT_TRUE(x_inf.is_inference());
  // An input of a recorded op (the weight requires grad): refused before any graph exists.
  EXPECT_EQ(error_of([&] { linear(x_inf, w).sum().backward(); }), "[autograd] linear: " + kSavedMsg);
  EXPECT_EQ(error_of([&] { (void)mul(w, x_inf.narrow(0, 0, 1).expand({5, 3})); }), "[autograd] mul: " + kSavedMsg);
  // An inference tensor that requires grad itself, in any recorded op (casts included).
  EXPECT_EQ(error_of([&] { (void)relu(w_inf); }), "[autograd] relu: " + kSavedMsg);
  EXPECT_EQ(error_of([&] { (void)w_inf.to(kBFloat16); }), "[autograd] to: " + kSavedMsg);
  // Nothing recorded, nothing refused: under NoGradGuard, or with no input requiring grad.
  {
    NoGradGuard no_grad;
    const Tensor y = linear(x_inf, w);
    EXPECT_FALSE(y.is_inference());
    EXPECT_TRUE(bits_equal(y, linear(x_inf.clone(), w)));
  }
  EXPECT_FALSE((x_inf * 2).requires_grad());
}

TEST(InferenceMode, InplaceOnInferenceTensorOutsideIsRefused) {
  Tensor inf;
  {
    InferenceMode guard;
    inf = zeros({2, 3});
  }
  EXPECT_EQ(error_of([&] { inf.add_(ones({2, 3})); }), "[add_] " + kInplaceMsg);
  EXPECT_EQ(error_of([&] { inf.mul_(2.0); }), "[mul_] " + kInplaceMsg);
  EXPECT_EQ(error_of([&] { inf.zero_(); }), "[fill_] " + kInplaceMsg);
  EXPECT_EQ(error_of([&] { inf[0].copy_(ones({3})); }), "[copy_] " + kInplaceMsg);  // through a view too
  {
    NoGradGuard no_grad;  // no-grad is not inference mode
    EXPECT_EQ(error_of([&] { inf.fill_(1.0); }), "[fill_] " + kInplaceMsg);
  }
  EXPECT_EQ(error_of([&] { inf.requires_grad_(true); }),
            "[requires_grad_] Setting requires_grad=True on inference tensor outside InferenceMode is not allowed.");
  EXPECT_EQ(inf.to_vector(), std::vector<double>(6, 0.0));  // nothing was written
  {
    InferenceMode guard;  // inside again, it may be written
    inf.fill_(1.0);
  }
  EXPECT_EQ(inf.to_vector(), std::vector<double>(6, 1.0));
}

TEST(InferenceMode, CloneOutsideGivesANormalTensorForAutograd) {
  const Tensor w = make_param({5, 3}, kFloat32, 1);
  const Tensor x = uniform({4, 3}, kFloat32);
  Tensor x_inf;
  {
    InferenceMode guard;
    x_inf = x * 1.0;
  }
  Tensor c = x_inf.clone();
  EXPECT_FALSE(c.is_inference());
  c.add_(zeros({4, 3}));  // a normal tensor may be written in place
  EXPECT_EQ(c._version(), 1);
  linear(c, w).sum().backward();
  const Tensor from_clone = w.grad().clone();
  w.set_grad(Tensor());
  linear(x, w).sum().backward();
  EXPECT_TRUE(bits_equal(from_clone, w.grad()));
}

// An inference parameter has no _version(), so the cache cannot key on it: an in-place
// write inside InferenceMode must still make its 16-bit copy stale.
TEST(InferenceMode, AutocastCacheNeverServesAStaleInferenceWeight) {
  const Tensor x = uniform({4, 16}, kFloat32);
  InferenceMode guard;
  Tensor w = make_param({8, 16}, kFloat32, 5);  // an fp32 leaf requiring grad: cacheable
  ASSERT_TRUE(w.is_inference());
  AutocastGuard autocast(kCPU, kBFloat16);
  amp::reset_autocast_cache_stats();
  const Tensor y1 = linear(x, w);
  EXPECT_TRUE(bits_equal(linear(x, w), y1));
  EXPECT_EQ(amp::autocast_cache_stats().hits, 1);
  w.mul_(0.5);
  EXPECT_EQ(w._version(), 0);
  const Tensor y2 = linear(x, w);
  EXPECT_EQ(amp::autocast_cache_stats().stale_replaced, 1);
  EXPECT_TRUE(bits_equal(y2, linear(x.to(kBFloat16), w.to(kBFloat16))));
  EXPECT_FALSE(bits_equal(y2, y1));
}

// A normal parameter's copy made inside InferenceMode outlives that scope: the region goes
// on, and a grad-mode op there takes the copy into its graph.
TEST(InferenceMode, AutocastCacheCopyMadeInsideServesGradModeOutside) {
  const Tensor x = uniform({4, 16}, kFloat32);
  const Tensor w = make_param({8, 16}, kFloat32, 6);
  AutocastGuard autocast(kCPU, kBFloat16);
  amp::reset_autocast_cache_stats();
  Tensor y_inf;
  {
    InferenceMode guard;
    y_inf = linear(x, w);
    EXPECT_TRUE(y_inf.is_inference());
  }
  const Tensor y = linear(x, w);
  EXPECT_FALSE(y.is_inference());
  EXPECT_TRUE(y.requires_grad());
  EXPECT_TRUE(bits_equal(y, y_inf));
  const auto s = amp::autocast_cache_stats();
  EXPECT_EQ(s.misses, 1);
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.grad_attached, 1);
  y.to(kFloat32).sum().backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().dtype(), kFloat32);
}

TEST(InferenceMode, ModelForwardEqualsNoGrad) {
  nn::Sequential net(nn::Linear(32, 64), nn::GELU(), nn::Linear(64, 64), nn::ReLU(), nn::Linear(64, 10));
  const Tensor x = uniform({16, 32}, kFloat32, -1, 1, 7);
  for (const bool autocast_on : {true, false}) {
    Tensor under_no_grad, under_inference;
    {
      AutocastGuard autocast(kCPU, amp::AutocastOptions().enabled(autocast_on));
      NoGradGuard no_grad;
      under_no_grad = net->forward(x);
    }
    {
      AutocastGuard autocast(kCPU, amp::AutocastOptions().enabled(autocast_on));
      InferenceMode guard;
      under_inference = net->forward(x);
    }
    EXPECT_EQ(under_inference.dtype(), autocast_on ? kBFloat16 : kFloat32);
    EXPECT_TRUE(under_inference.is_inference());
    EXPECT_FALSE(under_no_grad.is_inference());
    EXPECT_EQ(under_inference.grad_fn(), nullptr);
    EXPECT_TRUE(bits_equal(under_inference, under_no_grad));
  }
  // A model built inside InferenceMode: its parameters are inference tensors that require
  // grad; outside, they serve no-grad forwards and are refused by recorded ones.
  nn::Linear lin{nullptr};
  Tensor built_inside;
  {
    InferenceMode guard;
    lin = nn::Linear(32, 10);
    for (const Tensor& p : lin->parameters()) {
      EXPECT_TRUE(p.is_inference());
      EXPECT_TRUE(p.requires_grad());
    }
    built_inside = lin->forward(x);
  }
  EXPECT_TRUE(built_inside.is_inference());
  {
    NoGradGuard no_grad;
    EXPECT_TRUE(bits_equal(lin->forward(x), built_inside));
  }
  EXPECT_EQ(error_of([&] { (void)lin->forward(x); }), "[autograd] linear: " + kSavedMsg);
}

}  // namespace
