// Internal: branch-free float exp, log1p, the normal cdf and tanh that compilers vectorize (libm's
// scalar calls do not), for the softmax, loss and GELU loops. Double overloads forward to <cmath>, so
// templated kernels call fast_exp/fast_log1p/fast_normal_cdf_pdf/fast_tanh for either compute type.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

// Marks a float loop to be compiled for AVX2 and AVX-512 as well as baseline x86-64, the
// best picked at load time (GCC target_clones), so the library still runs on any x86-64.
// Not under ASan or TSan: the clones' ifunc resolvers run during relocation, before the
// sanitizer runtime is initialized, and crash the process at load; there the cloned loops
// are compiled once, as the default (baseline x86-64) version.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__)
#define TC_SIMD_CLONES __attribute__((target_clones("default", "avx2", "arch=x86-64-v4")))
#else
#define TC_SIMD_CLONES
#endif

namespace tc::cpu {

// c[0] x^(N-1) + ... + c[N-1] by Horner's rule (unrolled by the compiler; vectorizes).
template <size_t N>
inline float horner(float x, const float (&c)[N]) {
  float p = c[0];
  for (size_t i = 1; i < N; ++i) p = p * x + c[i];
  return p;
}

// exp(v), Cephes' expf scheme without branches: n = round(v log2 e) through the 1.5 * 2^23
// trick (no float->int conversion, defined for NaN too), r = v - n ln2 in two parts, a
// degree-6 polynomial on [-ln2/2, ln2/2], times 2^n built from bits; out-of-range and NaN
// inputs are fixed up with selects. About 2 ulps; results below FLT_MIN flush to 0, and
// arguments above 88.376 give inf (softmax and the losses only need arguments <= 0).
inline float fast_exp(float v) {
  constexpr float kLo = -87.33654f;  // exp(kLo) = FLT_MIN
  constexpr float kHi = 88.37626f;   // largest v with round(v log2 e) <= 127
  const float xc = v < kLo ? kLo : (v > kHi ? kHi : v);
  const float t = xc * 1.44269504088896341f + 12582912.0f;
  const float fn = t - 12582912.0f;
  const int32_t n = std::bit_cast<int32_t>(t) - 0x4b400000;
  const float r = (xc - fn * 0.693359375f) - fn * -2.12194440e-4f;
  float p = horner(
      r, {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f, 4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f});
  p = p * r * r + r + 1.0f;
  float e = p * std::bit_cast<float>(static_cast<uint32_t>(n + 127) << 23);
  e = v < kLo ? 0.0f : e;
  e = v > kHi ? std::numeric_limits<float>::infinity() : e;
  return v != v ? v : e;
}
inline double fast_exp(double v) { return std::exp(v); }

// log1p(e) for e in [0, 1] (the softplus range): u = 1 + e, Cephes' logf polynomial on
// the mantissa in [sqrt(1/2), sqrt(2)), plus the classic correction (e - (u - 1)) / u that
// restores the low bits lost in 1 + e, so tiny e gives e exactly. About 2 ulps.
inline float fast_log1p_unit(float e) {
  const float u = 1.0f + e;
  const bool big = u > 1.41421356f;
  const float m = big ? u * 0.5f : u;
  const float k = big ? 1.0f : 0.0f;
  const float x = m - 1.0f;
  const float z = x * x;
  float y = horner(x, {7.0376836292e-2f, -1.1514610310e-1f, 1.1676998740e-1f, -1.2420140846e-1f, 1.4249322787e-1f,
                       -1.6668057665e-1f, 2.0000714765e-1f, -2.4999993993e-1f, 3.3333331174e-1f});
  y = y * x * z;
  y += -2.12194440e-4f * k;
  y += -0.5f * z;
  const float lg = (x + y) + 0.693359375f * k;
  return lg + (e - (u - 1.0f)) / u;
}
inline double fast_log1p_unit(double e) { return std::log1p(e); }

// The standard normal distribution's cdf Phi(v) and density phi(v), sharing one exp:
// erfc(z) = t exp(-z^2) Q(t) with z = |v| / sqrt(2), t = 1 / (1 + z / 2) and Q a degree-9
// polynomial in t - 0.55 fitted to erfc(z) exp(z^2) / t for z in [0, 9] (relative fit
// error 1.5e-8: Numerical Recipes' erfcc form, with the polynomial itself in place of the
// exp of one). Phi(v) = erfc(z) / 2 for v < 0, accurate relative to itself into the tail
// (where 1 + erf would cancel), 1 - erfc(z) / 2 otherwise; phi(v) = exp(-z^2) / sqrt(2 pi).
// v^2 is rounded before the exp, so the tail's relative error grows about as v^2 / 2 ulps.
// No branches (loops vectorize). NaN propagates; Phi(+-inf) = 1 and 0, phi(+-inf) = 0.
inline void fast_normal_cdf_pdf(float v, float& cdf, float& pdf) {
  const float e = fast_exp(-0.5f * (v * v));  // z^2 = v^2 / 2 with one rounding
  const float z = std::fabs(v) * 0.70710678118654752f;
  const float zc = z < 9.0f ? z : 9.0f;
  const float t = 1.0f / (1.0f + 0.5f * zc);
  const float q = horner(
      t - 0.55f, {1.5524617396e-02f, -6.3743345439e-02f, 1.9440034404e-02f, 1.0939510912e-01f, -7.1672543883e-02f,
                  -1.9396702945e-01f, 1.0901347548e-01f, 5.7810568810e-01f, 7.4405932426e-01f, 5.4656386375e-01f});
  const float half_erfc = (0.5f * t * q) * e;
  cdf = v < 0.0f ? half_erfc : 1.0f - half_erfc;
  pdf = e * 0.39894228040143268f;
}
inline void fast_normal_cdf_pdf(double v, double& cdf, double& pdf) {  // the textbook formulas
  cdf = 0.5 * (1.0 + std::erf(v * M_SQRT1_2));
  pdf = std::exp(-0.5 * v * v) * 0.3989422804014327;
}

// tanh(x) without branches. |x| < 0.9: tanh(x) = x + x x^2 P(x^2), P of degree 6 (minimax
// fit, relative fit error 1.1e-9). |x| >= 0.9: 1 - 2 / (exp(2|x|) + 1) with fast_exp, |x|
// clamped to 9.5 where tanh rounds to 1, sign restored with copysign. tanh(-x) == -tanh(x)
// exactly, tanh(+-0) = +-0, tiny x gives x, tanh(+-inf) = +-1, NaN propagates. Measured
// against double std::tanh over every float: max error 1.0 ulp (at x = 0.9736), the
// same with and without FMA contraction.
inline float fast_tanh(float x) {
  const float t = std::fabs(x);
  const float s = x * x;
  const float p = horner(s, {-4.554561747e-4f, 2.582656918e-3f, -8.264531381e-3f, 2.166353539e-2f, -5.392929912e-2f,
                             1.333297789e-1f, -3.333332241e-1f});
  const float small = t + t * s * p;  // on |x|: x + x s P(s) would turn -0 into +0
  const float tc = t < 9.5f ? t : 9.5f;
  const float e = fast_exp(2.0f * tc);
  const float big = 1.0f - 2.0f / (e + 1.0f);
  const float r = std::copysign(t < 0.9f ? small : big, x);
  return x != x ? x : r;
}
inline double fast_tanh(double x) { return std::tanh(x); }

}  // namespace tc::cpu
