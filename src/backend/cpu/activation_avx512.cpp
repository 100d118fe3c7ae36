// The AVX-512 lookups of 16-bit activations (backend/cpu/activation_kernels.h): one
// 16-lane gather per 16 values, where the scalar loop loads them one by one.
//
// This file is compiled with -mavx512*: it must not odr-use inline functions from
// headers, or the linker could keep this file's AVX-512 copy for callers on CPUs without
// it. Plain pointers in, helpers in an unnamed namespace.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's AVX-512 headers (see convert_avx512.cpp)
#endif
#include <immintrin.h>

#include "backend/cpu/activation_kernels.h"

namespace tc::cpu::detail {

#if defined(__AVX512F__) && defined(__AVX512BW__)
namespace {

__mmask16 lanes_below(int64_t count) {
  return count >= 16 ? static_cast<__mmask16>(0xffff) : count <= 0 ? 0 : static_cast<__mmask16>((1u << count) - 1u);
}

// The table entries of h[i, i + 16) (lanes past n: entry 0, not stored).
__m512i entries(const uint32_t* table, const uint16_t* h, __mmask16 k) {
  const __m512i index = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, h));
  return _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), k, index, table, 4);
}

}  // namespace

void lookup_value_grad_avx512(const uint32_t* table, const uint16_t* h, uint16_t* y, uint16_t* d, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = lanes_below(n - i);
    const __m512i t = entries(table, h + i, k);
    _mm256_mask_storeu_epi16(y + i, k, _mm512_cvtepi32_epi16(t));
    _mm256_mask_storeu_epi16(d + i, k, _mm512_cvtepi32_epi16(_mm512_srli_epi32(t, 16)));
  }
}

void lookup_value_avx512(const uint32_t* table, const uint16_t* h, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = lanes_below(n - i);
    _mm256_mask_storeu_epi16(y + i, k, _mm512_cvtepi32_epi16(entries(table, h + i, k)));
  }
}
#else
// Never called: the caller checks the CPU's features first.
void lookup_value_grad_avx512(const uint32_t*, const uint16_t*, uint16_t*, uint16_t*, int64_t) { __builtin_trap(); }
void lookup_value_avx512(const uint32_t*, const uint16_t*, uint16_t*, int64_t) { __builtin_trap(); }
#endif

}  // namespace tc::cpu::detail
