// tc_float8_codes: tensorcast's 8-bit float casts (tensorcast/float8.h) as raw bytes, for a
// comparison with another implementation (tests/torch/float8_against_pytorch.py: PyTorch).
//
//   tc_float8_codes encode FORMAT   the code of every float bit pattern 0 .. 2^32 - 1 in
//                                   order: 2^32 bytes on stdout
//   tc_float8_codes decode FORMAT   the float bits of every code 0 .. 255: 256 uint32,
//                                   little-endian, on stdout
//
// FORMAT: e4m3fn, e5m2, e5m2_saturated (float8_e5m2_saturated) or e8m0fnu. Exit status 2
// on bad arguments, 1 when stdout fails.
#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "tensorcast/float8.h"

namespace {

enum class Format { kE4m3fn, kE5m2, kE5m2Saturated, kE8m0fnu };

bool parse(const char* s, Format* f) {
  if (std::strcmp(s, "e4m3fn") == 0) return *f = Format::kE4m3fn, true;
  if (std::strcmp(s, "e5m2") == 0) return *f = Format::kE5m2, true;
  if (std::strcmp(s, "e5m2_saturated") == 0) return *f = Format::kE5m2Saturated, true;
  if (std::strcmp(s, "e8m0fnu") == 0) return *f = Format::kE8m0fnu, true;
  return false;
}

uint8_t encode(Format f, float x) {
  switch (f) {
    case Format::kE4m3fn:
      return tc::Float8_e4m3fn(x).x;
    case Format::kE5m2:
      return tc::Float8_e5m2(x).x;
    case Format::kE5m2Saturated:
      return tc::float8_e5m2_saturated(x).x;
    case Format::kE8m0fnu:
      return tc::Float8_e8m0fnu(x).x;
  }
  return 0;
}

float decode(Format f, uint8_t code) {
  switch (f) {
    case Format::kE4m3fn:
      return tc::Float8_e4m3fn(code, tc::Float8_e4m3fn::from_bits());
    case Format::kE5m2:
    case Format::kE5m2Saturated:
      return tc::Float8_e5m2(code, tc::Float8_e5m2::from_bits());
    case Format::kE8m0fnu:
      return tc::Float8_e8m0fnu(code, tc::Float8_e8m0fnu::from_bits());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Format format{};
  const bool enc = argc == 3 && std::strcmp(argv[1], "encode") == 0;
  const bool dec = argc == 3 && std::strcmp(argv[1], "decode") == 0;
  if (!(enc || dec) || !parse(argv[2], &format)) {
    std::fprintf(stderr, "usage: tc_float8_codes encode|decode e4m3fn|e5m2|e5m2_saturated|e8m0fnu\n");
    return 2;
  }
  if (dec) {
    uint8_t out[256 * 4];
    for (int c = 0; c < 256; ++c) {
      const uint32_t b = std::bit_cast<uint32_t>(decode(format, static_cast<uint8_t>(c)));
      for (int i = 0; i < 4; ++i) out[c * 4 + i] = static_cast<uint8_t>(b >> (8 * i));
    }
    return std::fwrite(out, 1, sizeof out, stdout) == sizeof out && std::fflush(stdout) == 0 ? 0 : 1;
  }
  std::vector<uint8_t> block(size_t{1} << 24);
  for (uint64_t start = 0; start < (uint64_t{1} << 32); start += block.size()) {
    for (size_t i = 0; i < block.size(); ++i)
      block[i] = encode(format, std::bit_cast<float>(static_cast<uint32_t>(start + i)));
    if (std::fwrite(block.data(), 1, block.size(), stdout) != block.size()) return 1;
  }
  return std::fflush(stdout) == 0 ? 0 : 1;
}
