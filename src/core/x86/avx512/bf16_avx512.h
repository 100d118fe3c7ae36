// Internal, for files compiled with -mavx512f -mavx512bw only (it is inline AVX-512 code,
// kept in an unnamed namespace so that no other file can share a copy): 16 floats rounded
// to bfloat16 bit for bit as the reference in half.h rounds them (f32_to_bf16_hw, by the
// AVX512-BF16 instruction, where the file is compiled for it too).
#pragma once
#include <immintrin.h>

namespace tc::detail {
namespace {

// Round-to-nearest-even of 16 floats (as bits) to bf16, in integers: the reference rule.
// Result in the low 16 bits of each 32-bit lane.
inline __m512i bf16_round_bits(__m512i u) {
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  const __m512i ax = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(ax, _mm512_set1_epi32(0x7f800000));
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x0040));
  return _mm512_mask_mov_epi32(rounded, nan, quiet);
}

inline __m256i f32_to_bf16_int(__m512i u) { return _mm512_cvtepi32_epi16(bf16_round_bits(u)); }

#if defined(__AVX512BF16__)
// VCVTNEPS2BF16 treats float32 subnormal inputs as zero (DAZ, whatever MXCSR says); the
// reference keeps them (they round to bf16 subnormals). Lanes whose exponent field is
// zero but which are not +-0 are redone in integers. Rare in practice, so it is a branch.
inline __m256i f32_to_bf16_hw(__m512i u) {
  const __m256i hw = (__m256i)_mm512_cvtneps_pbh(_mm512_castsi512_ps(u));
  const __m512i ax = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
  // ax - 1 < 0x7fffff (unsigned) <=> 0 < ax <= 0x7fffff <=> nonzero subnormal.
  const __mmask16 sub =
      _mm512_cmplt_epu32_mask(_mm512_sub_epi32(ax, _mm512_set1_epi32(1)), _mm512_set1_epi32(0x7fffff));
  if (__builtin_expect(sub != 0, 0)) return _mm256_mask_mov_epi16(hw, sub, f32_to_bf16_int(u));
  return hw;
}
#endif

}  // namespace
}  // namespace tc::detail
