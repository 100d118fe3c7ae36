// The weight gradient's product g^T x on AMX tiles (weight_grad_kernels.h). g and x share
// their row index, the tokens, which is the sum's: TDPBF16PS wants its a tile with the sum
// along each row (16 rows of g^T: a transpose of g) and its b tile with the sum along pairs
// of rows (x's rows interleaved in pairs). Both are packed, a block of the sum at a time,
// into whole 1 KiB tiles, the a tiles by transposing x's kind of pair tile (pair_rows16,
// transpose16); then each 32 x 32 block of c takes the block in four accumulator tiles, two
// a and two b tiles loaded per four products. oneDNN 2.6 runs these long-sum, small-output
// products (gpt's, 2048 tokens into a 768 x 256 gradient) at two thirds of its rate on the
// forward's shapes, on either layout of g.
//
// Compiled with -mamx-tile -mamx-bf16 besides AVX-512: plain pointers in, helpers in
// unnamed namespaces.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's AVX-512 headers (see convert_avx512.cpp)
#endif
#include <immintrin.h>

#include "backend/cpu/x86/amx/amx_tiles.h"
#include "backend/cpu/x86/avx512bf16/attention_avx512.h"
#include "backend/cpu/x86/weight_grad_kernels.h"
#include "core/x86/amx/require.h"  // stops a build without this folder's flags

namespace tc::cpu::detail {

namespace {

constexpr int64_t kTileWords = kTile * kPairs;  // 32-bit pairs in a tile: 1 KiB
constexpr int64_t kChunk = 2 * kPairs;          // terms of the sum per tile product

// Terms of the sum packed at a time (of k in all): both operands' tiles for them, 512 KiB
// at most, stay in L2 with c's rows while every block of c takes them.
int64_t sum_block(int64_t m, int64_t n, int64_t k) {
  return min_of(max_of(2, min_of(16, (int64_t{1} << 18) / (m + n) / kChunk)) * kChunk, round_up(k, kChunk));
}

}  // namespace

// Scratch: the block's tiles of g and x; the column sums' accumulator tiles and the tile
// of ones they multiply (col_sums); + 32: room to align to 64 bytes.
int64_t weight_grad_scratch(int64_t m, int64_t n, int64_t k) {
  return (m + n) * sum_block(m, n, k) + (m / kTile + 1) * kTileWords * 2 + 32;
}

namespace {

// The tiles of `chunks` chunks of the sum from row k of src (rows past k1 zero), `cols`
// columns from col0, as [16 columns][chunk] tiles of 16 x 16 pairs: x's b tiles as
// pair_rows16 reads them, or transposed, g^T's a tiles. Row-major order over the chunks,
// so that src is read along its rows.
template <bool kTranspose>
void pack(const uint16_t* src, int64_t ld, int64_t k, int64_t k1, int64_t chunks, int64_t col0, int64_t cols,
          uint32_t* tiles) {
  __m512i w[16];
  for (int64_t t = 0; t < chunks; ++t) {
    const int64_t kt = k + t * kChunk;
    for (int64_t j = 0; j < cols / kTile; ++j) {
      pair_rows16(src + kt * ld + col0 + j * kTile, ld, min_of(kChunk, k1 - kt), w);
      if constexpr (kTranspose) transpose16(w);
      uint32_t* out = tiles + (j * chunks + t) * kTileWords;
      for (int64_t r = 0; r < kTile; ++r) _mm512_store_si512(out + r * kPairs, w[r]);
    }
  }
}

}  // namespace

// By blocks of the sum: both operands' tiles for the block packed, then each 32 x 32 block
// of c in four accumulator tiles (loaded from c after the first block of the sum), two a
// and two b tiles loaded per four products. The column sums of g: its tiles times a tile
// whose first column pairs are ones (1.0 twice) and the rest zero, whose products' first
// column holds each row of g^T summed, exactly, in float32.
void weight_grad_amx(const WeightGradBlock& b) {
  const int64_t m = b.m1 - b.m0, n = b.n1 - b.n0, kb = sum_block(m, n, b.k1 - b.k0);
  auto* a_tiles = reinterpret_cast<uint32_t*>((reinterpret_cast<uintptr_t>(b.scratch) + 63) & ~uintptr_t{63});
  uint32_t* b_tiles = a_tiles + m / kTile * (kb / kChunk) * kTileWords;
  uint32_t* ones = b_tiles + n / kTile * (kb / kChunk) * kTileWords;
  float* sums = reinterpret_cast<float*>(ones + kTileWords);  // m / 16 tiles of 16 x 16 floats
  if (b.col_sums)
    for (int64_t r = 0; r < kTile; ++r)
      for (int64_t c = 0; c < kPairs; ++c) ones[r * kPairs + c] = c == 0 ? 0x3f803f80u : 0u;
  configure_tiles();
  for (int64_t k = b.k0; k < b.k1; k += kb) {
    const int64_t chunks = round_up(min_of(kb, b.k1 - k), kChunk) / kChunk;
    pack<false>(b.x, b.ldx, k, b.k1, chunks, b.n0, n, b_tiles);
    pack<true>(b.g, b.ldg, k, b.k1, chunks, b.m0, m, a_tiles);
    for (int64_t i = 0; i < m / kTile; i += 2)
      for (int64_t j = 0; j < n / kTile; j += 2) {
        const uint32_t* a0 = a_tiles + i * chunks * kTileWords;
        const uint32_t* a1 = a0 + chunks * kTileWords;
        const uint32_t* b0 = b_tiles + j * chunks * kTileWords;
        const uint32_t* b1 = b0 + chunks * kTileWords;
        float* c = b.c + i * kTile * b.ldc + j * kTile;
        if (k == b.k0)
          zero_block();
        else
          load_block(c, b.ldc);
        for (int64_t t = 0; t < chunks; ++t)
          block_products(a0 + t * kTileWords, a1 + t * kTileWords, kTileBytes, b0 + t * kTileWords, b1 + t * kTileWords,
                         kTileBytes);
        store_block(c, b.ldc);
      }
    if (!b.col_sums) continue;
    _tile_loadd(6, ones, kTileBytes);
    for (int64_t i = 0; i < m / kTile; i += 2) {  // two accumulators: two chains of products
      float* acc = sums + i * kTileWords;
      if (k == b.k0) {
        _tile_zero(0);
        _tile_zero(1);
      } else {
        _tile_loadd(0, acc, kTileBytes);
        _tile_loadd(1, acc + kTileWords, kTileBytes);
      }
      for (int64_t t = 0; t < chunks; ++t) {
        _tile_loadd(4, a_tiles + (i * chunks + t) * kTileWords, kTileBytes);
        _tile_dpbf16ps(0, 4, 6);
        _tile_loadd(5, a_tiles + ((i + 1) * chunks + t) * kTileWords, kTileBytes);
        _tile_dpbf16ps(1, 5, 6);
      }
      _tile_stored(0, acc, kTileBytes);
      _tile_stored(1, acc + kTileWords, kTileBytes);
    }
  }
  _tile_release();
  if (b.col_sums)
    for (int64_t i = 0; i < m; ++i) b.col_sums[i] = sums[i * kPairs];  // row i's first column
}

}  // namespace tc::cpu::detail
