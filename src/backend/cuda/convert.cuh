// Internal (nvcc only): element conversions on the device with the CPU's rules
// (backend/cpu/loops/elementwise.cpp's load_block/store_block): values widen to a compute type C
// (float, or double when a dtype is float64/int64/int32) and are stored with
// tensorcast/half.h's rounding, so either device gives the same bits.
#pragma once
#include <bit>
#include <cstdint>
#include <type_traits>

#include "tensorcast/dtype.h"
#include "tensorcast/half.h"

namespace tc::gpu {

template <class T>
constexpr bool wide_compute = std::is_same_v<T, double> || std::is_same_v<T, int64_t> || std::is_same_v<T, int32_t>;

// float <-> double keeping a NaN's sign and payload (quieted), as x86's cvtss2sd/cvtsd2ss
// do on the CPU; the GPU's own conversions give one canonical NaN.
__host__ __device__ __forceinline__ double widen_nan_exact(float f) {
  if (f == f) return static_cast<double>(f);
  const uint32_t u = std::bit_cast<uint32_t>(f);
  return std::bit_cast<double>((static_cast<uint64_t>(u & 0x80000000u) << 32) | 0x7ff8000000000000ull |
                               (static_cast<uint64_t>(u & 0x7fffffu) << 29));
}
__host__ __device__ __forceinline__ float narrow_nan_exact(double d) {
  if (d == d) return static_cast<float>(d);
  const uint64_t u = std::bit_cast<uint64_t>(d);
  return std::bit_cast<float>(static_cast<uint32_t>(u >> 32 & 0x80000000u) | 0x7fc00000u |
                              static_cast<uint32_t>(u >> 29 & 0x7fffffu));
}
// A float widened to the compute type C.
template <class C>
__host__ __device__ __forceinline__ C widen(float f) {
  if constexpr (std::is_same_v<C, double>)
    return widen_nan_exact(f);
  else
    return static_cast<C>(f);
}

template <class D, class C>
__host__ __device__ __forceinline__ D store_as(C v) {
  if constexpr (std::is_same_v<D, bool>)
    return v != C(0);
  else if constexpr (std::is_integral_v<D>)
    return static_cast<D>(static_cast<int64_t>(v));
  else if constexpr (std::is_same_v<C, double> && (std::is_same_v<D, BFloat16> || std::is_same_v<D, Half>))
    return round_double_to<D>(v);  // one rounding, not two through float
  else if constexpr (std::is_same_v<C, double> && std::is_same_v<D, float>)
    return narrow_nan_exact(v);
  else
    return static_cast<D>(v);
}

template <class D, class S>
__host__ __device__ __forceinline__ D convert_value(S s) {
  if constexpr (std::is_same_v<D, S>) {
    return s;
  } else {
    using C = std::conditional_t<wide_compute<D> || wide_compute<S>, double, float>;
    if constexpr (std::is_same_v<S, BFloat16> || std::is_same_v<S, Half>)
      return store_as<D>(widen<C>(static_cast<float>(s)));
    else if constexpr (std::is_same_v<S, float>)
      return store_as<D>(widen<C>(s));
    else
      return store_as<D>(static_cast<C>(s));
  }
}

// An element of runtime dtype `dt` at p, widened to C (the pointwise kernels' operands
// may each have any dtype: a switch, uniform across a launch, so no divergence).
template <class C>
__device__ __forceinline__ C load_as(const char* p, DType dt) {
  switch (dt) {
    case DType::Float32:
      return widen<C>(*reinterpret_cast<const float*>(p));
    case DType::Float16:
      return widen<C>(static_cast<float>(*reinterpret_cast<const Half*>(p)));
    case DType::BFloat16:
      return widen<C>(static_cast<float>(*reinterpret_cast<const BFloat16*>(p)));
    case DType::Float64:
      return static_cast<C>(*reinterpret_cast<const double*>(p));
    case DType::Int64:
      return static_cast<C>(*reinterpret_cast<const int64_t*>(p));
    case DType::Int32:
      return static_cast<C>(*reinterpret_cast<const int32_t*>(p));
    case DType::UInt8:
      return static_cast<C>(*reinterpret_cast<const uint8_t*>(p));
    case DType::Bool:
      return static_cast<C>(*reinterpret_cast<const bool*>(p) ? 1 : 0);
  }
  return C(0);
}

// v rounded into an element of runtime dtype `dt` at p.
template <class C>
__device__ __forceinline__ void store_from(char* p, DType dt, C v) {
  switch (dt) {
    case DType::Float32:
      *reinterpret_cast<float*>(p) = store_as<float>(v);
      return;
    case DType::Float16:
      *reinterpret_cast<Half*>(p) = store_as<Half>(v);
      return;
    case DType::BFloat16:
      *reinterpret_cast<BFloat16*>(p) = store_as<BFloat16>(v);
      return;
    case DType::Float64:
      *reinterpret_cast<double*>(p) = store_as<double>(v);
      return;
    case DType::Int64:
      *reinterpret_cast<int64_t*>(p) = store_as<int64_t>(v);
      return;
    case DType::Int32:
      *reinterpret_cast<int32_t*>(p) = store_as<int32_t>(v);
      return;
    case DType::UInt8:
      *reinterpret_cast<uint8_t*>(p) = store_as<uint8_t>(v);
      return;
    case DType::Bool:
      *reinterpret_cast<bool*>(p) = store_as<bool>(v);
      return;
  }
}

}  // namespace tc::gpu
