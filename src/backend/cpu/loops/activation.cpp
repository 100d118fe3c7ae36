// GELU kernels over contiguous compute-type blocks from map_blocks. The float forms are
// cloned per ISA (TC_SIMD_CLONES) and use the branch-free fast_normal_cdf_pdf/fast_tanh, so
// they vectorize; the double forms are the same templates, where those forward to
// std::erf/tanh/exp. 16-bit activations are looked up in tables those float loops fill.
#include "backend/cpu/loops/activation.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <mutex>
#include <numeric>
#include <type_traits>
#include <vector>

#include "backend/cpu/loops/elementwise.h"
#include "backend/cpu/loops/fast_math.h"
#include "backend/cpu/x86/activation_kernels.h"
#include "tensorcast/convert.h"

namespace tc::cpu {

namespace {

// The erf form as v Phi(v): accurate relative to itself in the lower tail, where
// 0.5 v (1 + erf(v / sqrt 2)) cancels to 0 (float32, v < -4) while bfloat16 still holds it.
template <class C>
inline C gelu_erf_value(C v) {
  C cdf, pdf;
  fast_normal_cdf_pdf(v, cdf, pdf);
  return v * cdf;
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
// The derivative's v^2 is capped at 1e4: past |v| = 100, 1 - t^2 is 0 and an infinite v^2
// (|v| > 1.8e19 in float32) would make the product NaN instead of 0.
template <class C>
inline void gelu_tanh_value_grad(C v, C& y, C& d) {
  const C k = C(0.7978845608028654);
  const C t = fast_tanh(k * (v + C(0.044715) * v * v * v));
  const C v2 = std::min(v * v, C(1e4));
  y = C(0.5) * v * (C(1) + t);
  d = C(0.5) * (C(1) + t) + C(0.5) * v * (C(1) - t * t) * (k * (C(1) + C(3 * 0.044715) * v2));
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

// 16-bit activations by table. A bfloat16 or float16 h has 2^16 bit patterns, so act(h)
// and act'(h) -- the float32 loop's values, each rounded once as store_block rounds --
// fit one table of 2^16 entries (256 KiB), filled once, on first use, by that loop. A pass
// is then a load per element where the float32 GELU costs tens of cycles per 16 values (an
// exp, a division, two polynomials). The entries activations hit (values of moderate size,
// a few exponents) stay in the L1 cache. Every path that computes a 16-bit
// activation of a 16-bit tensor (the gelu op, the mlp node's forward, linear_activation
// without a graph) reads the one table, so they agree bit for bit.
constexpr int64_t kPatterns = int64_t{1} << 16;

bool is_16bit_float(DType dt) { return dt == kBFloat16 || dt == kFloat16; }

// Entry b: act(h) in the low 16 bits and act'(h) in the high, h the value of bit pattern b.
std::unique_ptr<uint32_t[]> make_table(Activation act, DType dt) {
  std::vector<uint16_t> bits(kPatterns), ybits(kPatterns), dbits(kPatterns);
  std::iota(bits.begin(), bits.end(), uint16_t{0});
  std::vector<float> x(kPatterns), y(kPatterns), d(kPatterns);
  load_block<float>(reinterpret_cast<const char*>(bits.data()), 2, dt, x.data(), kPatterns);
  value_grad_block(act, x.data(), y.data(), d.data(), kPatterns);
  store_block<float>(y.data(), reinterpret_cast<char*>(ybits.data()), 2, dt, kPatterns);
  store_block<float>(d.data(), reinterpret_cast<char*>(dbits.data()), 2, dt, kPatterns);
  auto table = std::make_unique<uint32_t[]>(kPatterns);
  for (int64_t b = 0; b < kPatterns; ++b) table[b] = ybits[b] | uint32_t{dbits[b]} << 16;
  return table;
}

bool has_avx512_lookup() {
  const CpuFeatures& f = cpu_features();
  return f.avx512f && f.avx512bw && f.avx512vl;
}

const uint32_t* value_grad_table(Activation act, DType dt) {
  constexpr int kActs = 3;  // kRelu, kGelu, kGeluTanh
  static std::once_flag made[2 * kActs];
  static std::unique_ptr<uint32_t[]> tables[2 * kActs];
  const int slot = (static_cast<int>(act) - 1) * 2 + (dt == kFloat16 ? 1 : 0);
  std::call_once(made[slot], [&] { tables[slot] = make_table(act, dt); });
  return tables[slot].get();
}

// GELU's float32 derivative of every bfloat16 bit pattern, as the backward loop computes
// it (its g * gelu'(x) with g = 1: one multiply by 1, exact), so that g * table[x] rounded
// once is that loop's dx bit for bit; filled on first use (256 KiB).
const float* gelu_derivative_table(bool tanh_form) {
  static std::once_flag made[2];
  static std::unique_ptr<float[]> tables[2];
  std::call_once(made[tanh_form ? 1 : 0], [&] {
    std::vector<uint16_t> bits(kPatterns);
    for (int64_t b = 0; b < kPatterns; ++b) bits[b] = static_cast<uint16_t>(b);
    std::vector<float> x(kPatterns), ones(kPatterns, 1.0f);
    load_block<float>(reinterpret_cast<const char*>(bits.data()), 2, kBFloat16, x.data(), kPatterns);
    auto t = std::make_unique<float[]>(kPatterns);
    gelu_backward_block(tanh_form, ones.data(), x.data(), t.get(), kPatterns);
    tables[tanh_form ? 1 : 0] = std::move(t);
  });
  return tables[tanh_form ? 1 : 0].get();
}

// y = act(h) and d = act'(h) over n 16-bit patterns from `table`; d may be h. (With
// AVX-512, activation_kernels.h's lookups instead: by gathers on Intel, by scalar loads
// split 16 at a time on AMD; both faster than this loop, which stores each half apart.)
void lookup_value_grad(const uint32_t* table, const uint16_t* h, uint16_t* y, uint16_t* d, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t t = table[h[i]];
    y[i] = static_cast<uint16_t>(t);
    d[i] = static_cast<uint16_t>(t >> 16);
  }
}
// y = act(h) alone; y may be h.
void lookup_value(const uint32_t* table, const uint16_t* h, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<uint16_t>(table[h[i]]);
}

}  // namespace

const uint32_t* activation_table(Activation act, DType dt) {
  TC_CHECK(act != Activation::kNone && is_16bit_float(dt), "activation_table",
           "expected an activation and a 16-bit floating dtype, got ", dtype_name(dt));
  return value_grad_table(act, dt);
}

void activation_value(const Tensor& y, const Tensor& h, Activation act) {
  TC_CHECK(act != Activation::kNone && y.is_contiguous() && h.is_contiguous() && y.dtype() == h.dtype() &&
               y.numel() == h.numel() && is_16bit_float(h.dtype()) && h.device().is_cpu(),
           "activation_value", "expected an activation and two contiguous 16-bit floating CPU tensors of one dtype");
  const uint32_t* table = value_grad_table(act, h.dtype());
  const auto* h16 = static_cast<const uint16_t*>(h.raw_data());
  auto* const y16 = static_cast<uint16_t*>(y.raw_data());
  const bool vector = has_avx512_lookup(), gather = cpu_features().fast_gather;
  parallel_for(0, h.numel(), kGrainElements, [&](int64_t b, int64_t e) {
    if (vector)
      detail::lookup_value_avx512(table, h16 + b, y16 + b, e - b, gather);
    else
      lookup_value(table, h16 + b, y16 + b, e - b);
  });
}

void gelu(const Tensor& out, const Tensor& x, bool tanh_approx) {
  if (out.dtype() == x.dtype() && is_16bit_float(x.dtype()) && out.sizes() == x.sizes() && out.is_contiguous() &&
      x.is_contiguous())
    return activation_value(out, x, tanh_approx ? Activation::kGeluTanh : Activation::kGelu);
  with_gelu_compute_type(computes_in_double(out.dtype()) || computes_in_double(x.dtype()), [&]<class C>(C) {
    map_blocks<C, 1>(out, {x}, "gelu",
                     [&](int64_t n, const C* const* in, C* o) { gelu_block(tanh_approx, in[0], o, n); });
  });
}

void gelu_backward(const Tensor& dx, const Tensor& g, const Tensor& x, bool tanh_approx) {
  // bfloat16 with AVX-512: the derivative looked up per bit pattern (a gather where the
  // float32 loop spends ~50 cycles per 16 values on its exp, erf and division).
  const bool bf16 = x.dtype() == kBFloat16 && g.dtype() == kBFloat16 && dx.dtype() == kBFloat16;
  if (bf16 && has_avx512_lookup() && x.sizes() == dx.sizes() && g.sizes() == dx.sizes() && x.is_contiguous() &&
      g.is_contiguous() && dx.is_contiguous() && x.device().is_cpu()) {
    const float* table = gelu_derivative_table(tanh_approx);
    const auto* x16 = static_cast<const uint16_t*>(x.raw_data());
    const auto* g16 = static_cast<const uint16_t*>(g.raw_data());
    auto* const dx16 = static_cast<uint16_t*>(dx.raw_data());
    const bool gather = cpu_features().fast_gather;
    parallel_for(0, dx.numel(), kGrainElements, [&](int64_t b, int64_t e) {
      detail::lookup_grad_times_bf16_avx512(table, x16 + b, g16 + b, dx16 + b, e - b, gather);
    });
    return;
  }
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
  if (is_16bit_float(dt)) {
    const uint32_t* table = value_grad_table(act, dt);
    auto* const h16 = static_cast<uint16_t*>(h.raw_data());
    auto* const y16 = static_cast<uint16_t*>(y.raw_data());
    const bool vector = has_avx512_lookup(), gather = cpu_features().fast_gather;
    parallel_for(0, h.numel(), kGrainElements, [&](int64_t b, int64_t e) {
      if (vector)
        detail::lookup_value_grad_avx512(table, h16 + b, y16 + b, h16 + b, e - b, gather);
      else
        lookup_value_grad(table, h16 + b, y16 + b, h16 + b, e - b);
    });
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
