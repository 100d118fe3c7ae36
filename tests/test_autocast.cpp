// Autocast: the policy of every dispatched op, region state (nesting, threads, options),
// the weight-cast cache, gradients through autocast, equality with explicit casts, user
// policies, the hardware warning, and the generated docs/amp-policy.md.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <thread>

#include "amp/dispatch.h"
#include "common/testing.h"
#include "tensorcast/tensorcast.h"

namespace {

using namespace tc;
using amp::AutocastGuard;
using amp::CastPolicy;
using tc::testing::uniform;

// One call of each dispatched op with floating inputs of dtype `dt` (integer and bool
// arguments stay as they are).
std::map<std::string, std::function<Tensor(DType)>> op_cases() {
  auto u = [](const Shape& s, DType dt, double lo = -1, double hi = 1) { return uniform(s, dt, lo, hi, 3); };
  auto pos = [u](const Shape& s, DType dt) { return u(s, dt, 0.5, 2.0); };
  std::map<std::string, std::function<Tensor(DType)>> c;
  c["add"] = [=](DType d) { return add(u({4, 3}, d), u({4, 3}, d)); };
  c["sub"] = [=](DType d) { return sub(u({4, 3}, d), u({4, 3}, d)); };
  c["mul"] = [=](DType d) { return mul(u({4, 3}, d), u({4, 3}, d)); };
  c["div"] = [=](DType d) { return div(u({4, 3}, d), pos({4, 3}, d)); };
  c["pow"] = [=](DType d) { return pow(pos({4, 3}, d), 2.5); };
  c["maximum"] = [=](DType d) { return maximum(u({4, 3}, d), u({4, 3}, d)); };
  c["minimum"] = [=](DType d) { return minimum(u({4, 3}, d), u({4, 3}, d)); };
  c["neg"] = [=](DType d) { return neg(u({4, 3}, d)); };
  c["abs"] = [=](DType d) { return abs(u({4, 3}, d)); };
  c["exp"] = [=](DType d) { return exp(u({4, 3}, d)); };
  c["log"] = [=](DType d) { return log(pos({4, 3}, d)); };
  c["log1p"] = [=](DType d) { return log1p(pos({4, 3}, d)); };
  c["sqrt"] = [=](DType d) { return sqrt(pos({4, 3}, d)); };
  c["rsqrt"] = [=](DType d) { return rsqrt(pos({4, 3}, d)); };
  c["reciprocal"] = [=](DType d) { return reciprocal(pos({4, 3}, d)); };
  c["tanh"] = [=](DType d) { return tanh(u({4, 3}, d)); };
  c["sigmoid"] = [=](DType d) { return sigmoid(u({4, 3}, d)); };
  c["relu"] = [=](DType d) { return relu(u({4, 3}, d)); };
  c["gelu"] = [=](DType d) { return gelu(u({4, 3}, d)); };
  c["silu"] = [=](DType d) { return silu(u({4, 3}, d)); };
  c["clamp"] = [=](DType d) { return clamp(u({4, 3}, d), -0.5, 0.5); };
  c["where"] = [=](DType d) { return where(u({4, 3}, kFloat32) > 0.0, u({4, 3}, d), u({4, 3}, d)); };
  c["sum"] = [=](DType d) { return sum(u({4, 3}, d), {1}); };
  c["mean"] = [=](DType d) { return mean(u({4, 3}, d)); };
  c["var"] = [=](DType d) { return var(u({4, 3}, d), {1}); };
  c["max"] = [=](DType d) { return max(u({4, 3}, d)); };
  c["min"] = [=](DType d) { return std::get<0>(min(u({4, 3}, d), 1)); };
  c["sum_to_size"] = [=](DType d) { return sum_to_size(u({4, 3}, d), {1, 3}); };
  c["matmul"] = [=](DType d) { return matmul(u({2, 4, 3}, d), u({3, 5}, d)); };
  c["mm"] = [=](DType d) { return mm(u({4, 3}, d), u({3, 5}, d)); };
  c["bmm"] = [=](DType d) { return bmm(u({2, 4, 3}, d), u({2, 3, 5}, d)); };
  c["linear"] = [=](DType d) { return linear(u({4, 3}, d), u({5, 3}, d), u({5}, d)); };
  c["conv2d"] = [=](DType d) { return conv2d(u({1, 2, 5, 5}, d), u({3, 2, 3, 3}, d), u({3}, d)); };
  c["max_pool2d"] = [=](DType d) { return max_pool2d(u({1, 2, 4, 4}, d), {2, 2}); };
  c["avg_pool2d"] = [=](DType d) { return avg_pool2d(u({1, 2, 4, 4}, d), {2, 2}); };
  c["adaptive_avg_pool2d"] = [=](DType d) { return adaptive_avg_pool2d(u({1, 2, 4, 4}, d), {1, 1}); };
  c["softmax"] = [=](DType d) { return softmax(u({4, 3}, d), -1); };
  c["log_softmax"] = [=](DType d) { return log_softmax(u({4, 3}, d), -1); };
  c["layer_norm"] = [=](DType d) { return layer_norm(u({4, 3}, d), {3}, u({3}, d), u({3}, d)); };
  c["batch_norm"] = [=](DType d) {
    return batch_norm(u({4, 3}, d), zeros({3}), ones({3}), u({3}, kFloat32), u({3}, kFloat32), false);
  };
  c["dropout"] = [=](DType d) { return dropout(u({4, 3}, d), 0.5, true); };
  c["embedding"] = [=](DType d) { return embedding(u({5, 3}, d), tensor(std::vector<int64_t>{0, 4, 2})); };
  c["cat"] = [=](DType d) { return cat({u({2, 3}, d), u({1, 3}, d)}); };
  c["stack"] = [=](DType d) { return stack({u({2, 3}, d), u({2, 3}, d)}); };
  c["cross_entropy"] = [=](DType d) { return cross_entropy(u({4, 3}, d), tensor(std::vector<int64_t>{0, 2, 1, 1})); };
  c["nll_loss"] = [=](DType d) { return nll_loss(u({4, 3}, d), tensor(std::vector<int64_t>{0, 2, 1, 1})); };
  c["mse_loss"] = [=](DType d) { return mse_loss(u({4, 3}, d), u({4, 3}, d)); };
  c["binary_cross_entropy_with_logits"] = [=](DType d) {
    return binary_cross_entropy_with_logits(u({4, 3}, d), u({4, 3}, d, 0, 1));
  };
  return c;
}

// What the policy makes of inputs of dtype `in` in a region of dtype `region`.
DType expected_dtype(CastPolicy p, DType in, DType region) {
  if (in == kFloat64) return kFloat64;  // float64 is never cast
  switch (p) {
    case CastPolicy::LowerPrecision:
      return region;
    case CastPolicy::Fp32:
      return kFloat32;
    default:
      return in;  // promote over one dtype, passthrough: unchanged
  }
}

const std::vector<DType> kInputs = {kFloat32, kBFloat16, kFloat16, kFloat64};

TEST(AutocastPolicy, ShippedPoliciesOfKeyOps) {
  EXPECT_EQ(amp::get_policy("matmul"), CastPolicy::LowerPrecision);
  EXPECT_EQ(amp::get_policy("conv2d"), CastPolicy::LowerPrecision);
  EXPECT_EQ(amp::get_policy("linear"), CastPolicy::LowerPrecision);
  for (const char* op : {"softmax", "log_softmax", "layer_norm", "exp", "log", "log1p", "pow", "rsqrt", "reciprocal",
                         "sum", "cross_entropy", "nll_loss", "mse_loss", "binary_cross_entropy_with_logits"})
    EXPECT_EQ(amp::get_policy(op), CastPolicy::Fp32) << op;
  for (const char* op : {"cat", "stack"}) EXPECT_EQ(amp::get_policy(op), CastPolicy::Promote) << op;
  // Their kernels promote mixed inputs themselves (PyTorch lists none of them either).
  for (const char* op : {"add", "sub", "mul", "div", "where", "maximum", "minimum", "relu", "batch_norm", "embedding",
                         "mean", "var", "dropout", "max_pool2d"})
    EXPECT_EQ(amp::get_policy(op), CastPolicy::Passthrough) << op;
}

TEST(AutocastPolicy, EveryDispatchedOpIsInTheTable) {
  for (const auto& [name, fn] : op_cases()) EXPECT_TRUE(amp::has_policy(name)) << name;
}

// The acceptance test: each op, each input dtype, in a bf16 and an fp16 region.
TEST(AutocastPolicy, OutputDtypePerOp) {
  for (DType region : {kBFloat16, kFloat16}) {
    for (const auto& [name, fn] : op_cases()) {
      const CastPolicy p = amp::get_policy(name);
      for (DType in : kInputs) {
        Tensor outside = fn(in);
        Tensor inside;
        {
          AutocastGuard g(kCPU, region);
          inside = fn(in);
        }
        const DType want = expected_dtype(p, outside.dtype(), region);
        EXPECT_EQ(inside.dtype(), want) << name << " with " << dtype_name(in) << " inputs in a " << dtype_name(region)
                                        << " region (" << amp::policy_name(p) << ")";
      }
    }
  }
}

TEST(AutocastPolicy, OutsideARegionNothingIsCast) {
  for (const auto& [name, fn] : op_cases())
    for (DType in : kInputs) {
      Tensor out = fn(in);
      if (name != "cross_entropy" && name != "nll_loss") EXPECT_EQ(out.dtype(), in) << name;
    }
  EXPECT_FALSE(amp::is_autocast_enabled(kCPU));
}

TEST(AutocastPolicy, PromoteMixedInputs) {
  Tensor b = uniform({4, 3}, kBFloat16), f = uniform({4, 3}, kFloat32), h = uniform({4, 3}, kFloat16);
  Tensor d = uniform({4, 3}, kFloat64);
  AutocastGuard g(kCPU, kBFloat16);
  EXPECT_EQ(cat({b, f}).dtype(), kFloat32);
  EXPECT_EQ(stack({b, f}).dtype(), kFloat32);
  EXPECT_EQ(add(b, f).dtype(), kFloat32);
  EXPECT_EQ(mul(h, b).dtype(), kFloat32);  // promote_types(fp16, bf16) = fp32
  EXPECT_EQ(where(f > 0.0, b, f).dtype(), kFloat32);
  EXPECT_EQ(cat({b, d}).dtype(), kFloat64);  // float64 is never cast; cat promotes itself
  // A 0-d fp32 tensor does not widen a dimensioned bf16 one (torch.result_type), and the
  // values equal the same call outside the region.
  Tensor s = scalar_tensor(1.1);
  Tensor in_region = mul(b, s);
  EXPECT_EQ(in_region.dtype(), kBFloat16);
  Tensor outside;
  {
    AutocastGuard off(kCPU, kBFloat16, /*enabled=*/false);
    outside = mul(b, s);
  }
  EXPECT_TRUE(tc::testing::equal(in_region, outside));
}

// add/mul/... read mixed dtypes in the kernel: no cast copy in a region, the same values
// and gradients as casting first would give.
TEST(AutocastPolicy, NativelyPromotingOpsMakeNoCastCopies) {
  Tensor b = uniform({64, 33}, kBFloat16).requires_grad_(), f = uniform({64, 33}, kFloat32).requires_grad_();
  Tensor y, y_cast;
  {
    AutocastGuard g(kCPU, kBFloat16);
    profiler::Profile prof;
    y = add(mul(b, f), b);
    prof.stop();
    for (const profiler::OpStat& s : prof.key_averages()) EXPECT_NE(s.name, "to");
  }
  y_cast = add(mul(b.to(kFloat32), f), b.to(kFloat32));
  EXPECT_EQ(y.dtype(), kFloat32);
  EXPECT_TRUE(tc::testing::equal(y, y_cast));
  std::vector<Tensor> g1 = autograd::grad(y.sum(), {b, f});
  std::vector<Tensor> g2 = autograd::grad(y_cast.sum(), {b, f});
  EXPECT_EQ(g1[0].dtype(), kBFloat16);
  EXPECT_TRUE(tc::testing::equal(g1[0], g2[0]));
  EXPECT_TRUE(tc::testing::equal(g1[1], g2[1]));
}

TEST(AutocastPolicy, IntegerAndBoolArgumentsAreUntouched) {
  AutocastGuard g(kCPU, kBFloat16);
  Tensor target = tensor(std::vector<int64_t>{0, 2, 1, 1});
  Tensor loss = cross_entropy(uniform({4, 3}, kBFloat16), target);
  EXPECT_EQ(loss.dtype(), kFloat32);
  EXPECT_EQ(target.dtype(), kInt64);
  Tensor i = tensor(std::vector<int64_t>{1, 2, 3});
  EXPECT_EQ(add(i, i).dtype(), kInt64);
  EXPECT_EQ(where(i > 1.0, i, i).dtype(), kInt64);
}

TEST(AutocastState, GuardQueriesAndDefaults) {
  EXPECT_FALSE(amp::is_autocast_enabled(kCPU));
  EXPECT_EQ(amp::default_autocast_dtype(kCPU), kBFloat16);
  EXPECT_EQ(amp::default_autocast_dtype(kCUDA), kFloat16);
  {
    AutocastGuard g(kCPU);
    EXPECT_TRUE(amp::is_autocast_enabled(kCPU));
    EXPECT_FALSE(amp::is_autocast_enabled(kCUDA));
    EXPECT_EQ(amp::get_autocast_dtype(kCPU), kBFloat16);
    EXPECT_EQ(amp::autocast_nesting_depth(), 1);
  }
  {
    AutocastGuard g(kCPU, amp::AutocastOptions().dtype(kFloat16).cache_enabled(false));
    EXPECT_EQ(amp::get_autocast_dtype(kCPU), kFloat16);
    EXPECT_FALSE(amp::is_autocast_cache_enabled());
  }
  EXPECT_TRUE(amp::is_autocast_cache_enabled());
  EXPECT_EQ(amp::autocast_nesting_depth(), 0);
  EXPECT_TRUE(tc::testing::throws_with([] { AutocastGuard g(kCPU, kFloat32); }, {"[autocast]", "float32"}));
  EXPECT_FALSE(amp::is_autocast_enabled(kCPU));
  EXPECT_EQ(amp::autocast_nesting_depth(), 0);
}

TEST(AutocastState, NestingRestoresAndDisables) {
  Tensor a = uniform({4, 3}, kFloat32), b = uniform({3, 2}, kFloat32);
  AutocastGuard outer(kCPU, kBFloat16);
  EXPECT_EQ(matmul(a, b).dtype(), kBFloat16);
  {
    AutocastGuard inner(kCPU, kFloat16);
    EXPECT_EQ(matmul(a, b).dtype(), kFloat16);
    {
      AutocastGuard off(kCPU, kFloat16, /*enabled=*/false);
      EXPECT_FALSE(amp::is_autocast_enabled(kCPU));
      EXPECT_EQ(matmul(a, b).dtype(), kFloat32);
      EXPECT_EQ(softmax(uniform({2, 2}, kBFloat16), -1).dtype(), kBFloat16);
    }
    EXPECT_EQ(matmul(a, b).dtype(), kFloat16);
  }
  EXPECT_EQ(amp::get_autocast_dtype(kCPU), kBFloat16);
  EXPECT_EQ(matmul(a, b).dtype(), kBFloat16);
}

TEST(AutocastState, CudaRegionDoesNotCastCpuTensors) {
  AutocastGuard g(kCUDA);
  EXPECT_TRUE(amp::is_autocast_enabled(kCUDA));
  EXPECT_EQ(amp::get_autocast_dtype(kCUDA), kFloat16);
  EXPECT_EQ(matmul(uniform({2, 2}, kFloat32), uniform({2, 2}, kFloat32)).dtype(), kFloat32);
}

TEST(AutocastState, ThreadIsolation) {
  Tensor a = uniform({4, 3}, kFloat32), b = uniform({3, 2}, kFloat32);
  AutocastGuard g(kCPU, kBFloat16);
  bool other_enabled = true;
  DType other_dtype = kBFloat16;
  std::thread t([&] {
    other_enabled = amp::is_autocast_enabled(kCPU);
    other_dtype = matmul(a, b).dtype();
    AutocastGuard inner(kCPU, kFloat16);  // must not leak into the main thread
    other_dtype = other_dtype == kFloat32 ? matmul(a, b).dtype() : other_dtype;
  });
  t.join();
  EXPECT_FALSE(other_enabled);
  EXPECT_EQ(other_dtype, kFloat16);  // fp32 outside its region, fp16 in its own
  EXPECT_EQ(amp::get_autocast_dtype(kCPU), kBFloat16);
  EXPECT_EQ(matmul(a, b).dtype(), kBFloat16);
}

TEST(AutocastState, InPlaceAndToAreNotAutocast) {
  AutocastGuard g(kCPU, kBFloat16);
  Tensor x = uniform({4, 3}, kFloat32);
  x.add_(uniform({4, 3}, kFloat32));
  EXPECT_EQ(x.dtype(), kFloat32);
  EXPECT_EQ(x.to(kFloat16).dtype(), kFloat16);
  // Tensor methods are the public ops, so they are autocast.
  EXPECT_EQ(x.matmul(uniform({3, 2}, kFloat32)).dtype(), kBFloat16);
  EXPECT_EQ(uniform({4, 3}, kBFloat16).exp().dtype(), kFloat32);
}

// A composite run through the dispatcher is not re-cast inside.
TEST(AutocastDispatch, NestedOpsAreNotRecast) {
  amp::set_policy("test_composite", CastPolicy::LowerPrecision);
  Tensor x = uniform({4, 3}, kFloat32);
  AutocastGuard g(kCPU, kBFloat16);
  Tensor y = amp::dispatch<"test_composite">([](const Tensor& t) { return softmax(t, -1); }, x);
  EXPECT_EQ(y.dtype(), kBFloat16);  // softmax alone would be fp32
  EXPECT_EQ(softmax(x, -1).dtype(), kFloat32);
}

// A tensor on cuda:0 (here host memory labelled cuda:0 through from_blob, never read)
// mixed with a CPU tensor is refused by the op's own checks, naming op and devices, before
// any kernel runs, inside an autocast region too.
TEST(AutocastDispatch, TensorsOnTwoDevicesAreRefused) {
  std::vector<float> host(6, 1.0f);
  const Tensor on_cuda = from_blob(host.data(), {2, 3}, TensorOptions(Device(kCUDA, 0)));
  const Tensor on_cpu = uniform({3, 2}, kFloat32);
  auto message = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message([&] { matmul(on_cpu, on_cuda); }),
            "[matmul] expected both inputs on the same device, got cpu and cuda:0");
  EXPECT_EQ(message([&] {
              cat({on_cpu.t(), on_cuda}, 0);
            }),
            "[cat] expected all tensors on the same device, got cpu and cuda:0");
  AutocastGuard g(kCPU, kBFloat16);  // a CPU region casts only CPU tensors
  EXPECT_EQ(message([&] { linear(on_cuda, on_cpu.t()); }),
            "[linear] expected both inputs on the same device, got cuda:0 and cpu");
  EXPECT_EQ(host, std::vector<float>(6, 1.0f));
}

TEST(AutocastDispatch, UserPoliciesAndOverrides) {
  Tensor x = uniform({4, 3}, kFloat32);
  amp::set_policy("relu", CastPolicy::LowerPrecision);
  {
    AutocastGuard g(kCPU, kBFloat16);
    EXPECT_EQ(relu(x).dtype(), kBFloat16);
  }
  amp::reset_policy("relu");
  {
    AutocastGuard g(kCPU, kBFloat16);
    EXPECT_EQ(relu(x).dtype(), kFloat32);
  }
  amp::set_policy("my_attention", CastPolicy::Fp32);
  EXPECT_TRUE(amp::has_policy("my_attention"));
  bool listed = false;
  for (const auto& e : amp::policy_table())
    if (e.op == "my_attention") listed = !e.builtin && e.policy == CastPolicy::Fp32;
  EXPECT_TRUE(listed);
  Tensor q = uniform({2, 2}, kBFloat16), i = tensor(std::vector<int64_t>{1});
  auto [q0, i0] = amp::autocast_args("my_attention", q, i);
  EXPECT_EQ(q0.dtype(), kBFloat16);  // outside a region: unchanged
  AutocastGuard g(kCPU, kBFloat16);
  auto [q1, i1] = amp::autocast_args("my_attention", q, i);
  EXPECT_EQ(q1.dtype(), kFloat32);
  EXPECT_EQ(i1.dtype(), kInt64);
  EXPECT_EQ(amp::autocast_args("unknown_op", {q})[0].dtype(), kBFloat16);  // passthrough
}

// ------------------------------------------------------------------ the cache

Tensor param(const Shape& s, uint64_t seed = 7) {
  Tensor p = uniform(s, kFloat32, -1, 1, seed);
  p.requires_grad_(true);
  return p;
}

TEST(AutocastCache, WeightUsedByNOpsIsCastOnce) {
  Tensor w = param({5, 3});
  Tensor x = uniform({4, 3}, kFloat32);
  amp::reset_autocast_cache_stats();
  const int N = 4;
  {
    AutocastGuard g(kCPU, kBFloat16);
    for (int i = 0; i < N; ++i) EXPECT_EQ(linear(x, w).dtype(), kBFloat16);
    auto s = amp::autocast_cache_stats();
    EXPECT_EQ(s.misses, 1);
    EXPECT_EQ(s.hits, N - 1);
    EXPECT_EQ(s.size, 1);
  }
  EXPECT_EQ(amp::autocast_cache_stats().size, 0);  // cleared at the outermost exit
}

TEST(AutocastCache, OnlyParametersAreCachedAndClearedWithTheOutermostRegion) {
  Tensor w = param({5, 3});
  Tensor plain = uniform({5, 3}, kFloat32);
  Tensor x = uniform({4, 3}, kFloat32);
  amp::reset_autocast_cache_stats();
  {
    AutocastGuard g(kCPU, kBFloat16);
    linear(x, plain);
    linear(x, plain);
    EXPECT_EQ(amp::autocast_cache_stats().misses, 0);  // not a parameter
    {
      AutocastGuard inner(kCPU, kBFloat16);
      linear(x, w);
    }
    EXPECT_EQ(amp::autocast_cache_stats().size, 1);  // an inner exit keeps it
    linear(x, w);
    EXPECT_EQ(amp::autocast_cache_stats().hits, 1);
    amp::clear_autocast_cache();
    EXPECT_EQ(amp::autocast_cache_stats().size, 0);
  }
  {
    AutocastGuard g(kCPU, kBFloat16, true, /*cache_enabled=*/false);
    linear(x, w);
    EXPECT_EQ(amp::autocast_cache_stats().size, 0);
  }
}

TEST(AutocastCache, HoldsNoStrongReferenceToTheParameter) {
  std::weak_ptr<TensorImpl> alive;
  AutocastGuard g(kCPU, kBFloat16);
  {
    Tensor w = param({5, 3});
    alive = w.impl_ptr();
    NoGradGuard ng;
    linear(uniform({4, 3}, kFloat32), w);
    EXPECT_EQ(amp::autocast_cache_stats().size, 1);
  }
  EXPECT_TRUE(alive.expired());
}

// pytorch/pytorch#65766: a copy made under no-grad must not be reused by an op that
// needs the gradient.
TEST(AutocastCache, NoGradCopyGetsItsGradientEdgeWhenGradIsNeeded) {
  Tensor w = param({5, 3});
  Tensor x = uniform({4, 3}, kFloat32);
  Tensor ref_grad;
  {
    Tensor y = linear(x.to(kBFloat16), w.to(kBFloat16));
    y.to(kFloat32).sum().backward();
    ref_grad = w.grad().clone();
    w.set_grad(Tensor());
  }
  amp::reset_autocast_cache_stats();
  {
    AutocastGuard g(kCPU, kBFloat16);
    {
      NoGradGuard ng;
      linear(x, w);
    }
    Tensor y = linear(x, w);
    EXPECT_TRUE(y.requires_grad());
    y.sum().backward();
    EXPECT_EQ(amp::autocast_cache_stats().grad_attached, 1);
    EXPECT_EQ(amp::autocast_cache_stats().misses, 1);  // the same values, not cast again
    // Later ops reuse the copy with its new gradient edge.
    EXPECT_TRUE(linear(x, w).requires_grad());
  }
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().dtype(), kFloat32);
  EXPECT_TRUE(tc::testing::equal(w.grad(), ref_grad));
}

// A copy reused after its parameter was written would be silently stale (PyTorch serves it
// until the region exits); here every tensorcast write bumps the version and forces a recast.
TEST(AutocastCache, AParameterWrittenInPlaceIsCastAgain) {
  Tensor w = param({5, 3});
  const Tensor x = uniform({4, 3}, kFloat32);
  auto fresh = [&] { return linear(x.to(kBFloat16), w.detach().to(kBFloat16)); };
  AutocastGuard g(kCPU, kBFloat16);
  NoGradGuard ng;
  amp::reset_autocast_cache_stats();
  (void)linear(x, w);
  w.add_(uniform({5, 3}, kFloat32, -1, 1, 9));
  const Tensor y = linear(x, w);
  EXPECT_EQ(amp::autocast_cache_stats().stale_replaced, 1);
  EXPECT_TRUE(tc::testing::equal(y, fresh()));
  // A write through data_ptr is seen once declared.
  w.data_ptr<float>()[0] = 100.0f;
  increment_version(w);
  EXPECT_TRUE(tc::testing::equal(linear(x, w), fresh()));
  EXPECT_EQ(amp::autocast_cache_stats().stale_replaced, 2);
  EXPECT_EQ(amp::autocast_cache_stats().hits, 0);
}

struct AcrossRegions {
  explicit AcrossRegions(bool on) : prev(amp::is_autocast_cache_across_regions()) {
    amp::set_autocast_cache_across_regions(on);
  }
  ~AcrossRegions() {
    amp::set_autocast_cache_across_regions(prev);
    amp::clear_autocast_cache();
  }
  bool prev;
};

TEST(AutocastCache, AcrossRegionsKeepsCopiesOfUnchangedParameters) {
  AcrossRegions across(true);
  Tensor w = param({5, 3});
  const Tensor x = uniform({4, 3}, kFloat32);
  auto fresh = [&] { return linear(x.to(kBFloat16), w.detach().to(kBFloat16)); };
  amp::reset_autocast_cache_stats();
  Tensor first;
  for (int call = 0; call < 3; ++call) {  // a served model: one region per forward
    AutocastGuard g(kCPU, kBFloat16);
    NoGradGuard ng;
    const Tensor y = linear(x, w);
    if (call == 0) first = y;
    EXPECT_TRUE(tc::testing::equal(y, first));
  }
  auto s = amp::autocast_cache_stats();
  EXPECT_EQ(s.misses, 1);
  EXPECT_EQ(s.hits, 2);
  EXPECT_EQ(s.size, 1);
  // A write between regions makes the copy stale: recast, the new values used.
  w.detach().add_(uniform({5, 3}, kFloat32, -1, 1, 9));
  {
    AutocastGuard g(kCPU, kBFloat16);
    NoGradGuard ng;
    EXPECT_TRUE(tc::testing::equal(linear(x, w), fresh()));
  }
  EXPECT_EQ(amp::autocast_cache_stats().stale_replaced, 1);
  // A copy that took autograd history ends with its region (its graph would have freed it)
  // unless training copies are kept: then its values outlive the exit, not the graph, and
  // the next region's op with gradients gets a new edge to the parameter, nothing cast again.
  {
    AutocastGuard g(kCPU, kBFloat16);
    EXPECT_TRUE(linear(x, w).requires_grad());
    EXPECT_EQ(amp::autocast_cache_stats().grad_attached, 1);  // the kept no-grad copy, given the edge
  }
  EXPECT_EQ(amp::autocast_cache_stats().size, 0);
  EXPECT_FALSE(amp::autocast_cache_keeps_training_copies());
  amp::set_autocast_cache_keeps_training_copies(true);
  for (int region = 0; region < 2; ++region) {
    AutocastGuard g(kCPU, kBFloat16);
    EXPECT_TRUE(linear(x, w).requires_grad());
  }
  amp::set_autocast_cache_keeps_training_copies(false);
  EXPECT_EQ(amp::autocast_cache_stats().size, 1);
  EXPECT_EQ(amp::autocast_cache_stats().grad_attached, 2);
  {
    AutocastGuard g(kCPU, kBFloat16);
    NoGradGuard ng;
    EXPECT_FALSE(amp::cached_cast(kBFloat16, w).requires_grad());
    EXPECT_TRUE(tc::testing::equal(linear(x, w), fresh()));
  }
  // A parameter that dies after its region's exit: its copy goes at the next exit.
  {
    Tensor tmp = param({2, 3});
    AutocastGuard g(kCPU, kBFloat16);
    NoGradGuard ng;
    (void)linear(x, tmp);
  }
  EXPECT_EQ(amp::autocast_cache_stats().size, 2);
  { AutocastGuard g(kCPU, kBFloat16); }
  EXPECT_EQ(amp::autocast_cache_stats().size, 1);
  EXPECT_EQ(amp::autocast_cache_stats().misses, 4);  // w after its write and after its region's exit, tmp once
}

TEST(AutocastCache, AcrossRegionsIsOffByDefault) {
  EXPECT_FALSE(amp::is_autocast_cache_across_regions());
  Tensor w = param({5, 3});
  {
    AutocastGuard g(kCPU, kBFloat16);
    NoGradGuard ng;
    (void)linear(uniform({4, 3}, kFloat32), w);
  }
  EXPECT_EQ(amp::autocast_cache_stats().size, 0);
}

// ------------------------------------------------------------------ gradients and equivalence

struct Mlp {
  Tensor w1 = param({32, 16}, 11), b1 = param({32}, 12), w2 = param({4, 32}, 13), b2 = param({4}, 14);
  std::vector<Tensor> params() const { return {w1, b1, w2, b2}; }
  void zero() const {
    for (const Tensor& p : params()) p.set_grad(Tensor());
  }
};

TEST(AutocastGrad, MlpEqualsExplicitCastsBitForBit) {
  for (DType dt : {kBFloat16, kFloat16}) {
    Mlp m;
    Tensor x = uniform({8, 16}, kFloat32, -1, 1, 21);
    Tensor target = tensor(std::vector<int64_t>{0, 1, 2, 3, 3, 2, 1, 0});
    Tensor loss_ac;
    {
      AutocastGuard g(kCPU, dt);
      Tensor h = relu(linear(x, m.w1, m.b1));
      Tensor logits = linear(h, m.w2, m.b2);
      EXPECT_EQ(logits.dtype(), dt);
      loss_ac = cross_entropy(logits, target);
    }
    EXPECT_EQ(loss_ac.dtype(), kFloat32);
    loss_ac.backward();
    std::vector<Tensor> g_ac;
    for (const Tensor& p : m.params()) {
      ASSERT_TRUE(p.grad().defined());
      EXPECT_EQ(p.grad().dtype(), kFloat32);
      g_ac.push_back(p.grad().clone());
    }
    m.zero();
    Tensor h = relu(linear(x.to(dt), m.w1.to(dt), m.b1.to(dt)));
    Tensor logits = linear(h, m.w2.to(dt), m.b2.to(dt));
    Tensor loss = cross_entropy(logits.to(kFloat32), target);
    loss.backward();
    EXPECT_TRUE(tc::testing::equal(loss_ac, loss)) << dtype_name(dt);
    for (size_t i = 0; i < g_ac.size(); ++i)
      EXPECT_TRUE(tc::testing::equal(g_ac[i], m.params()[i].grad())) << dtype_name(dt) << " param " << i;
  }
}

TEST(AutocastGrad, ConvNetEqualsExplicitCastsBitForBit) {
  Tensor k = param({4, 2, 3, 3}, 31), kb = param({4}, 32), w = param({3, 16}, 33), b = param({3}, 34);
  Tensor ln_w = param({16}, 35), ln_b = param({16}, 36);
  Tensor x = uniform({2, 2, 6, 6}, kFloat32, -1, 1, 37);
  Tensor target = tensor(std::vector<int64_t>{2, 0});
  const std::vector<Tensor> params = {k, kb, w, b, ln_w, ln_b};
  auto net = [&](const Tensor& in, DType dt, bool explicit_casts) {
    auto c = [&](const Tensor& t, DType to) { return explicit_casts ? t.to(to) : t; };
    Tensor y = relu(conv2d(c(in, dt), c(k, dt), c(kb, dt)));                     // lower precision
    y = max_pool2d(y, {2, 2}).flatten(1);                                        // passthrough: (2, 16)
    y = layer_norm(c(y, kFloat32), {16}, c(ln_w, kFloat32), c(ln_b, kFloat32));  // fp32
    y = linear(c(y, dt), c(w, dt), c(b, dt));                                    // lower precision
    return nll_loss(log_softmax(c(y, kFloat32), -1), target);                    // fp32
  };
  Tensor loss_ac;
  {
    AutocastGuard g(kCPU, kBFloat16);
    loss_ac = net(x, kBFloat16, false);
  }
  loss_ac.backward();
  std::vector<Tensor> g_ac;
  for (const Tensor& p : params) {
    EXPECT_EQ(p.grad().dtype(), kFloat32);
    g_ac.push_back(p.grad().clone());
    p.set_grad(Tensor());
  }
  Tensor loss = net(x, kBFloat16, true);
  loss.backward();
  EXPECT_TRUE(tc::testing::equal(loss_ac, loss));
  for (size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(tc::testing::equal(g_ac[i], params[i].grad())) << i;
}

// Under autocast, linear writes the fp32 weight's and bias's gradients in fp32 straight
// from the GEMM's float32 accumulators (autograd/cast.h): they match a float64 reference
// on the same bf16 operands to float32 accuracy, where a bf16 gradient widened afterwards
// would be off by up to 2^-9 relative.
TEST(AutocastGrad, LinearWeightGradientIsTheUnroundedFp32Product) {
  Tensor w = uniform({24, 96}, kFloat32, -1, 1, 41).requires_grad_();
  Tensor b = uniform({24}, kFloat32, -1, 1, 42).requires_grad_();
  Tensor x = uniform({64, 96}, kFloat32, -1, 1, 43);
  Tensor g = uniform({64, 24}, kBFloat16, -1, 1, 44);  // the gradient arriving at the bf16 output
  {
    AutocastGuard ac(kCPU, kBFloat16);
    Tensor y = linear(x, w, b);
    ASSERT_EQ(y.dtype(), kBFloat16);
    y.backward(g);
  }
  ASSERT_EQ(w.grad().dtype(), kFloat32);
  ASSERT_EQ(b.grad().dtype(), kFloat32);
  const Tensor g64 = g.to(kFloat64), x64 = x.to(kBFloat16).to(kFloat64);
  const Tensor dw_ref = mm(g64.t(), x64), db_ref = sum(g64, {0});
  EXPECT_TRUE(tc::testing::all_close(w.grad(), dw_ref, {1e-5, 1e-5}));
  EXPECT_TRUE(tc::testing::all_close(b.grad(), db_ref, {1e-5, 1e-5}));
  // The old way (a bf16 product widened afterwards) is measurably coarser: the test can tell.
  EXPECT_FALSE(tc::testing::all_close(mm(g.t(), x.to(kBFloat16)).to(kFloat32), dw_ref, {1e-5, 1e-5}));
}

// The same for conv2d: oneDNN writes the weight and bias gradients in fp32.
TEST(AutocastGrad, ConvWeightGradientIsTheUnroundedFp32Product) {
  Tensor w = uniform({6, 3, 3, 3}, kFloat32, -1, 1, 51).requires_grad_();
  Tensor b = uniform({6}, kFloat32, -1, 1, 52).requires_grad_();
  Tensor x = uniform({4, 3, 10, 10}, kFloat32, -1, 1, 53);
  Tensor g = uniform({4, 6, 10, 10}, kBFloat16, -1, 1, 54);
  {
    AutocastGuard ac(kCPU, kBFloat16);
    Tensor y = conv2d(x, w, b, {1, 1}, {1, 1});
    ASSERT_EQ(y.dtype(), kBFloat16);
    y.backward(g);
  }
  ASSERT_EQ(w.grad().dtype(), kFloat32);
  ASSERT_EQ(b.grad().dtype(), kFloat32);
  Tensor w64 = w.detach().to(kBFloat16).to(kFloat64).requires_grad_();
  Tensor b64 = b.detach().to(kBFloat16).to(kFloat64).requires_grad_();
  conv2d(x.to(kBFloat16).to(kFloat64), w64, b64, {1, 1}, {1, 1}).backward(g.to(kFloat64));
  EXPECT_TRUE(tc::testing::all_close(w.grad(), w64.grad(), {1e-5, 1e-5}));
  EXPECT_TRUE(tc::testing::all_close(b.grad(), b64.grad(), {1e-5, 1e-5}));
  EXPECT_FALSE(tc::testing::all_close(w64.grad().to(kBFloat16), w64.grad(), {1e-5, 1e-5}));  // bf16 would not do
}

TEST(AutocastGrad, Bf16InputGetsBf16Grad) {
  Tensor x = uniform({4, 3}, kBFloat16);
  x.requires_grad_(true);
  {
    AutocastGuard g(kCPU, kBFloat16);
    softmax(x, -1).sum().backward();  // softmax in fp32, cast back on the way down
  }
  EXPECT_EQ(x.grad().dtype(), kBFloat16);
}

// ------------------------------------------------------------------ hardware and warning

TEST(AutocastHardware, QueriesFollowCpuFeatures) {
  const CpuFeatures& f = cpu_features();
  EXPECT_EQ(amp::is_bf16_supported(kCPU), f.avx512_bf16 || f.amx_bf16);
  EXPECT_EQ(amp::is_fp16_supported(kCPU), f.avx512_fp16);
  // CUDA: compute capability >= 8.0 for bf16 (torch.cuda.is_bf16_supported), any GPU for fp16.
  EXPECT_EQ(amp::is_bf16_supported(kCUDA), cuda::is_available() && cuda::get_device_properties(0).major >= 8);
  EXPECT_EQ(amp::is_fp16_supported(kCUDA), cuda::is_available());
}

TEST(AutocastHardware, SlowBf16WarningFiresOnce) {
  amp::set_native_16bit_override(true);
  amp::reset_slow_autocast_warning();
  { AutocastGuard g(kCPU, kBFloat16); }
  EXPECT_FALSE(amp::slow_autocast_warning_fired());

  amp::set_native_16bit_override(false);  // pretend an old CPU
  ::testing::internal::CaptureStderr();
  { AutocastGuard g(kCPU, kBFloat16); }
  { AutocastGuard g(kCPU, kBFloat16); }
  { AutocastGuard g(kCPU, kBFloat16, /*enabled=*/false); }
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(amp::slow_autocast_warning_fired());
  EXPECT_NE(err.find("86270"), std::string::npos) << err;
  EXPECT_EQ(err.find("86270"), err.rfind("86270")) << "printed more than once: " << err;
  amp::set_native_16bit_override(std::nullopt);
  amp::reset_slow_autocast_warning();
}

// ------------------------------------------------------------------ the generated doc

TEST(AutocastDocs, PolicyDocIsUpToDate) {
  const std::string path = std::string(TC_SOURCE_DIR) + "/docs/amp-policy.md";
  std::ifstream in(path);
  ASSERT_TRUE(in.good()) << "missing " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), amp::policy_table_markdown())
      << "docs/amp-policy.md is stale: run ./build/tools/tc_amp_policy_doc > docs/amp-policy.md";
}

}  // namespace
