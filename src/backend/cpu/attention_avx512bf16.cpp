// The AVX-512 BF16 attention kernel (backend/cpu/attention_kernels.h): FlashAttention's
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
#include <type_traits>

#include "backend/cpu/attention_kernels.h"
#include "core/bf16_avx512.h"

namespace tc::cpu::detail {
namespace {

constexpr int64_t kRows = 4;      // query rows per register tile
constexpr int64_t kRankRows = 8;  // query rows per dk, dv update: two tiles' rows

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
int64_t min_of(int64_t a, int64_t b) { return a < b ? a : b; }
int64_t max_of(int64_t a, int64_t b) { return a > b ? a : b; }

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

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512BF16__)
namespace {

// The 32 bits of bfloat16 elements 2 e2 and 2 e2 + 1 of a row of E (zero past E).
uint32_t pair_at(const uint16_t* row, int64_t e2, int64_t E) {
  const uint32_t lo = 2 * e2 < E ? row[2 * e2] : 0, hi = 2 * e2 + 1 < E ? row[2 * e2 + 1] : 0;
  return lo | (hi << 16);
}

__m512bh as_bh(__m512i x) { return reinterpret_cast<__m512bh&>(x); }

// exp of 16 floats, fast_exp's scheme (Cephes' polynomial on r = x - n ln 2), with the
// power of two applied by VSCALEFPS. Arguments are <= 0 here (x - row max).
__m512 exp16(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.33654f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

// 16 floats rounded to bfloat16 as the library rounds everywhere (nearest even, bit for
// bit the reference), the lanes of `keep` stored.
void store_bf16(uint16_t* dst, __m512 x, __mmask16 keep = 0xffff) {
  _mm256_mask_storeu_epi16(dst, keep, ::tc::detail::f32_to_bf16_hw(_mm512_castps_si512(x)));
}

__mmask16 lanes_below(int64_t count) {
  return count >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << max_of(count, 0)) - 1u);
}

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

template <class F>
void by_blocks(int64_t blocks, F f) {  // f(first block, count <= 4) with count a template constant
  int64_t b = 0;
  for (; b + 4 <= blocks; b += 4) f(b, std::integral_constant<int, 4>{});
  if (blocks - b == 3) f(b, std::integral_constant<int, 3>{});
  if (blocks - b == 2) f(b, std::integral_constant<int, 2>{});
  if (blocks - b == 1) f(b, std::integral_constant<int, 1>{});
}

// dst[0, n) = factor src[0, n) rounded to bfloat16.
void store_row_bf16(const float* src, int64_t n, uint16_t* dst, float factor = 1.0f) {
  const __m512 f = _mm512_set1_ps(factor);
  for (int64_t c = 0; c < n; c += 16)
    store_bf16(dst + c, _mm512_mul_ps(_mm512_loadu_ps(src + c), f), lanes_below(n - c));
}

// The group's kRows rows together (row r: scores s + r ld, m[r] keys): p[r][0, m[r]) =
// exp(scale s - the row's max) rounded to bfloat16, the softmax's numerators (the caller
// divides the row's product with v by their sum, as FlashAttention does), p[r][m[r], pad)
// = 0. Sets inv_sum[r] = 1 / the sum and (lse not null) lse[r] = the log-sum-exp of
// scale s[r][0, m[r]) for r < rows, for the backward. The rows' passes are interleaved:
// one row's max, exp and sum are chains of dependent instructions (the reductions' and
// the exp polynomial's latencies), which four independent rows hide from each other. A
// NaN score makes its row and its lse NaN, as the composite's softmax.
void softmax_group(const float* s, int64_t ld, const int64_t* m, int64_t rows, int64_t pad, float scale, uint16_t* p,
                   float* inv_sum, float* lse) {
  const __m512 sc = _mm512_set1_ps(scale);
  __m512 vmax[kRows], vsum[kRows];
  __mmask16 nan[kRows];
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r) {
    vmax[r] = _mm512_set1_ps(-__builtin_inff());
    vsum[r] = _mm512_setzero_ps();
    nan[r] = 0;
  }
  for (int64_t j = 0; j < pad; j += 16)
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
      const __mmask16 k = lanes_below(m[r] - j);
      const __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, s + r * ld + j), sc);
      nan[r] |= _mm512_mask_cmp_ps_mask(k, x, x, _CMP_UNORD_Q);
      vmax[r] = _mm512_mask_max_ps(vmax[r], k, vmax[r], x);
    }
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r) vmax[r] = _mm512_set1_ps(_mm512_reduce_max_ps(vmax[r]));
  for (int64_t j = 0; j < pad; j += 16)
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
      const __mmask16 k = lanes_below(m[r] - j);
      const __m512 e =
          _mm512_maskz_mov_ps(k, exp16(_mm512_fmsub_ps(_mm512_maskz_loadu_ps(k, s + r * ld + j), sc, vmax[r])));
      vsum[r] = _mm512_add_ps(vsum[r], e);
      store_bf16(p + r * ld + j, e);
    }
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r) {
    const float sum = _mm512_reduce_add_ps(vsum[r]);
    const bool is_nan = nan[r] != 0;
    inv_sum[r] = is_nan ? __builtin_nanf("") : 1.0f / sum;
    if (lse && r < rows) lse[r] = is_nan ? __builtin_nanf("") : _mm512_cvtss_f32(vmax[r]) + __builtin_logf(sum);
  }
}

// The backward's row: the forward's probabilities again from its log-sum-exp in one pass,
// p[0, m) = exp(scale s[0, m) - lse), as float32 over s and rounded to bfloat16 into
// p16 (zero in [m, pad)). Returns sum_j p_j dp_j, softmax's backward's row term.
float probs_from_lse(float* s, const float* dp, int64_t m, int64_t pad, float scale, float lse, uint16_t* p16) {
  if (__builtin_isnan(lse)) {  // a NaN score in the forward: the row is NaN (exp16 would clamp it)
    for (int64_t j = 0; j < pad; j += 16) {
      const __mmask16 k = lanes_below(m - j);
      const __m512 pr = _mm512_maskz_mov_ps(k, _mm512_set1_ps(__builtin_nanf("")));
      _mm512_mask_storeu_ps(s + j, k, pr);
      store_bf16(p16 + j, pr);
    }
    return __builtin_nanf("");
  }
  const __m512 sc = _mm512_set1_ps(scale), l = _mm512_set1_ps(lse);
  __m512 vd = _mm512_setzero_ps();
  for (int64_t j = 0; j < pad; j += 16) {
    const __mmask16 k = lanes_below(m - j);
    const __m512 pr = _mm512_maskz_mov_ps(k, exp16(_mm512_fmsub_ps(_mm512_maskz_loadu_ps(k, s + j), sc, l)));
    _mm512_mask_storeu_ps(s + j, k, pr);
    store_bf16(p16 + j, pr);
    vd = _mm512_fmadd_ps(pr, _mm512_maskz_loadu_ps(k, dp + j), vd);
  }
  return _mm512_reduce_add_ps(vd);
}

// Row `row` of E as E2 = ceil(E / 2) pairs (zero past E).
void row_pairs(const uint16_t* row, int64_t E, uint32_t* pairs) {
  if (E % 2 == 0) {
    std::memcpy(pairs, row, static_cast<size_t>(E) * 2);
    return;
  }
  for (int64_t e2 = 0; e2 < (E + 1) / 2; ++e2) pairs[e2] = pair_at(row, e2, E);
}

// A group's kRows rows of x (`cols` bfloat16 each, row r at x + r ld) as tile_dot reads
// them: x itself when its rows are whole pairs and all kRows exist (*lda = ld / 2), else
// copied into `copy` as pairs (zero past cols and past `rows`; *lda = ceil(cols / 2)).
const uint16_t* group_pairs(const uint16_t* x, int64_t ld, int64_t cols, int64_t rows, uint16_t* copy, int64_t* lda) {
  if (cols % 2 == 0 && ld % 2 == 0 && rows == kRows) {
    *lda = ld / 2;
    return x;
  }
  const int64_t c2 = (cols + 1) / 2;
  uint32_t* out = reinterpret_cast<uint32_t*>(copy);
  for (int64_t r = 0; r < kRows; ++r) {
    if (r < rows)
      row_pairs(x + r * ld, cols, out + r * c2);
    else
      std::memset(out + r * c2, 0, static_cast<size_t>(c2) * 4);
  }
  *lda = c2;
  return copy;
}

// x[c] = column c of the 16 x 16 matrix of 32-bit words whose row r is x[r]: unpacks of
// words and of word pairs gather each column's quarter within 128-bit lanes, then two
// rounds of lane shuffles put the quarters together.
void transpose16(__m512i x[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(x[i], x[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(x[i], x[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {  // u[i + c]: column 4 L + c of rows i .. i + 3, in lane L
    u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int h = 0; h < 16; h += 8)  // rows h .. h + 7: lanes 0, 2 (0x88) and 1, 3 (0xdd) of two quarters
    for (int c = 0; c < 4; ++c) {
      t[h + c] = _mm512_shuffle_i32x4(u[h + c], u[h + 4 + c], 0x88);
      t[h + 4 + c] = _mm512_shuffle_i32x4(u[h + c], u[h + 4 + c], 0xdd);
    }
  for (int c = 0; c < 8; ++c) {
    x[c] = _mm512_shuffle_i32x4(t[c], t[c + 8], 0x88);
    x[c + 8] = _mm512_shuffle_i32x4(t[c], t[c + 8], 0xdd);
  }
}

// k_pairs[e2][j] = (k[j][2 e2], k[j][2 e2 + 1]) for j < np (zero past n and E): a
// transpose of the keys' 32-bit pairs, by 16 x 16 blocks when the rows are whole pairs,
// else a row at a time through `row` (E2 words).
void pack_keys(const uint16_t* k, int64_t k_row, int64_t n, int64_t np, int64_t E, uint16_t* kp, uint32_t* row) {
  const int64_t E2 = (E + 1) / 2;
  uint32_t* out = reinterpret_cast<uint32_t*>(kp);
  if (E % 2 == 0 && k_row % 2 == 0) {
    for (int64_t j0 = 0; j0 < np; j0 += 16)  // np: a multiple of 32
      for (int64_t e0 = 0; e0 < E2; e0 += 16) {
        const __mmask16 cols = lanes_below(E2 - e0);
        __m512i x[16];
        for (int64_t r = 0; r < 16; ++r)
          x[r] = j0 + r < n ? _mm512_maskz_loadu_epi32(cols, k + (j0 + r) * k_row + 2 * e0) : _mm512_setzero_si512();
        transpose16(x);
        for (int64_t c = 0; c < 16 && e0 + c < E2; ++c) _mm512_storeu_si512(out + (e0 + c) * np + j0, x[c]);
      }
    return;
  }
  for (int64_t j = 0; j < n; ++j) {
    row_pairs(k + j * k_row, E, row);
    for (int64_t e2 = 0; e2 < E2; ++e2) out[e2 * np + j] = row[e2];
  }
  for (int64_t e2 = 0; e2 < E2; ++e2)
    for (int64_t j = n; j < np; ++j) out[e2 * np + j] = 0;
}

// v_pairs[j2][c] = (v[2 j2][c], v[2 j2 + 1][c]) for j2 < np / 2, c < Evp (zero past n, Ev).
void pack_values(const uint16_t* v, int64_t v_row, int64_t n, int64_t np, int64_t Ev, uint16_t* vp) {
  const int64_t Evp = round_up(Ev, 16);
  // Interleaves 32 columns of two rows: lanes 2 i and 2 i + 1 of the result take lane i
  // of row a and of row b (first half: i < 16; second: i >= 16).
  alignas(64) uint16_t lo_idx[32], hi_idx[32];
  for (int i = 0; i < 16; ++i) {
    lo_idx[2 * i] = static_cast<uint16_t>(i);
    lo_idx[2 * i + 1] = static_cast<uint16_t>(32 + i);
    hi_idx[2 * i] = static_cast<uint16_t>(16 + i);
    hi_idx[2 * i + 1] = static_cast<uint16_t>(48 + i);
  }
  const __m512i lo = _mm512_load_si512(lo_idx), hi = _mm512_load_si512(hi_idx);
  for (int64_t j2 = 0; j2 < np / 2; ++j2) {
    uint16_t* row = vp + j2 * Evp * 2;
    const int64_t ja = 2 * j2, jb = 2 * j2 + 1;
    int64_t c = 0;
    if (jb < n) {
      for (; c + 32 <= Ev; c += 32) {
        const __m512i a = _mm512_loadu_si512(v + ja * v_row + c), b = _mm512_loadu_si512(v + jb * v_row + c);
        _mm512_storeu_si512(row + 2 * c, _mm512_permutex2var_epi16(a, lo, b));
        _mm512_storeu_si512(row + 2 * c + 32, _mm512_permutex2var_epi16(a, hi, b));
      }
    }
    for (; c < Evp; ++c) {
      row[2 * c] = ja < n && c < Ev ? v[ja * v_row + c] : 0;
      row[2 * c + 1] = jb < n && c < Ev ? v[jb * v_row + c] : 0;
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
    int64_t m[kRows], m_max = 0;
    for (int64_t r = 0; r < kRows; ++r) {
      m[r] = r < rows ? (b.causal ? min_of(b.n, g0 + r + 1) : b.n) : 0;
      m_max = max_of(m_max, m[r]);
    }
    int64_t ldq = 0;
    const uint16_t* qg = group_pairs(b.q + g0 * b.q_row, b.q_row, b.E, rows, b.q_group, &ldq);
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
  float* s = b.scratch32;  // scores, then float32 probabilities
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
  const __m512 sc = _mm512_set1_ps(b.scale);
  for (int64_t r0 = 0; r0 < b.L; r0 += kRankRows) {
    int64_t m[kRankRows], m_max = 0;  // keys each row sees (0 past L)
    for (int64_t r = 0; r < kRankRows; ++r) {
      m[r] = r0 + r < b.L ? (b.causal ? min_of(S, r0 + r + 1) : S) : 0;
      m_max = max_of(m_max, m[r]);
    }
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
      const uint16_t* qg = group_pairs(b.q + g0 * b.q_row, b.q_row, E, rows, q_group, &ldq);
      const uint16_t* gg = group_pairs(b.g + g0 * b.g_row, b.g_row, Ev, rows, g_group, &ldg);
      by_blocks(round_up(mt_max, 16) / 16, [&](int64_t first, auto nb) {
        tile_dot<decltype(nb)::value>(qg, ldq, k_pairs + 32 * first, np, E2, s + 16 * first, np);
        tile_dot<decltype(nb)::value>(gg, ldg, v_pairs + 32 * first, np, Ev2, dp + 16 * first, np);
      });
      for (int64_t r = 0; r < kRows; ++r) {  // ds = scale p (dp - sum(p dp)), rounded once
        float* pr = s + r * np;
        float* dpr = dp + r * np;
        // (rows past L: m = 0, zero probabilities for the rank updates)
        const float lse = r < rows ? b.lse[g0 + r] : 0.f;
        const __m512 D = _mm512_set1_ps(probs_from_lse(pr, dpr, mt[r], pad, b.scale, lse, pt + r * np));
        for (int64_t j = 0; j < pad; j += 16) {
          const __mmask16 k = lanes_below(mt[r] - j);
          const __m512 d = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, dpr + j), D);
          store_bf16(dst + r * np + j, _mm512_maskz_mul_ps(k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, pr + j), sc), d));
        }
      }
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
#else
// Never called: the caller checks the CPU's features first.
void attention_block_avx512bf16(const Bf16AttentionBlock&) { __builtin_trap(); }
void attention_backward_avx512bf16(const Bf16AttentionBackward&) { __builtin_trap(); }
#endif

}  // namespace tc::cpu::detail
