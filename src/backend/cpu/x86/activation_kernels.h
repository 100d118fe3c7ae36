// Internal: the AVX-512 lookups of 16-bit activations (activation_avx512.cpp), called by
// backend/cpu/loops/activation.cpp on CPUs that have the instructions. Plain pointers only: that
// file is compiled for AVX-512 and must share no inline code with the rest of the library.
#pragma once
#include <cstdint>

namespace tc::cpu::detail {

// y = act(h) and d = act'(h) for n 16-bit patterns h, from `table` (entry b: act's bits in
// the low half, act''s in the high, for the value of pattern b). d may be h. gather: by
// VPGATHERDD (where the CPU runs it fast: CpuFeatures::fast_gather), else by scalar loads.
void lookup_value_grad_avx512(const uint32_t* table, const uint16_t* h, uint16_t* y, uint16_t* d, int64_t n,
                              bool gather);

// y = act(h) alone (the low halves). y may be h.
void lookup_value_avx512(const uint32_t* table, const uint16_t* h, uint16_t* y, int64_t n, bool gather);

// dx = g * table[x] for n bfloat16 x, g (widened), the product rounded once to bfloat16
// (nearest even, as the library's conversions): an activation's backward from its float32
// derivative of every bit pattern.
void lookup_grad_times_bf16_avx512(const float* table, const uint16_t* x, const uint16_t* g, uint16_t* dx, int64_t n,
                                   bool gather);

}  // namespace tc::cpu::detail
