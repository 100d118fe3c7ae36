/// \file
/// tc::DType, its constexpr traits table, type promotion and the dtype dispatcher.
#pragma once
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <string_view>

#include "tensorcast/error.h"
#include "tensorcast/float8.h"
#include "tensorcast/half.h"

namespace tc {

/// A tensor's element type. The 8-bit floats are storage types, as in PyTorch: casts, copies,
/// views and safetensors take them; arithmetic does not (convert to bfloat16 first).
enum class DType : uint8_t {
  Float32,
  Float16,
  BFloat16,
  Float64,
  Int64,
  Int32,
  UInt8,
  Bool,
  Float8_e4m3fn,
  Float8_e5m2,
  Float8_e8m0fnu
};
/// The number of DType values.
inline constexpr int kNumDTypes = 11;

/// \name DType constants
/// @{

/// The dtypes under libtorch's names (tc::kFloat32 is torch::kFloat32), with their aliases.
inline constexpr DType kFloat32 = DType::Float32;
inline constexpr DType kFloat = DType::Float32;
inline constexpr DType kFloat16 = DType::Float16;
inline constexpr DType kHalf = DType::Float16;
inline constexpr DType kBFloat16 = DType::BFloat16;
inline constexpr DType kFloat64 = DType::Float64;
inline constexpr DType kDouble = DType::Float64;
inline constexpr DType kInt64 = DType::Int64;
inline constexpr DType kLong = DType::Int64;
inline constexpr DType kInt32 = DType::Int32;
inline constexpr DType kInt = DType::Int32;
inline constexpr DType kUInt8 = DType::UInt8;
inline constexpr DType kByte = DType::UInt8;
inline constexpr DType kBool = DType::Bool;
inline constexpr DType kFloat8_e4m3fn = DType::Float8_e4m3fn;
inline constexpr DType kFloat8_e5m2 = DType::Float8_e5m2;
inline constexpr DType kFloat8_e8m0fnu = DType::Float8_e8m0fnu;
/// @}

/// What a dtype is: names, size and numeric limits (kDTypeTraits holds one per DType).
struct DTypeTraits {
  std::string_view name;        ///< PyTorch's spelling: "float32", "bfloat16", ...
  std::string_view short_name;  ///< "f32", "bf16", ... (safetensors and reports use these)
  size_t size;                  ///< bytes per element
  bool is_floating;             ///< float32, float64, bfloat16, float16 or an 8-bit float
  DType accumulate;             ///< dtype reductions and GEMMs accumulate in
  double epsilon;               ///< machine epsilon (1 for integers)
  double max;                   ///< largest finite value
};

/// The traits of every DType, indexed by its value.
inline constexpr DTypeTraits kDTypeTraits[kNumDTypes] = {
    {"float32", "f32", 4, true, DType::Float32, 0x1p-23, 3.4028234663852886e38},
    {"float16", "f16", 2, true, DType::Float32, 0x1p-10, 65504.0},
    {"bfloat16", "bf16", 2, true, DType::Float32, 0x1p-7, 3.3895313892515355e38},
    {"float64", "f64", 8, true, DType::Float64, 0x1p-52, 1.7976931348623157e308},
    {"int64", "i64", 8, false, DType::Int64, 1.0, 9.223372036854775807e18},
    {"int32", "i32", 4, false, DType::Int64, 1.0, 2147483647.0},
    {"uint8", "u8", 1, false, DType::Int64, 1.0, 255.0},
    {"bool", "bool", 1, false, DType::Int64, 1.0, 1.0},
    {"float8_e4m3fn", "f8e4m3", 1, true, DType::Float32, 0x1p-3, 448.0},
    {"float8_e5m2", "f8e5m2", 1, true, DType::Float32, 0x1p-2, 57344.0},
    {"float8_e8m0fnu", "f8e8m0", 1, true, DType::Float32, 1.0, 0x1p127},
};

/// The traits of t.
constexpr const DTypeTraits& traits(DType t) { return kDTypeTraits[static_cast<int>(t)]; }
/// Bytes per element.
constexpr size_t element_size(DType t) { return traits(t).size; }
/// Whether t is a floating dtype: float32, float64, bfloat16, float16 or an 8-bit float
/// (PyTorch's is_floating_point).
constexpr bool is_floating(DType t) { return traits(t).is_floating; }
/// Whether t is one of the 16-bit floating types (bfloat16, float16).
constexpr bool is_reduced_float(DType t) { return t == DType::Float16 || t == DType::BFloat16; }
/// Whether t is one of the 8-bit floats (float8_e4m3fn, float8_e5m2, float8_e8m0fnu).
constexpr bool is_float8(DType t) {
  return t == DType::Float8_e4m3fn || t == DType::Float8_e5m2 || t == DType::Float8_e8m0fnu;
}
/// PyTorch's name of t ("float32", "bfloat16", ...).
constexpr std::string_view dtype_name(DType t) { return traits(t).name; }
/// Writes dtype_name(t).
std::ostream& operator<<(std::ostream& os, DType t);

/// The result dtype of a binary op on tensors of dtypes a and b (PyTorch's table):
/// floating beats integral, the wider wins, and float16 with bfloat16 gives float32. An 8-bit
/// float promotes only with itself (anything else is an error, as PyTorch's).
DType promote_types(DType a, DType b);

/// Throws: `op` is not implemented for the 8-bit float t (only casts, copies and views are).
[[noreturn]] void fail_float8_op(const char* op, DType t);

/// C++ type <-> DType.
template <class T>
struct CppToDType;
/// float is DType::Float32.
template <>
struct CppToDType<float> {
  static constexpr DType value = DType::Float32;  ///< the DType
};
/// Half is DType::Float16.
template <>
struct CppToDType<Half> {
  static constexpr DType value = DType::Float16;  ///< the DType
};
/// BFloat16 is DType::BFloat16.
template <>
struct CppToDType<BFloat16> {
  static constexpr DType value = DType::BFloat16;  ///< the DType
};
/// double is DType::Float64.
template <>
struct CppToDType<double> {
  static constexpr DType value = DType::Float64;  ///< the DType
};
/// int64_t is DType::Int64.
template <>
struct CppToDType<int64_t> {
  static constexpr DType value = DType::Int64;  ///< the DType
};
/// int32_t is DType::Int32.
template <>
struct CppToDType<int32_t> {
  static constexpr DType value = DType::Int32;  ///< the DType
};
/// uint8_t is DType::UInt8.
template <>
struct CppToDType<uint8_t> {
  static constexpr DType value = DType::UInt8;  ///< the DType
};
/// bool is DType::Bool.
template <>
struct CppToDType<bool> {
  static constexpr DType value = DType::Bool;  ///< the DType
};
/// Float8_e4m3fn is DType::Float8_e4m3fn.
template <>
struct CppToDType<Float8_e4m3fn> {
  static constexpr DType value = DType::Float8_e4m3fn;  ///< the DType
};
/// Float8_e5m2 is DType::Float8_e5m2.
template <>
struct CppToDType<Float8_e5m2> {
  static constexpr DType value = DType::Float8_e5m2;  ///< the DType
};
/// Float8_e8m0fnu is DType::Float8_e8m0fnu.
template <>
struct CppToDType<Float8_e8m0fnu> {
  static constexpr DType value = DType::Float8_e8m0fnu;  ///< the DType
};
/// The DType of the C++ type T: `dtype_of<float>` is kFloat32.
template <class T>
inline constexpr DType dtype_of = CppToDType<T>::value;

/// Calls `fn.template operator()<T>()` with the C++ type of `t`, for the dtypes arithmetic
/// takes (an 8-bit float fails, naming the op: see dispatch_float8).
/// Usage: `dispatch_all(t, "op", [&]<class T>() { ... });`
template <class F>
decltype(auto) dispatch_all(DType t, const char* op, F&& fn) {
  switch (t) {
    case DType::Float32:
      return fn.template operator()<float>();
    case DType::Float16:
      return fn.template operator()<Half>();
    case DType::BFloat16:
      return fn.template operator()<BFloat16>();
    case DType::Float64:
      return fn.template operator()<double>();
    case DType::Int64:
      return fn.template operator()<int64_t>();
    case DType::Int32:
      return fn.template operator()<int32_t>();
    case DType::UInt8:
      return fn.template operator()<uint8_t>();
    case DType::Bool:
      return fn.template operator()<bool>();
    case DType::Float8_e4m3fn:
    case DType::Float8_e5m2:
    case DType::Float8_e8m0fnu:
      fail_float8_op(op, t);
  }
  TC_FAIL(op, "unsupported dtype ", static_cast<int>(t));
}

/// The 8-bit floats only: what casts and copies use. Anything else is an error naming the op.
template <class F>
decltype(auto) dispatch_float8(DType t, const char* op, F&& fn) {
  switch (t) {
    case DType::Float8_e4m3fn:
      return fn.template operator()<Float8_e4m3fn>();
    case DType::Float8_e5m2:
      return fn.template operator()<Float8_e5m2>();
    case DType::Float8_e8m0fnu:
      return fn.template operator()<Float8_e8m0fnu>();
    default:
      TC_FAIL(op, "expected an 8-bit float dtype, got ", dtype_name(t));
  }
}

/// Floating dtypes only; anything else is an error naming the op.
template <class F>
decltype(auto) dispatch_floating(DType t, const char* op, F&& fn) {
  switch (t) {
    case DType::Float32:
      return fn.template operator()<float>();
    case DType::Float16:
      return fn.template operator()<Half>();
    case DType::BFloat16:
      return fn.template operator()<BFloat16>();
    case DType::Float64:
      return fn.template operator()<double>();
    default:
      if (is_float8(t)) fail_float8_op(op, t);
      TC_FAIL(op, "expected a floating dtype, got ", dtype_name(t));
  }
}

}  // namespace tc
