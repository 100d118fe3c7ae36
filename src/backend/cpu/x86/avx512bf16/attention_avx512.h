// Internal, for the kernels compiled for AVX-512 BF16 (attention_avx512bf16.cpp,
// attention_amx.cpp, weight_grad_amx.cpp, matmul_amx_kernel.cpp) only: the pieces the
// attention kernels share (the keys' and values' pair layouts, the softmax's row passes,
// bfloat16 stores), and the pair tiles and 16 x 16 transpose the products' kernels pack with. Inline AVX-512 code in
// an unnamed namespace, as core/x86/avx512/bf16_avx512.h, so that no file compiled for another ISA can
// share a copy.
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/x86/avx512/bf16_avx512.h"

namespace tc::cpu::detail {
namespace {

constexpr int64_t kRows = 4;  // query rows whose softmax passes interleave (softmax_group)

inline int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
inline int64_t min_of(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t max_of(int64_t a, int64_t b) { return a > b ? a : b; }

// m[r] = the keys query row first + r sees, for r < count (0 for rows at `end` or past:
// beyond the rows at hand), under causal masking those up to the row's own index, of n
// keys. Returns the largest.
inline int64_t keys_seen(int64_t* m, int64_t first, int64_t count, int64_t end, int64_t n, bool causal) {
  int64_t most = 0;
  for (int64_t r = 0; r < count; ++r) {
    m[r] = first + r < end ? (causal ? min_of(n, first + r + 1) : n) : 0;
    most = max_of(most, m[r]);
  }
  return most;
}

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512BF16__)
// The 32 bits of bfloat16 elements 2 e2 and 2 e2 + 1 of a row of E (zero past E).
inline uint32_t pair_at(const uint16_t* row, int64_t e2, int64_t E) {
  const uint32_t lo = 2 * e2 < E ? row[2 * e2] : 0, hi = 2 * e2 + 1 < E ? row[2 * e2 + 1] : 0;
  return lo | (hi << 16);
}

constexpr float kLog2e = 1.44269504088896341f;

// 2^t of 16 floats, 0 in the lanes outside `keep`: t = n + f (n the nearest integer, |f| <=
// 1/2), 2^f = 1 + f q(f) with q of degree 4 (fitted for the least relative error on [-1/2,
// 1/2]: 1.9e-7, under 2 float32 ulp; 2^0 = 1 exactly), 2^n applied by VSCALEFPS: 10
// instructions, where exp(x) by Cephes' scheme takes 15 (the softmax passes' largest cost,
// on one 512-bit FMA port). t is held at -125 or above, so a result is a normal float (the
// softmax numerators' bfloat16 rounding needs no subnormal care, store_bf16_normal), or
// NaN: max(-125, t) returns t when t is NaN, so a NaN score poisons its row's sum.
inline __m512 exp2_16(__m512 t, __mmask16 keep) {
  t = _mm512_max_ps(_mm512_set1_ps(-125.0f), t);
  const __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(t, n);
  __m512 q = _mm512_set1_ps(1.326467958278954e-3f);
  q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(9.671502746641636e-3f));
  q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(5.550733953714371e-2f));
  q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(2.4022242426872253e-1f));
  q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(6.931470036506653e-1f));
  return _mm512_maskz_scalef_ps(keep, _mm512_fmadd_ps(q, f, _mm512_set1_ps(1.0f)), n);
}

// 16 floats rounded to bfloat16 as the library rounds everywhere (nearest even, bit for
// bit the reference), the lanes of `keep` stored.
inline void store_bf16(uint16_t* dst, __m512 x, __mmask16 keep = 0xffff) {
  _mm256_mask_storeu_epi16(dst, keep, ::tc::detail::f32_to_bf16_hw(_mm512_castps_si512(x)));
}

// The same for 16 floats none of which is subnormal (exp2_16's results, zeros): VCVTNEPS2BF16
// alone, which rounds every other float as the library does.
inline void store_bf16_normal(uint16_t* dst, __m512 x) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), (__m256i)_mm512_cvtneps_pbh(x));
}

inline __mmask16 lanes_below(int64_t count) {
  return count >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << max_of(count, 0)) - 1u);
}

// f(j, masked) for the 16-float vectors j of [0, end) (multiples of 16): masked is a
// std::false_type below `whole`, where every lane is in range and no mask needs computing,
// a std::true_type from there.
template <class F>
inline void by_vectors(int64_t whole, int64_t end, F f) {
  int64_t j = 0;
  for (; j < whole; j += 16) f(j, std::false_type{});
  for (; j < end; j += 16) f(j, std::true_type{});
}

template <class F>
inline void by_blocks(int64_t blocks, F f) {  // f(first block, count <= 4) with count a template constant
  int64_t b = 0;
  for (; b + 4 <= blocks; b += 4) f(b, std::integral_constant<int, 4>{});
  if (blocks - b == 3) f(b, std::integral_constant<int, 3>{});
  if (blocks - b == 2) f(b, std::integral_constant<int, 2>{});
  if (blocks - b == 1) f(b, std::integral_constant<int, 1>{});
}

// dst[0, n) = factor src[0, n) rounded to bfloat16.
inline void store_row_bf16(const float* src, int64_t n, uint16_t* dst, float factor = 1.0f) {
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
// NaN score makes its row and its lse NaN (exp2_16 passes it to the sum), as the
// composite's softmax.
inline void softmax_group(const float* s, int64_t ld, const int64_t* m, int64_t rows, int64_t pad, float scale,
                          uint16_t* p, float* inv_sum, float* lse) {
  const __m512 sc = _mm512_set1_ps(scale), sc2 = _mm512_set1_ps(scale * kLog2e);
  __m512 vmax[kRows], vmax2[kRows], vsum[kRows];  // vmax2: the max in base 2
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r) {
    vmax[r] = _mm512_set1_ps(-__builtin_inff());
    vsum[r] = _mm512_setzero_ps();
  }
  int64_t whole = m[0], seen = m[0];  // vectors [0, whole): whole in every row, no masks; [seen, pad): zeros
#pragma GCC unroll 4
  for (int r = 1; r < kRows; ++r) {
    whole = min_of(whole, m[r]);
    seen = max_of(seen, m[r]);
  }
  whole = whole / 16 * 16;
  seen = round_up(seen, 16);
  auto max_pass = [&](int64_t j, auto masked) {
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
      const __mmask16 k = masked ? lanes_below(m[r] - j) : static_cast<__mmask16>(0xffff);
      vmax[r] = _mm512_mask_max_ps(vmax[r], k, vmax[r], _mm512_mul_ps(_mm512_maskz_loadu_ps(k, s + r * ld + j), sc));
    }
  };
  by_vectors(whole, seen, max_pass);
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r) {
    vmax[r] = _mm512_set1_ps(_mm512_reduce_max_ps(vmax[r]));
    vmax2[r] = _mm512_mul_ps(vmax[r], _mm512_set1_ps(kLog2e));
  }
  auto exp_pass = [&](int64_t j, auto masked) {  // exp(scale s - max) = 2^(s scale log2(e) - max log2(e))
#pragma GCC unroll 4
    for (int r = 0; r < kRows; ++r) {
      const __mmask16 k = masked ? lanes_below(m[r] - j) : static_cast<__mmask16>(0xffff);
      const __m512 e = exp2_16(_mm512_fmsub_ps(_mm512_maskz_loadu_ps(k, s + r * ld + j), sc2, vmax2[r]), k);
      vsum[r] = _mm512_add_ps(vsum[r], e);
      store_bf16_normal(p + r * ld + j, e);
    }
  };
  by_vectors(whole, seen, exp_pass);
  for (int r = 0; r < kRows; ++r) std::memset(p + r * ld + seen, 0, static_cast<size_t>(pad - seen) * 2);
#pragma GCC unroll 4
  for (int r = 0; r < kRows; ++r) {
    const float sum = _mm512_reduce_add_ps(vsum[r]);
    inv_sum[r] = 1.0f / sum;
    if (lse && r < rows) lse[r] = _mm512_cvtss_f32(vmax[r]) + __builtin_logf(sum);
  }
}

// sum_e g[e] o[e] over n bfloat16 values, in float32: softmax's backward's row term
// sum_j p_j dp_j (= g . sum_j p_j v_j) from the forward's output row, as FlashAttention-2
// takes it: known before the row's probabilities, so that p and ds come out of one pass.
inline float output_dot(const uint16_t* g, const uint16_t* o, int64_t n) {
  auto widen = [](__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); };
  __m512 acc = _mm512_setzero_ps();
  for (int64_t c = 0; c < n; c += 16) {
    const __mmask16 k = lanes_below(n - c);
    acc = _mm512_fmadd_ps(widen(_mm256_maskz_loadu_epi16(k, g + c)), widen(_mm256_maskz_loadu_epi16(k, o + c)), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

// A group's `group` rows of the backward (row r: scores s + r ld and dp = g v^T at dp + r
// ld, m[r] keys; g and the forward's output o: row r at g + r g_row, o + r o_row, Ev each):
// the probabilities again from the forward's log-sum-exp lse[r], p = exp(scale s - lse),
// rounded into p16, and ds = p (scale dp - scale D) with D = g . o, rounded once into ds16,
// in one pass; p16 and ds16 rows ld apart, zero in [m[r], pad). Rows r >= rows (past L:
// m[r] = 0) get zero rows, for the rank updates. A NaN lse or D (the forward's row saw a
// NaN) makes the row NaN through exp2_16 and the products.
inline void probs_and_score_grads(const float* s, const float* dp, int64_t ld, const int64_t* m, int64_t group,
                                  int64_t rows, int64_t pad, float scale, const float* lse, const uint16_t* g,
                                  int64_t g_row, const uint16_t* o, int64_t o_row, int64_t Ev, uint16_t* p16,
                                  uint16_t* ds16) {
  const __m512 sc = _mm512_set1_ps(scale), sc2 = _mm512_set1_ps(scale * kLog2e);
  for (int64_t r = 0; r < group; ++r) {
    const float* sr = s + r * ld;
    const float* dpr = dp + r * ld;
    uint16_t* pr = p16 + r * ld;
    uint16_t* dsr = ds16 + r * ld;
    const bool real = r < rows;
    const __m512 l2 = _mm512_set1_ps(real ? lse[r] * kLog2e : 0.f);
    const __m512 scD = _mm512_set1_ps(real ? scale * output_dot(g + r * g_row, o + r * o_row, Ev) : 0.f);
    auto step = [&](int64_t j, auto masked) {
      const __mmask16 k = masked ? lanes_below(m[r] - j) : static_cast<__mmask16>(0xffff);
      const __m512 p = exp2_16(_mm512_fmsub_ps(_mm512_maskz_loadu_ps(k, sr + j), sc2, l2), k);
      store_bf16_normal(pr + j, p);
      store_bf16(dsr + j, _mm512_maskz_mul_ps(k, p, _mm512_fmsub_ps(_mm512_maskz_loadu_ps(k, dpr + j), sc, scD)));
    };
    const int64_t seen = round_up(m[r], 16);
    by_vectors(m[r] / 16 * 16, seen, step);
    std::memset(pr + seen, 0, static_cast<size_t>(pad - seen) * 2);
    std::memset(dsr + seen, 0, static_cast<size_t>(pad - seen) * 2);
  }
}

// Row `row` of E as E2 = ceil(E / 2) pairs (zero past E).
inline void row_pairs(const uint16_t* row, int64_t E, uint32_t* pairs) {
  if (E % 2 == 0) {
    std::memcpy(pairs, row, static_cast<size_t>(E) * 2);
    return;
  }
  for (int64_t e2 = 0; e2 < (E + 1) / 2; ++e2) pairs[e2] = pair_at(row, e2, E);
}

// A group of `group` rows of x (`cols` bfloat16 each, row r at x + r ld) as a product
// reads them, rows of `pairs` pairs (at least ceil(cols / 2)): x itself when its rows are
// whole pairs, `pairs` wide, and all `group` rows exist (*lda = ld / 2), else copied into
// `copy` (zero past cols and past `rows`; *lda = pairs).
inline const uint16_t* group_pairs(const uint16_t* x, int64_t ld, int64_t cols, int64_t rows, int64_t group,
                                   int64_t pairs, uint16_t* copy, int64_t* lda) {
  if (cols % 2 == 0 && ld % 2 == 0 && rows == group && cols == 2 * pairs) {
    *lda = ld / 2;
    return x;
  }
  const int64_t c2 = (cols + 1) / 2;
  uint32_t* out = reinterpret_cast<uint32_t*>(copy);
  for (int64_t r = 0; r < group; ++r) {
    if (r < rows) row_pairs(x + r * ld, cols, out + r * pairs);
    std::memset(out + r * pairs + (r < rows ? c2 : 0), 0, static_cast<size_t>(pairs - (r < rows ? c2 : 0)) * 4);
  }
  *lda = pairs;
  return copy;
}

// x[c] = column c of the 16 x 16 matrix of 32-bit words whose row r is x[r]: unpacks of
// words and of word pairs gather each column's quarter within 128-bit lanes, then two
// rounds of lane shuffles put the quarters together.
inline void transpose16(__m512i x[16]) {
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

// w[h] = the 32-bit pairs (x[2 h][c], x[2 h + 1][c]) for c < 16, h < 16: 32 rows of 16
// bfloat16 columns (ld apart) as 16 rows of pairs, the rows at or past `rows` read as zero.
// A product's b tile as it is; transposed (transpose16), its a tile of x^T.
inline void pair_rows16(const uint16_t* x, int64_t ld, int64_t rows, __m512i w[16]) {
  for (int64_t h = 0; h < 16; ++h) {
    const int64_t r = 2 * h;
    const __m512i lo = r < rows
                           ? _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + r * ld)))
                           : _mm512_setzero_si512();
    const __m512i hi =
        r + 1 < rows ? _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + (r + 1) * ld)))
                     : _mm512_setzero_si512();
    w[h] = _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
  }
}

// k_pairs[e2][j] = (k[j][2 e2], k[j][2 e2 + 1]) for j < np (zero past n and E): a
// transpose of the keys' 32-bit pairs, by 16 x 16 blocks when the rows are whole pairs,
// else a row at a time through `row` (E2 words).
inline void pack_keys(const uint16_t* k, int64_t k_row, int64_t n, int64_t np, int64_t E, uint16_t* kp, uint32_t* row) {
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
inline void pack_values(const uint16_t* v, int64_t v_row, int64_t n, int64_t np, int64_t Ev, uint16_t* vp) {
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

#endif

}  // namespace
}  // namespace tc::cpu::detail
