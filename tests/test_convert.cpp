// Tests for float <-> bfloat16 / float16 conversion: the scalar reference in half.h
// against independent exact references, every bulk path in convert.h against the
// reference (bit for bit), tails and unaligned buffers, MXCSR independence, and
// round_double_to against exact integer rounding.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <ostream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tensorcast/convert.h"
#include "tensorcast/cpu_features.h"
#include "tensorcast/half.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#define TC_TEST_HAS_MXCSR 1
#endif
#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace tc {

// Test names and failure messages show the path's name, not its byte value.
void PrintTo(ConvertPath p, std::ostream* os) { *os << convert_path_name(p); }

namespace {

static_assert(sizeof(BFloat16) == 2 && sizeof(Half) == 2);
static_assert(round_double_to<BFloat16>(1.0).bits == 0x3f80);
static_assert(round_double_to<Half>(65520.0).bits == 0x7c00);

// ---- the two formats, described independently of half.h -----------------------------

template <class T>
struct Format;
template <>
struct Format<BFloat16> {
  static constexpr const char* kName = "bf16";
  static constexpr int kMant = 7, kExp = 8;
  static void narrow(const float* s, BFloat16* d, int64_t n, ConvertPath p) { float_to_bf16(s, d, n, p); }
  static void widen(const BFloat16* s, float* d, int64_t n, ConvertPath p) { bf16_to_float(s, d, n, p); }
  static uint16_t ref_narrow(float f) { return detail::float_to_bf16_bits(f); }
  static uint32_t ref_widen(uint16_t b) { return std::bit_cast<uint32_t>(detail::bf16_bits_to_float(b)); }
};
template <>
struct Format<Half> {
  static constexpr const char* kName = "fp16";
  static constexpr int kMant = 10, kExp = 5;
  static void narrow(const float* s, Half* d, int64_t n, ConvertPath p) { float_to_half(s, d, n, p); }
  static void widen(const Half* s, float* d, int64_t n, ConvertPath p) { half_to_float(s, d, n, p); }
  static uint16_t ref_narrow(float f) { return detail::float_to_half_bits(f); }
  static uint32_t ref_widen(uint16_t b) { return std::bit_cast<uint32_t>(detail::half_bits_to_float(b)); }
};
template <class T>
constexpr int kBias = (1 << (Format<T>::kExp - 1)) - 1;
template <class T>
constexpr uint16_t kInf = ((1u << Format<T>::kExp) - 1u) << Format<T>::kMant;
template <class T>
constexpr uint16_t kQuiet = 1u << (Format<T>::kMant - 1);
template <class T>
constexpr uint16_t kManMask = (1u << Format<T>::kMant) - 1u;

// Value of a finite non-negative pattern, from the IEEE-style field layout (exact in double).
// Pattern kInf decodes as 2^(emax+1): the "next value" past the largest finite one, which
// is where IEEE rounding to nearest puts the overflow threshold.
template <class T>
double decode(uint32_t bits) {
  const int e = static_cast<int>(bits >> Format<T>::kMant);
  const double m = static_cast<double>(bits & kManMask<T>);
  if (e == 0) return std::ldexp(m, 1 - kBias<T> - Format<T>::kMant);
  return std::ldexp(m + std::ldexp(1.0, Format<T>::kMant), e - kBias<T> - Format<T>::kMant);
}

// Independent float -> T: locate |x| between its two neighbours in the table of every
// finite value and pick the nearer (the midpoint is exact in double; ties to even bits).
template <class T>
uint16_t exact_narrow(float x) {
  static const std::vector<double> table = [] {
    std::vector<double> t(kInf<T>);
    for (uint32_t b = 0; b < kInf<T>; ++b) t[b] = decode<T>(b);
    return t;
  }();
  const uint32_t u = std::bit_cast<uint32_t>(x);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t man = u & 0x7fffffu;
  if ((u & 0x7f800000u) == 0x7f800000u) {  // inf, or NaN: quiet, top payload bits kept
    if (man == 0) return sign | kInf<T>;
    return sign | kInf<T> | kQuiet<T> | static_cast<uint16_t>(man >> (23 - Format<T>::kMant));
  }
  // |x| in double, from the fields (no float arithmetic: MXCSR cannot interfere).
  const int e = static_cast<int>((u >> 23) & 0xffu);
  const double a =
      e == 0 ? std::ldexp(static_cast<double>(man), -149) : std::ldexp(static_cast<double>(man | 0x800000u), e - 150);
  const size_t hi = static_cast<size_t>(std::upper_bound(table.begin(), table.end(), a) - table.begin());
  const size_t lo = hi - 1;  // table[0] == 0 <= a
  const double mid = (table[lo] + decode<T>(static_cast<uint32_t>(hi))) / 2;
  size_t r = a < mid ? lo : a > mid ? hi : (lo % 2 == 0 ? lo : hi);
  return sign | static_cast<uint16_t>(r);  // r == kInf<T> is infinity
}

// Independent T -> float: the value from the fields; NaN payloads copied bit for bit.
template <class T>
uint32_t exact_widen(uint16_t b) {
  const uint32_t sign = static_cast<uint32_t>(b & 0x8000u) << 16;
  const uint16_t mag = b & 0x7fffu;
  if (mag >= kInf<T>) return sign | 0x7f800000u | static_cast<uint32_t>(mag & kManMask<T>) << (23 - Format<T>::kMant);
  return sign | std::bit_cast<uint32_t>(static_cast<float>(decode<T>(mag)));
}

// ---- inputs ------------------------------------------------------------------------

// Structured float patterns: for both signs and all 256 exponents, mantissas placed just
// below, at and just above the rounding tie of every bit position, with even and odd
// kept bits; plus 0, 1, max mantissa. Exponent 255 gives inf and NaNs of many payloads;
// exponent 0 gives every subnormal boundary.
std::vector<float> structured_floats() {
  std::vector<float> v;
  std::mt19937 rng(12345);
  for (uint32_t sign = 0; sign < 2; ++sign) {
    for (uint32_t e = 0; e < 256; ++e) {
      auto push = [&](uint32_t man) { v.push_back(std::bit_cast<float>(sign << 31 | e << 23 | (man & 0x7fffffu))); };
      for (uint32_t man : {0u, 1u, 2u, 0x400000u, 0x7ffffeu, 0x7fffffu}) push(man);
      for (int k = 0; k < 23; ++k) {
        const uint32_t tie = 1u << k;
        const uint32_t above = 0x7fffffu & ~((tie << 1) - 1u);
        for (uint32_t high : {0u, tie << 1, above, static_cast<uint32_t>(rng()) & above}) {
          for (uint32_t low : {tie - 1u, tie, tie + 1u}) push(high | low);
        }
      }
    }
  }
  return v;
}

std::vector<float> random_floats(size_t n, uint64_t seed) {
  std::vector<float> v(n);
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < n; i += 2) {
    const uint64_t r = rng();
    v[i] = std::bit_cast<float>(static_cast<uint32_t>(r));
    if (i + 1 < n) v[i + 1] = std::bit_cast<float>(static_cast<uint32_t>(r >> 32));
  }
  return v;
}

std::string hex(uint32_t v, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%0*x", digits, v);
  return buf;
}

// Counts mismatches and keeps the first few for the failure message.
struct Mismatches {
  int64_t count = 0;
  std::string first;
  void add(uint32_t in, int in_digits, uint32_t got, uint32_t want, int out_digits) {
    if (count++ < 8)
      first += " [" + hex(in, in_digits) + " -> " + hex(got, out_digits) + ", want " + hex(want, out_digits) + "]";
  }
};

// ---- the reference itself against the independent exact references -----------------

template <class T>
void check_reference_narrow(const std::vector<float>& in, const char* what) {
  Mismatches m;
  for (float f : in) {
    const uint16_t want = exact_narrow<T>(f), got = Format<T>::ref_narrow(f);
    if (got != want) m.add(std::bit_cast<uint32_t>(f), 8, got, want, 4);
  }
  EXPECT_EQ(m.count, 0) << "half.h float->" << Format<T>::kName << " vs exact rounding, " << what << ":" << m.first;
}

// tc::cpu_features() against the kernel's own reading of CPUID: the flags and vendor of the
// first CPU in /proc/cpuinfo (Linux lists an extension only where the OS enables its state).
// AMX also needs this process's permission for the tile data, so it may be off where the
// flag is listed, never on where it is not.
TEST(CpuFeatures, AgreeWithTheKernelsCpuinfo) {
  std::ifstream in("/proc/cpuinfo");
  if (!in) GTEST_SKIP() << "no /proc/cpuinfo";
  std::set<std::string> flags;
  std::string vendor, line;
  while (std::getline(in, line) && (flags.empty() || vendor.empty())) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, line.find_first_of(" \t"));
    std::istringstream values(line.substr(colon + 1));
    if (key == "flags") {
      for (std::string f; values >> f;) flags.insert(f);
    } else if (key == "vendor_id") {
      values >> vendor;
    }
  }
  if (flags.empty()) GTEST_SKIP() << "/proc/cpuinfo lists no flags (not x86?)";
  const tc::CpuFeatures& f = tc::cpu_features();
  const auto has = [&](const char* name) { return flags.count(name) == 1; };
  EXPECT_EQ(f.sse4_2, has("sse4_2"));
  EXPECT_EQ(f.avx2, has("avx2"));
  EXPECT_EQ(f.f16c, has("f16c"));
  EXPECT_EQ(f.fma, has("fma"));
  EXPECT_EQ(f.avx512f, has("avx512f"));
  EXPECT_EQ(f.avx512bw, has("avx512bw"));
  EXPECT_EQ(f.avx512vl, has("avx512vl"));
  EXPECT_EQ(f.avx512_bf16, has("avx512_bf16"));
  EXPECT_EQ(f.avx512_fp16, has("avx512_fp16"));
  if (f.amx_bf16) EXPECT_TRUE(has("amx_bf16") && has("amx_tile"));
  const tc::CpuVendor expected = vendor == "GenuineIntel"   ? tc::CpuVendor::kIntel
                                 : vendor == "AuthenticAMD" ? tc::CpuVendor::kAmd
                                                            : tc::CpuVendor::kOther;
  EXPECT_EQ(f.vendor, expected) << "vendor_id " << vendor;
  EXPECT_EQ(f.fast_gather, f.avx512f && expected == tc::CpuVendor::kIntel);
}

TEST(ConvertReference, NarrowMatchesExactRoundingOnStructuredInputs) {
  const auto in = structured_floats();
  check_reference_narrow<BFloat16>(in, "structured");
  check_reference_narrow<Half>(in, "structured");
}

TEST(ConvertReference, NarrowMatchesExactRoundingOnRandomPatterns) {
  const auto in = random_floats(1u << 22, 0xC0FFEE);
  check_reference_narrow<BFloat16>(in, "random");
  check_reference_narrow<Half>(in, "random");
}

template <class T>
void check_reference_widen_all() {
  Mismatches m;
  for (uint32_t b = 0; b < 65536; ++b) {
    const uint32_t want = exact_widen<T>(static_cast<uint16_t>(b)),
                   got = Format<T>::ref_widen(static_cast<uint16_t>(b));
    if (got != want) m.add(b, 4, got, want, 8);
  }
  EXPECT_EQ(m.count, 0) << "half.h " << Format<T>::kName << "->float vs exact:" << m.first;
}

TEST(ConvertReference, WidenMatchesExactValueForAll65536Patterns) {
  check_reference_widen_all<BFloat16>();
  check_reference_widen_all<Half>();
}

// ---- every path against the reference ------------------------------------------------

class ConvertPathTest : public ::testing::TestWithParam<ConvertPath> {
 protected:
  void SetUp() override {
    if (!convert_path_available(GetParam()))
      GTEST_SKIP() << "conversion path '" << convert_path_name(GetParam()) << "' is not available on this CPU";
  }
};

// Narrows `in` on `path` and compares with the reference (and, when `exact`, with the
// independent exact rounding too).
template <class T>
void check_narrow(ConvertPath path, const std::vector<float>& in, const char* what, bool exact) {
  std::vector<T> out(in.size());
  Format<T>::narrow(in.data(), out.data(), static_cast<int64_t>(in.size()), path);
  Mismatches m, mx;
  for (size_t i = 0; i < in.size(); ++i) {
    const uint32_t u = std::bit_cast<uint32_t>(in[i]);
    const uint16_t want = Format<T>::ref_narrow(in[i]);
    if (out[i].bits != want) m.add(u, 8, out[i].bits, want, 4);
    if (exact) {
      const uint16_t want_x = exact_narrow<T>(in[i]);
      if (out[i].bits != want_x) mx.add(u, 8, out[i].bits, want_x, 4);
    }
  }
  EXPECT_EQ(m.count, 0) << "float->" << Format<T>::kName << " on " << convert_path_name(path) << ", " << what
                        << ", vs half.h:" << m.first;
  EXPECT_EQ(mx.count, 0) << "float->" << Format<T>::kName << " on " << convert_path_name(path) << ", " << what
                         << ", vs exact rounding:" << mx.first;
}

TEST_P(ConvertPathTest, NarrowRandomPatterns) {
  static const auto in = random_floats(1u << 24, 0x5EED1234);
  check_narrow<BFloat16>(GetParam(), in, "2^24 random patterns", false);
  check_narrow<Half>(GetParam(), in, "2^24 random patterns", false);
}

TEST_P(ConvertPathTest, NarrowStructuredTiesSubnormalsNaNs) {
  static const auto in = structured_floats();
  check_narrow<BFloat16>(GetParam(), in, "structured", true);
  check_narrow<Half>(GetParam(), in, "structured", true);
}

// Hand-checked values: each row is a float pattern and the pattern it must become.
struct Case {
  uint32_t in;
  uint16_t out;
  const char* why;
};

const Case kBF16Cases[] = {
    {0x00000000, 0x0000, "+0"},
    {0x80000000, 0x8000, "-0"},
    {0x7f800000, 0x7f80, "+inf"},
    {0xff800000, 0xff80, "-inf"},
    {0x00000001, 0x0000, "smallest float subnormal rounds to 0"},
    {0x00008000, 0x0000, "subnormal tie, even stays"},
    {0x00008001, 0x0001, "subnormal just above tie"},
    {0x00018000, 0x0002, "subnormal tie, odd rounds up"},
    {0x00400000, 0x0040, "float subnormal kept (VCVTNEPS2BF16 flushes it)"},
    {0x007f7fff, 0x007f, "largest subnormal below tie"},
    {0x007fffff, 0x0080, "largest float subnormal rounds to the smallest normal"},
    {0x807fffff, 0x8080, "negative, same"},
    {0x00800000, 0x0080, "smallest normal"},
    {0x3f808000, 0x3f80, "1 + 2^-8: tie to even"},
    {0x3f808001, 0x3f81, "1 + 2^-8 + 1 ulp"},
    {0x3f818000, 0x3f82, "tie, odd rounds up"},
    {0x3f817fff, 0x3f81, "just below tie"},
    {0x7f7f7fff, 0x7f7f, "largest finite, below tie"},
    {0x7f7f8000, 0x7f80, "overflow: tie above the largest finite rounds to inf"},
    {0x7f7fffff, 0x7f80, "FLT_MAX overflows to inf"},
    {0xff7f8000, 0xff80, "negative overflow to -inf"},
    {0x7f800001, 0x7fc0, "signalling NaN made quiet, low payload dropped"},
    {0x7fa00000, 0x7fe0, "signalling NaN, top payload kept"},
    {0x7fc00000, 0x7fc0, "quiet NaN"},
    {0xffc00000, 0xffc0, "negative quiet NaN keeps sign"},
    {0x7fffffff, 0x7fff, "all-ones payload"},
    {0xff812345, 0xffc1, "negative signalling NaN"},
};

const Case kF16Cases[] = {
    {0x00000000, 0x0000, "+0"},
    {0x80000000, 0x8000, "-0"},
    {0x7f800000, 0x7c00, "+inf"},
    {0xff800000, 0xfc00, "-inf"},
    {0x477fe000, 0x7bff, "65504 (largest finite)"},
    {0x477fe001, 0x7bff, "65504 + 1 float ulp"},
    {0x477fefff, 0x7bff, "just below 65520"},
    {0x477ff000, 0x7c00, "65520: tie with odd 0x7bff rounds to inf"},
    {0xc77ff000, 0xfc00, "-65520 -> -inf"},
    {0x47800000, 0x7c00, "65536"},
    {0x7f7fffff, 0x7c00, "FLT_MAX"},
    {0x00000001, 0x0000, "float subnormal -> 0"},
    {0x807fffff, 0x8000, "negative float subnormal -> -0"},
    {0x33000000, 0x0000, "2^-25: tie between 0 and 2^-24 -> 0"},
    {0x33000001, 0x0001, "just above 2^-25"},
    {0x32ffffff, 0x0000, "just below 2^-25"},
    {0x33800000, 0x0001, "2^-24: smallest subnormal"},
    {0x33c00000, 0x0002, "1.5 * 2^-24: tie, odd rounds up"},
    {0x34200000, 0x0002, "2.5 * 2^-24: tie, even stays"},
    {0x387fc000, 0x03ff, "largest subnormal"},
    {0x387fe000, 0x0400, "tie between largest subnormal and smallest normal"},
    {0x387fdfff, 0x03ff, "just below that tie"},
    {0x38800000, 0x0400, "2^-14: smallest normal"},
    {0x3f801000, 0x3c00, "1 + 2^-11: tie to even"},
    {0x3f803000, 0x3c02, "1 + 3 * 2^-11: tie, odd rounds up"},
    {0x3f801001, 0x3c01, "just above tie"},
    {0x7f800001, 0x7e00, "signalling NaN made quiet"},
    {0x7f802000, 0x7e01, "lowest kept payload bit"},
    {0x7fa00000, 0x7f00, "signalling NaN, top payload kept"},
    {0x7fc00000, 0x7e00, "quiet NaN"},
    {0xffffffff, 0xffff, "negative all-ones NaN"},
};

template <class T, size_t N>
void check_cases(ConvertPath path, const Case (&cases)[N]) {
  std::vector<float> in;
  for (const Case& c : cases) in.push_back(std::bit_cast<float>(c.in));
  std::vector<T> out(N);
  Format<T>::narrow(in.data(), out.data(), static_cast<int64_t>(N), path);
  for (size_t i = 0; i < N; ++i) {
    EXPECT_EQ(out[i].bits, cases[i].out) << Format<T>::kName << " on " << convert_path_name(path) << ": "
                                         << hex(cases[i].in, 8) << " (" << cases[i].why << ")";
    EXPECT_EQ(Format<T>::ref_narrow(in[i]), cases[i].out) << "half.h " << Format<T>::kName << ": " << cases[i].why;
  }
}

TEST_P(ConvertPathTest, NarrowHandCheckedValues) {
  check_cases<BFloat16>(GetParam(), kBF16Cases);
  check_cases<Half>(GetParam(), kF16Cases);
}

template <class T>
std::vector<T> all_patterns() {
  std::vector<T> v(65536);
  for (uint32_t b = 0; b < 65536; ++b) v[b] = T::from_bits(static_cast<uint16_t>(b));
  return v;
}

template <class T>
void check_widen_and_round_trip(ConvertPath path) {
  const std::vector<T> in = all_patterns<T>();
  std::vector<float> wide(65536);
  Format<T>::widen(in.data(), wide.data(), 65536, path);
  Mismatches m, mx, rt;
  for (uint32_t b = 0; b < 65536; ++b) {
    const uint32_t got = std::bit_cast<uint32_t>(wide[b]);
    const uint32_t want = Format<T>::ref_widen(static_cast<uint16_t>(b));
    if (got != want) m.add(b, 4, got, want, 8);
    if (got != exact_widen<T>(static_cast<uint16_t>(b))) mx.add(b, 4, got, exact_widen<T>(static_cast<uint16_t>(b)), 8);
  }
  EXPECT_EQ(m.count, 0) << Format<T>::kName << "->float on " << convert_path_name(path) << " vs half.h:" << m.first;
  EXPECT_EQ(mx.count, 0) << Format<T>::kName << "->float on " << convert_path_name(path) << " vs exact:" << mx.first;

  // Back to 16 bits on the same path. Every non-NaN pattern comes back exactly. A NaN
  // widens with its payload intact (a signalling NaN stays signalling in float), and
  // narrowing makes NaN quiet, so a NaN pattern comes back with its quiet bit set:
  // quiet NaNs unchanged, signalling NaNs as the quiet NaN with the same sign and payload.
  std::vector<T> back(65536);
  Format<T>::narrow(wide.data(), back.data(), 65536, path);
  for (uint32_t b = 0; b < 65536; ++b) {
    const bool nan = (b & 0x7fffu) > kInf<T>;
    const uint16_t want = static_cast<uint16_t>(nan ? b | kQuiet<T> : b);
    if (back[b].bits != want) rt.add(b, 4, back[b].bits, want, 4);
  }
  EXPECT_EQ(rt.count, 0) << Format<T>::kName << " round trip on " << convert_path_name(path) << ":" << rt.first;
}

TEST_P(ConvertPathTest, WidenAll65536PatternsAndRoundTrip) {
  check_widen_and_round_trip<BFloat16>(GetParam());
  check_widen_and_round_trip<Half>(GetParam());
}

TEST_P(ConvertPathTest, WidenHandCheckedValues) {
  const ConvertPath p = GetParam();
  const uint16_t h_in[] = {0x7c01, 0xfd55, 0x7e00, 0x7dff, 0x0001, 0x03ff, 0x0400, 0x7bff, 0x7c00, 0x8000};
  const uint32_t h_out[] = {0x7f802000, 0xffaaa000, 0x7fc00000, 0x7fbfe000, 0x33800000,
                            0x387fc000, 0x38800000, 0x477fe000, 0x7f800000, 0x80000000};
  std::vector<Half> h;
  for (uint16_t b : h_in) h.push_back(Half::from_bits(b));
  std::vector<float> f(h.size());
  half_to_float(h.data(), f.data(), static_cast<int64_t>(h.size()), p);
  for (size_t i = 0; i < h.size(); ++i)
    EXPECT_EQ(std::bit_cast<uint32_t>(f[i]), h_out[i])
        << "fp16 " << hex(h_in[i], 4) << " on " << convert_path_name(p) << " (a signalling NaN must stay signalling)";
  const BFloat16 b[] = {BFloat16::from_bits(0x7f81), BFloat16::from_bits(0x0001), BFloat16::from_bits(0xff80)};
  float g[3];
  bf16_to_float(b, g, 3, p);
  EXPECT_EQ(std::bit_cast<uint32_t>(g[0]), 0x7f810000u);
  EXPECT_EQ(std::bit_cast<uint32_t>(g[1]), 0x00010000u);
  EXPECT_EQ(std::bit_cast<uint32_t>(g[2]), 0xff800000u);
}

// Lengths 0..67 at every element offset 0..17 of source and destination: covers every
// misalignment mod 64 bytes, full vectors plus every tail length, and the fix-up lanes
// (the inputs are subnormals, NaNs and ties). Guard elements around the destination
// must stay untouched.
template <class T>
void check_tails(ConvertPath path) {
  const auto pool = structured_floats();
  constexpr int kMaxN = 67, kMaxOff = 17, kGuard = 40;
  constexpr uint16_t kSentinel = 0xdead;
  std::vector<float> src(kMaxN + kMaxOff), wide(kMaxN + kMaxOff + 2 * kGuard);
  std::vector<T> dst(kMaxN + kMaxOff + 2 * kGuard), hsrc(kMaxN + kMaxOff);
  int checked = 0;
  for (int n = 0; n <= kMaxN; ++n) {
    for (int off = 0; off <= kMaxOff; ++off) {
      const int doff = kGuard + (off * 7) % (kMaxOff + 1);
      for (int i = 0; i < n; ++i) src[off + i] = pool[(static_cast<size_t>(n) * 131 + i * 977) % pool.size()];
      std::fill(dst.begin(), dst.end(), T::from_bits(kSentinel));
      Format<T>::narrow(src.data() + off, dst.data() + doff, n, path);
      for (int i = 0; i < static_cast<int>(dst.size()); ++i) {
        const bool inside = i >= doff && i < doff + n;
        const uint16_t want = inside ? Format<T>::ref_narrow(src[off + i - doff]) : kSentinel;
        ASSERT_EQ(dst[i].bits, want) << "float->" << Format<T>::kName << " on " << convert_path_name(path) << " n=" << n
                                     << " src offset " << off << " dst offset " << doff << " index " << i - doff
                                     << (inside ? "" : " (outside the output: must be untouched)");
      }
      // Widening, same shape; the 16-bit source holds NaNs of both kinds and subnormals.
      for (int i = 0; i < n; ++i) hsrc[off + i] = T::from_bits(static_cast<uint16_t>((n * 7919 + i * 4099) & 0xffff));
      for (int i = 0; i < n; i += 5)
        hsrc[off + i] = T::from_bits(static_cast<uint16_t>(kInf<T> | 1 | (i % 10 == 5 ? 0x8000 : 0)));
      std::fill(wide.begin(), wide.end(), std::bit_cast<float>(0xdeadbeefu));
      Format<T>::widen(hsrc.data() + off, wide.data() + doff, n, path);
      for (int i = 0; i < static_cast<int>(wide.size()); ++i) {
        const bool inside = i >= doff && i < doff + n;
        const uint32_t want = inside ? Format<T>::ref_widen(hsrc[off + i - doff].bits) : 0xdeadbeefu;
        ASSERT_EQ(std::bit_cast<uint32_t>(wide[i]), want)
            << Format<T>::kName << "->float on " << convert_path_name(path) << " n=" << n << " index " << i - doff;
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, (kMaxN + 1) * (kMaxOff + 1));
}

TEST_P(ConvertPathTest, TailsAndUnalignedPointers) {
  check_tails<BFloat16>(GetParam());
  check_tails<Half>(GetParam());
}

#if defined(__linux__)
// Buffers that end exactly at an inaccessible page: a kernel that reads or writes even
// one element past n faults here instead of passing silently.
TEST_P(ConvertPathTest, NoAccessPastTheEnd) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* mem = mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  char* base = static_cast<char*>(mem);
  ASSERT_EQ(mprotect(base + page, page, PROT_NONE), 0);      // after region A
  ASSERT_EQ(mprotect(base + 3 * page, page, PROT_NONE), 0);  // after region B
  char* end_a = base + page;
  char* end_b = base + 3 * page;
  const ConvertPath p = GetParam();
  for (int n = 0; n <= 67; ++n) {
    auto* f = reinterpret_cast<float*>(end_a) - n;
    for (int i = 0; i < n; ++i) f[i] = static_cast<float>(i) * 0.37f - 3.0f;
    auto* bf = reinterpret_cast<BFloat16*>(end_b) - n;
    auto* hf = reinterpret_cast<Half*>(end_b) - n;
    float_to_bf16(f, bf, n, p);
    for (int i = 0; i < n; ++i) ASSERT_EQ(bf[i].bits, detail::float_to_bf16_bits(f[i]));
    float_to_half(f, hf, n, p);
    for (int i = 0; i < n; ++i) ASSERT_EQ(hf[i].bits, detail::float_to_half_bits(f[i]));
    auto* wide = reinterpret_cast<float*>(end_a) - n;
    half_to_float(hf, wide, n, p);
    for (int i = 0; i < n; ++i) ASSERT_EQ(std::bit_cast<uint32_t>(wide[i]), std::bit_cast<uint32_t>(float(hf[i])));
    float_to_bf16(wide, bf, n, p);
    bf16_to_float(bf, wide, n, p);
    for (int i = 0; i < n; ++i) ASSERT_EQ(std::bit_cast<uint32_t>(wide[i]), std::bit_cast<uint32_t>(float(bf[i])));
  }
  munmap(mem, 4 * page);
}
#endif

#if defined(TC_TEST_HAS_MXCSR)
// Sets MXCSR's rounding, FTZ and DAZ bits for a scope (exception masks untouched).
class MxcsrGuard {
 public:
  explicit MxcsrGuard(unsigned bits) : saved_(_mm_getcsr()) { _mm_setcsr((saved_ & ~0xe040u) | bits); }
  ~MxcsrGuard() { _mm_setcsr(saved_); }
  MxcsrGuard(const MxcsrGuard&) = delete;
  MxcsrGuard& operator=(const MxcsrGuard&) = delete;

 private:
  unsigned saved_;
};
constexpr unsigned kFTZ = 0x8000, kDAZ = 0x0040, kRoundDown = 0x2000, kRoundUp = 0x4000, kRoundZero = 0x6000;

// The result may not depend on MXCSR: round toward zero/up/down and FTZ/DAZ are all set
// by real programs (DAZ/FTZ by "flush denormals" switches). Expectations are computed
// first, under the default MXCSR.
template <class T>
void check_mxcsr(ConvertPath path, const std::vector<float>& in) {
  std::vector<uint16_t> want(in.size());
  for (size_t i = 0; i < in.size(); ++i) want[i] = Format<T>::ref_narrow(in[i]);
  const std::vector<T> all = all_patterns<T>();
  std::vector<uint32_t> want_wide(65536);
  for (uint32_t b = 0; b < 65536; ++b) want_wide[b] = Format<T>::ref_widen(static_cast<uint16_t>(b));
  for (unsigned mode : {kFTZ | kDAZ, kRoundDown, kRoundUp, kRoundZero, kFTZ | kDAZ | kRoundUp, kDAZ | kRoundDown}) {
    std::vector<T> out(in.size());
    std::vector<float> wide(65536);
    {
      MxcsrGuard g(mode);
      Format<T>::narrow(in.data(), out.data(), static_cast<int64_t>(in.size()), path);
      Format<T>::widen(all.data(), wide.data(), 65536, path);
    }
    Mismatches m, w;
    for (size_t i = 0; i < in.size(); ++i)
      if (out[i].bits != want[i]) m.add(std::bit_cast<uint32_t>(in[i]), 8, out[i].bits, want[i], 4);
    for (uint32_t b = 0; b < 65536; ++b)
      if (std::bit_cast<uint32_t>(wide[b]) != want_wide[b])
        w.add(b, 4, std::bit_cast<uint32_t>(wide[b]), want_wide[b], 8);
    EXPECT_EQ(m.count, 0) << "float->" << Format<T>::kName << " on " << convert_path_name(path) << " with MXCSR bits "
                          << hex(mode, 4) << ":" << m.first;
    EXPECT_EQ(w.count, 0) << Format<T>::kName << "->float on " << convert_path_name(path) << " with MXCSR bits "
                          << hex(mode, 4) << ":" << w.first;
  }
}

TEST_P(ConvertPathTest, IndependentOfMxcsr) {
  static const auto in = structured_floats();
  check_mxcsr<BFloat16>(GetParam(), in);
  check_mxcsr<Half>(GetParam(), in);
}
#endif

TEST(ConvertPaths, AnyToAnyConvertUsesTheSameRounding) {
  // convert() takes the auto path; it must agree with the reference as well.
  const auto in = structured_floats();
  std::vector<BFloat16> b(in.size());
  std::vector<Half> h(in.size());
  convert(in.data(), kFloat32, b.data(), kBFloat16, static_cast<int64_t>(in.size()));
  convert(in.data(), kFloat32, h.data(), kFloat16, static_cast<int64_t>(in.size()));
  for (size_t i = 0; i < in.size(); ++i) {
    ASSERT_EQ(b[i].bits, detail::float_to_bf16_bits(in[i])) << hex(std::bit_cast<uint32_t>(in[i]), 8);
    ASSERT_EQ(h[i].bits, detail::float_to_half_bits(in[i])) << hex(std::bit_cast<uint32_t>(in[i]), 8);
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, ConvertPathTest,
                         ::testing::Values(ConvertPath::kPortable, ConvertPath::kF16C, ConvertPath::kAVX512,
                                           ConvertPath::kAVX512BF16, ConvertPath::kAuto),
                         [](const ::testing::TestParamInfo<ConvertPath>& info) {
                           return std::string(convert_path_name(info.param));
                         });

TEST(ConvertPaths, UnavailablePathThrowsAndNamesIt) {
  for (ConvertPath p : {ConvertPath::kF16C, ConvertPath::kAVX512, ConvertPath::kAVX512BF16}) {
    if (convert_path_available(p)) continue;
    float f = 1.0f;
    BFloat16 b;
    try {
      float_to_bf16(&f, &b, 1, p);
      ADD_FAILURE() << "no error for unavailable path " << convert_path_name(p);
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(convert_path_name(p)), std::string::npos) << e.what();
    }
  }
  EXPECT_TRUE(convert_path_available(ConvertPath::kPortable));
  EXPECT_TRUE(convert_path_available(ConvertPath::kAuto));
}

// ---- round_double_to -----------------------------------------------------------------

// Exact nearest-even rounding of a double to T, in integers on the double's fields.
template <class T>
uint16_t exact_round_double(double d) {
  constexpr int kM = Format<T>::kMant;
  const uint64_t x = std::bit_cast<uint64_t>(d);
  const uint16_t sign = static_cast<uint16_t>((x >> 48) & 0x8000u);
  const int be = static_cast<int>((x >> 52) & 0x7ff);
  const uint64_t man = x & 0xfffffffffffffull;
  if (be == 0x7ff)
    return man ? sign | kInf<T> | kQuiet<T> | static_cast<uint16_t>((man >> (52 - kM)) & kManMask<T>) : sign | kInf<T>;
  if (be == 0 && man == 0) return sign;
  const uint64_t sig = be ? man | (1ull << 52) : man;
  const int e2 = (be ? be : 1) - 1075;               // |d| = sig * 2^e2
  const int lg = (63 - std::countl_zero(sig)) + e2;  // floor(log2 |d|)
  const int emin = 1 - kBias<T>;
  const int q = std::max(lg, emin) - kM;  // exponent of T's quantum at |d|
  uint64_t n;
  if (e2 >= q) {
    n = sig << (e2 - q);
  } else {
    const int s = q - e2;
    if (s >= 64) {
      n = 0;  // sig < 2^53 <= half a quantum
    } else {
      n = sig >> s;
      const uint64_t rem = sig & ((1ull << s) - 1), half = 1ull << (s - 1);
      if (rem > half || (rem == half && (n & 1))) ++n;
    }
  }
  uint64_t bits = lg < emin ? n : (static_cast<uint64_t>(lg + kBias<T>) << kM) + (n - (1ull << kM));
  if (bits >= kInf<T>) bits = kInf<T>;
  return sign | static_cast<uint16_t>(bits);
}

template <class T>
void check_round_double_random() {
  std::mt19937_64 rng(0xD0B1E);
  Mismatches m;
  for (int i = 0; i < (1 << 21); ++i) {
    uint64_t x = rng();
    if (i % 8 != 0) {  // mostly exponents around T's range: subnormal, normal, overflow
      const uint64_t be = 1023 - 175 + rng() % 320;
      x = (x & 0x800fffffffffffffull) | (be << 52);
    }
    const double d = std::bit_cast<double>(x);
    const uint16_t got = round_double_to<T>(d).bits, want = exact_round_double<T>(d);
    if (got != want) m.add(static_cast<uint32_t>(x >> 32), 8, got, want, 4);
  }
  EXPECT_EQ(m.count, 0) << "round_double_to<" << Format<T>::kName << "> (high word of input shown):" << m.first;
}

TEST(RoundDoubleTo, MatchesExactRoundingOnRandomDoubles) {
  check_round_double_random<BFloat16>();
  check_round_double_random<Half>();
}

// For every pair of neighbours (lo, hi) of T: the exact tie, and the tie plus/minus a
// sliver far below float's precision. Rounding to float first lands on the tie and then
// ties-to-even picks the even neighbour, which is wrong for half of those slivers;
// round_double_to must round once.
template <class T>
void check_round_double_ties(bool count_naive_failures) {
  Mismatches m;
  int64_t naive_wrong = 0, cases = 0;
  for (uint32_t b = 0; b < kInf<T>; ++b) {
    const double tie = (decode<T>(b) + decode<T>(b + 1)) / 2;
    const uint16_t even = static_cast<uint16_t>(b % 2 == 0 ? b : b + 1);
    for (double sgn : {1.0, -1.0}) {
      const uint16_t s = sgn < 0 ? 0x8000 : 0;
      const double sliver = std::ldexp(tie, -40);
      const struct {
        double d;
        uint16_t want;
      } probes[] = {
          {sgn * tie, static_cast<uint16_t>(s | even)},
          {sgn * (tie + sliver), static_cast<uint16_t>(s | (b + 1))},
          {sgn * (tie - sliver), static_cast<uint16_t>(s | b)},
          {sgn * std::nextafter(tie, 0.0), static_cast<uint16_t>(s | b)},
          {sgn * std::nextafter(tie, 1e300), static_cast<uint16_t>(s | (b + 1))},
      };
      for (const auto& pr : probes) {
        ++cases;
        const uint16_t got = round_double_to<T>(pr.d).bits;
        if (got != pr.want) m.add(static_cast<uint32_t>(std::bit_cast<uint64_t>(pr.d) >> 32), 8, got, pr.want, 4);
        if (exact_round_double<T>(pr.d) != pr.want) m.add(0xffffffffu, 8, exact_round_double<T>(pr.d), pr.want, 4);
        if (count_naive_failures && T(static_cast<float>(pr.d)).bits != pr.want) ++naive_wrong;
      }
    }
  }
  EXPECT_EQ(m.count, 0) << "round_double_to<" << Format<T>::kName << "> near ties (" << cases << " cases):" << m.first;
  // Sanity check of the test itself: the naive double -> float -> T is wrong on the
  // slivers on the odd side of each tie: 2 of the 4 sliver probes, for every tie, both signs.
  if (count_naive_failures) {
    EXPECT_EQ(naive_wrong, 2 * 2 * static_cast<int64_t>(kInf<T>)) << Format<T>::kName;
  }
}

TEST(RoundDoubleTo, RoundsOnceNearEveryTie) {
  check_round_double_ties<BFloat16>(true);
  check_round_double_ties<Half>(true);
}

TEST(RoundDoubleTo, SpecialValues) {
  EXPECT_EQ(round_double_to<BFloat16>(0.0).bits, 0x0000);
  EXPECT_EQ(round_double_to<BFloat16>(-0.0).bits, 0x8000);
  EXPECT_EQ(round_double_to<BFloat16>(INFINITY).bits, 0x7f80);
  EXPECT_EQ(round_double_to<Half>(-INFINITY).bits, 0xfc00);
  EXPECT_EQ(round_double_to<BFloat16>(1e300).bits, 0x7f80);
  EXPECT_EQ(round_double_to<Half>(-1e300).bits, 0xfc00);
  EXPECT_EQ(round_double_to<BFloat16>(1e-300).bits, 0x0000);
  EXPECT_EQ(round_double_to<Half>(-1e-300).bits, 0x8000);
  EXPECT_EQ(round_double_to<BFloat16>(4.9e-324).bits, 0x0000);  // double subnormal
  EXPECT_EQ(round_double_to<Half>(65519.999999).bits, 0x7bff);
  EXPECT_EQ(round_double_to<Half>(65520.0).bits, 0x7c00);
  EXPECT_EQ(round_double_to<BFloat16>(1e-39).bits, 0x000b);  // bf16 subnormal: 1e-39 / 2^-133 = 10.9
  // NaN stays NaN, quiet, sign and top payload kept (as double -> float -> T would).
  EXPECT_EQ(round_double_to<BFloat16>(std::bit_cast<double>(0x7ff0000000000001ull)).bits, 0x7fc0);
  EXPECT_EQ(round_double_to<Half>(std::bit_cast<double>(0xfff4000000000000ull)).bits, 0xff00);
}

#if defined(TC_TEST_HAS_MXCSR)
// round_double_to used to round through a float cast, which MXCSR.FTZ flushes to zero in
// the float subnormal range (1e-39 became bf16 0x0000 instead of 0x000b).
TEST(RoundDoubleTo, IndependentOfMxcsr) {
  std::mt19937_64 rng(77);
  std::vector<double> in;
  for (int i = 0; i < 200000; ++i) {
    const uint64_t be = 1023 - 175 + rng() % 320;
    in.push_back(std::bit_cast<double>((rng() & 0x800fffffffffffffull) | (be << 52)));
  }
  in.push_back(1e-39);
  std::vector<uint16_t> want_b, want_h;
  for (double d : in) {
    want_b.push_back(exact_round_double<BFloat16>(d));
    want_h.push_back(exact_round_double<Half>(d));
  }
  for (unsigned mode : {kFTZ, kDAZ, kFTZ | kDAZ, kRoundUp, kRoundDown, kRoundZero}) {
    std::vector<uint16_t> got_b(in.size()), got_h(in.size());
    {
      MxcsrGuard g(mode);
      for (size_t i = 0; i < in.size(); ++i) {
        got_b[i] = round_double_to<BFloat16>(in[i]).bits;
        got_h[i] = round_double_to<Half>(in[i]).bits;
      }
    }
    int64_t bad = 0;
    for (size_t i = 0; i < in.size(); ++i) bad += (got_b[i] != want_b[i]) + (got_h[i] != want_h[i]);
    EXPECT_EQ(bad, 0) << "round_double_to with MXCSR bits " << hex(mode, 4);
    EXPECT_EQ(got_b.back(), 0x000b) << "1e-39 with MXCSR bits " << hex(mode, 4);
  }
}
#endif

}  // namespace
}  // namespace tc
