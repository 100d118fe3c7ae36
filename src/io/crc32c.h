// Internal: CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of
// TFRecord framing (TensorBoard event files). SSE4.2 has an instruction for it; the table
// variant is the fallback on CPUs without one and the tests' cross-check.
#pragma once
#include <cstddef>
#include <cstdint>

namespace tc::io {

// The CRC of `size` bytes continued from `crc` (0 to start): crc32c(crc32c(0, a), b) ==
// crc32c(0, a + b). Uses SSE4.2 when the CPU has it.
uint32_t crc32c(uint32_t crc, const void* data, size_t size);

// The same value, computed with tables (slicing by 8) on any CPU.
uint32_t crc32c_portable(uint32_t crc, const void* data, size_t size);

// TFRecord stores CRCs masked, because a CRC over bytes that embed CRCs is weak.
inline uint32_t mask_crc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

}  // namespace tc::io
