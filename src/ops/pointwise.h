// Internal: utilities for op implementations (namespace tc::op_util): the dtype rules of
// scalar operands, and map1/map2/map3, which allocate an op's output (keeping a dense
// permuted layout) and run a functor of backend/pointwise_fns.h through the device's
// elementwise kernel.
#pragma once
#include <algorithm>
#include <array>
#include <initializer_list>

#include "backend/cpu/loops/elementwise.h"
#include "backend/kernels.h"
#include "tensorcast/ops.h"

namespace tc::op_util {

// The dtype a double scalar takes next to tensor `a` (PyTorch's wrapped-number rule):
// the tensor's floating dtype, else float32 for a fractional value, else the tensor's dtype.
DType scalar_result_dtype(const Tensor& a, double value);
// The scalar as a 0-d tensor in a's compute precision (float32, or float64 for float64).
Tensor scalar_operand(const Tensor& a, double value);
// The floating dtype a unary float op produces for x (integers give float32).
inline DType float_result_dtype(DType t) { return is_floating(t) ? t : kFloat32; }

// Dense-layout helpers (dense_stride_order, empty_like_layout, memory_order_view) live in
// src/core/tensor_impl.h: Tensor::to preserves layouts too.

namespace detail {
// The device's elementwise kernel for functor f (backend/kernels.h).
template <int NIn, class F>
void run_map(const Tensor& out, const std::array<Tensor, NIn>& in, const char* op, F f, bool dbl) {
  const auto& kernel = backend::kernels_for(out.device()).template map<F>();
  if constexpr (NIn == 1) kernel(out, in[0], op, f, dbl);
  if constexpr (NIn == 2) kernel(out, in[0], in[1], op, f, dbl);
  if constexpr (NIn == 3) kernel(out, in[0], in[1], in[2], op, f, dbl);
}

// The memory order shared by `ins` when the first is a permuted dense tensor and every
// other one has its shape with identical strides on the non-size-1 dims, or is 0-d (a
// scalar operand); empty otherwise (broadcasting, contiguous first operands and mixed
// layouts take the plain path with a contiguous output).
inline Shape shared_permuted_order(std::initializer_list<const Tensor*> ins) {
  const Tensor& a = **ins.begin();
  if (a.is_contiguous()) return {};
  Shape order = dense_stride_order(a.sizes(), a.strides());
  if (order.empty()) return {};
  for (const Tensor* t : ins) {
    if (t->dim() == 0) continue;
    if (t->sizes() != a.sizes()) return {};
    for (int64_t d = 0; d < a.dim(); ++d)
      if (a.size(d) != 1 && t->stride(d) != a.stride(d)) return {};
  }
  return order;
}

// t seen in memory order (0-d operands broadcast as they are).
inline Tensor in_order(const Tensor& t, const Shape& order) {
  return order.empty() || t.dim() == 0 ? t : memory_order_view(t, order);
}
}  // namespace detail

// out[i] = f(x[i]) with no autograd, computed in float (double for float64).
// A permuted dense x (e.g. channels-last) gives an output in the same layout, computed
// over memory order so the loops see one contiguous run.
template <class F>
Tensor map1(const Tensor& x, DType out_dtype, const char* op, F f) {
  const bool dbl = cpu::computes_in_double(out_dtype) || cpu::computes_in_double(x.dtype());
  if (const Shape order = detail::shared_permuted_order({&x}); !order.empty()) {
    Tensor out = empty_like_layout(x, out_dtype);
    detail::run_map<1>(memory_order_view(out, order), {memory_order_view(x, order)}, op, f, dbl);
    return out;
  }
  Tensor out = make_tensor(x.sizes(), out_dtype, x.device());
  detail::run_map<1>(out, {x}, op, f, dbl);
  return out;
}

// out[i] = f(a[i], b[i]) with broadcasting and no autograd.
template <class F>
Tensor map2(const Tensor& a, const Tensor& b, DType out_dtype, const char* op, F f) {
  TC_CHECK(a.device() == b.device(), op, "expected both tensors on the same device, got ", a.device(), " and ",
           b.device());
  const bool dbl =
      cpu::computes_in_double(out_dtype) || cpu::computes_in_double(a.dtype()) || cpu::computes_in_double(b.dtype());
  if (const Shape order = detail::shared_permuted_order({&a, &b}); !order.empty()) {
    Tensor out = empty_like_layout(a, out_dtype);
    detail::run_map<2>(memory_order_view(out, order), {detail::in_order(a, order), detail::in_order(b, order)}, op, f,
                       dbl);
    return out;
  }
  Tensor out = make_tensor(broadcast_shapes(a.sizes(), b.sizes(), op), out_dtype, a.device());
  detail::run_map<2>(out, {a, b}, op, f, dbl);
  return out;
}

// out[i] = f(a[i], b[i], c[i]) with broadcasting and no autograd.
template <class F>
Tensor map3(const Tensor& a, const Tensor& b, const Tensor& c, DType out_dtype, const char* op, F f) {
  Shape shape = broadcast_shapes(broadcast_shapes(a.sizes(), b.sizes(), op), c.sizes(), op);
  const Shape order = detail::shared_permuted_order({&a, &b, &c});
  Tensor out = order.empty() ? make_tensor(shape, out_dtype, a.device()) : empty_like_layout(a, out_dtype);
  // Permuted dense operands of one layout run over memory order (one contiguous run).
  const Tensor mo = detail::in_order(out, order), ma = detail::in_order(a, order), mb = detail::in_order(b, order),
               mc = detail::in_order(c, order);
  detail::run_map<3>(mo, {ma, mb, mc}, op, f,
                     cpu::computes_in_double(out_dtype) || cpu::computes_in_double(a.dtype()) ||
                         cpu::computes_in_double(b.dtype()) || cpu::computes_in_double(c.dtype()));
  return out;
}

void check_same_device(const char* op, const Tensor& a, const Tensor& b);

// Records out = a + alpha b (computed by the caller, e.g. in a fused pass) with add's
// backward; returns out.
Tensor record_add(const Tensor& out, const Tensor& a, const Tensor& b, double alpha);

}  // namespace tc::op_util
