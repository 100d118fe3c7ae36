// The AVX-512 lookups of 16-bit activations (backend/cpu/activation_kernels.h): the table
// entries are loaded one by one into a buffer, whose halves are then split into y and d 16
// lanes at a time. Not VPGATHERDD: AMD microcodes it (~1.75 cycles an element on Zen 5,
// measured), while scalar loads issue three or four a cycle; per value of gpt's MLP, 0.40
// -> 0.24 ns (one Zen 5 thread), against 0.32 ns for the plain scalar loop, which stores
// each half on its own.
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

void lookup_value_grad_avx512(const uint32_t* table, const uint16_t* h, uint16_t* y, uint16_t* d, int64_t n) {
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

void lookup_value_avx512(const uint32_t* table, const uint16_t* h, uint16_t* y, int64_t n) {
  alignas(64) uint32_t buf[kChunk];
  for (int64_t i = 0; i < n; i += kChunk) {
    const int64_t count = n - i < kChunk ? n - i : kChunk;
    load_entries(table, h + i, count, buf);  // before any store: y may be h
    for (int64_t j = 0; j < count; j += 16)
      _mm256_mask_storeu_epi16(y + i + j, lanes_below(count - j), _mm512_cvtepi32_epi16(_mm512_load_si512(buf + j)));
  }
}
#else
// Never called: the caller checks the CPU's features first.
void lookup_value_grad_avx512(const uint32_t*, const uint16_t*, uint16_t*, uint16_t*, int64_t) { __builtin_trap(); }
void lookup_value_avx512(const uint32_t*, const uint16_t*, uint16_t*, int64_t) { __builtin_trap(); }
#endif

}  // namespace tc::cpu::detail
