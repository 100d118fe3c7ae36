// AVX-512 float <-> bfloat16 / float16 kernels (declared in core/convert_kernels.h):
//   float_to_bf16_avx512bf16  VCVTNEPS2BF16, with float32-subnormal lanes fixed up
//   float_to_bf16_avx512      integer round-to-nearest-even (AVX-512F/BW)
//   bf16_to_float_avx512      zero-extend and shift (exact)
//   float_to_half_avx512      VCVTPS2PH with an explicit rounding immediate
//   half_to_float_avx512      VCVTPH2PS, with NaN lanes redone in integers
// Every kernel is bit-identical to the scalar reference in half.h for every input and
// ignores MXCSR (rounding mode, FTZ, DAZ). Tails use masked loads and stores, so nothing
// is read or written past n elements.
//
// This file is compiled with -mavx512*: it must not odr-use inline functions from
// headers (half.h's reference routines included), or the linker could keep this file's
// AVX-512 copy for callers on CPUs without AVX-512. Helpers stay in an unnamed namespace.
// GCC 12.2's AVX-512 headers trip -Wmaybe-uninitialized on their own `__Y = __Y`
// placeholders (GCC PR105593); the warning says nothing about this file.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "core/convert_kernels.h"
#include "core/x86/avx512/bf16_avx512.h"
#include "core/x86/avx512bf16/require.h"  // stops a build without this folder's flags

namespace tc::detail {
namespace {

inline __mmask16 tail_mask(int64_t rem) { return static_cast<__mmask16>((1u << rem) - 1u); }

inline __m256i f32_to_f16_hw(__m512 x) {
  // The immediate fixes the rounding (MXCSR.RC is not consulted). VCVTPS2PH quiets NaN
  // keeping sign and the top 9 payload bits, as the reference does, and produces fp16
  // subnormals whatever MXCSR.FTZ says (float32 subnormals become +-0 either way).
  return _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

// VCVTPH2PS quiets signalling NaNs (sets bit 22); the reference widens NaN payloads bit
// for bit. NaN lanes are rebuilt in integers: sign | 0x7f800000 | payload << 13.
inline __m512 f16_to_f32_hw(__m256i h) {
  __m512 w = _mm512_cvtph_ps(h);
  const __m256i ah = _mm256_and_si256(h, _mm256_set1_epi16(0x7fff));
  const __mmask16 nan = _mm256_cmpgt_epu16_mask(ah, _mm256_set1_epi16(0x7c00));
  if (__builtin_expect(nan != 0, 0)) {
    const __m512i e = _mm512_cvtepu16_epi32(h);
    const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(e, _mm512_set1_epi32(0x8000)), 16);
    const __m512i payload = _mm512_slli_epi32(_mm512_and_si512(e, _mm512_set1_epi32(0x3ff)), 13);
    const __m512i bits = _mm512_or_si512(_mm512_or_si512(sign, payload), _mm512_set1_epi32(0x7f800000));
    w = _mm512_mask_mov_ps(w, nan, _mm512_castsi512_ps(bits));
  }
  return w;
}

inline __m512 bf16_to_f32(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }

}  // namespace

void float_to_bf16_avx512bf16(const float* src, BFloat16* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i a = f32_to_bf16_hw(_mm512_loadu_si512(src + i));
    const __m256i b = f32_to_bf16_hw(_mm512_loadu_si512(src + i + 16));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), a);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i + 16), b);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : tail_mask(n - i);
    const __m256i r = f32_to_bf16_hw(_mm512_maskz_loadu_epi32(m, src + i));
    _mm256_mask_storeu_epi16(dst + i, m, r);
  }
}

void float_to_bf16_avx512(const float* src, BFloat16* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i a = f32_to_bf16_int(_mm512_loadu_si512(src + i));
    const __m256i b = f32_to_bf16_int(_mm512_loadu_si512(src + i + 16));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), a);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i + 16), b);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : tail_mask(n - i);
    _mm256_mask_storeu_epi16(dst + i, m, f32_to_bf16_int(_mm512_maskz_loadu_epi32(m, src + i)));
  }
}

void bf16_to_float_avx512(const BFloat16* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 a = bf16_to_f32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
    const __m512 b = bf16_to_f32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 16)));
    _mm512_storeu_ps(dst + i, a);
    _mm512_storeu_ps(dst + i + 16, b);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : tail_mask(n - i);
    _mm512_mask_storeu_ps(dst + i, m, bf16_to_f32(_mm256_maskz_loadu_epi16(m, src + i)));
  }
}

void float_to_half_avx512(const float* src, Half* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i a = f32_to_f16_hw(_mm512_loadu_ps(src + i));
    const __m256i b = f32_to_f16_hw(_mm512_loadu_ps(src + i + 16));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), a);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i + 16), b);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : tail_mask(n - i);
    _mm256_mask_storeu_epi16(dst + i, m, f32_to_f16_hw(_mm512_maskz_loadu_ps(m, src + i)));
  }
}

void half_to_float_avx512(const Half* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 a = f16_to_f32_hw(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
    const __m512 b = f16_to_f32_hw(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 16)));
    _mm512_storeu_ps(dst + i, a);
    _mm512_storeu_ps(dst + i + 16, b);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xffff) : tail_mask(n - i);
    _mm512_mask_storeu_ps(dst + i, m, f16_to_f32_hw(_mm256_maskz_loadu_epi16(m, src + i)));
  }
}

}  // namespace tc::detail
