// Internal: helpers for pointwise ops and the fused pointwise kernels backward formulas use.
#pragma once
#include <algorithm>
#include <initializer_list>

#include "backend/cpu/loops.h"
#include "tensorcast/ops.h"

namespace tc::ops {

// The dtype a double scalar takes next to tensor `a` (PyTorch's wrapped-number rule):
// the tensor's floating dtype, else float32 for a fractional value, else the tensor's dtype.
DType scalar_result_dtype(const Tensor& a, double value);
// The scalar as a 0-d tensor in a's compute precision (float32, or float64 for float64).
Tensor scalar_operand(const Tensor& a, double value);
// The floating dtype a unary float op produces for x (integers give float32).
inline DType float_result_dtype(DType t) { return is_floating(t) ? t : kFloat32; }

// ---- Dense layouts (PyTorch's "memory format" preservation) ------------------------------
//
// A tensor is dense when its elements fill numel() consecutive slots of its storage in
// some order of its dims: the non-size-1 dims, sorted by decreasing stride, form a
// contiguous layout (e.g. channels-last NCHW: strides (H*W*C, 1, W*C, C)).

// The dims of (sizes, strides) from outermost to innermost in memory when the layout is
// dense and non-overlapping (size-1 dims first, in logical order, since their strides do
// not matter); empty when it is not dense or has no elements.
inline Shape dense_stride_order(const Shape& sizes, const Shape& strides) {
  Shape order, big;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return {};
    (sizes[d] == 1 ? order : big).push_back(static_cast<int64_t>(d));
  }
  std::stable_sort(big.begin(), big.end(), [&](int64_t a, int64_t b) { return strides[a] > strides[b]; });
  int64_t expected = 1;
  for (size_t i = big.size(); i-- > 0;) {
    if (strides[big[i]] != expected) return {};
    expected *= sizes[big[i]];
  }
  order.insert(order.end(), big.begin(), big.end());
  return order;
}

// True when t is dense and non-overlapping but not contiguous (a permuted dense layout).
inline bool is_permuted_dense(const Tensor& t) {
  return !t.is_contiguous() && !dense_stride_order(t.sizes(), t.strides()).empty();
}

// The strides of a new dense tensor of `sizes` whose dims lie in memory in `order`
// (outermost first); size-1 dims get the stride a contiguous tensor would give them.
inline Shape strides_for_order(const Shape& sizes, const Shape& order) {
  Shape st(sizes.size(), 0);
  int64_t next = 1;
  for (size_t i = order.size(); i-- > 0;) {
    st[order[i]] = next;
    next *= sizes[order[i]];
  }
  Shape cont = contiguous_strides(sizes);
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] == 1) st[d] = cont[d];
  return st;
}

// A new uninitialized tensor of t's sizes in `dtype` with t's memory layout when t is a
// permuted dense tensor (empty_like preserving the memory format); contiguous otherwise.
inline Tensor empty_like_layout(const Tensor& t, DType dtype) {
  if (t.is_contiguous()) return make_tensor(t.sizes(), dtype, t.device());
  const Shape order = dense_stride_order(t.sizes(), t.strides());
  if (order.empty()) return make_tensor(t.sizes(), dtype, t.device());
  Tensor base = make_tensor({shape_numel(t.sizes())}, dtype, t.device());
  return make_view(base, t.sizes(), strides_for_order(t.sizes(), order), 0);
}

// The view of dense t that is contiguous, its dims permuted to memory order `order`.
inline Tensor memory_order_view(const Tensor& t, const Shape& order) {
  Shape sz, st;
  for (int64_t d : order) {
    sz.push_back(t.size(d));
    st.push_back(t.stride(d));
  }
  return make_view(t, sz, st, t.storage_offset());
}

namespace detail {
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
  if (const Shape order = detail::shared_permuted_order({&x}); !order.empty()) {
    Tensor out = empty_like_layout(x, out_dtype);
    cpu::unary_map(memory_order_view(out, order), memory_order_view(x, order), op, f);
    return out;
  }
  Tensor out = make_tensor(x.sizes(), out_dtype, x.device());
  cpu::unary_map(out, x, op, f);
  return out;
}

// out[i] = f(a[i], b[i]) with broadcasting and no autograd.
template <class F>
Tensor map2(const Tensor& a, const Tensor& b, DType out_dtype, const char* op, F f) {
  TC_CHECK(a.device() == b.device(), op, "expected both tensors on the same device, got ", a.device(), " and ",
           b.device());
  const bool dbl = cpu::computes_in_double(out_dtype) || cpu::computes_in_double(a.dtype()) ||
                   cpu::computes_in_double(b.dtype());
  if (const Shape order = detail::shared_permuted_order({&a, &b}); !order.empty()) {
    Tensor out = empty_like_layout(a, out_dtype);
    cpu::binary_map(memory_order_view(out, order), detail::in_order(a, order), detail::in_order(b, order), op, f, dbl);
    return out;
  }
  Tensor out = make_tensor(broadcast_shapes(a.sizes(), b.sizes(), op), out_dtype, a.device());
  cpu::binary_map(out, a, b, op, f, dbl);
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
  auto body = [&]<class C>() {
    cpu::map_blocks<C, 3>(mo, {ma, mb, mc}, op, [&](int64_t n, const C* const* in, C* o) {
      for (int64_t i = 0; i < n; ++i) o[i] = f(in[0][i], in[1][i], in[2][i]);
    });
  };
  if (cpu::computes_in_double(out_dtype) || cpu::computes_in_double(a.dtype()) ||
      cpu::computes_in_double(b.dtype()) || cpu::computes_in_double(c.dtype()))
    body.template operator()<double>();
  else
    body.template operator()<float>();
  return out;
}

void check_same_device(const char* op, const Tensor& a, const Tensor& b);

}  // namespace tc::ops
