// Internal: the scalar formulas of the pointwise ops and their fused backward formulas, one
// functor each, shared by both backends: the CPU's loops (backend/cpu/loops/elementwise.h) call them
// on float or double blocks, the CUDA kernels (backend/cuda/pointwise.cu) per element. A
// functor computes in its argument type C (float, or double for float64/int64/int32 data)
// and holds its op's parameters (alpha, an exponent, bounds) as members. The lists at the
// end name the functors the CUDA backend instantiates; an op whose formula is a lambda or
// a functor not listed runs on the CPU only.
#pragma once
#include <cmath>

#if defined(__CUDACC__)
#define TC_HD __host__ __device__ __forceinline__
#else
#define TC_HD inline
#endif

namespace tc::fn {

template <class C>
TC_HD C stable_sigmoid(C v) {
  if (v >= C(0)) return C(1) / (C(1) + std::exp(-v));
  const C e = std::exp(v);
  return e / (C(1) + e);
}

// ---- binary arithmetic: f(a, b)
struct Add {
  template <class C>
  TC_HD C operator()(C x, C y) const {
    return x + y;
  }
};
struct AddScaled {  // a + alpha * b
  double alpha;
  template <class C>
  TC_HD C operator()(C x, C y) const {
    return x + C(alpha) * y;
  }
};
struct Mul {
  template <class C>
  TC_HD C operator()(C x, C y) const {
    return x * y;
  }
};
struct Div {
  template <class C>
  TC_HD C operator()(C x, C y) const {
    return x / y;
  }
};
struct Pow {
  template <class C>
  TC_HD C operator()(C x, C y) const {
    return std::pow(x, y);
  }
};
template <bool IsMax>
struct Extremum {  // maximum / minimum; NaN propagates
  template <class C>
  TC_HD C operator()(C x, C y) const {
    if (x != x) return x;
    if (y != y) return y;
    return IsMax ? (x > y ? x : y) : (x < y ? x : y);
  }
};
using Maximum = Extremum<true>;
using Minimum = Extremum<false>;

// ---- comparisons: 1 or 0 in C, stored as bool
#define TC_COMPARISON_FN(Name, expr)     \
  struct Name {                          \
    template <class C>                   \
    TC_HD C operator()(C x, C y) const { \
      return C((expr) ? 1 : 0);          \
    }                                    \
  };
TC_COMPARISON_FN(Eq, x == y)
TC_COMPARISON_FN(Ne, x != y)
TC_COMPARISON_FN(Lt, x < y)
TC_COMPARISON_FN(Le, x <= y)
TC_COMPARISON_FN(Gt, x > y)
TC_COMPARISON_FN(Ge, x >= y)
#undef TC_COMPARISON_FN

// ---- unary: f(x)
struct Neg {
  template <class C>
  TC_HD C operator()(C v) const {
    return -v;
  }
};
struct Abs {
  template <class C>
  TC_HD C operator()(C v) const {
    return std::abs(v);
  }
};
struct Square {
  template <class C>
  TC_HD C operator()(C v) const {
    return v * v;
  }
};
struct PowScalar {
  double e;
  template <class C>
  TC_HD C operator()(C v) const {
    return std::pow(v, C(e));
  }
};
struct Exp {
  template <class C>
  TC_HD C operator()(C v) const {
    return std::exp(v);
  }
};
struct Log {
  template <class C>
  TC_HD C operator()(C v) const {
    return std::log(v);
  }
};
struct Log1p {
  template <class C>
  TC_HD C operator()(C v) const {
    return std::log1p(v);
  }
};
struct Sqrt {
  template <class C>
  TC_HD C operator()(C v) const {
    return std::sqrt(v);
  }
};
struct Rsqrt {
  template <class C>
  TC_HD C operator()(C v) const {
    return C(1) / std::sqrt(v);
  }
};
struct Reciprocal {
  template <class C>
  TC_HD C operator()(C v) const {
    return C(1) / v;
  }
};
struct Tanh {
  template <class C>
  TC_HD C operator()(C v) const {
    return std::tanh(v);
  }
};
struct Sigmoid {
  template <class C>
  TC_HD C operator()(C v) const {
    return stable_sigmoid(v);
  }
};
struct Silu {
  template <class C>
  TC_HD C operator()(C v) const {
    return v * stable_sigmoid(v);
  }
};
struct Softplus {
  double beta, threshold;
  template <class C>
  TC_HD C operator()(C v) const {
    const C bx = C(beta) * v;
    return bx > C(threshold) ? v : std::log1p(std::exp(bx)) / C(beta);
  }
};
struct Relu {
  template <class C>
  TC_HD C operator()(C v) const {
    return v > C(0) || v != v ? v : C(0);
  }
};
struct Clamp {  // max wins when min > max, as torch.clamp; NaN stays
  double lo, hi;
  template <class C>
  TC_HD C operator()(C v) const {
    if (v != v) return v;
    const C lo_clamped = v < C(lo) ? C(lo) : v;
    return lo_clamped > C(hi) ? C(hi) : lo_clamped;
  }
};
struct IsNan {
  template <class C>
  TC_HD C operator()(C v) const {
    return C(v != v ? 1 : 0);
  }
};
struct IsFinite {
  template <class C>
  TC_HD C operator()(C v) const {
    return C(std::isfinite(v) ? 1 : 0);
  }
};

// GELU, erf or tanh form. The CPU runs its own vectorized loops (backend/cpu/loops/activation.cpp,
// the same GELU over fast_normal_cdf_pdf/fast_tanh); these are the device's, over the math library.
struct Gelu {
  bool tanh_form;
  template <class C>
  TC_HD C operator()(C v) const {
    if (!tanh_form) return C(0.5) * v * (C(1) + std::erf(v * C(0.70710678118654752)));
    return C(0.5) * v * (C(1) + std::tanh(C(0.7978845608028654) * (v + C(0.044715) * v * v * v)));
  }
};
struct GeluBackward {  // f(g, x)
  bool tanh_form;
  template <class C>
  TC_HD C operator()(C g, C v) const {
    if (!tanh_form) {
      const C cdf = C(0.5) * (C(1) + std::erf(v * C(0.70710678118654752)));
      return g * (cdf + v * std::exp(C(-0.5) * v * v) * C(0.3989422804014327));
    }
    const C k = C(0.7978845608028654);
    const C t = std::tanh(k * (v + C(0.044715) * v * v * v));
    const C dinner = k * (C(1) + C(3 * 0.044715) * v * v);
    return g * (C(0.5) * (C(1) + t) + C(0.5) * v * (C(1) - t * t) * dinner);
  }
};

// ---- ternary
struct Where {  // c ? a : b
  template <class C>
  TC_HD C operator()(C c, C x, C y) const {
    return c != C(0) ? x : y;
  }
};

// ---- backward formulas. Unary float ops: f(g, x, out) gives the input gradient.
#define TC_UNARY_BACKWARD_FN(Name, expr)      \
  struct Name {                               \
    template <class C>                        \
    TC_HD C operator()(C g, C v, C o) const { \
      return expr;                            \
    }                                         \
  };
TC_UNARY_BACKWARD_FN(ExpBackward, g* o)
TC_UNARY_BACKWARD_FN(LogBackward, g / v)
TC_UNARY_BACKWARD_FN(Log1pBackward, g / (C(1) + v))
TC_UNARY_BACKWARD_FN(SqrtBackward, g / (C(2) * o))
TC_UNARY_BACKWARD_FN(RsqrtBackward, C(-0.5) * g * o * o * o)
TC_UNARY_BACKWARD_FN(ReciprocalBackward, -g* o* o)
TC_UNARY_BACKWARD_FN(TanhBackward, g*(C(1) - o * o))
TC_UNARY_BACKWARD_FN(SigmoidBackward, g* o*(C(1) - o))
#undef TC_UNARY_BACKWARD_FN
struct SiluBackward {
  template <class C>
  TC_HD C operator()(C g, C v, C) const {
    const C s = stable_sigmoid(v);
    return g * s * (C(1) + v * (C(1) - s));
  }
};
struct SoftplusBackward {
  double beta, threshold;
  template <class C>
  TC_HD C operator()(C g, C v, C) const {
    const C bx = C(beta) * v;
    return bx > C(threshold) ? g : g * stable_sigmoid(bx);
  }
};
// f(g, x) for the ops that save their input (or output).
struct AbsBackward {
  template <class C>
  TC_HD C operator()(C g, C v) const {
    return v > C(0) ? g : (v < C(0) ? -g : C(0));
  }
};
struct ReluBackward {  // from the output
  template <class C>
  TC_HD C operator()(C g, C o) const {
    return o > C(0) ? g : C(0);
  }
};
struct ClampBackward {
  double lo, hi;
  template <class C>
  TC_HD C operator()(C g, C v) const {
    return (v >= C(lo) && v <= C(hi)) ? g : C(0);
  }
};
struct PowScalarBackward {
  double e;
  template <class C>
  TC_HD C operator()(C g, C x) const {
    return g * C(e) * std::pow(x, C(e - 1.0));
  }
};
struct DivBackwardDivisor {  // f(g, out, b) = -g * out / b
  template <class C>
  TC_HD C operator()(C g, C o, C y) const {
    return -g * o / y;
  }
};
struct PowBackwardBase {  // f(g, a, e)
  template <class C>
  TC_HD C operator()(C g, C x, C y) const {
    return y == C(0) ? C(0) : g * y * std::pow(x, y - C(1));
  }
};
struct PowBackwardExponent {  // f(out, a, e) = d/de a^e without g; 0 where a == 0 and e >= 0 (PyTorch)
  template <class C>
  TC_HD C operator()(C o, C x, C y) const {
    return (x == C(0) && y >= C(0)) ? C(0) : o * std::log(x);
  }
};
template <bool IsMax>
struct ExtremumBackward {  // f(g, self, other): the gradient to the chosen input; ties split it evenly
  template <class C>
  TC_HD C operator()(C g, C x, C y) const {
    if (x == y) return g * C(0.5);
    const bool chosen = (x != x) || (IsMax ? x > y : x < y);
    return chosen ? g : C(0);
  }
};
using MaximumBackward = ExtremumBackward<true>;
using MinimumBackward = ExtremumBackward<false>;

// ---- reductions and losses (ops/reduction.cpp, ops/loss_pointwise.cpp)
struct SquaredDifference {  // mse_loss per element
  template <class C>
  TC_HD C operator()(C x, C y) const {
    return (x - y) * (x - y);
  }
};
struct MseBackward {  // f(x, target, g) = d/dx (x - t)^2 times g
  template <class C>
  TC_HD C operator()(C x, C y, C g) const {
    return C(2) * (x - y) * g;
  }
};
struct VarBackward {  // f(x, mean, g) = scale (x - mean) g, scale = 2 / (N - correction)
  double scale;
  template <class C>
  TC_HD C operator()(C x, C m, C g) const {
    return C(scale) * (x - m) * g;
  }
};
struct EqualOrBothNan {  // f(x, extremum): whether x is the max/min of all elements (a NaN result: every NaN)
  template <class C>
  TC_HD C operator()(C x, C m) const {
    return C((x == m) || (x != x && m != m) ? 1 : 0);
  }
};
struct ShareWhere {  // f(mask, g, count): g split evenly over the count elements of the mask
  template <class C>
  TC_HD C operator()(C mask, C g, C count) const {
    return mask != C(0) ? g / count : C(0);
  }
};

}  // namespace tc::fn

// Every elementwise functor, by arity: each backend registers a kernel per functor
// (backend/kernels.h), and an op may use only these.
// clang-format off
#define TC_UNARY_FNS(X)                                                                      \
  X(Neg) X(Abs) X(Square) X(PowScalar) X(Exp) X(Log) X(Log1p) X(Sqrt) X(Rsqrt) X(Reciprocal)      \
  X(Tanh) X(Sigmoid) X(Silu) X(Softplus) X(Relu) X(Clamp) X(IsNan) X(IsFinite) X(Gelu)
#define TC_BINARY_FNS(X)                                                                     \
  X(Add) X(AddScaled) X(Mul) X(Div) X(Pow) X(Maximum) X(Minimum)                                  \
  X(Eq) X(Ne) X(Lt) X(Le) X(Gt) X(Ge)                                                             \
  X(AbsBackward) X(ReluBackward) X(ClampBackward) X(PowScalarBackward) X(GeluBackward)            \
  X(SquaredDifference) X(EqualOrBothNan)
#define TC_TERNARY_FNS(X)                                                                    \
  X(Where) X(ExpBackward) X(LogBackward) X(Log1pBackward) X(SqrtBackward) X(RsqrtBackward)        \
  X(ReciprocalBackward) X(TanhBackward) X(SigmoidBackward) X(SiluBackward) X(SoftplusBackward)    \
  X(DivBackwardDivisor) X(PowBackwardBase) X(PowBackwardExponent) X(MaximumBackward)              \
  X(MinimumBackward)                                                                              \
  X(MseBackward) X(VarBackward) X(ShareWhere)
// clang-format on
