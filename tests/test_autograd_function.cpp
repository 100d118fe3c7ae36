// Custom autograd functions (tensorcast/autograd_function.h): forward/backward, saved
// tensors and data, needs_input_grad, and torch.amp's custom_fwd/custom_bwd semantics.
#include <gtest/gtest.h>

#include "common/testing.h"
#include "tensorcast/tensorcast.h"

namespace {

using namespace tc;
using autograd::AutogradContext;
using tc::testing::uniform;

// y = tanh(x) * s, dy/dx = s * (1 - tanh^2) = s - y^2 / s.
struct ScaledTanh : autograd::Function<ScaledTanh> {
  static constexpr const char* name = "ScaledTanh";
  static Tensor forward(AutogradContext* ctx, const Tensor& x, double s) {
    Tensor y = tanh(x) * s;
    ctx->save_for_backward({y});
    ctx->saved_data["s"] = s;
    return y;
  }
  static std::vector<Tensor> backward(AutogradContext* ctx, std::vector<Tensor> g) {
    Tensor y = ctx->get_saved_variables()[0];
    const double s = std::any_cast<double>(ctx->saved_data["s"]);
    return {g[0] * (s - y * y / s)};
  }
};

// a * b with needs_input_grad honoured.
struct MulFn : autograd::Function<MulFn> {
  static inline int computed_a = 0, computed_b = 0;
  static Tensor forward(AutogradContext* ctx, const Tensor& a, const Tensor& b) {
    ctx->save_for_backward({a, b});
    return a * b;
  }
  static std::vector<Tensor> backward(AutogradContext* ctx, std::vector<Tensor> g) {
    const auto& s = ctx->get_saved_variables();
    Tensor ga, gb;
    if (ctx->needs_input_grad(0)) {
      ga = g[0] * s[1];
      ++computed_a;
    }
    if (ctx->needs_input_grad(1)) {
      gb = g[0] * s[0];
      ++computed_b;
    }
    return {ga, gb};
  }
};

// custom_fwd(cast_inputs=float32): records what forward and backward saw.
struct Fp32Fn : autograd::Function<Fp32Fn> {
  static constexpr std::optional<DType> autocast_cast_inputs = kFloat32;
  static inline DType seen_dtype = kBool;
  static inline bool fwd_autocast = true, bwd_autocast = false;
  static inline DType bwd_dtype = kFloat32, bwd_matmul = kBool;
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& w) {
    seen_dtype = x.dtype();
    fwd_autocast = amp::is_autocast_enabled(kCPU);
    ctx->save_for_backward({x, w});
    return matmul(x, w);  // autocast is off in here: stays fp32
  }
  static std::vector<Tensor> backward(AutogradContext* ctx, std::vector<Tensor> g) {
    bwd_autocast = amp::is_autocast_enabled(kCPU);
    bwd_dtype = amp::get_autocast_dtype(kCPU);
    const auto& s = ctx->get_saved_variables();
    bwd_matmul = matmul(g[0], s[1].t()).dtype();
    return {matmul(g[0], s[1].t()).to(kFloat32), matmul(s[0].t(), g[0]).to(kFloat32)};
  }
};

// custom_fwd() without a cast: forward runs under the caller's autocast state.
struct PlainFn : autograd::Function<PlainFn> {
  static Tensor forward(AutogradContext*, const Tensor& x, const Tensor& w) { return matmul(x, w); }
  static std::vector<Tensor> backward(AutogradContext*, std::vector<Tensor> g) { return {g[0], Tensor()}; }
};

struct Identity : autograd::Function<Identity> {
  static Tensor forward(AutogradContext*, const Tensor& x) { return x; }
  static std::vector<Tensor> backward(AutogradContext*, std::vector<Tensor> g) { return {g[0] * 2.0}; }
};

// (a, b) -> a + b, whose backward hands out, as both gradients, views of one block it
// keeps: rows 0 and 1 of `kept` (3, n), as if a and b were rows 0 and 1 of one tensor.
struct KeptBlockGrads : autograd::Function<KeptBlockGrads> {
  static inline Tensor kept;
  static Tensor forward(AutogradContext*, const Tensor& a, const Tensor& b) { return a + b; }
  static std::vector<Tensor> backward(AutogradContext*, std::vector<Tensor> g) {
    kept.select(0, 0).copy_(g[0]);
    kept.select(0, 1).copy_(g[0] * 2.0);
    return {kept.select(0, 0), kept.select(0, 1)};
  }
};

TEST(AutogradFunction, ForwardAndBackwardMatchBuiltinOps) {
  Tensor x = uniform({3, 4}, kFloat32);
  x.requires_grad_(true);
  Tensor y = ScaledTanh::apply(x, 2.0);
  EXPECT_EQ(y.grad_fn()->name, "ScaledTanh");
  y.sum().backward();
  Tensor gx = x.grad().clone();

  Tensor x2 = x.detach().clone();
  x2.requires_grad_(true);
  Tensor y2 = tanh(x2) * 2.0;
  EXPECT_TRUE(tc::testing::all_close(y, y2, {1e-6, 1e-6}));
  y2.sum().backward();
  EXPECT_TRUE(tc::testing::all_close(gx, x2.grad(), {1e-5, 1e-5}));
}

TEST(AutogradFunction, NeedsInputGradAndUndefinedGrads) {
  Tensor a = uniform({3}, kFloat32), b = uniform({3}, kFloat32, -1, 1, 5);
  a.requires_grad_(true);
  MulFn::computed_a = MulFn::computed_b = 0;
  MulFn::apply(a, b).sum().backward();
  EXPECT_EQ(MulFn::computed_a, 1);
  EXPECT_EQ(MulFn::computed_b, 0);
  EXPECT_TRUE(tc::testing::equal(a.grad(), b));
}

TEST(AutogradFunction, NoRecordingWithoutGradOrUnderNoGrad) {
  Tensor a = uniform({3}, kFloat32);
  EXPECT_FALSE(MulFn::apply(a, a).requires_grad());
  a.requires_grad_(true);
  NoGradGuard ng;
  EXPECT_FALSE(MulFn::apply(a, a).requires_grad());
}

TEST(AutogradFunction, ReturningAnInputKeepsItsHistory) {
  Tensor x = uniform({3}, kFloat32);
  x.requires_grad_(true);
  Tensor y = Identity::apply(x);
  EXPECT_TRUE(x.is_leaf());
  y.sum().backward();
  EXPECT_TRUE(tc::testing::equal(x.grad(), full({3}, 2.0)));
}

TEST(AutogradFunction, CustomFwdCastsInputsAndRunsWithAutocastOff) {
  Tensor x = uniform({4, 3}, kBFloat16);
  Tensor w = uniform({3, 2}, kFloat32, -1, 1, 9);
  x.requires_grad_(true);
  w.requires_grad_(true);
  Tensor y;
  {
    amp::AutocastGuard g(kCPU, kBFloat16);
    y = Fp32Fn::apply(x, w);
  }
  EXPECT_EQ(Fp32Fn::seen_dtype, kFloat32);
  EXPECT_FALSE(Fp32Fn::fwd_autocast);
  EXPECT_EQ(y.dtype(), kFloat32);
  y.sum().backward();  // outside the region
  // custom_bwd: backward runs under the state the forward ran under, which a cast turned
  // off, so the backward's products stay fp32.
  EXPECT_FALSE(Fp32Fn::bwd_autocast);
  EXPECT_EQ(Fp32Fn::bwd_matmul, kFloat32);
  EXPECT_FALSE(amp::is_autocast_enabled(kCPU));
  EXPECT_EQ(x.grad().dtype(), kBFloat16);  // the cast's gradient is cast back
  EXPECT_EQ(w.grad().dtype(), kFloat32);

  // Backward called inside a region: still off.
  {
    amp::AutocastGuard g(kCPU, kBFloat16);
    Fp32Fn::apply(x, w).sum().backward();
  }
  EXPECT_FALSE(Fp32Fn::bwd_autocast);
  EXPECT_EQ(Fp32Fn::bwd_matmul, kFloat32);

  // Outside a region nothing is cast and backward runs with autocast off.
  Fp32Fn::apply(x, w.detach().to(kBFloat16)).sum().backward();
  EXPECT_EQ(Fp32Fn::seen_dtype, kBFloat16);
  EXPECT_FALSE(Fp32Fn::bwd_autocast);
}

// custom_fwd() without a cast: backward runs under the state the forward ran under, not
// the one backward() is called in.
struct StateFn : autograd::Function<StateFn> {
  static inline bool bwd_autocast = false;
  static inline DType bwd_matmul = kBool;
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& w) {
    ctx->save_for_backward({x, w});
    return matmul(x, w);
  }
  static std::vector<Tensor> backward(AutogradContext* ctx, std::vector<Tensor> g) {
    bwd_autocast = amp::is_autocast_enabled(kCPU);
    const auto& s = ctx->get_saved_variables();
    bwd_matmul = matmul(g[0], s[1].t()).dtype();
    return {matmul(g[0], s[1].t()).to(s[0].dtype()), matmul(s[0].t(), g[0]).to(s[1].dtype())};
  }
};

// The four cases of torch.amp.custom_fwd/custom_bwd on the CPU with bf16, as PyTorch 2.x
// gives them: a Function whose forward is a.mm(b) and whose backward records
// torch.is_autocast_enabled("cpu") and the dtype of g.mm(b.t()), applied inside and outside
// torch.autocast("cpu", dtype=torch.bfloat16), then y.float().sum().backward() outside:
//   custom_fwd(cast_inputs=torch.float32)  inside:  out fp32, backward autocast off, fp32
//                                          outside: out fp32, backward autocast off, fp32
//   custom_fwd()                           inside:  out bf16, backward autocast on,  bf16
//                                          outside: out fp32, backward autocast off, fp32
TEST(AutogradFunction, BackwardRunsUnderTheStateForwardRanUnderAsPyTorch) {
  struct Case {
    bool cast, inside;
    DType out;
    bool bwd_autocast;
    DType bwd_matmul;
  };
  const Case cases[] = {{true, true, kFloat32, false, kFloat32},
                        {true, false, kFloat32, false, kFloat32},
                        {false, true, kBFloat16, true, kBFloat16},
                        {false, false, kFloat32, false, kFloat32}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.cast ? "cast_inputs" : "no cast") + (c.inside ? ", inside" : ", outside"));
    Tensor a = uniform({4, 4}, kFloat32, -1, 1, 3), b = uniform({4, 4}, kFloat32, -1, 1, 4);
    a.requires_grad_(true);
    b.requires_grad_(true);
    Tensor y;
    {
      amp::AutocastGuard g(kCPU, kBFloat16, /*enabled=*/c.inside);
      y = c.cast ? Fp32Fn::apply(a, b) : StateFn::apply(a, b);
    }
    EXPECT_EQ(y.dtype(), c.out);
    y.to(kFloat32).sum().backward();
    EXPECT_EQ(c.cast ? Fp32Fn::bwd_autocast : StateFn::bwd_autocast, c.bwd_autocast);
    EXPECT_EQ(c.cast ? Fp32Fn::bwd_matmul : StateFn::bwd_matmul, c.bwd_matmul);
    EXPECT_EQ(a.grad().dtype(), kFloat32);
  }
}

TEST(AutogradFunction, CustomFwdWithoutCastRunsUnderTheCallersState) {
  Tensor x = uniform({4, 3}, kFloat32), w = uniform({3, 2}, kFloat32);
  amp::AutocastGuard g(kCPU, kBFloat16);
  EXPECT_EQ(PlainFn::apply(x, w).dtype(), kBFloat16);
}

// Gradients that are parts of one block, for slices of one tensor: the engine takes the
// block as that tensor's gradient without copying, but never writes into memory the
// backward still holds: the part no slice wrote (row 2) is zero in the result, not in
// `kept`.
TEST(AutogradFunction, GradientsThatArePartsOfOneKeptBlockAreNotWrittenInto) {
  const int64_t n = 4;
  KeptBlockGrads::kept = full({3, n}, 7.0);
  Tensor x = ones({3, n}).requires_grad_();
  const Tensor base = x * 1.0;
  KeptBlockGrads::apply(base.select(0, 0), base.select(0, 1)).sum().backward();
  const std::vector<double> g = x.grad().to_vector();
  std::vector<double> expected(3 * n, 0.0);
  for (int64_t j = 0; j < n; ++j) {
    expected[j] = 1.0;      // row 0: g
    expected[n + j] = 2.0;  // row 1: 2 g
  }
  EXPECT_EQ(g, expected);
  const std::vector<double> kept = KeptBlockGrads::kept.to_vector();
  for (int64_t j = 0; j < n; ++j) {
    EXPECT_EQ(kept[j], 1.0);
    EXPECT_EQ(kept[n + j], 2.0);
    EXPECT_EQ(kept[2 * n + j], 7.0);  // untouched
  }
  KeptBlockGrads::kept = Tensor();
}

}  // namespace
