// Internal: helpers for pointwise ops and the fused pointwise kernels backward formulas use.
#pragma once
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

// out[i] = f(x[i]) with no autograd, computed in float (double for float64).
template <class F>
Tensor map1(const Tensor& x, DType out_dtype, const char* op, F f) {
  Tensor out = make_tensor(x.sizes(), out_dtype, x.device());
  cpu::unary_map(out, x, op, f);
  return out;
}

// out[i] = f(a[i], b[i]) with broadcasting and no autograd.
template <class F>
Tensor map2(const Tensor& a, const Tensor& b, DType out_dtype, const char* op, F f) {
  TC_CHECK(a.device() == b.device(), op, "expected both tensors on the same device, got ", a.device(), " and ",
           b.device());
  Tensor out = make_tensor(broadcast_shapes(a.sizes(), b.sizes(), op), out_dtype, a.device());
  const bool dbl = cpu::computes_in_double(out_dtype) || cpu::computes_in_double(a.dtype()) ||
                   cpu::computes_in_double(b.dtype());
  cpu::binary_map(out, a, b, op, f, dbl);
  return out;
}

// out[i] = f(a[i], b[i], c[i]) with broadcasting and no autograd.
template <class F>
Tensor map3(const Tensor& a, const Tensor& b, const Tensor& c, DType out_dtype, const char* op, F f) {
  Shape shape = broadcast_shapes(broadcast_shapes(a.sizes(), b.sizes(), op), c.sizes(), op);
  Tensor out = make_tensor(shape, out_dtype, a.device());
  auto body = [&]<class C>() {
    cpu::map_blocks<C, 3>(out, {a, b, c}, op, [&](int64_t n, const C* const* in, C* o) {
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
