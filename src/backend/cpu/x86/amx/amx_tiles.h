// Internal, for the files compiled for AMX (attention_amx.cpp, weight_grad_amx.cpp,
// matmul_amx_kernel.cpp): the tile configuration they share, every tile 16 rows of 64
// bytes (a 16 x 32 bfloat16 tile, a 16-pair x 16-column one, or a 16 x 16 float32
// accumulator). In an unnamed namespace, as attention_avx512.h, so that no file compiled
// for another ISA can share a copy.
#pragma once
#include <immintrin.h>

#include <cstdint>

#include "core/x86/amx/require.h"  // the intrinsics below need the folder's flags

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

inline void configure_tiles() { _tile_loadconfig(&kTileConfig); }

// A 32 x 32 block of float32 c in the accumulator tiles 0-3 (rows 0-15 and 16-31 by
// columns 0-15 and 16-31), rows ld floats apart.
inline void zero_block() {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
}
inline void load_block(const float* c, int64_t ld) {
  _tile_loadd(0, c, ld * 4);
  _tile_loadd(1, c + kTile, ld * 4);
  _tile_loadd(2, c + kTile * ld, ld * 4);
  _tile_loadd(3, c + kTile * ld + kTile, ld * 4);
}
inline void store_block(float* c, int64_t ld) {
  _tile_stored(0, c, ld * 4);
  _tile_stored(1, c + kTile, ld * 4);
  _tile_stored(2, c + kTile * ld, ld * 4);
  _tile_stored(3, c + kTile * ld + kTile, ld * 4);
}

// The block's four products for one chunk of the sum: a's two tiles (its rows 0-15 and
// 16-31; rows a_ld bytes apart) times b's two (columns 0-15 and 16-31, b_ld bytes), in
// tiles 4-7, loaded in the order that lets the first product start after two loads.
inline void block_products(const void* a0, const void* a1, int64_t a_ld, const void* b0, const void* b1, int64_t b_ld) {
  _tile_loadd(4, a0, a_ld);
  _tile_loadd(6, b0, b_ld);
  _tile_dpbf16ps(0, 4, 6);
  _tile_loadd(7, b1, b_ld);
  _tile_dpbf16ps(1, 4, 7);
  _tile_loadd(5, a1, a_ld);
  _tile_dpbf16ps(2, 5, 6);
  _tile_dpbf16ps(3, 5, 7);
}

}  // namespace
}  // namespace tc::cpu::detail
