/// \file
/// tc::BFloat16 and tc::Half: 16-bit floating scalars stored as raw bits.
///
/// Conversions from float round to nearest even; NaN stays NaN (made quiet, sign and top
/// payload bits kept); infinities and signed zeros are preserved; subnormals are exact
/// (fp16) and IEEE (bf16 -- no flush to zero). Widening to float is exact and keeps NaN
/// payloads bit for bit. Arithmetic goes through float, as in PyTorch.
/// These scalar routines are the reference every vectorized path (convert.h) must match.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include <iosfwd>
#include <limits>

namespace tc {
namespace detail {

constexpr uint16_t float_to_bf16_bits(float f) noexcept {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
  return static_cast<uint16_t>(u >> 16);
}

constexpr float bf16_bits_to_float(uint16_t b) noexcept { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

constexpr uint16_t float_to_half_bits(float f) noexcept {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u)  // NaN: quiet it, keep the top payload bits
    return static_cast<uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 -> inf
  if (ax < 0x38800000u) {                                               // below 2^-14
    if (ax < 0x33000000u) return static_cast<uint16_t>(sign);           // <= 2^-25 -> 0
    const uint32_t e = ax >> 23;
    const uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - e;  // 14..24
    uint32_t r = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (r & 1u))) ++r;  // may carry into the smallest normal
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t v = ax - (112u << 23);  // rebias the exponent from 127 to 15
  v += 0x0fffu + ((v >> 13) & 1u);
  return static_cast<uint16_t>(sign | (v >> 13));
}

constexpr float half_bits_to_float(uint16_t h) noexcept {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0x1fu) return std::bit_cast<float>(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    if (man == 0) return std::bit_cast<float>(sign);
    const uint32_t p = static_cast<uint32_t>(std::bit_width(man)) - 1u;  // leading bit, 0..9
    return std::bit_cast<float>(sign | ((p + 103u) << 23) | ((man << (23u - p)) & 0x7fffffu));
  }
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (man << 13));
}

}  // namespace detail

/// bfloat16: the top 16 bits of a float32 (8 exponent bits, 7 mantissa bits), stored as raw bits.
struct alignas(2) BFloat16 {
  uint16_t bits = 0;  ///< the raw bits
  struct from_bits_t {};
  constexpr BFloat16() = default;
  /// From raw bits (see from_bits).
  constexpr BFloat16(uint16_t b, from_bits_t) noexcept : bits(b) {}
  /// Rounds f to nearest even (NaN stays NaN).
  constexpr BFloat16(float f) noexcept : bits(detail::float_to_bf16_bits(f)) {}  // NOLINT
  /// Widens exactly.
  constexpr operator float() const noexcept { return detail::bf16_bits_to_float(bits); }  // NOLINT
  /// The value whose raw bits are b.
  static constexpr BFloat16 from_bits(uint16_t b) noexcept { return {b, from_bits_t{}}; }
};

/// IEEE float16 (5 exponent bits, 10 mantissa bits), stored as raw bits.
struct alignas(2) Half {
  uint16_t bits = 0;  ///< the raw bits
  struct from_bits_t {};
  constexpr Half() = default;
  /// From raw bits (see from_bits).
  constexpr Half(uint16_t b, from_bits_t) noexcept : bits(b) {}
  /// Rounds f to nearest even (overflow to inf, subnormals exact, NaN stays NaN).
  constexpr Half(float f) noexcept : bits(detail::float_to_half_bits(f)) {}  // NOLINT
  /// Widens exactly.
  constexpr operator float() const noexcept { return detail::half_bits_to_float(bits); }  // NOLINT
  /// The value whose raw bits are b.
  static constexpr Half from_bits(uint16_t b) noexcept { return {b, from_bits_t{}}; }
};

/// Arithmetic through float (the result rounds back on assignment to a 16-bit variable).
#define TC_HALF_ARITH(T)                                                 \
  inline float operator+(T a, T b) { return float(a) + float(b); }       \
  inline float operator-(T a, T b) { return float(a) - float(b); }       \
  inline float operator*(T a, T b) { return float(a) * float(b); }       \
  inline float operator/(T a, T b) { return float(a) / float(b); }       \
  inline float operator-(T a) { return -float(a); }                      \
  inline T& operator+=(T& a, T b) { return a = T(float(a) + float(b)); } \
  inline T& operator-=(T& a, T b) { return a = T(float(a) - float(b)); } \
  inline T& operator*=(T& a, T b) { return a = T(float(a) * float(b)); } \
  inline T& operator/=(T& a, T b) { return a = T(float(a) / float(b)); } \
  inline bool operator==(T a, T b) { return float(a) == float(b); }      \
  inline bool operator<(T a, T b) { return float(a) < float(b); }        \
  inline bool operator>(T a, T b) { return float(a) > float(b); }        \
  inline bool operator<=(T a, T b) { return float(a) <= float(b); }      \
  inline bool operator>=(T a, T b) { return float(a) >= float(b); }
TC_HALF_ARITH(BFloat16)
TC_HALF_ARITH(Half)
#undef TC_HALF_ARITH

/// Rounds a double to a 16-bit type once (double -> float -> 16-bit would round twice).
/// The double is first rounded to float with round-to-odd, which float's 13+ spare bits
/// make exact for the following round-to-nearest-even step. The round-to-odd step is done
/// in integers: a cast would follow MXCSR, and with FTZ set it flushes the float subnormal
/// range to zero, losing bf16 subnormals (e.g. 1e-39 gave 0x0000 instead of 0x000b).
template <class D>
constexpr D round_double_to(double d) noexcept {
  const uint64_t x = std::bit_cast<uint64_t>(d);
  const uint32_t sign = static_cast<uint32_t>(x >> 32) & 0x80000000u;
  const int e = static_cast<int>((x >> 52) & 0x7ffu);  // biased double exponent
  const uint64_t man = x & 0xfffffffffffffull;
  uint32_t f;
  if (e == 0x7ff) {  // inf, or NaN made quiet keeping the top payload bits (as a cast does)
    f = 0x7f800000u | (man ? 0x400000u | static_cast<uint32_t>(man >> 29) : 0u);
  } else if (e > 1023 + 127) {  // |d| >= 2^128: the largest (odd) float, which rounds to inf
    f = 0x7f7fffffu;
  } else if (e >= 1023 - 126) {  // float normal range
    f = (static_cast<uint32_t>(e - 1023 + 127) << 23) | static_cast<uint32_t>(man >> 29) |
        ((man & 0x1fffffffu) != 0 ? 1u : 0u);
  } else {  // float subnormal range or below, in units of 2^-149
    const uint64_t sig = e != 0 ? man | (1ull << 52) : man;
    const int shift = 926 - (e != 0 ? e : 1);  // >= 30
    const uint64_t kept = shift < 64 ? sig >> shift : 0;
    const bool inexact = shift < 64 ? (sig & ((1ull << shift) - 1)) != 0 : sig != 0;
    f = static_cast<uint32_t>(kept) | (inexact ? 1u : 0u);
  }
  return D(std::bit_cast<float>(sign | f));
}

/// Writes the value as a float.
std::ostream& operator<<(std::ostream& os, BFloat16 v);
/// Writes the value as a float.
std::ostream& operator<<(std::ostream& os, Half v);

}  // namespace tc

namespace std {

template <>
class numeric_limits<tc::BFloat16> {
  using T = tc::BFloat16;

 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr bool has_signaling_NaN = true;
  static constexpr float_denorm_style has_denorm = denorm_present;
  static constexpr bool has_denorm_loss = false;
  static constexpr float_round_style round_style = round_to_nearest;
  static constexpr bool is_iec559 = false;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr int digits = 8;
  static constexpr int digits10 = 2;
  static constexpr int max_digits10 = 4;
  static constexpr int radix = 2;
  static constexpr int min_exponent = -125;
  static constexpr int min_exponent10 = -37;
  static constexpr int max_exponent = 128;
  static constexpr int max_exponent10 = 38;
  static constexpr bool traps = false;
  static constexpr bool tinyness_before = false;
  static constexpr T min() noexcept { return T::from_bits(0x0080); }
  static constexpr T lowest() noexcept { return T::from_bits(0xff7f); }
  static constexpr T max() noexcept { return T::from_bits(0x7f7f); }
  static constexpr T epsilon() noexcept { return T::from_bits(0x3c00); }  ///< 2^-7
  static constexpr T round_error() noexcept { return T::from_bits(0x3f00); }
  static constexpr T infinity() noexcept { return T::from_bits(0x7f80); }
  static constexpr T quiet_NaN() noexcept { return T::from_bits(0x7fc0); }
  static constexpr T signaling_NaN() noexcept { return T::from_bits(0x7f81); }
  static constexpr T denorm_min() noexcept { return T::from_bits(0x0001); }
};

template <>
class numeric_limits<tc::Half> {
  using T = tc::Half;

 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr bool has_signaling_NaN = true;
  static constexpr float_denorm_style has_denorm = denorm_present;
  static constexpr bool has_denorm_loss = false;
  static constexpr float_round_style round_style = round_to_nearest;
  static constexpr bool is_iec559 = true;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr int digits = 11;
  static constexpr int digits10 = 3;
  static constexpr int max_digits10 = 5;
  static constexpr int radix = 2;
  static constexpr int min_exponent = -13;
  static constexpr int min_exponent10 = -4;
  static constexpr int max_exponent = 16;
  static constexpr int max_exponent10 = 4;
  static constexpr bool traps = false;
  static constexpr bool tinyness_before = false;
  static constexpr T min() noexcept { return T::from_bits(0x0400); }
  static constexpr T lowest() noexcept { return T::from_bits(0xfbff); }
  static constexpr T max() noexcept { return T::from_bits(0x7bff); }
  static constexpr T epsilon() noexcept { return T::from_bits(0x1400); }  ///< 2^-10
  static constexpr T round_error() noexcept { return T::from_bits(0x3800); }
  static constexpr T infinity() noexcept { return T::from_bits(0x7c00); }
  static constexpr T quiet_NaN() noexcept { return T::from_bits(0x7e00); }
  static constexpr T signaling_NaN() noexcept { return T::from_bits(0x7d00); }
  static constexpr T denorm_min() noexcept { return T::from_bits(0x0001); }
};

}  // namespace std
