/// \file
/// tc::Float8_e4m3fn, tc::Float8_e5m2 and tc::Float8_e8m0fnu: the OCP 8-bit floats, stored as
/// raw bits, with PyTorch's names (c10::Float8_*) and PyTorch's conversions.
///
/// - E4M3 ("fn": finite, NaN): 1 sign, 4 exponent (bias 7), 3 mantissa bits; largest 448,
///   no infinity, NaN = S.1111.111. From float: round to nearest even; beyond the range
///   (infinities included) ±448, as PyTorch's `.to(torch.float8_e4m3fn)`; NaN stays NaN.
/// - E5M2: 1 sign, 5 exponent (bias 15), 2 mantissa bits; largest 57344, IEEE infinities and
///   NaNs. From float: round to nearest even, so from 61440 on ±inf, as PyTorch's
///   `.to(torch.float8_e5m2)`; `float8_e5m2_saturated` gives ±57344 there instead (infinities
///   too): the cast the fp8 recipes take for gradients, as Transformer Engine's satfinite.
/// - E8M0 ("fnu": finite, NaN, unsigned): a power of two 2^(e-127), e = 0..254; 0xff is NaN.
///   The MX formats' scale. From float: the sign is dropped, the exponent rounded to nearest
///   (ties to even on the implied bit), and infinities and NaN give NaN, as PyTorch's.
///
/// Widening to float is exact. NaN widens as PyTorch widens it: E4M3's to ±0x7ff00000,
/// E5M2's quieted (its payload bits kept, bit 22 set), E8M0's to 0x7f800001.
/// Arithmetic goes through float.
#pragma once
#include <bit>
#include <cstdint>
#include <iosfwd>

namespace tc {
namespace detail {

/// The magnitude code of the finite float |f| (bits `ax`, below the format's overflow) in a
/// format with kMan mantissa bits and exponent bias kBias, rounded to nearest even. Codes run
/// in order of value, so a value that rounds past the largest normal gives the next code
/// (which the callers treat as overflow).
template <int kMan, int kBias>
constexpr uint32_t fp8_round_magnitude(uint32_t ax) noexcept {
  constexpr uint32_t kMinNormal = static_cast<uint32_t>(127 - kBias + 1) << 23;  // 2^(1 - bias)
  if (ax >= kMinNormal) {
    constexpr int kShift = 23 - kMan;
    uint32_t v = ax - (static_cast<uint32_t>(127 - kBias) << 23);  // rebias the exponent
    v += (1u << (kShift - 1)) - 1u + ((v >> kShift) & 1u);         // round to nearest, ties to even
    return v >> kShift;
  }
  // A subnormal code counts units of 2^(1 - bias - kMan): the significand (with its
  // implicit bit where the float is normal) shifted right by what that unit lacks.
  const uint32_t exp = ax >> 23;
  const uint32_t sig = exp == 0 ? (ax & 0x7fffffu) : ((ax & 0x7fffffu) | 0x800000u);
  const uint32_t shift = static_cast<uint32_t>(127 + 23 + 1 - kBias - kMan) - (exp == 0 ? 1u : exp);
  if (shift > 24) return 0;  // below half the smallest subnormal
  const uint32_t r = sig >> shift, rem = sig & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  return r + ((rem > half || (rem == half && (r & 1u))) ? 1u : 0u);
}

constexpr uint8_t float_to_e4m3fn_bits(float f) noexcept {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const auto sign = static_cast<uint8_t>((x >> 24) & 0x80u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return sign | 0x7fu;   // NaN
  if (ax >= 0x43e00000u) return sign | 0x7eu;  // >= 448 (infinity too): the largest
  return static_cast<uint8_t>(sign | fp8_round_magnitude<3, 7>(ax));
}

constexpr uint8_t float_to_e5m2_bits(float f, bool saturate = false) noexcept {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const auto sign = static_cast<uint8_t>((x >> 24) & 0x80u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return sign | 0x7fu;                           // NaN
  if (saturate && ax >= 0x47600000u) return sign | 0x7bu;              // >= 57344: the largest
  if (ax >= 0x47800000u) return sign | 0x7cu;                          // >= 65536 (infinity too): infinity
  return static_cast<uint8_t>(sign | fp8_round_magnitude<2, 15>(ax));  // from 61440 on: 0x7c
}

constexpr uint8_t float_to_e8m0fnu_bits(float f) noexcept {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t exp = (x >> 23) & 0xffu;
  if (exp == 0xffu) return 0xffu;  // infinity, NaN
  // Up at the halfway point and past it; a tie (bit 22 alone) goes up where the implied
  // bit is 1 (a normal float), so that 1.5 * 2^e gives 2^(e+1) and a subnormal's tie 0.
  const bool half = (x & 0x400000u) != 0, rest = (x & 0x3fffffu) != 0;
  return static_cast<uint8_t>(exp + ((half && (rest || exp > 0)) ? 1u : 0u));  // 254 + 1: NaN
}

/// The value of a code that is neither NaN nor infinity, exactly, in a format with kMan
/// mantissa bits and exponent bias kBias.
template <int kMan, int kBias>
constexpr float fp8_finite_to_float(uint8_t b) noexcept {
  const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
  const uint32_t exp = (b & 0x7fu) >> kMan, man = b & ((1u << kMan) - 1u);
  if (exp == 0) {  // subnormal: man units of 2^(1 - bias - kMan), normalized for float
    if (man == 0) return std::bit_cast<float>(sign);
    const uint32_t p = static_cast<uint32_t>(std::bit_width(man)) - 1u;  // the leading bit
    return std::bit_cast<float>(sign | ((p + 127u + 1u - kBias - kMan) << 23) | ((man << (23u - p)) & 0x7fffffu));
  }
  return std::bit_cast<float>(sign | ((exp + 127u - kBias) << 23) | (man << (23 - kMan)));
}

constexpr float e4m3fn_bits_to_float(uint8_t b) noexcept {
  if ((b & 0x7fu) == 0x7fu) return std::bit_cast<float>((static_cast<uint32_t>(b & 0x80u) << 24) | 0x7ff00000u);
  return fp8_finite_to_float<3, 7>(b);
}

constexpr float e5m2_bits_to_float(uint8_t b) noexcept {
  if ((b & 0x7cu) == 0x7cu) {  // infinity, or NaN quieted
    const uint32_t man = b & 0x3u;
    return std::bit_cast<float>((static_cast<uint32_t>(b & 0x80u) << 24) | 0x7f800000u | (man << 21) |
                                (man ? 0x400000u : 0u));
  }
  return fp8_finite_to_float<2, 15>(b);
}

constexpr float e8m0fnu_bits_to_float(uint8_t b) noexcept {
  if (b == 0xffu) return std::bit_cast<float>(0x7f800001u);
  if (b == 0) return std::bit_cast<float>(0x00400000u);  // 2^-127, a float subnormal
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 23);
}

}  // namespace detail

/// Defines an 8-bit float type T over the bit conversions FROM and TO.
#define TC_FLOAT8_TYPE(T, FROM, TO)                                             \
  struct alignas(1) T {                                                         \
    uint8_t x = 0; /**< the raw bits */                                         \
    /** Tag for from_bits: the argument is the raw bit pattern. */              \
    struct from_bits_t {};                                                      \
    T() = default;                                                              \
    /** Rounds as PyTorch's cast (see float8.h). */                             \
    constexpr T(float f) noexcept : x(detail::FROM(f)) {}                       \
    /** The raw bit pattern `bits`. */                                          \
    constexpr T(uint8_t bits, from_bits_t) noexcept : x(bits) {}                \
    /** The exact value as a float. */                                          \
    constexpr operator float() const noexcept { return detail::TO(x); }         \
    /** The type of raw-bit construction. */                                    \
    static constexpr from_bits_t from_bits() noexcept { return from_bits_t{}; } \
  };                                                                            \
  /** Bitwise equality of the codes (a NaN code equals itself). */              \
  constexpr bool same_bits(T a, T b) noexcept { return a.x == b.x; }            \
  /** Prints the value as a float. */                                           \
  std::ostream& operator<<(std::ostream& os, T v);

/// E4M3 with NaN and no infinity (torch.float8_e4m3fn).
TC_FLOAT8_TYPE(Float8_e4m3fn, float_to_e4m3fn_bits, e4m3fn_bits_to_float)
/// E5M2 with IEEE infinities and NaNs (torch.float8_e5m2).
TC_FLOAT8_TYPE(Float8_e5m2, float_to_e5m2_bits, e5m2_bits_to_float)
/// E8M0, a power of two or NaN: the MX formats' scale (torch.float8_e8m0fnu).
TC_FLOAT8_TYPE(Float8_e8m0fnu, float_to_e8m0fnu_bits, e8m0fnu_bits_to_float)
#undef TC_FLOAT8_TYPE

/// `f` in E5M2, ±57344 past the range and for infinities (NaN stays NaN): the saturating
/// cast the fp8 recipes use for gradients, where PyTorch's `.to()` gives infinity.
constexpr Float8_e5m2 float8_e5m2_saturated(float f) noexcept {
  return Float8_e5m2(detail::float_to_e5m2_bits(f, true), Float8_e5m2::from_bits());
}

}  // namespace tc
