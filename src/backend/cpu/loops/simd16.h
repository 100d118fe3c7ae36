// Internal: 16 floats as one value (one AVX-512 register, two AVX2 ones) with GCC vector
// extensions, for micro-kernels compiled per ISA (TC_SIMD_CLONES, fast_math.h).
#pragma once

namespace tc::cpu {

using v16 = float __attribute__((vector_size(64)));
using v16u = float __attribute__((vector_size(64), aligned(4), may_alias));  // unaligned access

}  // namespace tc::cpu

// Macros rather than functions: a v16 passed by value to a function compiled for the
// baseline ISA would change the calling convention between clones (GCC's -Wpsabi).
#define TC_LOAD16(p) (*reinterpret_cast<const ::tc::cpu::v16u*>(p))
#define TC_STORE16(p, v) (*reinterpret_cast<::tc::cpu::v16u*>(p) = (v))
