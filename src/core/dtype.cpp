// DType printing (and the scalars' and devices'), and promote_types.
#include "tensorcast/dtype.h"

#include <charconv>
#include <ostream>
#include <string>

#include "tensorcast/device.h"
#include "tensorcast/error.h"
#include "tensorcast/float8.h"

namespace tc {

std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }
std::ostream& operator<<(std::ostream& os, BFloat16 v) { return os << float(v); }
std::ostream& operator<<(std::ostream& os, Half v) { return os << float(v); }
std::ostream& operator<<(std::ostream& os, Float8_e4m3fn v) { return os << float(v); }
std::ostream& operator<<(std::ostream& os, Float8_e5m2 v) { return os << float(v); }
std::ostream& operator<<(std::ostream& os, Float8_e8m0fnu v) { return os << float(v); }
std::ostream& operator<<(std::ostream& os, Device d) {
  if (d.is_cuda()) return os << "cuda:" << static_cast<int>(d.index);
  return os << (d.is_meta() ? "meta" : "cpu");
}

Device::Device(std::string_view spec) {
  int index_value = 0;
  if (spec == "meta") {
    type = DeviceType::Meta;
    return;
  }
  bool ok = spec == "cpu" || spec == "cuda";
  if (!ok && spec.starts_with("cuda:") && spec.size() > 5) {
    const char* end = spec.data() + spec.size();
    const auto [p, ec] = std::from_chars(spec.data() + 5, end, index_value);
    ok = ec == std::errc() && p == end && index_value >= 0 && index_value <= 127;
  }
  if (!ok)
    throw Error("[device] expected \"cpu\", \"cuda\", \"cuda:N\" (N from 0 to 127) or \"meta\", got \"" +
                std::string(spec) + "\"");
  type = spec == "cpu" ? DeviceType::CPU : DeviceType::CUDA;
  index = static_cast<int8_t>(index_value);
}

void fail_float8_op(const char* op, DType t) {
  TC_FAIL(op, "not implemented for ", dtype_name(t),
          ": 8-bit float tensors take only casts (.to), copies, views and safetensors I/O, as in PyTorch;"
          " convert with .to(tc::kBFloat16) first");
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (is_float8(a) || is_float8(b))
    TC_FAIL("promote_types", "promotion for 8-bit float types is not supported, attempted to promote ", dtype_name(a),
            " and ", dtype_name(b), " (as PyTorch: cast one of them with .to() first)");
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
