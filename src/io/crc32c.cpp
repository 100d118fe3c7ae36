// CRC-32C: slicing-by-8 tables, and the SSE4.2 crc32 instruction picked at run time.
#include "io/crc32c.h"

#include <nmmintrin.h>

#include <array>
#include <cstring>

#include "tensorcast/cpu_features.h"

namespace tc::io {

namespace {

constexpr uint32_t kPoly = 0x82F63B78u;

// kTables[0] is the byte-at-a-time table; kTables[k][b] is the CRC of byte b followed by k
// zero bytes, so eight bytes fold in with eight look-ups and no dependency between them.
constexpr std::array<std::array<uint32_t, 256>, 8> make_tables() {
  std::array<std::array<uint32_t, 256>, 8> t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int i = 0; i < 8; ++i) c = (c >> 1) ^ (kPoly & (0u - (c & 1)));
    t[0][b] = c;
  }
  for (size_t k = 1; k < 8; ++k)
    for (uint32_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFF];
  return t;
}
constexpr auto kTables = make_tables();

__attribute__((target("sse4.2"))) uint32_t crc32c_sse42(uint32_t crc, const unsigned char* p, size_t n) {
  uint64_t c = ~crc;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t v;
    std::memcpy(&v, p, 8);  // unaligned, and crc32 on a little-endian word is crc32 on its bytes
    c = _mm_crc32_u64(c, v);
  }
  auto c32 = static_cast<uint32_t>(c);
  for (; n > 0; ++p, --n) c32 = _mm_crc32_u8(c32, *p);
  return ~c32;
}

}  // namespace

uint32_t crc32c_portable(uint32_t crc, const void* data, size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = ~crc;
  for (; size >= 8; p += 8, size -= 8) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= c;  // little-endian x86-64: the word's low byte is the first byte
    c = kTables[7][lo & 0xFF] ^ kTables[6][(lo >> 8) & 0xFF] ^ kTables[5][(lo >> 16) & 0xFF] ^ kTables[4][lo >> 24] ^
        kTables[3][hi & 0xFF] ^ kTables[2][(hi >> 8) & 0xFF] ^ kTables[1][(hi >> 16) & 0xFF] ^ kTables[0][hi >> 24];
  }
  for (; size > 0; ++p, --size) c = (c >> 8) ^ kTables[0][(c ^ *p) & 0xFF];
  return ~c;
}

uint32_t crc32c(uint32_t crc, const void* data, size_t size) {
  static const bool sse42 = cpu_features().sse4_2;
  const auto* p = static_cast<const unsigned char*>(data);
  return sse42 ? crc32c_sse42(crc, p, size) : crc32c_portable(crc, p, size);
}

}  // namespace tc::io
