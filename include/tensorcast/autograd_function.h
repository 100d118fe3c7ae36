/// \file
/// Custom autograd functions, libtorch-style, with torch.amp's custom_fwd/custom_bwd:
///
/// \code{.cpp}
///   struct ScaledTanh : tc::autograd::Function<ScaledTanh> {
///     static constexpr const char* name = "ScaledTanh";                       // optional
///     static constexpr std::optional<tc::DType> autocast_cast_inputs = tc::kFloat32;  // optional
///     static tc::Tensor forward(tc::autograd::AutogradContext* ctx, const tc::Tensor& x, double s) {
///       auto y = tc::tanh(x) * s;
///       ctx->save_for_backward({y});
///       ctx->saved_data["s"] = s;
///       return y;
///     }
///     static std::vector<tc::Tensor> backward(tc::autograd::AutogradContext* ctx, std::vector<tc::Tensor> g) {
///       auto y = ctx->get_saved_variables()[0];
///       double s = std::any_cast<double>(ctx->saved_data["s"]);
///       return {g[0] * (s - y * y / s)};   // one gradient per Tensor argument of forward
///     }
///   };
///   tc::Tensor y = ScaledTanh::apply(x, 2.0);
/// \endcode
///
/// forward runs with grad mode off; apply records one node whose backward calls
/// T::backward. autocast (custom_fwd/custom_bwd semantics of torch.amp):
/// \verbatim
///   * T::autocast_cast_inputs set (custom_fwd(cast_inputs=dtype)): inside an enabled CPU
///     region, floating CPU tensor arguments are cast to that dtype and forward runs with
///     autocast off. Outside a region nothing is cast. Backward runs with autocast off,
///     inside a region or not.
///   * otherwise (custom_fwd()) forward runs under the caller's autocast state, and so does
///     backward, wherever backward() is called.
///   Both as torch.amp's custom_fwd + custom_bwd: backward runs under the state the forward
///   ran under (tests/test_autograd_function.cpp has PyTorch's outcome of each case).
/// \endverbatim
///
/// Header-only. Because apply() reads and sets the autocast state, this header sits in the
/// amp layer (above ops and autograd: docs/design.md, Layers), unlike tensorcast/autograd.h.
#pragma once
#include <any>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tensorcast/amp/autocast.h"
#include "tensorcast/autograd.h"

namespace tc::autograd {

/// What forward saves for backward (libtorch's AutogradContext).
class AutogradContext {
 public:
  /// Tensors the backward needs. Stored detached (no grad_fn), so saving the output does
  /// not make a reference cycle through the node.
  void save_for_backward(const std::vector<Tensor>& tensors) {
    saved_.clear();
    saved_.reserve(tensors.size());
    for (const Tensor& t : tensors) saved_.push_back(t.defined() ? t.detach() : t);
  }
  /// The tensors save_for_backward stored.
  const std::vector<Tensor>& get_saved_variables() const { return saved_; }
  /// Whether Tensor argument i of forward wants a gradient (valid in backward).
  bool needs_input_grad(size_t i) const { return i < needs_.size() && needs_[i]; }
  /// Non-tensor state for backward (libtorch's ctx->saved_data).
  std::unordered_map<std::string, std::any> saved_data;

  /// Whether forward ran with CPU autocast on (false when custom_fwd cast its inputs),
  /// restored around backward.
  bool autocast_enabled = false;
  DType autocast_dtype = kBFloat16;  ///< the CPU autocast dtype apply() saw

 private:
  template <class T>
  friend struct Function;
  std::vector<Tensor> saved_;
  std::vector<bool> needs_;
};

namespace detail {

template <class T>
concept HasCastInputs = requires {
  T::autocast_cast_inputs;
};
template <class T>
concept HasName = requires {
  T::name;
};

inline void collect_inputs(std::vector<Tensor>& out, const Tensor& t) { out.push_back(t); }
template <class A>
void collect_inputs(std::vector<Tensor>&, const A&) {}

/// custom_fwd's cast: floating CPU tensors to `to` (float64 included, as torch.amp._cast).
inline Tensor cast_input(const Tensor& t, DType to) {
  return t.defined() && t.device().is_cpu() && t.is_floating_point() ? t.to(to) : t;
}
template <class A>
requires(!std::is_same_v<std::remove_cvref_t<A>, Tensor>) A && cast_input(A&& a, DType) { return std::forward<A>(a); }

/// A forward that returns one of its own inputs must not have that input's history
/// replaced: give it a fresh handle over the same storage.
inline Tensor fresh_output(const Tensor& out, const std::vector<Tensor>& inputs) {
  TC_CHECK(out.defined(), "autograd::Function", "forward returned an undefined tensor");
  for (const Tensor& in : inputs)
    if (in.is_same(out)) return out.detach();
  return out;
}

}  // namespace detail

/// The base of a custom autograd function T (see the top of this file).
template <class T>
struct Function {
  /// Runs T::forward on args and records a node whose backward calls T::backward.
  template <class... Args>
  static Tensor apply(Args&&... args) {
    auto ctx = std::make_shared<AutogradContext>();
    ctx->autocast_enabled = amp::is_autocast_enabled(kCPU);
    ctx->autocast_dtype = amp::get_autocast_dtype(kCPU);
    std::optional<DType> cast_to;
    if constexpr (detail::HasCastInputs<T>) cast_to = T::autocast_cast_inputs;
    if (cast_to) {
      // custom_fwd(cast_inputs=...): forward and backward run with autocast off (torch.amp
      // records _fwd_used_autocast = False whether or not a region was active). Inside a
      // region the inputs are cast first (recorded, so gradients reach the originals).
      const bool in_region = ctx->autocast_enabled;
      ctx->autocast_enabled = false;
      if (in_region) return run(ctx, true, detail::cast_input(std::forward<Args>(args), *cast_to)...);
    }
    return run(ctx, false, std::forward<Args>(args)...);
  }

 private:
  template <class... Args>
  static Tensor run(const std::shared_ptr<AutogradContext>& ctx, bool autocast_off, Args&&... args) {
    std::vector<Tensor> inputs;
    (detail::collect_inputs(inputs, args), ...);
    Tensor out;
    {
      NoGradGuard no_grad;
      std::optional<amp::AutocastGuard> off;
      if (autocast_off) off.emplace(kCPU, ctx->autocast_dtype, /*enabled=*/false);
      out = T::forward(ctx.get(), std::forward<Args>(args)...);
    }
    out = detail::fresh_output(out, inputs);
    const char* name = "CustomFunction";
    if constexpr (detail::HasName<T>) name = T::name;
    return record(name, out, inputs, [ctx](const Tensor& g, const std::vector<bool>& needs) {
      ctx->needs_ = needs;
      // custom_bwd: backward runs under the autocast state the forward ran under.
      amp::AutocastGuard state(kCPU, ctx->autocast_dtype, ctx->autocast_enabled);
      return T::backward(ctx.get(), std::vector<Tensor>{g});
    });
  }
};

}  // namespace tc::autograd
