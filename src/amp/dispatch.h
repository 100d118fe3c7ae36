// Internal: the dispatcher every public op passes through (src/amp/ops.cpp).
//
//   Tensor mm(const Tensor& a, const Tensor& b) { return amp::dispatch<OpId::mm>(impl_callable, a, b); }
//
// (dispatch<"name"> is the same for an op outside the list: a user's registered op.)
// It first refuses a tensor on a device the op has no kernel for (CUDA: has_cuda_kernel),
// naming the op and the device, before any kernel reads the memory. Outside an
// autocast region (and with no profiler recording) the rest is a test of two
// thread-local bools and a direct call. Inside,
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

// True when every tensor argument is undefined or on the CPU; otherwise `where` is the
// first other device.
inline bool on_cpu(const Tensor& t, Device& where) {
  const TensorImpl* impl = t.impl();
  if (impl == nullptr || impl->device().is_cpu()) [[likely]]
    return true;
  where = impl->device();
  return false;
}
inline bool on_cpu(const std::vector<Tensor>& ts, Device& where) {
  for (const Tensor& t : ts)
    if (!on_cpu(t, where)) return false;
  return true;
}
template <class T>
bool on_cpu(const T&, Device&) {
  return true;
}

[[noreturn]] void throw_no_kernel(std::string_view op, Device device);

// The ops of the list that run on CUDA tensors so far (src/backend/cuda). A CUDA tensor
// reaching any other op is refused here, before a CPU kernel could read device memory.
constexpr bool has_cuda_kernel(OpId op) {
  switch (op) {
    // pointwise (backend/cuda/pointwise.cu)
    case OpId::add:
    case OpId::sub:
    case OpId::mul:
    case OpId::div:
    case OpId::pow:
    case OpId::maximum:
    case OpId::minimum:
    case OpId::neg:
    case OpId::abs:
    case OpId::exp:
    case OpId::log:
    case OpId::log1p:
    case OpId::sqrt:
    case OpId::rsqrt:
    case OpId::reciprocal:
    case OpId::tanh:
    case OpId::sigmoid:
    case OpId::relu:
    case OpId::gelu:
    case OpId::silu:
    case OpId::softplus:
    case OpId::clamp:
    case OpId::where:
    case OpId::eq:
    case OpId::ne:
    case OpId::lt:
    case OpId::le:
    case OpId::gt:
    case OpId::ge:
    case OpId::isnan:
    case OpId::isfinite:
    // rows (softmax.cu)
    case OpId::softmax:
    case OpId::log_softmax:
    case OpId::cross_entropy:
    case OpId::nll_loss:
    case OpId::layer_norm:
    case OpId::add_layer_norm:  // the composition of add and layer_norm
    case OpId::batch_norm:      // norm.cu
    // pooling (pool.cu)
    case OpId::max_pool2d:
    case OpId::avg_pool2d:
    case OpId::adaptive_avg_pool2d:
    // reductions and shapes (reduce.cu, copy.cu)
    case OpId::sum:
    case OpId::mean:
    case OpId::sum_to_size:
    case OpId::var:
    case OpId::max:
    case OpId::min:
    case OpId::argmax:
    case OpId::argmin:
    case OpId::mse_loss:
    case OpId::binary_cross_entropy_with_logits:
    case OpId::cat:
    case OpId::stack:
    // products (matmul.cu)
    case OpId::matmul:
    case OpId::mm:
    case OpId::bmm:
    case OpId::linear:
    case OpId::linear_activation:  // the compositions on CUDA
    case OpId::mlp:
    // embedding.cu, dropout.cu; attention on the products and softmax kernels
    case OpId::embedding:
    case OpId::dropout:
    case OpId::scaled_dot_product_attention:
    // convolution (conv.cu, cuDNN)
    case OpId::conv2d:
      return true;
    default:
      return false;
  }
}

template <class... Args>
inline void check_devices(std::string_view op, bool cuda_ok, const Args&... args) {
  Device where;
  if (!(on_cpu(args, where) && ...)) [[unlikely]]
    if (!(cuda_ok && where.is_cuda())) throw_no_kernel(op, where);
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
  detail::check_devices(op_name(Op), detail::has_cuda_kernel(Op), args...);
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
  // A user's op runs on whatever devices the ops it calls accept (each is checked itself).
  detail::check_devices(Name.view(), true, args...);
  if (!(detail::t_autocast_active | profiler::detail::t_recording)) [[likely]]
    return f(args...);
  profiler::detail::Scope record(Name.view());
  if (!detail::t_autocast_active) return f(args...);
  static const detail::OpEntry* const entry = detail::op_entry(Name.view());
  return detail::dispatch_slow(entry, f, args...);
}

}  // namespace tc::amp
