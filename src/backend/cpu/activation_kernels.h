// Internal: the AVX-512 BF16 GELU kernel (activation_avx512bf16.cpp), called by
// backend/cpu/activation.cpp on CPUs that have the instructions. Plain pointers only: that
// file is compiled for AVX-512 and must share no inline code with the rest of the library.
#pragma once
#include <cstdint>

namespace tc::cpu::detail {

// y = gelu(h) and d = gelu'(h), erf form, for n bfloat16 values (raw bits), computed in
// float32 and each rounded once as the library rounds (nearest even, subnormals kept).
// fast_normal_cdf_pdf's operations in its order, fused where GCC fuses activation.cpp's
// AVX-512 loop, so for every bfloat16 input both results are that float32 loop's rounded
// (test_elementwise checks all 2^16). d may be h (written in place).
void gelu_value_grad_avx512bf16(const uint16_t* h, uint16_t* y, uint16_t* d, int64_t n);

}  // namespace tc::cpu::detail
