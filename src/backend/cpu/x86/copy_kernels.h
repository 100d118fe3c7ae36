// Internal: the AVX-512 transpose of 16-bit tiles (copy_avx512.cpp), called by
// backend/cpu/loops/elementwise.cpp's transposing copy on CPUs that have the instructions. Plain
// pointers only: that file is compiled for AVX-512 and must share no inline code with the
// rest of the library.
#pragma once
#include <cstdint>

namespace tc::cpu::detail {

// dst[r * dst_stride + c] = src[c * src_stride + r] for r, c in [0, 32): one 32 x 32 tile of
// 16-bit values (strides in elements).
void transpose_tile_16bit_avx512(const uint16_t* src, int64_t src_stride, uint16_t* dst, int64_t dst_stride);

}  // namespace tc::cpu::detail
