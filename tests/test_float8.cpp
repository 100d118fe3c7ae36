// The 8-bit floats of tensorcast/float8.h against float64 references written from the
// formats' definitions: every code decodes to its value, and floats encode to the nearest
// value with ties to even under PyTorch's rules past the range. The comparison with
// PyTorch's own casts over all 2^32 floats is tests/torch/float8_against_pytorch.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "tensorcast/float8.h"

namespace {

using tc::Float8_e4m3fn;
using tc::Float8_e5m2;
using tc::Float8_e8m0fnu;

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }

// The value of a sign / exponent / mantissa code with the given field widths and bias, in
// float64 (no NaN or infinity handling: the callers do that).
double code_value(uint8_t code, int exp_bits, int man_bits, int bias) {
  const int exp = (code >> man_bits) & ((1 << exp_bits) - 1), man = code & ((1 << man_bits) - 1);
  const double frac = static_cast<double>(man) / (1 << man_bits);
  const double mag = exp == 0 ? std::ldexp(frac, 1 - bias) : std::ldexp(1.0 + frac, exp - bias);
  return (code & 0x80) ? -mag : mag;
}

TEST(Float8, E4m3fnCodesDecodeToTheirValues) {
  for (int c = 0; c < 256; ++c) {
    const float f = Float8_e4m3fn(static_cast<uint8_t>(c), Float8_e4m3fn::from_bits());
    if ((c & 0x7f) == 0x7f) {  // the one NaN pattern, widened as PyTorch does
      EXPECT_EQ(bits(f), (c & 0x80 ? 0x80000000u : 0u) | 0x7ff00000u) << c;
      continue;
    }
    const double v = code_value(static_cast<uint8_t>(c), 4, 3, 7);
    EXPECT_EQ(bits(f), bits(static_cast<float>(v))) << "code " << c << " value " << v;
  }
  EXPECT_EQ(static_cast<float>(Float8_e4m3fn(0x7e, Float8_e4m3fn::from_bits())), 448.0f);
  EXPECT_EQ(static_cast<float>(Float8_e4m3fn(0x01, Float8_e4m3fn::from_bits())), std::ldexp(1.0f, -9));
}

TEST(Float8, E5m2CodesDecodeToTheirValues) {
  for (int c = 0; c < 256; ++c) {
    const float f = Float8_e5m2(static_cast<uint8_t>(c), Float8_e5m2::from_bits());
    const uint32_t sign = c & 0x80 ? 0x80000000u : 0u;
    if ((c & 0x7c) == 0x7c) {  // infinity, or NaN quieted with its payload kept
      const uint32_t man = c & 3;
      EXPECT_EQ(bits(f), sign | 0x7f800000u | (man << 21) | (man ? 0x400000u : 0u)) << c;
      continue;
    }
    const double v = code_value(static_cast<uint8_t>(c), 5, 2, 15);
    EXPECT_EQ(bits(f), bits(static_cast<float>(v))) << "code " << c << " value " << v;
  }
  EXPECT_EQ(static_cast<float>(Float8_e5m2(0x7b, Float8_e5m2::from_bits())), 57344.0f);
}

TEST(Float8, E8m0fnuCodesArePowersOfTwo) {
  for (int c = 0; c < 255; ++c) {
    const float f = Float8_e8m0fnu(static_cast<uint8_t>(c), Float8_e8m0fnu::from_bits());
    EXPECT_EQ(static_cast<double>(f), std::ldexp(1.0, c - 127)) << c;
  }
  EXPECT_EQ(bits(Float8_e8m0fnu(0xff, Float8_e8m0fnu::from_bits())), 0x7f800001u);
}

// float64 references of the casts from float. round_to(a, man_bits, min_exp): the
// non-negative a rounded to man_bits mantissa bits, to nearest with ties to even, with the
// quantum of the smallest normal exponent below it (subnormals).
double round_to(double a, int man_bits, int min_exp) {
  int e = 0;
  (void)std::frexp(a, &e);  // a = m 2^e, m in [0.5, 1): the leading bit is 2^(e-1)
  const double quantum = std::ldexp(1.0, std::max(e - 1, min_exp) - man_bits);
  return std::nearbyint(a / quantum) * quantum;  // the default rounding mode: ties to even
}

// What the cast of f must widen back to (NaN: any NaN of f's sign; checked apart).
double e4m3fn_reference(float f) {
  const double a = std::fabs(static_cast<double>(f));
  return std::copysign(a >= 448.0 ? 448.0 : round_to(a, 3, -6), f);  // saturates, infinity too
}
double e5m2_reference(float f, bool saturate) {
  const double a = std::fabs(static_cast<double>(f));
  const double r = std::isinf(a) ? a : round_to(a, 2, -14);
  const double past = saturate ? 57344.0 : INFINITY;
  return std::copysign(r > 57344.0 ? past : r, f);
}
double e8m0fnu_reference(float f) {  // a power of two, or NaN (returned for 2^128 and up)
  const double a = std::fabs(static_cast<double>(f));
  if (a < 0x1p-126) return a > 0x1p-127 ? 0x1p-126 : 0x1p-127;  // zero and the subnormals
  int e = 0;
  const double m = 2 * std::frexp(a, &e);  // a = m 2^(e-1), m in [1, 2)
  const double r = std::ldexp(1.0, m >= 1.5 ? e : e - 1);
  return r > 0x1p127 ? NAN : r;
}

// Checks one float against every reference; returns a description of the first mismatch.
std::string check(uint32_t pattern) {
  const float f = std::bit_cast<float>(pattern);
  std::ostringstream why;
  const auto expect = [&](const char* name, float got, double want, bool nan) {
    if (nan ? std::isnan(got) : (bits(got) == bits(static_cast<float>(want)))) return true;
    why << name << " of 0x" << std::hex << pattern << std::dec << " (" << f << "): " << got << ", want "
        << (nan ? NAN : want);
    return false;
  };
  const bool nan = std::isnan(f);
  const bool ok = expect("e4m3fn", Float8_e4m3fn(f), nan ? 0 : e4m3fn_reference(f), nan) &&
                  expect("e5m2", Float8_e5m2(f), nan ? 0 : e5m2_reference(f, false), nan) &&
                  expect("e5m2 saturated", tc::float8_e5m2_saturated(f), nan ? 0 : e5m2_reference(f, true), nan);
  if (!ok) return why.str();
  const double e8 = std::isnan(f) || std::isinf(f) ? NAN : e8m0fnu_reference(f);
  if (!expect("e8m0fnu", Float8_e8m0fnu(f), e8, std::isnan(e8))) return why.str();
  // The sign of an E4M3 or E5M2 NaN is the input's, as PyTorch keeps it.
  if (nan && ((Float8_e4m3fn(f).x ^ (pattern >> 24)) & 0x80)) return "e4m3fn NaN lost its sign";
  return "";
}

// Every float whose low 12 mantissa bits are 0, 1 or all ones: each 8-bit value, each
// midpoint between two neighbours and the floats either side of it, at every exponent; and
// every 1021st float besides.
TEST(Float8, CastsFromFloatMatchTheFloat64References) {
  std::vector<uint32_t> patterns;
  for (uint64_t hi = 0; hi < (uint64_t{1} << 20); ++hi)
    for (uint32_t lo : {0u, 1u, 0xfffu}) patterns.push_back(static_cast<uint32_t>(hi << 12) | lo);
  for (uint64_t p = 0; p < (uint64_t{1} << 32); p += 1021) patterns.push_back(static_cast<uint32_t>(p));
  int failures = 0;
  for (uint32_t p : patterns) {
    const std::string why = check(p);
    if (!why.empty() && ++failures <= 10) ADD_FAILURE() << why;
  }
  EXPECT_EQ(failures, 0) << "of " << patterns.size() << " floats";
}

TEST(Float8, CastsAtTheEdgesOfTheRange) {
  EXPECT_EQ(Float8_e4m3fn(448.0f).x, 0x7e);
  EXPECT_EQ(Float8_e4m3fn(470.0f).x, 0x7e);  // PyTorch saturates where RNE would give 480
  EXPECT_EQ(Float8_e4m3fn(-INFINITY).x, 0xfe);
  EXPECT_EQ(Float8_e4m3fn(NAN).x, 0x7f);
  EXPECT_EQ(Float8_e4m3fn(std::ldexp(1.0f, -10)).x, 0x00);  // half the smallest subnormal: to even
  EXPECT_EQ(Float8_e4m3fn(std::ldexp(1.5f, -9)).x, 0x02);   // 1.5 units: to even
  EXPECT_EQ(Float8_e5m2(61440.0f).x, 0x7c);                 // the midpoint past 57344 ties to infinity
  EXPECT_EQ(Float8_e5m2(61439.0f).x, 0x7b);
  EXPECT_EQ(tc::float8_e5m2_saturated(INFINITY).x, 0x7b);
  EXPECT_EQ(tc::float8_e5m2_saturated(-1e30f).x, 0xfb);
  EXPECT_EQ(Float8_e8m0fnu(3.0f).x, 129);   // 1.5 * 2^1: up
  EXPECT_EQ(Float8_e8m0fnu(-1.0f).x, 127);  // the sign is dropped
  EXPECT_EQ(Float8_e8m0fnu(0.0f).x, 0);
  EXPECT_EQ(Float8_e8m0fnu(std::ldexp(1.75f, 127)).x, 0xff);  // rounds past 2^127: NaN
  std::ostringstream os;
  os << Float8_e4m3fn(0.3f) << " " << Float8_e5m2(-3.0f) << " " << Float8_e8m0fnu(0.25f);
  EXPECT_EQ(os.str(), "0.3125 -3 0.25");
}

}  // namespace
