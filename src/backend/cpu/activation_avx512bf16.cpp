// The AVX-512 BF16 GELU kernel (backend/cpu/activation_kernels.h): the forward of a
// training GELU, y = h Phi(h) and d = Phi(h) + h phi(h), straight from bfloat16 h to
// bfloat16 y and d in registers. The generic path (activation.cpp) widens blocks into
// float buffers, runs the compiler-vectorized fast_normal_cdf_pdf with range fix-ups for
// any exp argument, and narrows two buffers back; here the exp argument -h^2 / 2 is known
// to be <= 0 (or NaN), so only its underflow is fixed up, and nothing goes through memory.
//
// This file is compiled with -mavx512*: it must not odr-use inline functions from
// headers, or the linker could keep this file's AVX-512 copy for callers on CPUs without
// it. Plain pointers in, helpers in an unnamed namespace.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's AVX-512 headers (see convert_avx512.cpp)
#endif
#include <immintrin.h>

#include "backend/cpu/activation_kernels.h"
#include "core/bf16_avx512.h"

namespace tc::cpu::detail {

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512BF16__)
namespace {

__m512 c(float v) { return _mm512_set1_ps(v); }

// The steps below each apply to kWays independent vectors: one vector's chain (the exp,
// then the division and polynomial of erfc) is ~40 dependent operations, and the
// scheduler only overlaps them across vectors it sees side by side.
constexpr int kWays = 4;
using Vecs = __m512[kWays];

// Horner's rule continued over k on every vector: p = p x + k[0], then p x + k[1], ...
template <int N>
void horner(Vecs& p, const Vecs& x, const float (&k)[N]) {
#pragma GCC unroll 8
  for (int i = 0; i < N; ++i)
#pragma GCC unroll 4
    for (int w = 0; w < kWays; ++w) p[w] = _mm512_fmadd_ps(p[w], x[w], c(k[i]));
}

// e = exp(x) for x <= 0 or NaN, fast_exp's arithmetic: n = round(x log2 e) by the 1.5 * 2^23
// trick, r = x - n ln 2 in two parts, Cephes' degree-6 polynomial, times 2^n from bits;
// 0 below exp's normal range (x < -87.33654), NaN for NaN.
void exp_nonpositive(const Vecs& x, Vecs& e) {
  constexpr float kLo = -87.33654f;
  Vecs xc, fn, r, p;
  __m512i pow2[kWays];
#pragma GCC unroll 4
  for (int w = 0; w < kWays; ++w) {
    xc[w] = _mm512_max_ps(x[w], c(kLo));  // in range: x itself (NaN: kLo, fixed below)
    const __m512 t = _mm512_fmadd_ps(xc[w], c(1.44269504088896341f), c(12582912.0f));
    fn[w] = _mm512_sub_ps(t, c(12582912.0f));
    pow2[w] = _mm512_slli_epi32(_mm512_add_epi32(_mm512_castps_si512(t), _mm512_set1_epi32(127 - 0x4b400000)),
                                23);  // 2^n, n >= -126
  }
#pragma GCC unroll 4
  for (int w = 0; w < kWays; ++w)
    r[w] = _mm512_fmadd_ps(fn[w], c(2.12194440e-4f), _mm512_fnmadd_ps(fn[w], c(0.693359375f), xc[w]));
#pragma GCC unroll 4
  for (int w = 0; w < kWays; ++w) p[w] = _mm512_fmadd_ps(r[w], c(1.9875691500e-4f), c(1.3981999507e-3f));
  constexpr float kExp[] = {8.3334519073e-3f, 4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
  horner(p, r, kExp);
#pragma GCC unroll 4
  for (int w = 0; w < kWays; ++w) {
    p[w] = _mm512_add_ps(_mm512_fmadd_ps(r[w], _mm512_mul_ps(r[w], p[w]), r[w]), c(1.0f));
    e[w] = _mm512_mul_ps(p[w], _mm512_castsi512_ps(pow2[w]));
    e[w] = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x[w], c(kLo), _CMP_NLT_UQ), e[w]);  // x < kLo: 0
    e[w] = _mm512_mask_mov_ps(e[w], _mm512_cmp_ps_mask(x[w], x[w], _CMP_UNORD_Q), x[w]);
  }
}

// y = v Phi(v), d = Phi(v) + v phi(v): fast_normal_cdf_pdf (fast_math.h) and the two
// products of gelu_erf_value_grad.
void gelu_value_grad(const Vecs& v, Vecs& y, Vecs& d) {
  Vecs x, e, t, u, q;
#pragma GCC unroll 4
  for (int w = 0; w < kWays; ++w) x[w] = _mm512_mul_ps(_mm512_mul_ps(v[w], v[w]), c(-0.5f));
  exp_nonpositive(x, e);
#pragma GCC unroll 4
  for (int w = 0; w < kWays; ++w) {
    const __m512 zc = _mm512_min_ps(_mm512_mul_ps(_mm512_abs_ps(v[w]), c(0.70710678118654752f)), c(9.0f));
    t[w] = _mm512_div_ps(c(1.0f), _mm512_fmadd_ps(zc, c(0.5f), c(1.0f)));
    u[w] = _mm512_add_ps(t[w], c(-0.55f));
    q[w] = _mm512_fmadd_ps(u[w], c(1.5524617396e-02f), c(-6.3743345439e-02f));
  }
  constexpr float kErfc[] = {1.9440034404e-02f, 1.0939510912e-01f, -7.1672543883e-02f, -1.9396702945e-01f,
                             1.0901347548e-01f, 5.7810568810e-01f, 7.4405932426e-01f,  5.4656386375e-01f};
  horner(q, u, kErfc);
#pragma GCC unroll 4
  for (int w = 0; w < kWays; ++w) {
    const __m512 half_erfc = _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(t[w], c(0.5f)), q[w]), e[w]);
    const __mmask16 upper = _mm512_cmp_ps_mask(v[w], _mm512_setzero_ps(), _CMP_NLT_UQ);  // !(v < 0)
    const __m512 cdf = _mm512_mask_sub_ps(half_erfc, upper, c(1.0f), half_erfc);
    const __m512 pdf = _mm512_mul_ps(e[w], c(0.39894228040143268f));
    y[w] = _mm512_mul_ps(v[w], cdf);
    d[w] = _mm512_fmadd_ps(v[w], pdf, cdf);
  }
}

__mmask16 lanes_below(int64_t count) {
  return count >= 16 ? static_cast<__mmask16>(0xffff) : count <= 0 ? 0 : static_cast<__mmask16>((1u << count) - 1u);
}

}  // namespace

void gelu_value_grad_avx512bf16(const uint16_t* h, uint16_t* y, uint16_t* d, int64_t n) {
  for (int64_t i = 0; i < n; i += 16 * kWays) {
    __mmask16 k[kWays];
    Vecs v, yv, dv;
#pragma GCC unroll 4
    for (int w = 0; w < kWays; ++w) {
      k[w] = lanes_below(n - i - 16 * w);
      v[w] = _mm512_castsi512_ps(
          _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k[w], h + i + 16 * w)), 16));
    }
    gelu_value_grad(v, yv, dv);
#pragma GCC unroll 4
    for (int w = 0; w < kWays; ++w) {
      _mm256_mask_storeu_epi16(y + i + 16 * w, k[w], ::tc::detail::f32_to_bf16_hw(_mm512_castps_si512(yv[w])));
      _mm256_mask_storeu_epi16(d + i + 16 * w, k[w], ::tc::detail::f32_to_bf16_hw(_mm512_castps_si512(dv[w])));
    }
  }
}
#else
// Never called: the caller checks the CPU's features first.
void gelu_value_grad_avx512bf16(const uint16_t*, uint16_t*, uint16_t*, int64_t) { __builtin_trap(); }
#endif

}  // namespace tc::cpu::detail
