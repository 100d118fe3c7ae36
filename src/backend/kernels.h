// Internal: the kernel table every backend fills and the registry the ops look it up in.
//
//   const backend::Kernels& k = backend::kernels_for(x.device());
//   k.softmax_forward(y, x, dim, log);           // raises if the device has no such kernel
//   if (k.add_layer_norm_forward) ... else ...;  // a fused kernel the device may lack
//   k.map<fn::Exp>()(out, x, "exp", fn::Exp{}, compute_double);
//
// The kernels are listed once, in kernels.def (and the elementwise functors in
// pointwise_fns.h); a backend registers the ones it has in its own kernels.cpp. The
// registry knows backends only by the device type they register for: the build lists
// the backends it compiles in (CMake's TC_BACKENDS, core/backend_list.h).
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "backend/class_targets.h"
#include "backend/cpu/loops/activation.h"  // Activation
#include "backend/cpu/loops/norm.h"        // BnGeometry
#include "backend/cpu/window_params.h"     // ConvParams, PoolParams
#include "backend/optim_fns.h"
#include "backend/pointwise_fns.h"
#include "tensorcast/amp/scaler_rules.h"
#include "tensorcast/tensor.h"

namespace tc::backend {

using PairOfTensors = std::pair<Tensor, Tensor>;

namespace detail {
[[noreturn]] void throw_no_kernel(const char* kernel, const char* device);
}

// One kernel of one device: a function pointer, null where the device has none.
template <class Sig>
class Kernel;
template <class R, class... A>
class Kernel<R(A...)> {
 public:
  using Fn = R (*)(A...);
  explicit constexpr Kernel(const char* name) : name_(name) {}
  Kernel& operator=(Fn f) {
    fn_ = f;
    return *this;
  }
  // Whether the device has this kernel.
  explicit operator bool() const { return fn_ != nullptr; }
  R operator()(A... args) const {
    if (fn_ == nullptr) [[unlikely]]
      detail::throw_no_kernel(name_, device_);
    return fn_(static_cast<A>(args)...);
  }
  const char* name() const { return name_; }
  void set_device(const char* device) { device_ = device; }

 private:
  const char* name_;
  const char* device_ = nullptr;  // null: no backend registered this table
  Fn fn_ = nullptr;
};

// The elementwise kernels: one per functor of pointwise_fns.h's lists, with the contract of
// cpu::unary_map / binary_map / ternary_map (any dtypes and strides, inputs broadcast to
// out's shape, computed in float, or double when compute_double, rounded once).
template <class F>
using UnaryMap = Kernel<void(const Tensor& out, const Tensor& x, const char* op, F f, bool compute_double)>;
template <class F>
using BinaryMap =
    Kernel<void(const Tensor& out, const Tensor& a, const Tensor& b, const char* op, F f, bool compute_double)>;
template <class F>
using TernaryMap = Kernel<void(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c, const char* op,
                               F f, bool compute_double)>;

struct Kernels {
#define TC_KERNEL(name, ret, params) Kernel<ret params> name{#name};
#include "backend/kernels.def"
#undef TC_KERNEL

#define TC_MAP_MEMBER(Arity, F) Arity##Map<fn::F> map_##F{"elementwise " #F};
#define TC_UNARY(F) TC_MAP_MEMBER(Unary, F)
#define TC_BINARY(F) TC_MAP_MEMBER(Binary, F)
#define TC_TERNARY(F) TC_MAP_MEMBER(Ternary, F)
  TC_UNARY_FNS(TC_UNARY)
  TC_BINARY_FNS(TC_BINARY)
  TC_TERNARY_FNS(TC_TERNARY)
#undef TC_UNARY
#undef TC_BINARY
#undef TC_TERNARY
#undef TC_MAP_MEMBER

  // The elementwise kernel of functor F (a compile error for a functor not in the lists).
  template <class F>
  const auto& map() const {
    return map_of(static_cast<F*>(nullptr));
  }
  template <class F>
  auto& map() {
    return const_cast<std::remove_cvref_t<decltype(map_of(static_cast<F*>(nullptr)))>&>(
        map_of(static_cast<F*>(nullptr)));
  }

  // Names every kernel after the device, for "[kernel] no kernel for <device> tensors".
  void set_device(const char* device);

 private:
#define TC_MAP_OF(F) \
  const auto& map_of(fn::F*) const { return map_##F; }
  TC_UNARY_FNS(TC_MAP_OF)
  TC_BINARY_FNS(TC_MAP_OF)
  TC_TERNARY_FNS(TC_MAP_OF)
#undef TC_MAP_OF
};

// The table of the device's backend. A device type no backend of this build registered
// has an empty table, so each kernel says what is missing.
const Kernels& kernels_for(Device device);

}  // namespace tc::backend
