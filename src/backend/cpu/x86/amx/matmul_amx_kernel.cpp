// A 16-bit product c = a @ b whose b is a weight (matmul_amx_kernels.h): linear's forward
// (b = w^T) and its input's gradient (b = w). TDPBF16PS reads a's tiles straight from its
// rows (16 rows of 32 terms), so only b is packed, once per product (a weight is small next
// to the activations). Each 32 x 32 block of c takes its whole sum in four accumulator
// tiles, two a and two b tiles loaded per four products; a's 32 rows stay in L1 while the
// block walks c's columns (for sums of up to ~512 terms; longer ones read them from L2),
// b's tiles come from L2 (columns in passes of 0.5-1 MiB of tiles). The epilogue (bias,
// multiplier, rounding, an optional activation lookup) of each block runs between the next
// block's products, from a second buffer: done after them, its stores would stall the tile
// unit instead of overlapping with it. Reading a in place and keeping b's packed tiles is
// what makes this kernel faster than oneDNN 2.6's at gpt's shapes (docs/performance.md).
//
// Compiled with -mamx-tile -mamx-bf16 besides AVX-512: plain pointers in, helpers in
// unnamed namespaces.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's AVX-512 headers (see convert_avx512.cpp)
#endif
#include <immintrin.h>

#include "backend/cpu/x86/amx/amx_tiles.h"
#include "backend/cpu/x86/avx512bf16/attention_avx512.h"
#include "backend/cpu/x86/matmul_amx_kernels.h"
#include "core/x86/amx/require.h"  // stops a build without this folder's flags

namespace tc::cpu::detail {

// Columns per pass over the rows: their b tiles, pass_bytes at most, stay in L2.
int64_t matmul_amx_pass(int64_t n, int64_t k, int64_t pass_bytes) {
  constexpr int64_t kBlock = 32;
  const int64_t cols = pass_bytes / 2 / k / kBlock * kBlock;
  return cols < kBlock ? kBlock : cols < n ? cols : n;
}

namespace {

constexpr int64_t kTileWords = kTile * kPairs;  // 32-bit pairs in a tile: 1 KiB
constexpr int64_t kChunk = 2 * kPairs;          // terms of the sum per tile product
constexpr int64_t kBlock = 32;                  // rows and columns of c per block of four tiles
constexpr int64_t kAccFloats = kBlock * kBlock;

__m512 widen_bf16(const uint16_t* p) {
  const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(bits), 16));
}

// 16 floats rounded to bfloat16 (the library's rounding, subnormals kept), then, with a
// table, replaced by its entries' low halves: an activation of the rounded values.
void store_bf16_looked_up(uint16_t* out, __m512 x, const uint32_t* table) {
  __m256i bits = ::tc::detail::f32_to_bf16_hw(_mm512_castps_si512(x));
  if (table) bits = _mm512_cvtepi32_epi16(_mm512_i32gather_epi32(_mm512_cvtepu16_epi32(bits), table, 4));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), bits);
}

// Rows [r0, r1) of a finished 32 x 32 block (acc, rows of 32 floats) into c at its block's
// first element, with the bias (its 32 columns' values) and the multiplier added, and
// bfloat16 c's values looked up in the table where there is one.
template <bool kBf16>
void epilogue(const float* acc, const float* bias, const void* mul, int64_t ldmul, const uint32_t* table, void* c,
              int64_t ldc, int64_t r0, int64_t r1) {
  const __m512 b_lo = bias ? _mm512_loadu_ps(bias) : _mm512_setzero_ps();
  const __m512 b_hi = bias ? _mm512_loadu_ps(bias + 16) : _mm512_setzero_ps();
  for (int64_t r = r0; r < r1; ++r) {
    __m512 lo = _mm512_add_ps(_mm512_load_ps(acc + r * kBlock), b_lo);
    __m512 hi = _mm512_add_ps(_mm512_load_ps(acc + r * kBlock + 16), b_hi);
    if constexpr (kBf16) {
      if (mul) {
        const uint16_t* m = static_cast<const uint16_t*>(mul) + r * ldmul;
        lo = _mm512_mul_ps(lo, widen_bf16(m));
        hi = _mm512_mul_ps(hi, widen_bf16(m + 16));
      }
      uint16_t* out = static_cast<uint16_t*>(c) + r * ldc;
      store_bf16_looked_up(out, lo, table);
      store_bf16_looked_up(out + 16, hi, table);
    } else {
      if (mul) {
        const float* m = static_cast<const float*>(mul) + r * ldmul;
        lo = _mm512_mul_ps(lo, _mm512_loadu_ps(m));
        hi = _mm512_mul_ps(hi, _mm512_loadu_ps(m + 16));
      }
      float* out = static_cast<float*>(c) + r * ldc;
      _mm512_storeu_ps(out, lo);
      _mm512_storeu_ps(out + 16, hi);
    }
  }
}

template <bool kBf16>
void rows(const MatmulAmxRows& p) {
  const int64_t chunks = p.k / kChunk, lda = p.lda * 2;
  const int64_t per_chunk = (kBlock + chunks - 1) / chunks;  // epilogue rows per chunk of the next block
  const int64_t esize = kBf16 ? 2 : 4;
  int64_t done_i = -1, done_j = 0;  // the block whose epilogue is pending, in acc's other half
  int half = 0;
  const auto pending = [&](int64_t r0, int64_t r1) {
    const int64_t at_mul = done_i * p.ldmul + done_j, at_c = done_i * p.ldc + done_j;
    epilogue<kBf16>(p.acc + (half ^ 1) * kAccFloats, p.bias ? p.bias + done_j : nullptr,
                    p.mul ? static_cast<const char*>(p.mul) + at_mul * esize : nullptr, p.ldmul, p.table,
                    static_cast<char*>(p.c) + at_c * esize, p.ldc, r0, r1);
  };
  configure_tiles();
  for (int64_t i = p.m0; i < p.m1; i += kBlock)
    for (int64_t j = p.n0; j < p.n1; j += kBlock) {
      const uint16_t* a0 = p.a + i * p.lda;
      const uint16_t* a1 = a0 + kTile * p.lda;
      const uint32_t* b0 = p.b_tiles + j / kTile * chunks * kTileWords;
      const uint32_t* b1 = b0 + chunks * kTileWords;
      zero_block();
      for (int64_t t = 0; t < chunks; ++t) {
        block_products(a0 + t * kChunk, a1 + t * kChunk, lda, b0 + t * kTileWords, b1 + t * kTileWords, kTileBytes);
        if (done_i >= 0 && t * per_chunk < kBlock) pending(t * per_chunk, min_of(kBlock, (t + 1) * per_chunk));
      }
      store_block(p.acc + half * kAccFloats, kBlock);
      done_i = i;
      done_j = j;
      half ^= 1;
    }
  _tile_release();
  if (done_i >= 0) pending(0, kBlock);
}

}  // namespace

void pack_b_tiles(const uint16_t* b, int64_t ld, bool transposed, int64_t k, int64_t j0, int64_t j1, uint32_t* tiles) {
  const int64_t chunks = k / kChunk;
  __m512i w[16];
  for (int64_t j = j0 / kTile; j < j1 / kTile; ++j)
    for (int64_t t = 0; t < chunks; ++t) {
      if (transposed) {  // w's 16 rows from column j's first, 32 terms (16 pairs) of each
        for (int64_t r = 0; r < kTile; ++r) w[r] = _mm512_loadu_si512(b + (j * kTile + r) * ld + t * kChunk);
        transpose16(w);
      } else {
        pair_rows16(b + t * kChunk * ld + j * kTile, ld, kChunk, w);
      }
      uint32_t* out = tiles + (j * chunks + t) * kTileWords;
      for (int64_t r = 0; r < kTile; ++r) _mm512_store_si512(out + r * kPairs, w[r]);
    }
}

void matmul_amx_rows(const MatmulAmxRows& r) {
  if (r.c_bf16)
    rows<true>(r);
  else
    rows<false>(r);
}

}  // namespace tc::cpu::detail
