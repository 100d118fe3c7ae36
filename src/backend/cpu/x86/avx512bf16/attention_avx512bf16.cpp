// The AVX-512 BF16 attention kernel (backend/cpu/x86/attention_kernels.h): FlashAttention's
// forward for one block of query rows on VDPBF16PS, which multiplies pairs of bfloat16
// and accumulates in float32, twice the float32 FMA's rate. The keys are laid out once per
// block as pairs along the embedding (k_pairs[e / 2][j]) and the values as pairs along the
// keys (v_pairs[j / 2][c]), so that both products, scores = q k^T and out = p v, read one
// register of 16 column pairs per broadcast pair of a query or probability row. Groups of
// 4 query rows share each load; the scores of a group stay in L1, are softmaxed in
// float32 and rounded once to bfloat16.
//
// This file is compiled with -mavx512*: it must not odr-use inline functions from
// headers, or the linker could keep this file's AVX-512 copy for callers on CPUs without
// it. Plain pointers in, helpers in an unnamed namespace, memcpy only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12's AVX-512 headers (see convert_avx512.cpp)
#endif
#include <immintrin.h>

#include <cstring>

#include "backend/cpu/x86/attention_kernels.h"
#include "backend/cpu/x86/avx512bf16/attention_avx512.h"
#include "core/x86/avx512bf16/require.h"  // stops a build without this folder's flags

namespace tc::cpu::detail {
namespace {

constexpr int64_t kRankRows = 8;  // query rows per dk, dv update: two tiles' rows

}  // namespace

Bf16AttentionScratch attention_block_scratch(int64_t n, int64_t E, int64_t Ev) {
  const int64_t np = round_up(n, 32), E2 = (E + 1) / 2, Evp = round_up(Ev, 16);
  return {E2 * np * 2, np / 2 * Evp * 2, kRows * E2 * 2, kRows * np, kRows * np, kRows * Evp};
}

Bf16BackwardScratch attention_backward_scratch(int64_t S, int64_t E, int64_t Ev) {
  const int64_t np = round_up(S, 32), E2 = (E + 1) / 2, Ev2 = (Ev + 1) / 2;
  const int64_t Ep = round_up(E, 16), Evp = round_up(Ev, 16);
  const int64_t halves = E2 * np * 2 + np / 2 * Ep * 2 + Ev2 * np * 2 + kRows * max_of(E2, Ev2) * 2 + kRows * Ev2 * 2 +
                         kRankRows / 2 * (Ep + Evp) * 2 + 4 * kRankRows * np;
  return {halves, 2 * kRows * np + kRows * Ep + S * (Ep + Evp)};
}

namespace {

__m512bh as_bh(__m512i x) { return reinterpret_cast<__m512bh&>(x); }

// out[r][16 b + l] = sum_t a[r][t] . bm[t][16 b + l] for r < 4, b < NB, t < pairs, where
// a[r][t] and bm[t][c] are pairs of bfloat16 (lda, ldb in pairs) and . is the pair's dot
// product: every product of the kernels (scores = q k^T over pairs of the embedding,
// out = p v and dq = ds k over pairs of keys). All 4 rows are stored, rows past a group's
// end too (every caller's buffer has them): with a variable count GCC keeps the
// accumulators on the stack, zeroing and storing them there on every call.
template <int NB>
void tile_dot(const uint16_t* a, int64_t lda, const uint16_t* bm, int64_t ldb, int64_t pairs, float* out, int64_t ldo) {
  __m512 acc[kRows][NB];
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b) acc[r][b] = _mm512_setzero_ps();
  for (int64_t t = 0; t < pairs; ++t) {
    __m512i bb[NB];
    for (int b = 0; b < NB; ++b) bb[b] = _mm512_loadu_si512(bm + (t * ldb + 16 * b) * 2);
    for (int r = 0; r < kRows; ++r) {
      uint32_t w;
      std::memcpy(&w, a + (r * lda + t) * 2, 4);
      const __m512i ab = _mm512_set1_epi32(static_cast<int>(w));
      for (int b = 0; b < NB; ++b) acc[r][b] = _mm512_dpbf16_ps(acc[r][b], as_bh(ab), as_bh(bb[b]));
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b) _mm512_storeu_ps(out + r * ldo + 16 * b, acc[r][b]);
}

// y[j][c0 + 16 b + l] += sum_{r < kRankRows} w[r][j] z[r][c] for j < m: w as its row pairs
// wp[h][j] = (w[2 h][j], w[2 h + 1][j]) (ldw pairs per h), z as zp[h][c] = (z[2 h][c],
// z[2 h + 1][c]) of Cp columns. Each y row is loaded and stored once per kRankRows / 2 dot
// products.
template <int NB>
void rank_blocks(const uint16_t* wp, int64_t ldw, int64_t m, const uint16_t* zp, int64_t Cp, int64_t c0, float* y,
                 int64_t ldy) {
  constexpr int kPairs = kRankRows / 2;
  __m512i z[kPairs][NB];
#pragma GCC unroll 4
  for (int h = 0; h < kPairs; ++h)
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b) z[h][b] = _mm512_loadu_si512(zp + (h * Cp + c0 + 16 * b) * 2);
  for (int64_t j = 0; j < m; ++j) {
    __m512i wb[kPairs];
#pragma GCC unroll 4
    for (int h = 0; h < kPairs; ++h) {
      uint32_t w;
      std::memcpy(&w, wp + (h * ldw + j) * 2, 4);
      wb[h] = _mm512_set1_epi32(static_cast<int>(w));
    }
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b) {
      float* yj = y + j * ldy + c0 + 16 * b;
      __m512 acc = _mm512_loadu_ps(yj);
#pragma GCC unroll 4
      for (int h = 0; h < kPairs; ++h) acc = _mm512_dpbf16_ps(acc, as_bh(wb[h]), as_bh(z[h][b]));
      _mm512_storeu_ps(yj, acc);
    }
  }
}

}  // namespace

void attention_block_avx512bf16(const Bf16AttentionBlock& b) {
  const int64_t np = round_up(b.n, 32), E2 = (b.E + 1) / 2, Evp = round_up(b.Ev, 16);
  pack_keys(b.k, b.k_row, b.n, np, b.E, b.k_pairs, reinterpret_cast<uint32_t*>(b.q_group));
  pack_values(b.v, b.v_row, b.n, np, b.Ev, b.v_pairs);
  for (int64_t g0 = b.i0; g0 < b.i1; g0 += kRows) {
    const int64_t rows = min_of(kRows, b.i1 - g0);
    int64_t m[kRows];
    const int64_t m_max = keys_seen(m, g0, kRows, b.i1, b.n, b.causal);
    int64_t ldq = 0;
    const uint16_t* qg = group_pairs(b.q + g0 * b.q_row, b.q_row, b.E, rows, kRows, E2, b.q_group, &ldq);
    const int64_t pad = round_up(m_max, 16);  // whole pairs of keys, zero past each row's m
    by_blocks(round_up(m_max, 16) / 16, [&](int64_t first, auto nb) {
      tile_dot<decltype(nb)::value>(qg, ldq, b.k_pairs + 32 * first, np, E2, b.scores + 16 * first, np);
    });
    float inv_sum[kRows];
    softmax_group(b.scores, np, m, rows, pad, b.scale, b.probs, inv_sum, b.lse ? b.lse + g0 : nullptr);
    by_blocks(Evp / 16, [&](int64_t first, auto nb) {
      tile_dot<decltype(nb)::value>(b.probs, np / 2, b.v_pairs + 32 * first, Evp, pad / 2, b.tile + 16 * first, Evp);
    });
    for (int64_t r = 0; r < rows; ++r) store_row_bf16(b.tile + r * Evp, b.Ev, b.out + (g0 + r) * b.out_row, inv_sum[r]);
  }
}

void attention_backward_avx512bf16(const Bf16AttentionBackward& b) {
  const int64_t S = b.S, E = b.E, Ev = b.Ev, np = round_up(S, 32), E2 = (E + 1) / 2, Ev2 = (Ev + 1) / 2;
  const int64_t Ep = round_up(E, 16), Evp = round_up(Ev, 16);
  uint16_t* h = b.scratch16;                                  // carved as attention_backward_scratch sized it
  uint16_t* k_pairs = h;                                      // keys, pairs along E: scores = q k^T
  uint16_t* k_key_pairs = k_pairs + E2 * np * 2;              // keys, pairs along the keys: dq = ds k
  uint16_t* v_pairs = k_key_pairs + np / 2 * Ep * 2;          // values, pairs along Ev: dp = g v^T
  uint16_t* q_group = v_pairs + Ev2 * np * 2;                 // 4 rows of q as pairs
  uint16_t* g_group = q_group + kRows * max_of(E2, Ev2) * 2;  // 4 rows of g as pairs
  uint16_t* q_rows = g_group + kRows * Ev2 * 2;               // kRankRows rows of q as row pairs: dk += ds^T q
  uint16_t* g_rows = q_rows + kRankRows / 2 * Ep * 2;         // of g: dv += p^T g
  uint16_t* p16 = g_rows + kRankRows / 2 * Evp * 2;           // kRankRows rows of p and of ds
  uint16_t* ds16 = p16 + kRankRows * np;
  uint16_t* p_pairs = ds16 + kRankRows * np;  // p16 and ds16 as row pairs: the rank updates' broadcasts
  uint16_t* ds_pairs = p_pairs + kRankRows * np;
  float* s = b.scratch32;  // a group's scores
  float* dp = s + kRows * np;
  float* tile = dp + kRows * np;  // a group's dq
  float* dk = tile + kRows * Ep;  // float32 sums of dk and dv
  float* dv = dk + S * Ep;
  uint32_t* tmp = reinterpret_cast<uint32_t*>(q_group);
  pack_keys(b.k, b.k_row, S, np, E, k_pairs, tmp);
  pack_values(b.k, b.k_row, S, np, E, k_key_pairs);
  pack_keys(b.v, b.v_row, S, np, Ev, v_pairs, tmp);
  std::memset(dk, 0, static_cast<size_t>(S * Ep) * 4);
  std::memset(dv, 0, static_cast<size_t>(S * Evp) * 4);
  for (int64_t r0 = 0; r0 < b.L; r0 += kRankRows) {
    int64_t m[kRankRows];
    const int64_t m_max = keys_seen(m, r0, kRankRows, b.L, S, b.causal);
    const int64_t pad = round_up(m_max, 16);             // p and ds rows are zero in [m[r], pad)
    for (int64_t t0 = 0; t0 < kRankRows; t0 += kRows) {  // the register tiles of kRows rows
      const int64_t g0 = r0 + t0, rows = min_of(kRows, b.L - g0);
      uint16_t* pt = p16 + t0 * np;
      uint16_t* dst = ds16 + t0 * np;
      if (rows <= 0) {  // past L: zero rows for the rank updates
        std::memset(pt, 0, static_cast<size_t>(kRows * np) * 2);
        std::memset(dst, 0, static_cast<size_t>(kRows * np) * 2);
        continue;
      }
      const int64_t* mt = m + t0;
      int64_t mt_max = 0;
      for (int64_t r = 0; r < kRows; ++r) mt_max = max_of(mt_max, mt[r]);
      int64_t ldq = 0, ldg = 0;
      const uint16_t* qg = group_pairs(b.q + g0 * b.q_row, b.q_row, E, rows, kRows, E2, q_group, &ldq);
      const uint16_t* gg = group_pairs(b.g + g0 * b.g_row, b.g_row, Ev, rows, kRows, Ev2, g_group, &ldg);
      by_blocks(round_up(mt_max, 16) / 16, [&](int64_t first, auto nb) {
        tile_dot<decltype(nb)::value>(qg, ldq, k_pairs + 32 * first, np, E2, s + 16 * first, np);
        tile_dot<decltype(nb)::value>(gg, ldg, v_pairs + 32 * first, np, Ev2, dp + 16 * first, np);
      });
      probs_and_score_grads(s, dp, np, mt, kRows, rows, pad, b.scale, b.lse + g0, b.g + g0 * b.g_row, b.g_row,
                            b.o + g0 * b.o_row, b.o_row, Ev, pt, dst);
      if (b.dq) {
        const int64_t pairs = round_up(mt_max, 16) / 2;
        by_blocks(Ep / 16, [&](int64_t first, auto nb) {
          tile_dot<decltype(nb)::value>(dst, np / 2, k_key_pairs + 32 * first, Ep, pairs, tile + 16 * first, Ep);
        });
        for (int64_t r = 0; r < rows; ++r) store_row_bf16(tile + r * Ep, E, b.dq + (g0 + r) * b.dq_row);
      }
    }
    const int64_t rows = min_of(kRankRows, b.L - r0);
    pack_values(b.g + r0 * b.g_row, b.g_row, rows, kRankRows, Ev, g_rows);
    pack_values(b.q + r0 * b.q_row, b.q_row, rows, kRankRows, E, q_rows);
    pack_values(p16, np, kRankRows, kRankRows, pad, p_pairs);
    pack_values(ds16, np, kRankRows, kRankRows, pad, ds_pairs);
    by_blocks(Evp / 16, [&](int64_t first, auto nb) {
      rank_blocks<decltype(nb)::value>(p_pairs, pad, m_max, g_rows, Evp, 16 * first, dv, Evp);
    });
    by_blocks(Ep / 16, [&](int64_t first, auto nb) {
      rank_blocks<decltype(nb)::value>(ds_pairs, pad, m_max, q_rows, Ep, 16 * first, dk, Ep);
    });
  }
  for (int64_t j = 0; b.dk && j < S; ++j) store_row_bf16(dk + j * Ep, E, b.dk + j * b.dk_row);
  for (int64_t j = 0; b.dv && j < S; ++j) store_row_bf16(dv + j * Evp, Ev, b.dv + j * b.dv_row);
}

}  // namespace tc::cpu::detail
