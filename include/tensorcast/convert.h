/// \file
/// Bulk dtype conversion of contiguous buffers.
///
/// float <-> bfloat16 / float16 have vector paths chosen at run time (AVX-512 BF16,
/// AVX-512F, F16C) and a portable path; every path is bit-identical to the scalar
/// reference in half.h. Other pairs go through a generic element loop.
#pragma once
#include <cstdint>
#include <string_view>

#include "tensorcast/cpu_features.h"  // the features that pick the paths
#include "tensorcast/dtype.h"

namespace tc {

/// The conversion paths, for tests and benchmarks. kAuto picks the best the CPU has.
enum class ConvertPath : uint8_t { kAuto, kPortable, kF16C, kAVX512, kAVX512BF16 };
/// Whether path `p` runs on this CPU.
bool convert_path_available(ConvertPath p);
/// The path's name ("portable", "f16c", ...).
std::string_view convert_path_name(ConvertPath p);

/// \name Bulk conversions
/// @{

/// Converts n elements with path `p` (kAuto: the fastest available); rounding and NaN handling match half.h's
/// scalar routines bit for bit.
void float_to_bf16(const float* src, BFloat16* dst, int64_t n, ConvertPath p = ConvertPath::kAuto);
void bf16_to_float(const BFloat16* src, float* dst, int64_t n, ConvertPath p = ConvertPath::kAuto);
void float_to_half(const float* src, Half* dst, int64_t n, ConvertPath p = ConvertPath::kAuto);
void half_to_float(const Half* src, float* dst, int64_t n, ConvertPath p = ConvertPath::kAuto);
/// @}

/// Any dtype to any dtype, contiguous, n elements. Floating -> integral truncates toward
/// zero as static_cast does (PyTorch's rule); anything -> bool is `x != 0`.
void convert(const void* src, DType src_dtype, void* dst, DType dst_dtype, int64_t n);

}  // namespace tc
