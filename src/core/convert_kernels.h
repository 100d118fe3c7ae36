// Internal: the vectorized float <-> 16-bit conversion kernels, one set per ISA.
// Each must agree bit for bit with the scalar reference in half.h for every input.
#pragma once
#include <cstdint>

#include "tensorcast/half.h"

namespace tc::detail {

// convert_avx512.cpp (AVX-512F/BW/VL, plus AVX-512 BF16 for the *_avx512bf16 kernel)
void float_to_bf16_avx512bf16(const float* src, BFloat16* dst, int64_t n);
void float_to_bf16_avx512(const float* src, BFloat16* dst, int64_t n);
void bf16_to_float_avx512(const BFloat16* src, float* dst, int64_t n);
void float_to_half_avx512(const float* src, Half* dst, int64_t n);
void half_to_float_avx512(const Half* src, float* dst, int64_t n);

// convert_f16c.cpp (AVX2 + F16C)
void float_to_bf16_avx2(const float* src, BFloat16* dst, int64_t n);
void bf16_to_float_avx2(const BFloat16* src, float* dst, int64_t n);
void float_to_half_f16c(const float* src, Half* dst, int64_t n);
void half_to_float_f16c(const Half* src, float* dst, int64_t n);

}  // namespace tc::detail
