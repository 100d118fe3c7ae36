// DType printing and promote_types.
#include "tensorcast/dtype.h"

#include <ostream>

#include "tensorcast/device.h"

namespace tc {

std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }
std::ostream& operator<<(std::ostream& os, BFloat16 v) { return os << float(v); }
std::ostream& operator<<(std::ostream& os, Half v) { return os << float(v); }
std::ostream& operator<<(std::ostream& os, Device d) {
  return os << (d.is_cpu() ? "cpu" : "cuda:") << (d.is_cuda() ? std::to_string(d.index) : "");
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  const bool fa = is_floating(a), fb = is_floating(b);
  if (fa != fb) return fa ? a : b;  // floating beats integral
  if (fa) {
    if (a == kFloat64 || b == kFloat64) return kFloat64;
    return kFloat32;  // f32 with a 16-bit type, or f16 with bf16
  }
  // Integral: bool < uint8 < int32 < int64 (uint8 with a signed type widens to the signed one).
  auto rank = [](DType t) {
    switch (t) {
      case DType::Bool:
        return 0;
      case DType::UInt8:
        return 1;
      case DType::Int32:
        return 2;
      default:
        return 3;
    }
  };
  return rank(a) > rank(b) ? a : b;
}

}  // namespace tc
