// GELU kernels over contiguous compute-type blocks from map_blocks. The float forms are
// cloned per ISA (TC_SIMD_CLONES) and use the branch-free fast_erf/fast_tanh/fast_exp, so
// they vectorize; the double forms are the same templates, where those forward to
// std::erf/tanh/exp.
#include "backend/cpu/activation.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "backend/cpu/activation_kernels.h"
#include "backend/cpu/fast_math.h"
#include "backend/cpu/loops.h"
#include "tensorcast/convert.h"

namespace tc::cpu {

namespace {

template <class C>
inline C gelu_erf_value(C v) {
  return C(0.5) * v * (C(1) + fast_erf(v * C(M_SQRT1_2)));
}
template <class C>
inline C gelu_tanh_value(C v) {
  const C k = C(0.7978845608028654);  // sqrt(2/pi)
  return C(0.5) * v * (C(1) + fast_tanh(k * (v + C(0.044715) * v * v * v)));
}

// y = act(v) and d = act'(v), sharing the transcendental between the two.
template <class C>
inline void relu_value_grad(C v, C& y, C& d) {
  y = v > C(0) || v != v ? v : C(0);  // as fn::Relu: NaN passes
  d = v > C(0) ? C(1) : C(0);         // as fn::ReluBackward
}
template <class C>
inline void gelu_erf_value_grad(C v, C& y, C& d) {
  C cdf, pdf;
  fast_normal_cdf_pdf(v, cdf, pdf);
  y = v * cdf;
  d = cdf + v * pdf;
}
template <class C>
inline void gelu_tanh_value_grad(C v, C& y, C& d) {
  const C k = C(0.7978845608028654);
  const C t = fast_tanh(k * (v + C(0.044715) * v * v * v));
  y = C(0.5) * v * (C(1) + t);
  d = C(0.5) * (C(1) + t) + C(0.5) * v * (C(1) - t * t) * (k * (C(1) + C(3 * 0.044715) * v * v));
}
// g * gelu'(v): the derivative above (the unused value is dropped by the compiler).
template <class C>
inline C gelu_erf_grad(C g, C v) {
  C y, d;
  gelu_erf_value_grad(v, y, d);
  return g * d;
}
template <class C>
inline C gelu_tanh_grad(C g, C v) {
  C y, d;
  gelu_tanh_value_grad(v, y, d);
  return g * d;
}

TC_SIMD_CLONES void gelu_erf_forward_f32(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = gelu_erf_value(x[i]);
}
TC_SIMD_CLONES void gelu_erf_backward_f32(const float* g, const float* x, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = gelu_erf_grad(g[i], x[i]);
}
TC_SIMD_CLONES void gelu_tanh_forward_f32(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = gelu_tanh_value(x[i]);
}
TC_SIMD_CLONES void gelu_tanh_backward_f32(const float* g, const float* x, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = gelu_tanh_grad(g[i], x[i]);
}
TC_SIMD_CLONES void relu_value_grad_f32(const float* x, float* y, float* d, int64_t n) {
  for (int64_t i = 0; i < n; ++i) relu_value_grad(x[i], y[i], d[i]);
}
TC_SIMD_CLONES void gelu_erf_value_grad_f32(const float* x, float* y, float* d, int64_t n) {
  for (int64_t i = 0; i < n; ++i) gelu_erf_value_grad(x[i], y[i], d[i]);
}
TC_SIMD_CLONES void gelu_tanh_value_grad_f32(const float* x, float* y, float* d, int64_t n) {
  for (int64_t i = 0; i < n; ++i) gelu_tanh_value_grad(x[i], y[i], d[i]);
}
template <class C>
void value_grad_block(Activation act, const C* x, C* y, C* d, int64_t n) {
  if constexpr (std::is_same_v<C, float>) {
    act == Activation::kRelu   ? relu_value_grad_f32(x, y, d, n)
    : act == Activation::kGelu ? gelu_erf_value_grad_f32(x, y, d, n)
                               : gelu_tanh_value_grad_f32(x, y, d, n);
  } else {
    for (int64_t i = 0; i < n; ++i)
      act == Activation::kRelu   ? relu_value_grad(x[i], y[i], d[i])
      : act == Activation::kGelu ? gelu_erf_value_grad(x[i], y[i], d[i])
                                 : gelu_tanh_value_grad(x[i], y[i], d[i]);
  }
}
// y = gelu(x) over n elements: the ISA clones for float, the exact std::erf/tanh forms
// for double.
template <class C>
void gelu_block(bool tanh_form, const C* x, C* y, int64_t n) {
  if constexpr (std::is_same_v<C, float>) {
    tanh_form ? gelu_tanh_forward_f32(x, y, n) : gelu_erf_forward_f32(x, y, n);
  } else {
    for (int64_t i = 0; i < n; ++i) y[i] = tanh_form ? gelu_tanh_value(x[i]) : gelu_erf_value(x[i]);
  }
}
template <class C>
void gelu_backward_block(bool tanh_form, const C* g, const C* x, C* dx, int64_t n) {
  if constexpr (std::is_same_v<C, float>) {
    tanh_form ? gelu_tanh_backward_f32(g, x, dx, n) : gelu_erf_backward_f32(g, x, dx, n);
  } else {
    for (int64_t i = 0; i < n; ++i) dx[i] = tanh_form ? gelu_tanh_grad(g[i], x[i]) : gelu_erf_grad(g[i], x[i]);
  }
}
// Calls f(C{}) with C = double (float64 or 64-bit integer operands) or float.
template <class F>
void with_gelu_compute_type(bool dbl, F f) {
  if (dbl)
    f(double{});
  else
    f(float{});
}

}  // namespace

void gelu(const Tensor& out, const Tensor& x, bool tanh_approx) {
  with_gelu_compute_type(computes_in_double(out.dtype()) || computes_in_double(x.dtype()), [&]<class C>(C) {
    map_blocks<C, 1>(out, {x}, "gelu",
                     [&](int64_t n, const C* const* in, C* o) { gelu_block(tanh_approx, in[0], o, n); });
  });
}

void gelu_backward(const Tensor& dx, const Tensor& g, const Tensor& x, bool tanh_approx) {
  with_gelu_compute_type(computes_in_double(g.dtype()) || computes_in_double(x.dtype()), [&]<class C>(C) {
    map_blocks<C, 2>(dx, {g, x}, "gelu", [&](int64_t n, const C* const* in, C* o) {
      gelu_backward_block(tanh_approx, in[0], in[1], o, n);
    });
  });
}

void activation_and_derivative(const Tensor& y, const Tensor& h, Activation act) {
  TC_CHECK(act != Activation::kNone && y.is_contiguous() && h.is_contiguous() && y.dtype() == h.dtype() &&
               y.numel() == h.numel() && is_floating(h.dtype()),
           "activation_and_derivative", "expected an activation and two contiguous tensors of one floating dtype");
  TC_CHECK(h.device().is_cpu(), "activation_and_derivative", "no CUDA kernel (tensor on ", h.device(), ")");
  const DType dt = h.dtype();
  // bfloat16 GELU, the transformer's: its own kernel where the CPU has AVX-512 BF16, ~20 %
  // faster than widening blocks through buffers (activation_kernels.h); the same bits.
  const CpuFeatures& f = cpu_features();
  if (dt == kBFloat16 && act == Activation::kGelu && f.avx512f && f.avx512bw && f.avx512vl && f.avx512_bf16) {
    auto* const h16 = static_cast<uint16_t*>(h.raw_data());
    auto* const y16 = static_cast<uint16_t*>(y.raw_data());
    parallel_for(0, h.numel(), kGrainElements,
                 [&](int64_t b, int64_t e) { detail::gelu_value_grad_avx512bf16(h16 + b, y16 + b, h16 + b, e - b); });
    return;
  }
  const auto es = static_cast<int64_t>(element_size(dt));
  char* const hp = static_cast<char*>(h.raw_data());
  char* const yp = static_cast<char*>(y.raw_data());
  with_gelu_compute_type(dt == kFloat64, [&]<class C>(C) {
    parallel_for(0, h.numel(), kGrainElements, [&](int64_t b, int64_t e) {
      alignas(64) C xb[kBlock], yb[kBlock], db[kBlock];
      for (int64_t i = b; i < e; i += kBlock) {
        const int64_t m = std::min(kBlock, e - i);
        load_block<C>(hp + i * es, es, dt, xb, m);
        value_grad_block(act, xb, yb, db, m);
        store_block<C>(yb, yp + i * es, es, dt, m);
        store_block<C>(db, hp + i * es, es, dt, m);
      }
    });
  });
}

}  // namespace tc::cpu
