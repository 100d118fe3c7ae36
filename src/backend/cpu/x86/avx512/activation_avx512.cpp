// The AVX-512 lookups of 16-bit activations (backend/cpu/x86/activation_kernels.h), in two
// forms. By gathers: one VPGATHERDD per 16 values, which Intel cores run at about an
// element a cycle, faster than the scalar form there. By scalar loads: the table entries
// loaded one by one into a buffer, whose halves are then split into y and d 16 lanes at a
// time, since AMD microcodes the gather (slower than an element a cycle) while scalar loads
// issue three or four a cycle; splitting 16 lanes at a time also beats the plain scalar
// loop, which stores each half on its own.
//
// This file is compiled with -mavx512*: it must not odr-use inline functions from
// headers, or the linker could keep this file's AVX-512 copy for callers on CPUs without
// it. Plain pointers in, helpers in an unnamed namespace.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's AVX-512 headers (see convert_avx512.cpp)
#endif
#include <immintrin.h>

#include "backend/cpu/x86/activation_kernels.h"
#include "core/x86/avx512/bf16_avx512.h"
#include "core/x86/avx512/require.h"  // stops a build without this folder's flags

namespace tc::cpu::detail {

namespace {

__mmask16 lanes_below(int64_t count) {
  return count >= 16 ? static_cast<__mmask16>(0xffff) : count <= 0 ? 0 : static_cast<__mmask16>((1u << count) - 1u);
}

constexpr int64_t kChunk = 64;  // entries per buffer fill

// buf[j] = table[h[j]] for j < count (<= kChunk), zero up to the next 16.
void load_entries(const uint32_t* table, const uint16_t* h, int64_t count, uint32_t* buf) {
  if (count == kChunk) {
#pragma GCC unroll 16
    for (int64_t j = 0; j < kChunk; ++j) buf[j] = table[h[j]];
    return;
  }
  for (int64_t j = 0; j < count; ++j) buf[j] = table[h[j]];
  for (int64_t j = count; j % 16 != 0; ++j) buf[j] = 0;
}

}  // namespace

// t(i): the table entries of h[i, i + 16) as 16 lanes (lanes of k only; the others 0).
#define TC_GATHER(i, k)                                                                                               \
  _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), k, _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, h + (i))), \
                              table, 4)

void lookup_value_grad_avx512(const uint32_t* table, const uint16_t* h, uint16_t* y, uint16_t* d, int64_t n,
                              bool gather) {
  if (gather) {
    for (int64_t i = 0; i < n; i += 16) {  // h[i, i + 16) read before d's lanes there are written
      const __mmask16 k = lanes_below(n - i);
      const __m512i t = TC_GATHER(i, k);
      _mm256_mask_storeu_epi16(y + i, k, _mm512_cvtepi32_epi16(t));
      _mm256_mask_storeu_epi16(d + i, k, _mm512_cvtepi32_epi16(_mm512_srli_epi32(t, 16)));
    }
    return;
  }
  alignas(64) uint32_t buf[kChunk];
  for (int64_t i = 0; i < n; i += kChunk) {
    const int64_t count = n - i < kChunk ? n - i : kChunk;
    load_entries(table, h + i, count, buf);  // before any store: d may be h
    for (int64_t j = 0; j < count; j += 16) {
      const __mmask16 k = lanes_below(count - j);
      const __m512i t = _mm512_load_si512(buf + j);
      _mm256_mask_storeu_epi16(y + i + j, k, _mm512_cvtepi32_epi16(t));
      _mm256_mask_storeu_epi16(d + i + j, k, _mm512_cvtepi32_epi16(_mm512_srli_epi32(t, 16)));
    }
  }
}

void lookup_value_avx512(const uint32_t* table, const uint16_t* h, uint16_t* y, int64_t n, bool gather) {
  if (gather) {
    for (int64_t i = 0; i < n; i += 16) {
      const __mmask16 k = lanes_below(n - i);
      _mm256_mask_storeu_epi16(y + i, k, _mm512_cvtepi32_epi16(TC_GATHER(i, k)));
    }
    return;
  }
  alignas(64) uint32_t buf[kChunk];
  for (int64_t i = 0; i < n; i += kChunk) {
    const int64_t count = n - i < kChunk ? n - i : kChunk;
    load_entries(table, h + i, count, buf);  // before any store: y may be h
    for (int64_t j = 0; j < count; j += 16)
      _mm256_mask_storeu_epi16(y + i + j, lanes_below(count - j), _mm512_cvtepi32_epi16(_mm512_load_si512(buf + j)));
  }
}
#undef TC_GATHER

void lookup_grad_times_bf16_avx512(const float* table, const uint16_t* x, const uint16_t* g, uint16_t* dx, int64_t n,
                                   bool gather) {
  alignas(64) float buf[16];
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = lanes_below(n - i);
    __m512 d;
    if (gather) {
      d = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), k, _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, x + i)),
                                   table, 4);
    } else {
      const int64_t count = n - i < 16 ? n - i : 16;
      for (int64_t j = 0; j < 16; ++j) buf[j] = j < count ? table[x[i + j]] : 0.0f;
      d = _mm512_load_ps(buf);
    }
    const __m512 gv =
        _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, g + i)), 16));
    _mm256_mask_storeu_epi16(dx + i, k, ::tc::detail::f32_to_bf16_int(_mm512_castps_si512(_mm512_mul_ps(gv, d))));
  }
}

}  // namespace tc::cpu::detail
