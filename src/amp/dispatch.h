// Internal: the dispatcher every public op passes through (src/amp/ops.cpp).
//
//   Tensor mm(const Tensor& a, const Tensor& b) { return amp::dispatch<OpId::mm>(impl_callable, a, b); }
//
// (dispatch<"name"> is the same for an op outside the list: a user's registered op.)
// Devices are the kernels' business (backend/kernels.h: a device without a kernel raises,
// naming it, before anything reads the memory). Outside an autocast region (and with no
// profiler recording) the dispatcher is a test of two thread-local bools and a direct
// call. Inside,
// it looks the op's policy up (once per op: a function-local static handle into the
// table), casts the Tensor and std::vector<Tensor> arguments per the policy, and calls the
// implementation with autocast excluded so nested ops are not re-cast.
#pragma once
#include <algorithm>
#include <cstddef>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "amp/state.h"
#include "core/tensor_impl.h"
#include "profiler/hooks.h"

namespace tc::amp {

// A string literal usable as a template argument: dispatch<"matmul"> gets its own
// instantiation, hence its own static handle, per op name.
template <size_t N>
struct OpName {
  char chars[N];
  constexpr OpName(const char (&s)[N]) { std::copy_n(s, N, chars); }  // NOLINT: implicit by design
  constexpr std::string_view view() const { return {chars, N - 1}; }
};

namespace detail {

inline void collect(std::vector<const Tensor*>& out, const Tensor& t) { out.push_back(&t); }
inline void collect(std::vector<const Tensor*>& out, const std::vector<Tensor>& ts) {
  for (const Tensor& t : ts) out.push_back(&t);
}
template <class T>
void collect(std::vector<const Tensor*>&, const T&) {}

inline Tensor cast_arg(const CastPlan& p, const Tensor& t) { return apply_cast(p, t); }
inline std::vector<Tensor> cast_arg(const CastPlan& p, const std::vector<Tensor>& ts) {
  std::vector<Tensor> out;
  out.reserve(ts.size());
  for (const Tensor& t : ts) out.push_back(apply_cast(p, t));
  return out;
}
template <class T>
const T& cast_arg(const CastPlan&, const T& v) {
  return v;
}

template <class F, class... Args>
decltype(auto) dispatch_slow(const OpEntry* entry, F& f, const Args&... args) {
  std::vector<const Tensor*> tensors;
  tensors.reserve(sizeof...(Args));
  (collect(tensors, args), ...);
  const CastPlan plan = plan_casts(entry_policy(entry), tensors.data(), tensors.size());
  ExcludeGuard exclude;  // also for passthrough: a composite's pieces are not re-cast
  if (!plan.cast) return f(args...);
  return f(cast_arg(plan, args)...);
}

}  // namespace detail

// An op of the list (tensorcast/ops.def).
template <OpId Op, class F, class... Args>
inline decltype(auto) dispatch(F&& f, const Args&... args) {
  if (!(detail::t_autocast_active | profiler::detail::t_recording)) [[likely]]
    return f(args...);
  profiler::detail::Scope record(op_name(Op));
  if (!detail::t_autocast_active) return f(args...);
  static const detail::OpEntry* const entry = detail::builtin_entry(Op);
  return detail::dispatch_slow(entry, f, args...);
}

// An op outside the list, by name (registered as passthrough unless a policy is set).
template <OpName Name, class F, class... Args>
inline decltype(auto) dispatch(F&& f, const Args&... args) {
  if (!(detail::t_autocast_active | profiler::detail::t_recording)) [[likely]]
    return f(args...);
  profiler::detail::Scope record(Name.view());
  if (!detail::t_autocast_active) return f(args...);
  static const detail::OpEntry* const entry = detail::op_entry(Name.view());
  return detail::dispatch_slow(entry, f, args...);
}

}  // namespace tc::amp
