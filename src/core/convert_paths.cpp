// Run-time selection among the float <-> 16-bit conversion paths.
// Portable paths are the scalar reference (half.h); vector paths are declared in
// core/convert_kernels.h and defined in files compiled for their ISA.
#include "core/convert_kernels.h"
#include "tensorcast/convert.h"

namespace tc {

bool convert_path_available(ConvertPath p) {
  const CpuFeatures& f = cpu_features();
  switch (p) {
    case ConvertPath::kAuto:
    case ConvertPath::kPortable:
      return true;
    case ConvertPath::kF16C:
      return f.f16c && f.avx2;
    case ConvertPath::kAVX512:
      return f.avx512f && f.avx512bw && f.avx512vl;
    case ConvertPath::kAVX512BF16:
      return f.avx512f && f.avx512bw && f.avx512vl && f.avx512_bf16;
  }
  return false;
}

namespace {

ConvertPath resolve(ConvertPath p, const char* op) {
  if (p == ConvertPath::kAuto) {
    static const ConvertPath best = convert_path_available(ConvertPath::kAVX512BF16) ? ConvertPath::kAVX512BF16
                                    : convert_path_available(ConvertPath::kAVX512)   ? ConvertPath::kAVX512
                                    : convert_path_available(ConvertPath::kF16C)     ? ConvertPath::kF16C
                                                                                     : ConvertPath::kPortable;
    return best;
  }
  TC_CHECK(convert_path_available(p), op, "conversion path ", convert_path_name(p), " is not supported by this CPU");
  return p;
}

}  // namespace

void float_to_bf16(const float* src, BFloat16* dst, int64_t n, ConvertPath p) {
  switch (resolve(p, "float_to_bf16")) {
    case ConvertPath::kAVX512BF16:
      return detail::float_to_bf16_avx512bf16(src, dst, n);
    case ConvertPath::kAVX512:
      return detail::float_to_bf16_avx512(src, dst, n);
    case ConvertPath::kF16C:
      return detail::float_to_bf16_avx2(src, dst, n);
    default:
      for (int64_t i = 0; i < n; ++i) dst[i] = BFloat16(src[i]);
  }
}

void bf16_to_float(const BFloat16* src, float* dst, int64_t n, ConvertPath p) {
  switch (resolve(p, "bf16_to_float")) {
    case ConvertPath::kAVX512BF16:
    case ConvertPath::kAVX512:
      return detail::bf16_to_float_avx512(src, dst, n);
    case ConvertPath::kF16C:
      return detail::bf16_to_float_avx2(src, dst, n);
    default:
      for (int64_t i = 0; i < n; ++i) dst[i] = float(src[i]);
  }
}

void float_to_half(const float* src, Half* dst, int64_t n, ConvertPath p) {
  switch (resolve(p, "float_to_half")) {
    case ConvertPath::kAVX512BF16:
    case ConvertPath::kAVX512:
      return detail::float_to_half_avx512(src, dst, n);
    case ConvertPath::kF16C:
      return detail::float_to_half_f16c(src, dst, n);
    default:
      for (int64_t i = 0; i < n; ++i) dst[i] = Half(src[i]);
  }
}

void half_to_float(const Half* src, float* dst, int64_t n, ConvertPath p) {
  switch (resolve(p, "half_to_float")) {
    case ConvertPath::kAVX512BF16:
    case ConvertPath::kAVX512:
      return detail::half_to_float_avx512(src, dst, n);
    case ConvertPath::kF16C:
      return detail::half_to_float_f16c(src, dst, n);
    default:
      for (int64_t i = 0; i < n; ++i) dst[i] = float(src[i]);
  }
}

}  // namespace tc
