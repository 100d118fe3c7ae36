// Internal, for the files compiled for AMX (attention_amx.cpp, weight_grad_amx.cpp,
// matmul_amx_kernel.cpp): the tile configuration they share, every tile 16 rows of 64
// bytes (a 16 x 32 bfloat16 tile, a 16-pair x 16-column one, or a 16 x 16 float32
// accumulator). In an unnamed namespace, as attention_avx512.h, so that no file compiled
// for another ISA can share a copy.
#pragma once
#include <immintrin.h>

#include <cstdint>

namespace tc::cpu::detail {
namespace {

constexpr int64_t kTile = 16;       // rows of a tile
constexpr int64_t kPairs = 16;      // bfloat16 pairs along a product's inner dim per tile
constexpr int64_t kTileBytes = 64;  // bytes of a tile row

// A constant in memory: GCC 12's _tile_loadconfig tells the compiler it reads 8 bytes, so
// the stores of a local configuration's other bytes may be dropped.
struct alignas(64) TileConfig {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};
constexpr TileConfig tile_config() {
  TileConfig c{1, 0, {}, {}, {}};
  for (int t = 0; t < 8; ++t) {
    c.colsb[t] = kTileBytes;
    c.rows[t] = kTile;
  }
  return c;
}
inline const TileConfig kTileConfig = tile_config();

#if defined(__AMX_TILE__)
inline void configure_tiles() { _tile_loadconfig(&kTileConfig); }
#endif

}  // namespace
}  // namespace tc::cpu::detail
