// Pointwise ops: arithmetic, unary math, activations, clamp, where, comparisons.
// Forward and backward live together; backward formulas are fused pointwise kernels
// (one pass, float32 math for 16-bit data) rather than chains of ops.
#include <cmath>

#include "backend/cpu/activation.h"
#include "ops/impl.h"
#include "ops/pointwise.h"

namespace tc {

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
      "add", out, {a, b}, [sa = a.sizes(), sb = b.sizes(), alpha](const Tensor& g, const std::vector<bool>& n) {
        return std::vector<Tensor>{n[0] ? impl::sum_to_size(g, sa) : Tensor(),
                                   n[1] ? impl::sum_to_size(alpha == 1.0 ? g : impl::mul(g, alpha), sb) : Tensor()};
      });
}

}  // namespace op_util

namespace {

void check_defined(const char* op, const Tensor& x) { TC_CHECK(x.defined(), op, "got an undefined tensor"); }

// A unary op with a fused backward: df(g, x, out) gives the input gradient.
template <class F, class DF>
Tensor unary_float_op(const char* name, const Tensor& x, F f, DF df) {
  check_defined(name, x);
  Tensor out = map1(x, op_util::float_result_dtype(x.dtype()), name, f);
  return record(name, out, {x},
                [x = x.detach(), out = out.detach(), name, df](const Tensor& g, const std::vector<bool>&) {
                  return std::vector<Tensor>{map3(g, x, out, g.dtype(), name, df)};
                });
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
  return record("mul", out, {a, b}, [a = a.detach(), b = b.detach()](const Tensor& g, const std::vector<bool>& n) {
    return std::vector<Tensor>{n[0] ? impl::sum_to_size(impl::mul(g, b), a.sizes()) : Tensor(),
                               n[1] ? impl::sum_to_size(impl::mul(g, a), b.sizes()) : Tensor()};
  });
}

Tensor div(const Tensor& a, const Tensor& b) {
  DType dt = arith_dtype("div", a, b);
  if (!is_floating(dt)) dt = kFloat32;  // true division, as torch.div
  Tensor out = map2(a, b, dt, "div", fn::Div{});
  return record("div", out, {a, b},
                [a = a.detach(), b = b.detach(), out = out.detach()](const Tensor& g, const std::vector<bool>& n) {
                  Tensor ga, gb;
                  if (n[0]) ga = impl::sum_to_size(impl::div(g, b), a.sizes());
                  if (n[1])
                    gb = impl::sum_to_size(map3(g, out, b, g.dtype(), "div_backward", fn::DivBackwardDivisor{}),
                                           b.sizes());
                  return std::vector<Tensor>{ga, gb};
                });
}

Tensor add(const Tensor& a, double b) {
  check_defined("add", a);
  Tensor out = map2(a, op_util::scalar_operand(a, b), op_util::scalar_result_dtype(a, b), "add", fn::Add{});
  return record("add", out, {a}, [](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{g}; });
}
Tensor sub(const Tensor& a, double b) { return impl::add(a, -b); }
Tensor mul(const Tensor& a, double b) {
  check_defined("mul", a);
  Tensor out = map2(a, op_util::scalar_operand(a, b), op_util::scalar_result_dtype(a, b), "mul", fn::Mul{});
  return record("mul", out, {a},
                [b](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{impl::mul(g, b)}; });
}
Tensor div(const Tensor& a, double b) {
  check_defined("div", a);
  const DType dt = is_floating(a.dtype()) ? a.dtype() : kFloat32;
  Tensor out = map2(a, op_util::scalar_operand(a, b), dt, "div", fn::Div{});
  return record("div", out, {a},
                [b](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{impl::div(g, b)}; });
}

Tensor pow(const Tensor& a, double e) {
  check_defined("pow", a);
  const DType dt = op_util::scalar_result_dtype(a, e);
  Tensor out = e == 2.0 ? map1(a, dt, "pow", fn::Square{}) : map1(a, dt, "pow", fn::PowScalar{e});
  return record("pow", out, {a}, [a = a.detach(), e](const Tensor& g, const std::vector<bool>&) {
    if (e == 0.0) return std::vector<Tensor>{zeros_like(g)};
    return std::vector<Tensor>{map2(g, a, g.dtype(), "pow_backward", fn::PowScalarBackward{e})};
  });
}

Tensor pow(const Tensor& a, const Tensor& e) {
  DType dt = arith_dtype("pow", a, e);
  Tensor out = map2(a, e, dt, "pow", fn::Pow{});
  return record("pow", out, {a, e},
                [a = a.detach(), e = e.detach(), out = out.detach()](const Tensor& g, const std::vector<bool>& n) {
                  Tensor ga, ge;
                  if (n[0]) {
                    ga = map3(g, a, e, g.dtype(), "pow_backward", fn::PowBackwardBase{});
                    ga = impl::sum_to_size(ga, a.sizes());
                  }
                  if (n[1]) {
                    // d/de a^e = a^e log(a); PyTorch defines it as 0 where a == 0 and e >= 0.
                    Tensor t = map3(out, a, e, g.dtype(), "pow_backward", fn::PowBackwardExponent{});
                    ge = impl::sum_to_size(impl::mul(g, t), e.sizes());
                  }
                  return std::vector<Tensor>{ga, ge};
                });
}

namespace {
template <bool IsMax>
Tensor extremum(const char* name, const Tensor& a, const Tensor& b) {
  const DType dt = arith_dtype(name, a, b);
  Tensor out = map2(a, b, dt, name, fn::Extremum<IsMax>{});
  return record(name, out, {a, b}, [a = a.detach(), b = b.detach(), name](const Tensor& g, const std::vector<bool>& n) {
    // The gradient goes to the chosen input; ties split it evenly (as PyTorch).
    auto share = [&](const Tensor& self, const Tensor& other) {
      return map3(g, self, other, g.dtype(), name, fn::ExtremumBackward<IsMax>{});
    };
    return std::vector<Tensor>{n[0] ? impl::sum_to_size(share(a, b), a.sizes()) : Tensor(),
                               n[1] ? impl::sum_to_size(share(b, a), b.sizes()) : Tensor()};
  });
}
}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) { return extremum<true>("maximum", a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return extremum<false>("minimum", a, b); }

// ------------------------------------------------------------------ unary

Tensor neg(const Tensor& x) {
  check_defined("neg", x);
  TC_CHECK(x.dtype() != kBool, "neg", "negation of a bool tensor is not supported");
  Tensor out = map1(x, x.dtype(), "neg", fn::Neg{});
  return record("neg", out, {x},
                [](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{impl::neg(g)}; });
}

Tensor abs(const Tensor& x) {
  check_defined("abs", x);
  Tensor out = map1(x, x.dtype(), "abs", fn::Abs{});
  return record("abs", out, {x}, [x = x.detach()](const Tensor& g, const std::vector<bool>&) {
    return std::vector<Tensor>{map2(g, x, g.dtype(), "abs_backward", fn::AbsBackward{})};
  });
}

Tensor exp(const Tensor& x) { return unary_float_op("exp", x, fn::Exp{}, fn::ExpBackward{}); }
Tensor log(const Tensor& x) { return unary_float_op("log", x, fn::Log{}, fn::LogBackward{}); }
Tensor log1p(const Tensor& x) { return unary_float_op("log1p", x, fn::Log1p{}, fn::Log1pBackward{}); }
Tensor sqrt(const Tensor& x) { return unary_float_op("sqrt", x, fn::Sqrt{}, fn::SqrtBackward{}); }
Tensor rsqrt(const Tensor& x) { return unary_float_op("rsqrt", x, fn::Rsqrt{}, fn::RsqrtBackward{}); }
Tensor reciprocal(const Tensor& x) {
  return unary_float_op("reciprocal", x, fn::Reciprocal{}, fn::ReciprocalBackward{});
}
Tensor tanh(const Tensor& x) { return unary_float_op("tanh", x, fn::Tanh{}, fn::TanhBackward{}); }
Tensor sigmoid(const Tensor& x) { return unary_float_op("sigmoid", x, fn::Sigmoid{}, fn::SigmoidBackward{}); }

Tensor relu(const Tensor& x) {
  check_defined("relu", x);
  Tensor out = map1(x, x.dtype(), "relu", fn::Relu{});
  return record("relu", out, {x}, [out = out.detach()](const Tensor& g, const std::vector<bool>&) {
    return std::vector<Tensor>{map2(g, out, g.dtype(), "relu_backward", fn::ReluBackward{})};
  });
}

Tensor gelu(const Tensor& x, std::string_view approximate) {
  TC_CHECK(approximate == "none" || approximate == "tanh", "gelu", "approximate must be \"none\" or \"tanh\", got \"",
           approximate, "\"");
  check_defined("gelu", x);
  const bool tanh_form = approximate == "tanh";
  const DType dt = op_util::float_result_dtype(x.dtype());
  Tensor out;
  if (x.device().is_cuda()) {
    out = map1(x, dt, "gelu", fn::Gelu{tanh_form});
  } else {
    out = make_tensor(x.sizes(), dt, x.device());
    cpu::gelu(out, x, tanh_form);
  }
  return record("gelu", out, {x}, [x = x.detach(), tanh_form](const Tensor& g, const std::vector<bool>&) {
    if (g.device().is_cuda()) return std::vector<Tensor>{map2(g, x, g.dtype(), "gelu", fn::GeluBackward{tanh_form})};
    Tensor dx = make_tensor(broadcast_shapes(g.sizes(), x.sizes(), "gelu"), g.dtype(), g.device());
    cpu::gelu_backward(dx, g, x, tanh_form);
    return std::vector<Tensor>{dx};
  });
}

Tensor silu(const Tensor& x) { return unary_float_op("silu", x, fn::Silu{}, fn::SiluBackward{}); }

Tensor softplus(const Tensor& x, double beta, double threshold) {
  TC_CHECK(beta != 0 && std::isfinite(beta), "softplus", "beta must be finite and nonzero, got ", beta);
  return unary_float_op("softplus", x, fn::Softplus{beta, threshold}, fn::SoftplusBackward{beta, threshold});
}

Tensor clamp(const Tensor& x, std::optional<double> lo, std::optional<double> hi) {
  check_defined("clamp", x);
  TC_CHECK(lo || hi, "clamp", "at least one of min and max must be given");
  const double l = lo.value_or(-INFINITY), h = hi.value_or(INFINITY);
  DType dt = x.dtype();
  if (!is_floating(dt) && ((lo && std::floor(*lo) != *lo) || (hi && std::floor(*hi) != *hi))) dt = kFloat32;
  Tensor out = map1(x, dt, "clamp", fn::Clamp{l, h});
  return record("clamp", out, {x}, [x = x.detach(), l, h](const Tensor& g, const std::vector<bool>&) {
    return std::vector<Tensor>{map2(g, x, g.dtype(), "clamp_backward", fn::ClampBackward{l, h})};
  });
}

Tensor where(const Tensor& c, const Tensor& a, const Tensor& b) {
  op_util::check_same_device("where", c, a);
  op_util::check_same_device("where", a, b);
  TC_CHECK(c.dtype() == kBool, "where", "condition must be a bool tensor, got ", dtype_name(c.dtype()));
  const DType dt = result_type(a, b);
  Tensor out = map3(c, a, b, dt, "where", fn::Where{});
  return record("where", out, {a, b},
                [c = c.detach(), sa = a.sizes(), sb = b.sizes()](const Tensor& g, const std::vector<bool>& n) {
                  Tensor z = zeros({}, TensorOptions(g.dtype()).device(g.device()));
                  return std::vector<Tensor>{n[0] ? impl::sum_to_size(impl::where(c, g, z), sa) : Tensor(),
                                             n[1] ? impl::sum_to_size(impl::where(c, z, g), sb) : Tensor()};
                });
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
