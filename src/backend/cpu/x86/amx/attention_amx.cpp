// The AMX attention kernels (backend/cpu/x86/attention_kernels.h): the AVX-512 BF16 kernels'
// algorithm, layouts and rounding points, with every product on AMX tiles. TDPBF16PS
// multiplies a 16 x 32 bfloat16 tile by a 32 x 16 one (stored as 16 rows of 16 column
// pairs: the pair layouts k_pairs and v_pairs already are) into a 16 x 16 float32 tile, at
// several times VDPBF16PS's rate; the softmax's passes stay on AVX-512. Query rows go in
// groups of 16 (a tile's rows); the backward's dk, dv updates take 32 rows at a time (a
// tile's inner dim), their probability and score-gradient rows transposed to key-major
// pairs so that each key block is a tile of rows.
//
// Compiled with -mamx-tile -mamx-bf16 besides AVX-512 BF16; as the other ISA files, it
// shares no inline code with the library: plain pointers in, helpers in unnamed namespaces.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's AVX-512 headers (see convert_avx512.cpp)
#endif
#include <immintrin.h>

#include <cstring>

#include "backend/cpu/x86/amx/amx_tiles.h"
#include "backend/cpu/x86/attention_kernels.h"
#include "backend/cpu/x86/avx512bf16/attention_avx512.h"
#include "core/x86/amx/require.h"  // stops a build without this folder's flags

namespace tc::cpu::detail {
namespace {

constexpr int64_t kRankRows = 64;  // query rows per dk, dv update: two tiles' inner dim

}  // namespace

Bf16AttentionScratch attention_block_scratch_amx(int64_t n, int64_t E, int64_t Ev) {
  const int64_t np = round_up(n, 32), E2p = round_up((E + 1) / 2, kPairs), Evp = round_up(Ev, 16);
  return {E2p * np * 2, np / 2 * Evp * 2, kTile * E2p * 2, kTile * np, kTile * np, kTile * Evp};
}

Bf16BackwardScratch attention_backward_scratch_amx(int64_t S, int64_t E, int64_t Ev) {
  const int64_t np = round_up(S, 32), E2p = round_up((E + 1) / 2, kPairs), Ev2p = round_up((Ev + 1) / 2, kPairs);
  const int64_t Ep = round_up(E, 16), Evp = round_up(Ev, 16);
  const int64_t halves = (E2p + Ev2p) * np * 2 + np / 2 * Ep * 2 + kTile * (E2p + Ev2p) * 2 +
                         kRankRows / 2 * (Ep + Evp) * 2 + 2 * kRankRows * np + 2 * np * kRankRows;
  return {halves, 2 * kTile * np + kTile * Ep + np * (Ep + Evp)};
}

namespace {

// Tiles 0-3 hold c's blocks, 4 a's chunk, 5-7 b's blocks (amx_tiles.h's configuration).

// c[r][16 b + l] (+)= sum_{t < chunks} a_t[r][.] . b_t[.][16 b + l] for r < 16, b < NB: a_t
// is the 16 x 16-pair tile at a + 64 t bytes (rows a_stride bytes apart), b_t the 16-pair x
// 16 NB-column block whose pair row h is at bm + (16 t + h) b_stride bytes, columns 4 bytes
// apart, and c's rows are c_stride bytes apart. accumulate: c's values are the start (else 0).
template <int NB>
void tile_product(const void* a, int64_t a_stride, const void* bm, int64_t b_stride, int64_t chunks, float* c,
                  int64_t c_stride, bool accumulate) {
  static_assert(NB >= 1 && NB <= 4);
  const char* ap = static_cast<const char*>(a);
  const char* bp = static_cast<const char*>(bm);
  char* cp = reinterpret_cast<char*>(c);
  if (accumulate) {
    _tile_loadd(0, cp, c_stride);
    if constexpr (NB > 1) _tile_loadd(1, cp + kTileBytes, c_stride);
    if constexpr (NB > 2) _tile_loadd(2, cp + 2 * kTileBytes, c_stride);
    if constexpr (NB > 3) _tile_loadd(3, cp + 3 * kTileBytes, c_stride);
  } else {
    _tile_zero(0);
    if constexpr (NB > 1) _tile_zero(1);
    if constexpr (NB > 2) _tile_zero(2);
    if constexpr (NB > 3) _tile_zero(3);
  }
  for (int64_t t = 0; t < chunks; ++t) {
    const char* bt = bp + t * kPairs * b_stride;
    _tile_loadd(4, ap + t * kTileBytes, a_stride);
    _tile_loadd(5, bt, b_stride);
    _tile_dpbf16ps(0, 4, 5);
    if constexpr (NB > 1) {
      _tile_loadd(6, bt + kTileBytes, b_stride);
      _tile_dpbf16ps(1, 4, 6);
    }
    if constexpr (NB > 2) {
      _tile_loadd(7, bt + 2 * kTileBytes, b_stride);
      _tile_dpbf16ps(2, 4, 7);
    }
    if constexpr (NB > 3) {
      _tile_loadd(5, bt + 3 * kTileBytes, b_stride);
      _tile_dpbf16ps(3, 4, 5);
    }
  }
  _tile_stored(0, cp, c_stride);
  if constexpr (NB > 1) _tile_stored(1, cp + kTileBytes, c_stride);
  if constexpr (NB > 2) _tile_stored(2, cp + 2 * kTileBytes, c_stride);
  if constexpr (NB > 3) _tile_stored(3, cp + 3 * kTileBytes, c_stride);
}

// c (16 rows of 16 `cols`-column floats, c_stride bytes apart) (+)= the products of a's
// chunks with bm's column blocks: tile_product over every block of 16 columns.
void product(const void* a, int64_t a_stride, const uint16_t* bm, int64_t b_stride, int64_t cols, int64_t chunks,
             float* c, int64_t c_stride, bool accumulate) {
  by_blocks(cols / 16, [&](int64_t first, auto nb) {
    tile_product<decltype(nb)::value>(a, a_stride, bm + 32 * first, b_stride, chunks, c + 16 * first, c_stride,
                                      accumulate);
  });
}

// k_pairs as pack_keys lays it out (E2 pair rows of np keys), padded with zero pair rows
// up to a whole tile's inner dim.
void pack_key_tiles(const uint16_t* k, int64_t k_row, int64_t n, int64_t np, int64_t E, uint16_t* kp, uint32_t* tmp) {
  const int64_t E2 = (E + 1) / 2, E2p = round_up(E2, kPairs);
  pack_keys(k, k_row, n, np, E, kp, tmp);
  std::memset(kp + E2 * np * 2, 0, static_cast<size_t>((E2p - E2) * np) * 4);
}

// t[j][h] = (x[2 h][j], x[2 h + 1][j]) for j < keys (a multiple of 16), h < kRankRows / 2:
// kRankRows rows of bfloat16 (ld apart) as key-major pairs of rows, a tile's rows per 16
// keys, two tiles' inner dims per row.
void transpose_row_pairs(const uint16_t* x, int64_t ld, int64_t keys, uint16_t* t) {
  uint32_t* out = reinterpret_cast<uint32_t*>(t);
  for (int64_t j0 = 0; j0 < keys; j0 += 16)
    for (int64_t h0 = 0; h0 < kRankRows / 2; h0 += 16) {
      __m512i w[16];
      pair_rows16(x + 2 * h0 * ld + j0, ld, 32, w);
      transpose16(w);
      for (int64_t c = 0; c < 16; ++c) _mm512_storeu_si512(out + (j0 + c) * (kRankRows / 2) + h0, w[c]);
    }
}

}  // namespace

void attention_block_amx(const Bf16AttentionBlock& b) {
  const int64_t np = round_up(b.n, 32), E2p = round_up((b.E + 1) / 2, kPairs), Evp = round_up(b.Ev, 16);
  pack_key_tiles(b.k, b.k_row, b.n, np, b.E, b.k_pairs, reinterpret_cast<uint32_t*>(b.q_group));
  pack_values(b.v, b.v_row, b.n, np, b.Ev, b.v_pairs);
  configure_tiles();
  for (int64_t g0 = b.i0; g0 < b.i1; g0 += kTile) {
    const int64_t rows = min_of(kTile, b.i1 - g0);
    int64_t m[kTile];
    const int64_t m_max = keys_seen(m, g0, kTile, b.i1, b.n, b.causal);
    int64_t ldq = 0;
    const uint16_t* qg = group_pairs(b.q + g0 * b.q_row, b.q_row, b.E, rows, kTile, E2p, b.q_group, &ldq);
    product(qg, ldq * 4, b.k_pairs, np * 4, round_up(m_max, 16), E2p / kPairs, b.scores, np * 4, false);
    const int64_t pad = round_up(m_max, 32);  // whole tiles of keys, zero past each row's m
    float inv_sum[kTile];
    for (int64_t r0 = 0; r0 < kTile; r0 += kRows)
      softmax_group(b.scores + r0 * np, np, m + r0, max_of(0, min_of(kRows, rows - r0)), pad, b.scale,
                    b.probs + r0 * np, inv_sum + r0, b.lse ? b.lse + g0 + r0 : nullptr);
    product(b.probs, np * 2, b.v_pairs, Evp * 4, Evp, pad / 32, b.tile, Evp * 4, false);
    for (int64_t r = 0; r < rows; ++r) store_row_bf16(b.tile + r * Evp, b.Ev, b.out + (g0 + r) * b.out_row, inv_sum[r]);
  }
  _tile_release();
}

void attention_backward_amx(const Bf16AttentionBackward& b) {
  const int64_t S = b.S, E = b.E, Ev = b.Ev, np = round_up(S, 32);
  const int64_t E2p = round_up((E + 1) / 2, kPairs), Ev2p = round_up((Ev + 1) / 2, kPairs);
  const int64_t Ep = round_up(E, 16), Evp = round_up(Ev, 16);
  uint16_t* h = b.scratch16;                           // carved as attention_backward_scratch_amx sized it
  uint16_t* k_pairs = h;                               // keys, pairs along E: scores = q k^T
  uint16_t* v_pairs = k_pairs + E2p * np * 2;          // values, pairs along Ev: dp = g v^T
  uint16_t* k_key_pairs = v_pairs + Ev2p * np * 2;     // keys, pairs along the keys: dq = ds k
  uint16_t* q_group = k_key_pairs + np / 2 * Ep * 2;   // 16 rows of q as pairs
  uint16_t* g_group = q_group + kTile * E2p * 2;       // of g
  uint16_t* q_rows = g_group + kTile * Ev2p * 2;       // kRankRows rows of q as row pairs: dk += ds^T q
  uint16_t* g_rows = q_rows + kRankRows / 2 * Ep * 2;  // of g: dv += p^T g
  uint16_t* p16 = g_rows + kRankRows / 2 * Evp * 2;    // kRankRows rows of p and of ds
  uint16_t* ds16 = p16 + kRankRows * np;
  uint16_t* p_t = ds16 + kRankRows * np;  // p16 and ds16 as key-major row pairs: the rank updates' a tiles
  uint16_t* ds_t = p_t + np * kRankRows;
  float* s = b.scratch32;  // a group's scores
  float* dp = s + kTile * np;
  float* tile = dp + kTile * np;  // a group's dq
  float* dk = tile + kTile * Ep;  // float32 sums of dk and dv, np rows
  float* dv = dk + np * Ep;
  pack_key_tiles(b.k, b.k_row, S, np, E, k_pairs, reinterpret_cast<uint32_t*>(q_group));
  pack_key_tiles(b.v, b.v_row, S, np, Ev, v_pairs, reinterpret_cast<uint32_t*>(g_group));
  pack_values(b.k, b.k_row, S, np, E, k_key_pairs);
  configure_tiles();
  int64_t touched = 0;  // keys whose dk, dv sums exist: the first update of a tile of keys writes it
  for (int64_t r0 = 0; r0 < b.L; r0 += kRankRows) {
    int64_t m[kRankRows];
    const int64_t m_max = keys_seen(m, r0, kRankRows, b.L, S, b.causal);
    const int64_t pad = round_up(m_max, 32);             // p and ds rows are zero in [m[r], pad)
    for (int64_t t0 = 0; t0 < kRankRows; t0 += kTile) {  // the groups of a tile's rows
      const int64_t g0 = r0 + t0, rows = min_of(kTile, b.L - g0);
      uint16_t* pt = p16 + t0 * np;
      uint16_t* dst = ds16 + t0 * np;
      if (rows <= 0) {  // past L: zero rows for the rank updates
        std::memset(pt, 0, static_cast<size_t>(kTile * np) * 2);
        std::memset(dst, 0, static_cast<size_t>(kTile * np) * 2);
        continue;
      }
      const int64_t* mt = m + t0;
      int64_t mt_max = 0;
      for (int64_t r = 0; r < kTile; ++r) mt_max = max_of(mt_max, mt[r]);
      int64_t ldq = 0, ldg = 0;
      const uint16_t* qg = group_pairs(b.q + g0 * b.q_row, b.q_row, E, rows, kTile, E2p, q_group, &ldq);
      const uint16_t* gg = group_pairs(b.g + g0 * b.g_row, b.g_row, Ev, rows, kTile, Ev2p, g_group, &ldg);
      product(qg, ldq * 4, k_pairs, np * 4, round_up(mt_max, 16), E2p / kPairs, s, np * 4, false);
      product(gg, ldg * 4, v_pairs, np * 4, round_up(mt_max, 16), Ev2p / kPairs, dp, np * 4, false);
      probs_and_score_grads(s, dp, np, mt, kTile, rows, pad, b.scale, b.lse + g0, b.g + g0 * b.g_row, b.g_row,
                            b.o + g0 * b.o_row, b.o_row, Ev, pt, dst);
      if (b.dq) {
        product(dst, np * 2, k_key_pairs, Ep * 4, Ep, round_up(mt_max, 32) / 32, tile, Ep * 4, false);
        for (int64_t r = 0; r < rows; ++r) store_row_bf16(tile + r * Ep, E, b.dq + (g0 + r) * b.dq_row);
      }
    }
    const int64_t rows = min_of(kRankRows, b.L - r0), keys = round_up(m_max, 16);
    pack_values(b.g + r0 * b.g_row, b.g_row, rows, kRankRows, Ev, g_rows);
    pack_values(b.q + r0 * b.q_row, b.q_row, rows, kRankRows, E, q_rows);
    transpose_row_pairs(p16, np, keys, p_t);
    transpose_row_pairs(ds16, np, keys, ds_t);
    for (int64_t j0 = 0; j0 < keys; j0 += kTile) {  // a tile of keys: its dv, dk rows += 32 query rows' terms
      // (causal: rows before the tile's first key see none of it, their chunks of p, ds are zero)
      const int64_t first = b.causal ? max_of(0, j0 - r0) / 32 : 0, chunks = kRankRows / 32 - first;
      product(p_t + j0 * kRankRows + 32 * first, kRankRows * 2, g_rows + first * 16 * Evp * 2, Evp * 4, Evp, chunks,
              dv + j0 * Evp, Evp * 4, j0 < touched);
      product(ds_t + j0 * kRankRows + 32 * first, kRankRows * 2, q_rows + first * 16 * Ep * 2, Ep * 4, Ep, chunks,
              dk + j0 * Ep, Ep * 4, j0 < touched);
    }
    touched = max_of(touched, keys);
  }
  _tile_release();
  // Rows of the float32 sums into dst (null: not wanted); keys past `touched`, which no
  // query row sees (causal, S > L), get zero rows.
  auto store = [&](const float* sums, int64_t ld, int64_t n, uint16_t* dst, int64_t dst_row) {
    for (int64_t j = 0; dst && j < S; ++j) {
      if (j < touched)
        store_row_bf16(sums + j * ld, n, dst + j * dst_row);
      else
        std::memset(dst + j * dst_row, 0, static_cast<size_t>(n) * 2);
    }
  };
  store(dk, Ep, E, b.dk, b.dk_row);
  store(dv, Evp, Ev, b.dv, b.dv_row);
}

}  // namespace tc::cpu::detail
