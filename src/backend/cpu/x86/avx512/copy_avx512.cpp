// The AVX-512 transpose of a 32 x 32 tile of 16-bit values (backend/cpu/x86/copy_kernels.h):
// the 32 source lines in registers, then five rounds of two-source word permutes, each
// swapping the off-diagonal blocks of every 2h x 2h block (h = 16, 8, 4, 2, 1), so that
// 160 permutes move 1024 values where the scalar tile loop made 1024 strided moves.
//
// Compiled for AVX-512 alone (CMakeLists.txt), so, as every such file, it shares no inline
// code with the library (the linker might keep its AVX-512 copy for every CPU): plain
// pointers in, helpers in an unnamed namespace.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's AVX-512 headers (see convert_avx512.cpp)
#endif
#include <immintrin.h>

#include "backend/cpu/x86/copy_kernels.h"
#include "core/x86/avx512/require.h"  // stops a build without this folder's flags

namespace tc::cpu::detail {

namespace {

// The permute indices of one round: row i (bit h of i clear) keeps its columns j with bit
// h clear and takes row i + h's columns j - h for the others; row i + h takes row i's
// columns j + h and keeps its own. (Index bit 5 picks the second source.)
template <int H>
void swap_blocks(__m512i (&rows)[32]) {
  alignas(64) uint16_t lo[32], hi[32];
  for (int j = 0; j < 32; ++j) {
    lo[j] = static_cast<uint16_t>((j & H) ? 32 + j - H : j);
    hi[j] = static_cast<uint16_t>((j & H) ? 32 + j : j + H);
  }
  const __m512i ilo = _mm512_load_si512(lo), ihi = _mm512_load_si512(hi);
#pragma GCC unroll 32
  for (int i = 0; i < 32; ++i) {
    if (i & H) continue;
    const __m512i a = rows[i], b = rows[i + H];
    rows[i] = _mm512_permutex2var_epi16(a, ilo, b);
    rows[i + H] = _mm512_permutex2var_epi16(a, ihi, b);
  }
}

}  // namespace

void transpose_tile_16bit_avx512(const uint16_t* src, int64_t src_stride, uint16_t* dst, int64_t dst_stride) {
  __m512i rows[32];
#pragma GCC unroll 32
  for (int i = 0; i < 32; ++i) rows[i] = _mm512_loadu_si512(src + i * src_stride);
  swap_blocks<16>(rows);
  swap_blocks<8>(rows);
  swap_blocks<4>(rows);
  swap_blocks<2>(rows);
  swap_blocks<1>(rows);
#pragma GCC unroll 32
  for (int i = 0; i < 32; ++i) _mm512_storeu_si512(dst + i * dst_stride, rows[i]);
}

}  // namespace tc::cpu::detail
