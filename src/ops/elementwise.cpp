// Pointwise ops: arithmetic, unary math, activations, clamp, where, comparisons.
// Forward and backward live together; backward formulas are fused pointwise kernels
// (one pass, float32 math for 16-bit data) rather than chains of ops. Each is recorded as
// an op of its own (times_derivative), so backward with create_graph differentiates it.
#include <cmath>
#include <memory>
#include <numbers>

#include "autograd/nodes.h"
#include "backend/kernels.h"
#include "ops/impl.h"
#include "ops/pointwise.h"

namespace tc {

using autograd::Differentiable;
using autograd::record;
using op_util::map1;
using op_util::map2;
using op_util::map3;

namespace op_util {

DType scalar_result_dtype(const Tensor& a, double value) {
  if (is_floating(a.dtype())) return a.dtype();
  if (std::floor(value) != value) return kFloat32;
  return a.dtype() == kBool ? kInt64 : a.dtype();  // True + 1 == 2, as in PyTorch
}

Tensor scalar_operand(const Tensor& a, double value) {
  // float32 suffices next to 16-bit and float32 data; integers need the scalar's full value.
  const bool wide = a.dtype() == kFloat64 || !is_floating(a.dtype());
  return full({}, value, TensorOptions(wide ? kFloat64 : kFloat32).device(a.device()));
}

void check_same_device(const char* op, const Tensor& a, const Tensor& b) {
  TC_CHECK(a.defined() && b.defined(), op, "got an undefined tensor");
  TC_CHECK(a.device() == b.device(), op, "expected all tensors on the same device, got ", a.device(), " and ",
           b.device());
}

Tensor record_add(const Tensor& out, const Tensor& a, const Tensor& b, double alpha) {
  return record(
      "add", out, {a, b},
      [sa = a.sizes(), sb = b.sizes(), alpha](const Tensor& g, const std::vector<bool>& n) {
        return std::vector<Tensor>{n[0] ? impl::sum_to_size(g, sa) : Tensor(),
                                   n[1] ? impl::sum_to_size(alpha == 1.0 ? g : impl::mul(g, alpha), sb) : Tensor()};
      },
      Differentiable::kTwice);
}

}  // namespace op_util

namespace {

void check_defined(const char* op, const Tensor& x) { TC_CHECK(x.defined(), op, "got an undefined tensor"); }

// The derivatives of a pointwise f at one x: `first(g)` is g * f'(x) (a fused kernel),
// `second()` is f''(x) written with recorded ops; empty where f'' is zero (relu, abs,
// clamp), and then x is not kept for it (relu's backward reads only its output).
struct Derivatives {
  std::function<Tensor(const Tensor& g)> first;
  std::function<Tensor()> second;
};

// g * f'(x), recorded as an op of (g, x) so that backward with create_graph can
// differentiate it: by g it is this op again, by x it is g * f''(x). Without create_graph
// (grad mode off in backward) nothing is recorded: the fused kernel alone runs. x is
// undefined when f'' is zero.
Tensor times_derivative(const char* name, const Tensor& g, const Tensor& x, std::shared_ptr<const Derivatives> d) {
  Tensor dx = d->first(g);
  return record(
      name, dx, x.defined() ? std::vector<Tensor>{g, x} : std::vector<Tensor>{g},
      [g, x, d, name](const Tensor& gg, const std::vector<bool>& n) {
        const Tensor f2 = n.size() > 1 && n[1] ? d->second() : Tensor();
        return std::vector<Tensor>{n[0] ? times_derivative(name, gg, x, d) : Tensor(),
                                   f2.defined() ? impl::mul(impl::mul(gg, g), f2) : Tensor()};
      },
      Differentiable::kTwice);
}

// Records the backward of out = f(x), a pointwise op, from its derivatives at x.
Tensor record_pointwise(const char* name, const char* backward_name, const Tensor& out, const Tensor& x,
                        Derivatives d) {
  const Tensor kept = d.second ? x : Tensor();
  return record(
      name, out, {x},
      [x = kept, backward_name, d = std::make_shared<const Derivatives>(std::move(d))](const Tensor& g,
                                                                                       const std::vector<bool>&) {
        return std::vector<Tensor>{times_derivative(backward_name, g, x, d)};
      },
      Differentiable::kTwice);
}

// A unary op with a fused backward: df(g, x, out) gives the input gradient, `second(x)`
// the second derivative (recorded ops; undefined where it is zero).
template <class F, class DF>
Tensor unary_float_op(const char* name, const char* backward_name, const Tensor& x, F f, DF df,
                      std::function<Tensor(const Tensor&)> second) {
  check_defined(name, x);
  Tensor out = map1(x, op_util::float_result_dtype(x.dtype()), name, f);
  if (!autograd::will_record({x})) return out;
  return record_pointwise(name, backward_name, out, x,
                          {[xd = x.detach(), out = out.detach(), name, df](const Tensor& g) {
                             return map3(g, xd, out, g.dtype(), name, df);
                           },
                           [x, second] { return second(x); }});
}

DType arith_dtype(const char* op, const Tensor& a, const Tensor& b) {
  op_util::check_same_device(op, a, b);
  return result_type(a, b);
}

}  // namespace

// ------------------------------------------------------------------ binary arithmetic

DType result_type(const Tensor& a, const Tensor& b) {
  TC_CHECK(a.defined() && b.defined(), "result_type", "got an undefined tensor");
  const bool da = a.dim() > 0, db = b.dim() > 0;
  if (da == db) return promote_types(a.dtype(), b.dtype());
  // A 0-d tensor joins a dimensioned one like a Python scalar: it only decides the
  // result when its category (bool < integer < floating) is higher.
  auto category = [](DType t) { return is_floating(t) ? 2 : t == kBool ? 0 : 1; };
  const DType dimmed = da ? a.dtype() : b.dtype(), zero = da ? b.dtype() : a.dtype();
  return category(zero) > category(dimmed) ? promote_types(dimmed, zero) : dimmed;
}

// The dispatched ops (src/ops/dispatch.cpp makes the public tc:: forms).
namespace impl {

Tensor add(const Tensor& a, const Tensor& b, double alpha) {
  const DType dt = arith_dtype("add", a, b);
  Tensor out = alpha == 1.0 ? map2(a, b, dt, "add", fn::Add{}) : map2(a, b, dt, "add", fn::AddScaled{alpha});
  return op_util::record_add(out, a, b, alpha);
}

Tensor sub(const Tensor& a, const Tensor& b, double alpha) {
  TC_CHECK(a.dtype() != kBool || b.dtype() != kBool, "sub", "subtraction of two bool tensors is not supported");
  return impl::add(a, b, -alpha);
}

Tensor mul(const Tensor& a, const Tensor& b) {
  const DType dt = arith_dtype("mul", a, b);
  Tensor out = map2(a, b, dt, "mul", fn::Mul{});
  // a and b saved as they are (not detached): with create_graph the gradients are
  // recorded as functions of them.
  return record(
      "mul", out, {a, b},
      [a, b](const Tensor& g, const std::vector<bool>& n) {
        return std::vector<Tensor>{n[0] ? impl::sum_to_size(impl::mul(g, b), a.sizes()) : Tensor(),
                                   n[1] ? impl::sum_to_size(impl::mul(g, a), b.sizes()) : Tensor()};
      },
      Differentiable::kTwice);
}

Tensor div(const Tensor& a, const Tensor& b) {
  DType dt = arith_dtype("div", a, b);
  if (!is_floating(dt)) dt = kFloat32;  // true division, as torch.div
  Tensor out = map2(a, b, dt, "div", fn::Div{});
  return record(
      "div", out, {a, b},
      [a, b, out = out.detach()](const Tensor& g, const std::vector<bool>& n) {
        Tensor ga, gb;
        if (n[0]) ga = impl::sum_to_size(impl::div(g, b), a.sizes());
        if (n[1]) {
          // -g a / b^2: one fused pass from the saved output, or recorded ops with create_graph.
          const Tensor d = is_grad_enabled() ? impl::neg(impl::div(impl::mul(g, a), impl::mul(b, b)))
                                             : map3(g, out, b, g.dtype(), "div_backward", fn::DivBackwardDivisor{});
          gb = impl::sum_to_size(d, b.sizes());
        }
        return std::vector<Tensor>{ga, gb};
      },
      Differentiable::kTwice);
}

Tensor add(const Tensor& a, double b) {
  check_defined("add", a);
  Tensor out = map2(a, op_util::scalar_operand(a, b), op_util::scalar_result_dtype(a, b), "add", fn::Add{});
  return record(
      "add", out, {a}, [](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{g}; },
      Differentiable::kTwice);
}
Tensor sub(const Tensor& a, double b) { return impl::add(a, -b); }
Tensor mul(const Tensor& a, double b) {
  check_defined("mul", a);
  Tensor out = map2(a, op_util::scalar_operand(a, b), op_util::scalar_result_dtype(a, b), "mul", fn::Mul{});
  return record(
      "mul", out, {a}, [b](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{impl::mul(g, b)}; },
      Differentiable::kTwice);
}
Tensor div(const Tensor& a, double b) {
  check_defined("div", a);
  const DType dt = is_floating(a.dtype()) ? a.dtype() : kFloat32;
  Tensor out = map2(a, op_util::scalar_operand(a, b), dt, "div", fn::Div{});
  return record(
      "div", out, {a}, [b](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{impl::div(g, b)}; },
      Differentiable::kTwice);
}

Tensor pow(const Tensor& a, double e) {
  check_defined("pow", a);
  const DType dt = op_util::scalar_result_dtype(a, e);
  Tensor out = e == 2.0 ? map1(a, dt, "pow", fn::Square{}) : map1(a, dt, "pow", fn::PowScalar{e});
  if (!autograd::will_record({a})) return out;
  if (e == 0.0)
    return record(
        "pow", out, {a}, [](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{zeros_like(g)}; },
        Differentiable::kTwice);
  return record_pointwise("pow", "pow_backward", out, a,
                          {[ad = a.detach(), e](const Tensor& g) {
                             return map2(g, ad, g.dtype(), "pow_backward", fn::PowScalarBackward{e});
                           },
                           [a, e] {  // e (e - 1) a^(e - 2)
                             if (e == 1.0) return Tensor();
                             return e == 2.0 ? full_like(a, 2.0) : impl::mul(impl::pow(a, e - 2.0), e * (e - 1.0));
                           }});
}

Tensor pow(const Tensor& a, const Tensor& e) {
  DType dt = arith_dtype("pow", a, e);
  Tensor out = map2(a, e, dt, "pow", fn::Pow{});
  return record(
      "pow", out, {a, e},
      [a, e, out = out.detach()](const Tensor& g, const std::vector<bool>& n) {
        Tensor grad_a, grad_e;
        if (is_grad_enabled()) {  // create_graph: PyTorch's pow_backward formulas, in recorded ops
          const Tensor zero = zeros({}, TensorOptions(g.dtype()).device(g.device()));
          if (n[0])  // g e a^(e - 1), 0 where e == 0
            grad_a = impl::mul(g, impl::where(eq(e, 0.0), zero, impl::mul(e, impl::pow(a, impl::sub(e, 1.0)))));
          if (n[1]) {  // g a^e log(a), 0 where a == 0 and e >= 0
            const Tensor t = impl::mul(autograd::detail::saved_output(out), impl::log(a));
            grad_e = impl::mul(g, impl::where(eq(a, 0.0), impl::where(ge(e, 0.0), zero, t), t));
          }
        } else {
          if (n[0]) grad_a = map3(g, a, e, g.dtype(), "pow_backward", fn::PowBackwardBase{});
          // d/de a^e = a^e log(a); PyTorch defines it as 0 where a == 0 and e >= 0.
          if (n[1]) grad_e = impl::mul(g, map3(out, a, e, g.dtype(), "pow_backward", fn::PowBackwardExponent{}));
        }
        return std::vector<Tensor>{grad_a.defined() ? impl::sum_to_size(grad_a, a.sizes()) : grad_a,
                                   grad_e.defined() ? impl::sum_to_size(grad_e, e.sizes()) : grad_e};
      },
      Differentiable::kTwice);
}

namespace {
template <bool IsMax>
Tensor extremum(const char* name, const Tensor& a, const Tensor& b) {
  const DType dt = arith_dtype(name, a, b);
  Tensor out = map2(a, b, dt, name, fn::Extremum<IsMax>{});
  return record(
      name, out, {a, b},
      [a = a.detach(), b = b.detach(), name](const Tensor& g, const std::vector<bool>& n) {
        // The gradient goes to the chosen input; ties split it evenly (as PyTorch). With
        // create_graph, g times that share (0, 1/2 or 1: exact), a recorded product.
        auto share = [&](const Tensor& self, const Tensor& other) {
          if (!is_grad_enabled()) return map3(g, self, other, g.dtype(), name, fn::ExtremumBackward<IsMax>{});
          const Tensor ones = full(g.sizes(), 1.0, TensorOptions(g.dtype()).device(g.device()));
          return impl::mul(g, map3(ones, self, other, g.dtype(), name, fn::ExtremumBackward<IsMax>{}));
        };
        return std::vector<Tensor>{n[0] ? impl::sum_to_size(share(a, b), a.sizes()) : Tensor(),
                                   n[1] ? impl::sum_to_size(share(b, a), b.sizes()) : Tensor()};
      },
      Differentiable::kTwice);
}
}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) { return extremum<true>("maximum", a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return extremum<false>("minimum", a, b); }

// ------------------------------------------------------------------ unary

Tensor neg(const Tensor& x) {
  check_defined("neg", x);
  TC_CHECK(x.dtype() != kBool, "neg", "negation of a bool tensor is not supported");
  Tensor out = map1(x, x.dtype(), "neg", fn::Neg{});
  return record(
      "neg", out, {x}, [](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{impl::neg(g)}; },
      Differentiable::kTwice);
}

Tensor abs(const Tensor& x) {
  check_defined("abs", x);
  Tensor out = map1(x, x.dtype(), "abs", fn::Abs{});
  if (!autograd::will_record({x})) return out;
  return record_pointwise(
      "abs", "abs_backward", out, x,
      {[xd = x.detach()](const Tensor& g) { return map2(g, xd, g.dtype(), "abs_backward", fn::AbsBackward{}); }, {}});
}

// Second derivatives, written with recorded ops (so a third derivative exists too).
namespace second {
Tensor one_minus(const Tensor& t) { return impl::add(impl::neg(t), 1.0); }
Tensor exp(const Tensor& x) { return impl::exp(x); }
Tensor log(const Tensor& x) { return impl::neg(impl::reciprocal(impl::mul(x, x))); }
Tensor log1p(const Tensor& x) { return impl::neg(impl::pow(impl::add(x, 1.0), -2.0)); }
Tensor sqrt(const Tensor& x) { return impl::mul(impl::pow(x, -1.5), -0.25); }
Tensor rsqrt(const Tensor& x) { return impl::mul(impl::pow(x, -2.5), 0.75); }
Tensor reciprocal(const Tensor& x) { return impl::mul(impl::pow(x, -3.0), 2.0); }
Tensor tanh(const Tensor& x) {  // -2 t (1 - t^2)
  const Tensor t = impl::tanh(x);
  return impl::mul(impl::mul(t, one_minus(impl::mul(t, t))), -2.0);
}
Tensor sigmoid(const Tensor& x) {  // s (1 - s) (1 - 2 s)
  const Tensor s = impl::sigmoid(x);
  return impl::mul(impl::mul(s, one_minus(s)), one_minus(impl::mul(s, 2.0)));
}
Tensor silu(const Tensor& x) {  // s (1 - s) (2 + x (1 - 2 s))
  const Tensor s = impl::sigmoid(x);
  return impl::mul(impl::mul(s, one_minus(s)), impl::add(impl::mul(x, one_minus(impl::mul(s, 2.0))), 2.0));
}
Tensor gelu(const Tensor& x, bool tanh_form) {
  const Tensor x2 = impl::mul(x, x);
  if (!tanh_form) {  // phi(x) (2 - x^2), phi the standard normal density
    const Tensor phi = impl::mul(impl::exp(impl::mul(x2, -0.5)), 1.0 / std::sqrt(2.0 * std::numbers::pi));
    return impl::mul(phi, impl::add(impl::neg(x2), 2.0));
  }
  // u = c (x + a x^3), t = tanh(u): (1 - t^2) (u' - x t u'^2 + 3 a c x^2), u' = c (1 + 3 a x^2)
  const double c = std::sqrt(2.0 / std::numbers::pi), a = 0.044715;
  const Tensor t = impl::tanh(impl::mul(impl::add(x, impl::mul(impl::mul(x2, x), a)), c));
  const Tensor du = impl::mul(impl::add(impl::mul(x2, 3.0 * a), 1.0), c);
  const Tensor inner =
      impl::add(impl::sub(du, impl::mul(impl::mul(x, t), impl::mul(du, du))), impl::mul(x2, 3.0 * a * c));
  return impl::mul(one_minus(impl::mul(t, t)), inner);
}
Tensor softplus(const Tensor& x, double beta,
                double threshold) {  // beta s (1 - s), s = sigmoid(beta x); 0 past threshold
  const Tensor bx = impl::mul(x, beta);
  const Tensor s = impl::sigmoid(bx);
  const Tensor f2 = impl::mul(impl::mul(s, one_minus(s)), beta);
  return impl::where(gt(bx, threshold), zeros({}, TensorOptions(f2.dtype()).device(f2.device())), f2);
}
}  // namespace second

Tensor exp(const Tensor& x) {
  return unary_float_op("exp", "exp_backward", x, fn::Exp{}, fn::ExpBackward{}, second::exp);
}
Tensor log(const Tensor& x) {
  return unary_float_op("log", "log_backward", x, fn::Log{}, fn::LogBackward{}, second::log);
}
Tensor log1p(const Tensor& x) {
  return unary_float_op("log1p", "log1p_backward", x, fn::Log1p{}, fn::Log1pBackward{}, second::log1p);
}
Tensor sqrt(const Tensor& x) {
  return unary_float_op("sqrt", "sqrt_backward", x, fn::Sqrt{}, fn::SqrtBackward{}, second::sqrt);
}
Tensor rsqrt(const Tensor& x) {
  return unary_float_op("rsqrt", "rsqrt_backward", x, fn::Rsqrt{}, fn::RsqrtBackward{}, second::rsqrt);
}
Tensor reciprocal(const Tensor& x) {
  return unary_float_op("reciprocal", "reciprocal_backward", x, fn::Reciprocal{}, fn::ReciprocalBackward{},
                        second::reciprocal);
}
Tensor tanh(const Tensor& x) {
  return unary_float_op("tanh", "tanh_backward", x, fn::Tanh{}, fn::TanhBackward{}, second::tanh);
}
Tensor sigmoid(const Tensor& x) {
  return unary_float_op("sigmoid", "sigmoid_backward", x, fn::Sigmoid{}, fn::SigmoidBackward{}, second::sigmoid);
}

Tensor relu(const Tensor& x) {
  check_defined("relu", x);
  Tensor out = map1(x, x.dtype(), "relu", fn::Relu{});
  if (!autograd::will_record({x})) return out;
  return record_pointwise(
      "relu", "relu_backward", out, x,
      {[out = out.detach()](const Tensor& g) { return map2(g, out, g.dtype(), "relu_backward", fn::ReluBackward{}); },
       {}});
}

Tensor gelu(const Tensor& x, std::string_view approximate) {
  TC_CHECK(approximate == "none" || approximate == "tanh", "gelu", "approximate must be \"none\" or \"tanh\", got \"",
           approximate, "\"");
  check_defined("gelu", x);
  const bool tanh_form = approximate == "tanh";
  const DType dt = op_util::float_result_dtype(x.dtype());
  Tensor out = make_tensor(x.sizes(), dt, x.device());
  backend::kernels_for(x.device()).gelu(out, x, tanh_form);
  if (!autograd::will_record({x})) return out;
  return record_pointwise("gelu", "gelu_backward", out, x,
                          {[xd = x.detach(), tanh_form](const Tensor& g) {
                             Tensor dx =
                                 make_tensor(broadcast_shapes(g.sizes(), xd.sizes(), "gelu"), g.dtype(), g.device());
                             backend::kernels_for(g.device()).gelu_backward(dx, g, xd, tanh_form);
                             return dx;
                           },
                           [x, tanh_form] { return second::gelu(x, tanh_form); }});
}

Tensor silu(const Tensor& x) {
  return unary_float_op("silu", "silu_backward", x, fn::Silu{}, fn::SiluBackward{}, second::silu);
}

Tensor softplus(const Tensor& x, double beta, double threshold) {
  TC_CHECK(beta != 0 && std::isfinite(beta), "softplus", "beta must be finite and nonzero, got ", beta);
  return unary_float_op("softplus", "softplus_backward", x, fn::Softplus{beta, threshold},
                        fn::SoftplusBackward{beta, threshold},
                        [beta, threshold](const Tensor& x) { return second::softplus(x, beta, threshold); });
}

Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi) {
  check_defined("clamp", x);
  TC_CHECK(lo || hi, "clamp", "at least one of min and max must be given");
  const double l = lo.value_or(-INFINITY), h = hi.value_or(INFINITY);
  DType dt = x.dtype();
  if (!is_floating(dt) && ((lo && std::floor(*lo) != *lo) || (hi && std::floor(*hi) != *hi))) dt = kFloat32;
  Tensor out = map1(x, dt, "clamp", fn::Clamp{l, h});
  if (!autograd::will_record({x})) return out;
  return record_pointwise("clamp", "clamp_backward", out, x,
                          {[xd = x.detach(), l, h](const Tensor& g) {
                             return map2(g, xd, g.dtype(), "clamp_backward", fn::ClampBackward{l, h});
                           },
                           {}});
}

Tensor where(const Tensor& c, const Tensor& a, const Tensor& b) {
  op_util::check_same_device("where", c, a);
  op_util::check_same_device("where", a, b);
  TC_CHECK(c.dtype() == kBool, "where", "condition must be a bool tensor, got ", dtype_name(c.dtype()));
  const DType dt = result_type(a, b);
  Tensor out = map3(c, a, b, dt, "where", fn::Where{});
  return record(
      "where", out, {a, b},
      [c = c.detach(), sa = a.sizes(), sb = b.sizes()](const Tensor& g, const std::vector<bool>& n) {
        Tensor z = zeros({}, TensorOptions(g.dtype()).device(g.device()));
        return std::vector<Tensor>{n[0] ? impl::sum_to_size(impl::where(c, g, z), sa) : Tensor(),
                                   n[1] ? impl::sum_to_size(impl::where(c, z, g), sb) : Tensor()};
      },
      Differentiable::kTwice);
}

}  // namespace impl

// ------------------------------------------------------------------ comparisons

#define TC_COMPARISON(name, Fn)                                                                              \
  Tensor name(const Tensor& a, const Tensor& b) {                                                            \
    op_util::check_same_device(#name, a, b);                                                                 \
    return map2(a, b, kBool, #name, fn::Fn{});                                                               \
  }                                                                                                          \
  Tensor name(const Tensor& a, double s) {                                                                   \
    TC_CHECK(a.defined(), #name, "got an undefined tensor");                                                 \
    /* The scalar takes a floating tensor's dtype (x_bf16 == 0.1 compares bf16(0.1)). */                     \
    Tensor b = full({}, s, TensorOptions(is_floating(a.dtype()) ? a.dtype() : kFloat64).device(a.device())); \
    return map2(a, b, kBool, #name, fn::Fn{});                                                               \
  }
TC_COMPARISON(eq, Eq)
TC_COMPARISON(ne, Ne)
TC_COMPARISON(lt, Lt)
TC_COMPARISON(le, Le)
TC_COMPARISON(gt, Gt)
TC_COMPARISON(ge, Ge)
#undef TC_COMPARISON

Tensor isnan(const Tensor& x) {
  check_defined("isnan", x);
  return map1(x, kBool, "isnan", fn::IsNan{});
}
Tensor isfinite(const Tensor& x) {
  check_defined("isfinite", x);
  return map1(x, kBool, "isfinite", fn::IsFinite{});
}

// ------------------------------------------------------------------ operators

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator+(const Tensor& a, double b) { return add(a, b); }
Tensor operator-(const Tensor& a, double b) { return sub(a, b); }
Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
Tensor operator/(const Tensor& a, double b) { return div(a, b); }
Tensor operator+(double a, const Tensor& b) { return add(b, a); }
Tensor operator-(double a, const Tensor& b) { return add(neg(b), a); }
Tensor operator*(double a, const Tensor& b) { return mul(b, a); }
Tensor operator/(double a, const Tensor& b) { return mul(reciprocal(b), a); }
Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor operator==(const Tensor& a, double b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, double b) { return ne(a, b); }
Tensor operator<(const Tensor& a, double b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, double b) { return le(a, b); }
Tensor operator>(const Tensor& a, double b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, double b) { return ge(a, b); }

}  // namespace tc
