// layer_norm's forward rows on AVX-512 (norm_kernels.h). The portable loops convert each
// operand through a buffer by a call of its own, five a row, which dominates short rows
// such as gpt's 256 elements; here the row s (x, or x + residual rounded to the sum's dtype) goes to
// an L1 buffer in one pass that also takes its moments (in double lanes), then one more
// pass writes the output.
//
// Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512bf16 (VCVTNEPS2BF16 run only where
// the CPU has it: hw_bf16): plain pointers in, helpers in an unnamed
// namespace (no inline function shared with the rest of the library).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's AVX-512 headers (see convert_avx512.cpp)
#pragma GCC diagnostic ignored "-Wuninitialized"        // and their _mm512_reduce_add_pd
#endif
#include <immintrin.h>

#include <cmath>

#include "backend/cpu/x86/norm_kernels.h"
#include "core/x86/avx512/bf16_avx512.h"
#include "core/x86/avx512bf16/require.h"  // stops a build without this folder's flags

namespace tc::cpu::detail {

namespace {

__m512 load16(const void* p, bool bf16, int64_t i) {
  if (bf16) {
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(static_cast<const uint16_t*>(p) + i));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
  }
  return _mm512_loadu_ps(static_cast<const float*>(p) + i);
}

// Stores v rounded to the operand's dtype (bfloat16: the library's nearest even, subnormals
// kept; kHw: by VCVTNEPS2BF16, a third of the integer rounding's instructions) and returns
// the stored value as a float.
template <bool kHw>
__m512 store16(void* p, bool bf16, int64_t i, __m512 v) {
  if (bf16) {
    const __m256i h =
        kHw ? tc::detail::f32_to_bf16_hw(_mm512_castps_si512(v)) : tc::detail::f32_to_bf16_int(_mm512_castps_si512(v));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(static_cast<uint16_t*>(p) + i), h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  _mm512_storeu_ps(static_cast<float*>(p) + i, v);
  return v;
}

// A row's first and second moments about its first element k, in double lanes (lanes 0-7
// and 8-15 of each vector apart): one pass, where the two-pass form (the mean, then the
// squared deviations from it) waits on the first sum's reduction. In double, x - k and its
// square are exact for float x (24-bit significands), so var = E[(x-k)^2] - E[x-k]^2 only
// loses the sum's roundings: ~1e-16 relative, whatever the mean's size.
struct Moments {
  __m512d k, s_lo, s_hi, q_lo, q_hi;
  explicit Moments(float first)
      : k(_mm512_set1_pd(first)),
        s_lo(_mm512_setzero_pd()),
        s_hi(_mm512_setzero_pd()),
        q_lo(_mm512_setzero_pd()),
        q_hi(_mm512_setzero_pd()) {}
  void add(__m512 v) {
    const __m512d a = _mm512_sub_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(v)), k);
    const __m512d b = _mm512_sub_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(_mm512_shuffle_f32x4(v, v, 0xee))), k);
    s_lo = _mm512_add_pd(s_lo, a);
    s_hi = _mm512_add_pd(s_hi, b);
    q_lo = _mm512_fmadd_pd(a, a, q_lo);
    q_hi = _mm512_fmadd_pd(b, b, q_hi);
  }
};

// The statistics from a row's moments and its output (float32 or bfloat16), from s in L1.
template <bool kHw>
void finish(const Moments& mo, const float* s, int64_t n, const float* w, const float* b, double eps, void* out,
            bool out_bf16, float* mean, float* rstd) {
  const double d = _mm512_reduce_add_pd(_mm512_add_pd(mo.s_lo, mo.s_hi)) / static_cast<double>(n);
  double var = _mm512_reduce_add_pd(_mm512_add_pd(mo.q_lo, mo.q_hi)) / static_cast<double>(n) - d * d;
  if (var < 0.0) var = 0.0;  // a rounding below zero; NaN (an inf in the row) stays NaN, as two passes give
  const double mu = static_cast<double>(s[0]) + d, rs = 1.0 / std::sqrt(var + eps);
  *mean = static_cast<float>(mu);
  *rstd = static_cast<float>(rs);
  const __m512 m = _mm512_set1_ps(static_cast<float>(mu)), k = _mm512_set1_ps(static_cast<float>(rs));
  for (int64_t j = 0; j < n; j += 16) {
    __m512 y = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(s + j), m), k);
    if (w && b)
      y = _mm512_fmadd_ps(y, _mm512_loadu_ps(w + j), _mm512_loadu_ps(b + j));
    else if (w)
      y = _mm512_mul_ps(y, _mm512_loadu_ps(w + j));
    else if (b)
      y = _mm512_add_ps(y, _mm512_loadu_ps(b + j));
    store16<kHw>(out, out_bf16, j, y);
  }
}

// The same of a row s already in memory.
template <bool kHw>
void finish(const float* s, int64_t n, const float* w, const float* b, double eps, void* out, bool out_bf16,
            float* mean, float* rstd) {
  Moments mo(s[0]);
  for (int64_t j = 0; j < n; j += 16) mo.add(_mm512_loadu_ps(s + j));
  finish<kHw>(mo, s, n, w, b, eps, out, out_bf16, mean, rstd);
}

template <bool kHw>
void rows(const LnRows& p, int64_t r0, int64_t r1, float* scratch) {
  const int64_t n = p.n;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t at = r * n;
    void* out = static_cast<char*>(p.out) + at * (p.out_bf16 ? 2 : 4);
    if (!p.residual && !p.x_bf16) {
      finish<kHw>(static_cast<const float*>(p.x) + at, n, p.w, p.b, p.eps, out, p.out_bf16, p.mean + r, p.rstd + r);
      continue;
    }
    // The row s (x, or x + residual rounded to the sum's dtype) into scratch, its moments
    // taken on the way.
    const int64_t ra = (r % p.residual_rows) * n;
    auto row_at = [&](int64_t j) {
      const __m512 x = load16(p.x, p.x_bf16, at + j);
      return p.residual ? store16<kHw>(p.sum, p.sum_bf16, at + j,
                                       _mm512_add_ps(x, load16(p.residual, p.residual_bf16, ra + j)))
                        : x;
    };
    const __m512 first = row_at(0);
    Moments mo(_mm512_cvtss_f32(first));
    mo.add(first);
    _mm512_storeu_ps(scratch, first);
    for (int64_t j = 16; j < n; j += 16) {
      const __m512 v = row_at(j);
      mo.add(v);
      _mm512_storeu_ps(scratch + j, v);
    }
    finish<kHw>(mo, scratch, n, p.w, p.b, p.eps, out, p.out_bf16, p.mean + r, p.rstd + r);
  }
}

}  // namespace

void ln_forward_rows(const LnRows& p, int64_t r0, int64_t r1, float* scratch) {
  if (p.hw_bf16)
    rows<true>(p, r0, r1, scratch);
  else
    rows<false>(p, r0, r1, scratch);
}

void ln_finish_row(const float* s, int64_t n, const float* w, const float* b, double eps, float* y, float* mean,
                   float* rstd) {
  finish<false>(s, n, w, b, eps, y, false, mean, rstd);  // (a float y: no rounding)
}

}  // namespace tc::cpu::detail
