/// \file
/// The public ops. Every op: checks its inputs (tc::Error naming op, shapes and dtypes),
/// promotes dtypes, records an autograd node when an input requires grad, and runs the
/// device's kernel. Floating math on bfloat16/float16 computes in float32 and rounds once.
///
/// The dispatched ops (all that autocast may cast) are declared from one list,
/// tensorcast/ops.def, which says each op's signature, defaults and autocast policy.
/// That list, as the ops' reference (`TC_OP(return type, name, (parameters), (arguments))`;
/// `TC_POLICY` gives the autocast policy, docs/amp-policy.md explains it):
/// \include tensorcast/ops.def
#pragma once
#include <optional>
#include <string_view>
#include <tuple>
#include <vector>

#include "tensorcast/factories.h"
#include "tensorcast/parallel.h"
#include "tensorcast/tensor.h"

namespace tc {

/// The dtype of a binary op on a and b (torch.result_type): promote_types, except that a
/// 0-d tensor does not widen a dimensioned one of the same category (bf16 (N) * f32 () -> bf16).
DType result_type(const Tensor& a, const Tensor& b);

/// (values, indices): what max and min along a dim return.
using TensorPair = std::tuple<Tensor, Tensor>;

/// Loss reductions (torch.nn.functional's reduction=).
enum class Reduction : uint8_t { None, Mean, Sum };
/// Reduction::None, as libtorch's torch::kNone.
inline constexpr Reduction kNone = Reduction::None;
/// Reduction::Mean, as libtorch's torch::kMean.
inline constexpr Reduction kMean = Reduction::Mean;
/// Reduction::Sum, as libtorch's torch::kSum.
inline constexpr Reduction kSum = Reduction::Sum;

/// The activation of the fused linear ops (linear_activation, mlp): ReLU, GELU (erf: gelu's
/// approximate "none") or GELU's tanh approximation (approximate "tanh").
enum class Activation : uint8_t { kRelu, kGelu, kGeluTanh };
/// The activation's name: "relu", "gelu" or "gelu_tanh" ("invalid" for a value outside the enum).
constexpr const char* activation_name(Activation act) noexcept {
  switch (act) {
    case Activation::kRelu:
      return "relu";
    case Activation::kGelu:
      return "gelu";
    case Activation::kGeluTanh:
      return "gelu_tanh";
  }
  return "invalid";
}

#define TC_DEFAULT(...) = __VA_ARGS__
#define TC_POLICY(op, policy, pytorch, note)
#define TC_OP(ret, op, params, args) ret op params;
#include "tensorcast/ops.def"
#undef TC_OP
#undef TC_POLICY
#undef TC_DEFAULT

// ---------------------------------------------------------------- comparisons and operators
/// \name Comparisons
/// @{

/// Elementwise comparisons (broadcasting, as the binary ops): kBool tensors, no gradient.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double b);
Tensor ne(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);
Tensor isnan(const Tensor& x);
Tensor isfinite(const Tensor& x);
/// @}

/// \name Operators
/// @{

/// The ops as operators: `a + b` is tc::add(a, b), `a == b` is tc::eq(a, b) (kBool), `-x` is
/// tc::neg(x); a double takes the tensor's floating dtype.
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator+(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator*(double a, const Tensor& b);
Tensor operator/(double a, const Tensor& b);
Tensor operator-(const Tensor& x);
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, double b);
Tensor operator!=(const Tensor& a, double b);
Tensor operator<(const Tensor& a, double b);
Tensor operator<=(const Tensor& a, double b);
Tensor operator>(const Tensor& a, double b);
Tensor operator>=(const Tensor& a, double b);
/// @}

}  // namespace tc
