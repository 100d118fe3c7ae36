// Bulk conversion: the portable paths, run-time path selection, and the any-to-any loop.
// The vector paths live in x86/avx512bf16/convert_avx512.cpp and x86/avx2/convert_f16c.cpp
// (compiled for their ISA).
#include "tensorcast/convert.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace tc {

std::string_view convert_path_name(ConvertPath p) {
  switch (p) {
    case ConvertPath::kAuto:
      return "auto";
    case ConvertPath::kPortable:
      return "portable";
    case ConvertPath::kF16C:
      return "f16c";
    case ConvertPath::kAVX512:
      return "avx512";
    case ConvertPath::kAVX512BF16:
      return "avx512bf16";
  }
  return "?";
}

namespace {

// An 8-bit float on either side goes through float, a block at a time: widening is exact, and
// narrowing from float is the one rounding PyTorch's casts make (a double or int64 reaches the
// 8-bit type through float in PyTorch too).
void convert_through_float(const char* src, DType sdt, char* dst, DType ddt, int64_t n) {
  constexpr int64_t kBlock = 256;
  float buf[kBlock];
  const size_t ses = element_size(sdt), des = element_size(ddt);
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t m = std::min(kBlock, n - b);
    const char* s = src + b * static_cast<int64_t>(ses);
    char* d = dst + b * static_cast<int64_t>(des);
    if (is_float8(sdt))
      dispatch_float8(sdt, "convert", [&]<class S>() {
        for (int64_t i = 0; i < m; ++i) buf[i] = static_cast<float>(reinterpret_cast<const S*>(s)[i]);
      });
    else
      convert(s, sdt, buf, kFloat32, m);
    if (is_float8(ddt))
      dispatch_float8(ddt, "convert", [&]<class D>() {
        for (int64_t i = 0; i < m; ++i) reinterpret_cast<D*>(d)[i] = D(buf[i]);
      });
    else
      convert(buf, kFloat32, d, ddt, m);
  }
}

}  // namespace

void convert(const void* src, DType sdt, void* dst, DType ddt, int64_t n) {
  if (sdt == ddt) {
    std::memcpy(dst, src, static_cast<size_t>(n) * element_size(sdt));
    return;
  }
  if (is_float8(sdt) || is_float8(ddt))
    return convert_through_float(static_cast<const char*>(src), sdt, static_cast<char*>(dst), ddt, n);
  if (sdt == kFloat32 && ddt == kBFloat16)
    return float_to_bf16(static_cast<const float*>(src), static_cast<BFloat16*>(dst), n);
  if (sdt == kBFloat16 && ddt == kFloat32)
    return bf16_to_float(static_cast<const BFloat16*>(src), static_cast<float*>(dst), n);
  if (sdt == kFloat32 && ddt == kFloat16)
    return float_to_half(static_cast<const float*>(src), static_cast<Half*>(dst), n);
  if (sdt == kFloat16 && ddt == kFloat32)
    return half_to_float(static_cast<const Half*>(src), static_cast<float*>(dst), n);
  dispatch_all(sdt, "convert", [&]<class S>() {
    dispatch_all(ddt, "convert", [&]<class D>() {
      const S* s = static_cast<const S*>(src);
      D* d = static_cast<D*>(dst);
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (std::is_same_v<D, bool>) {
          d[i] = static_cast<float>(s[i]) != 0.0f || (std::is_integral_v<S> && s[i] != S{});
        } else if constexpr (std::is_same_v<S, BFloat16> || std::is_same_v<S, Half>) {
          d[i] = static_cast<D>(static_cast<float>(s[i]));  // 16-bit -> anything via float (exact)
        } else if constexpr (std::is_same_v<D, BFloat16> || std::is_same_v<D, Half>) {
          // double -> 16-bit via float would round twice; round the double once instead.
          if constexpr (std::is_same_v<S, double>)
            d[i] = round_double_to<D>(s[i]);
          else
            d[i] = D(static_cast<float>(s[i]));
        } else {
          d[i] = static_cast<D>(s[i]);
        }
      }
    });
  });
}

}  // namespace tc
