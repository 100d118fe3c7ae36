// AVX2 + F16C float <-> bfloat16 / float16 kernels (declared in core/convert_kernels.h):
//   float_to_bf16_avx2   integer round-to-nearest-even, 16 floats per step
//   bf16_to_float_avx2   zero-extend and shift (exact)
//   float_to_half_f16c   VCVTPS2PH with an explicit rounding immediate
//   half_to_float_f16c   VCVTPH2PS, with NaN lanes redone in integers
// Every kernel is bit-identical to the scalar reference in half.h for every input and
// ignores MXCSR. AVX2 has no 16-bit masked store, so a tail (< one vector) goes through
// a small stack buffer: nothing is read or written past n elements.
//
// This file is compiled with -mavx2 -mf16c: it must not odr-use inline functions from
// headers (half.h's reference routines included), or the linker could keep this file's
// AVX2 copy for callers on CPUs without AVX2. Helpers stay in an unnamed namespace.
#include <immintrin.h>

#include <cstring>

#include "core/convert_kernels.h"
#include "core/x86/avx2/require.h"  // stops a build without this folder's flags

namespace tc::detail {
namespace {

// 8 floats (as bits) -> bf16 bits in the low half of each 32-bit lane (the reference rule).
inline __m256i bf16_round_bits(__m256i u) {
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
  const __m256i ax = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
  // Signed compare is right: ax and 0x7f800000 are both non-negative.
  const __m256i nan = _mm256_cmpgt_epi32(ax, _mm256_set1_epi32(0x7f800000));
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x0040));
  return _mm256_blendv_epi8(rounded, quiet, nan);
}

// 16 floats -> 16 bf16. packus works per 128-bit lane (a0-3 b0-3 a4-7 b4-7); the
// permute restores order. Values are <= 0xffff so the unsigned saturation never bites.
inline __m256i f32x16_to_bf16(const uint32_t* p) {
  const __m256i a = bf16_round_bits(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  const __m256i b = bf16_round_bits(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 8)));
  return _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xd8);
}

inline __m256 bf16x8_to_f32(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

// The immediate fixes the rounding (MXCSR.RC is not consulted); VCVTPS2PH's NaN and
// subnormal results already match the reference (see convert_avx512.cpp).
inline __m128i f32x8_to_f16(const float* p) {
  return _mm256_cvtps_ph(_mm256_loadu_ps(p), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

// VCVTPH2PS quiets signalling NaNs; the reference keeps NaN payloads bit for bit.
inline __m256 f16x8_to_f32(const uint16_t* p) {
  const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  __m256 w = _mm256_cvtph_ps(h);
  const __m128i ah = _mm_and_si128(h, _mm_set1_epi16(0x7fff));
  const __m128i nan16 = _mm_cmpgt_epi16(ah, _mm_set1_epi16(0x7c00));  // both non-negative
  if (__builtin_expect(_mm_movemask_epi8(nan16) != 0, 0)) {
    const __m256i e = _mm256_cvtepu16_epi32(h);
    const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(e, _mm256_set1_epi32(0x8000)), 16);
    const __m256i payload = _mm256_slli_epi32(_mm256_and_si256(e, _mm256_set1_epi32(0x3ff)), 13);
    const __m256i bits = _mm256_or_si256(_mm256_or_si256(sign, payload), _mm256_set1_epi32(0x7f800000));
    const __m256i nan32 = _mm256_cvtepi16_epi32(nan16);
    w = _mm256_blendv_ps(w, _mm256_castsi256_ps(bits), _mm256_castsi256_ps(nan32));
  }
  return w;
}

}  // namespace

void float_to_bf16_avx2(const float* src, BFloat16* dst, int64_t n) {
  const auto* s = reinterpret_cast<const uint32_t*>(src);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), f32x16_to_bf16(s + i));
  if (i < n) {
    uint32_t in[16] = {};
    uint16_t out[16];
    std::memcpy(in, s + i, static_cast<size_t>(n - i) * 4);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), f32x16_to_bf16(in));
    std::memcpy(dst + i, out, static_cast<size_t>(n - i) * 2);
  }
}

void bf16_to_float_avx2(const BFloat16* src, float* dst, int64_t n) {
  const auto* s = reinterpret_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a = bf16x8_to_f32(s + i);
    const __m256 b = bf16x8_to_f32(s + i + 8);
    _mm256_storeu_ps(dst + i, a);
    _mm256_storeu_ps(dst + i + 8, b);
  }
  for (; i < n; i += 8) {
    uint16_t in[8] = {};
    float out[8];
    const int64_t k = n - i < 8 ? n - i : 8;
    std::memcpy(in, s + i, static_cast<size_t>(k) * 2);
    _mm256_storeu_ps(out, bf16x8_to_f32(in));
    std::memcpy(dst + i, out, static_cast<size_t>(k) * 4);
  }
}

void float_to_half_f16c(const float* src, Half* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i a = f32x8_to_f16(src + i);
    const __m128i b = f32x8_to_f16(src + i + 8);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 8), b);
  }
  for (; i < n; i += 8) {
    float in[8] = {};
    uint16_t out[8];
    const int64_t k = n - i < 8 ? n - i : 8;
    std::memcpy(in, src + i, static_cast<size_t>(k) * 4);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), f32x8_to_f16(in));
    std::memcpy(dst + i, out, static_cast<size_t>(k) * 2);
  }
}

void half_to_float_f16c(const Half* src, float* dst, int64_t n) {
  const auto* s = reinterpret_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a = f16x8_to_f32(s + i);
    const __m256 b = f16x8_to_f32(s + i + 8);
    _mm256_storeu_ps(dst + i, a);
    _mm256_storeu_ps(dst + i + 8, b);
  }
  for (; i < n; i += 8) {
    uint16_t in[8] = {};
    float out[8];
    const int64_t k = n - i < 8 ? n - i : 8;
    std::memcpy(in, s + i, static_cast<size_t>(k) * 2);
    _mm256_storeu_ps(out, f16x8_to_f32(in));
    std::memcpy(dst + i, out, static_cast<size_t>(k) * 4);
  }
}

}  // namespace tc::detail
