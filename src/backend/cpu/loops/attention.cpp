// Fused scaled dot product attention (backend/cpu/loops/attention.h).
//
// Keys and values are widened to float32 buffers once per task (keys also transposed to
// (E, S), so scores are a product like any other); groups of 4 query rows then run through
// register-tiled kernels compiled for AVX-512 and AVX2 as well (TC_SIMD_CLONES). Work
// splits depend only on the shapes, so results do not depend on the thread count.
#include "backend/cpu/loops/attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <optional>
#include <vector>

#include "backend/cpu/loops/elementwise.h"
#include "backend/cpu/loops/fast_math.h"
#include "backend/cpu/loops/rows.h"
#include "backend/cpu/loops/simd16.h"
#include "backend/cpu/x86/attention_kernels.h"
#include "tensorcast/convert.h"
#include "tensorcast/parallel.h"

namespace tc::cpu {
namespace {

// Register-tiled micro-kernels on float32 buffers, written with GCC vector extensions
// (16 floats: one AVX-512 register, two AVX2 ones) and cloned per ISA (TC_SIMD_CLONES).
// Each works on a group of kRows query rows so that every load of a key or value row
// feeds kRows FMAs. Column counts are multiples of 16 (buffers are zero-padded to that).
constexpr int64_t kRows = 4;

// o[r][c] += sum_{j < m} w[r][j] x[j][c] for r < kRows, c < ncols: scores (w = scaled
// queries, x = transposed keys) and weighted sums of value or key rows alike.
TC_SIMD_CLONES void tile_accumulate(const float* w, int64_t ldw, int64_t m, const float* x, int64_t ldx, int64_t ncols,
                                    float* o, int64_t ldo) {
  int64_t c = 0;
  for (; c + 32 <= ncols; c += 32) {
    v16 acc[kRows][2];
    for (int64_t r = 0; r < kRows; ++r) {
      acc[r][0] = TC_LOAD16(o + r * ldo + c);
      acc[r][1] = TC_LOAD16(o + r * ldo + c + 16);
    }
    for (int64_t j = 0; j < m; ++j) {
      const v16 x0 = TC_LOAD16(x + j * ldx + c), x1 = TC_LOAD16(x + j * ldx + c + 16);
      for (int64_t r = 0; r < kRows; ++r) {
        const float a = w[r * ldw + j];
        acc[r][0] += a * x0;
        acc[r][1] += a * x1;
      }
    }
    for (int64_t r = 0; r < kRows; ++r) {
      TC_STORE16(o + r * ldo + c, acc[r][0]);
      TC_STORE16(o + r * ldo + c + 16, acc[r][1]);
    }
  }
  for (; c < ncols; c += 16) {
    v16 acc[kRows];
    for (int64_t r = 0; r < kRows; ++r) acc[r] = TC_LOAD16(o + r * ldo + c);
    for (int64_t j = 0; j < m; ++j) {
      const v16 xv = TC_LOAD16(x + j * ldx + c);
      for (int64_t r = 0; r < kRows; ++r) acc[r] += w[r * ldw + j] * xv;
    }
    for (int64_t r = 0; r < kRows; ++r) TC_STORE16(o + r * ldo + c, acc[r]);
  }
}

// y[j][c] += sum_{r < kRows} w[r][j] z[r][c] for j < m, c < ncols (a rank-kRows update).
TC_SIMD_CLONES void tile_update(const float* w, int64_t ldw, int64_t m, const float* z, int64_t ldz, int64_t ncols,
                                float* y, int64_t ldy) {
  for (int64_t c = 0; c < ncols; c += 16) {
    v16 zr[kRows];
    for (int64_t r = 0; r < kRows; ++r) zr[r] = TC_LOAD16(z + r * ldz + c);
    for (int64_t j = 0; j < m; ++j) {
      v16 acc = TC_LOAD16(y + j * ldy + c);
      for (int64_t r = 0; r < kRows; ++r) acc += w[r * ldw + j] * zr[r];
      TC_STORE16(y + j * ldy + c, acc);
    }
  }
}

TC_SIMD_CLONES void scale_row(float* x, float a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= a;
}

// y[0, m) = softmax(sc * x[0, m)) and y[m, n) = 0 (y does not alias x), in three passes over
// a row that stays in L1: 16-lane vectors for the scaled copy and its max (a NaN is ignored
// by the max, as row_max's, and still poisons the row through exp and the sum), lane
// arrays for exp and the sum, which the compiler vectorizes.
TC_SIMD_CLONES void softmax_scaled_row(const float* __restrict x, float* __restrict y, int64_t m, int64_t n, float sc) {
  constexpr int kL = 16;
  v16 vmax;
  for (int k = 0; k < kL; ++k) vmax[k] = -std::numeric_limits<float>::infinity();
  int64_t j = 0;
  for (; j + kL <= m; j += kL) {
    const v16 v = TC_LOAD16(x + j) * sc;
    TC_STORE16(y + j, v);
    vmax = v > vmax ? v : vmax;
  }
  float M = -std::numeric_limits<float>::infinity();
  for (int k = 0; k < kL; ++k) M = vmax[k] > M ? vmax[k] : M;
  for (; j < m; ++j) {
    y[j] = x[j] * sc;
    M = y[j] > M ? y[j] : M;
  }
  float acc[kL] = {};
  for (j = 0; j + kL <= m; j += kL)
    for (int k = 0; k < kL; ++k) {
      const float e = fast_exp(y[j + k] - M);
      y[j + k] = e;
      acc[k] += e;
    }
  for (; j < m; ++j) {
    y[j] = fast_exp(y[j] - M);
    acc[0] += y[j];
  }
  float sum = 0.f;
  for (int k = 0; k < kL; ++k) sum += acc[k];
  const float inv = 1.f / sum;
  for (j = 0; j < m; ++j) y[j] *= inv;
  for (; j < n; ++j) y[j] = 0.f;
}

// y[j] = sc * p[j] * (g[j] - sum_k g[k] p[k]) over a row of n.
TC_SIMD_CLONES void softmax_backward_scaled_row(const float* __restrict g, const float* __restrict p,
                                                float* __restrict y, int64_t n, float sc) {
  constexpr int kL = 16;
  float acc[kL] = {};
  int64_t j = 0;
  for (; j + kL <= n; j += kL)
    for (int k = 0; k < kL; ++k) acc[k] += g[j + k] * p[j + k];
  for (; j < n; ++j) acc[0] += g[j] * p[j];
  float sum = 0.f;
  for (int k = 0; k < kL; ++k) sum += acc[k];
  for (j = 0; j < n; ++j) y[j] = sc * (p[j] * (g[j] - sum));
}

int64_t round16(int64_t n) { return (n + 15) / 16 * 16; }

// A (..., rows, cols) tensor: the element offset of each batch index, and row/col strides.
struct MatrixView {
  char* base = nullptr;
  DType dtype = kFloat32;
  int64_t es = 4, row_stride = 0, col_stride = 1, cols = 0;
  std::vector<int64_t> batch_offset;

  explicit MatrixView(const Tensor& t)
      : base(static_cast<char*>(t.raw_data())),
        dtype(t.dtype()),
        es(static_cast<int64_t>(element_size(t.dtype()))),
        row_stride(t.stride(-2)),
        col_stride(t.stride(-1)),
        cols(t.size(-1)) {
    const int64_t nb = t.dim() - 2;
    int64_t n = 1;
    for (int64_t d = 0; d < nb; ++d) n *= t.size(d);
    batch_offset.resize(static_cast<size_t>(n));
    for (int64_t b = 0; b < n; ++b) {
      int64_t rem = b, off = 0;
      for (int64_t d = nb - 1; d >= 0; --d) {
        off += (rem % t.size(d)) * t.stride(d);
        rem /= t.size(d);
      }
      batch_offset[static_cast<size_t>(b)] = off;
    }
  }
  char* row(int64_t b, int64_t r) const { return base + (batch_offset[static_cast<size_t>(b)] + r * row_stride) * es; }
  void load(int64_t b, int64_t r, float* dst) const {
    const char* src = row(b, r);
    if (col_stride == 1 && dtype == kFloat32) {
      std::memcpy(dst, src, static_cast<size_t>(cols) * sizeof(float));
    } else if (col_stride == 1 && dtype == kBFloat16) {
      bf16_to_float(reinterpret_cast<const BFloat16*>(src), dst, cols);
    } else if (col_stride == 1 && dtype == kFloat16) {
      half_to_float(reinterpret_cast<const Half*>(src), dst, cols);
    } else {
      load_block<float>(src, col_stride * es, dtype, dst, cols);
    }
  }
  void store(int64_t b, int64_t r, const float* src) const {
    char* dst = row(b, r);
    if (col_stride == 1 && dtype == kFloat32) {
      std::memcpy(dst, src, static_cast<size_t>(cols) * sizeof(float));
    } else if (col_stride == 1 && dtype == kBFloat16) {
      float_to_bf16(src, reinterpret_cast<BFloat16*>(dst), cols);
    } else if (col_stride == 1 && dtype == kFloat16) {
      float_to_half(src, reinterpret_cast<Half*>(dst), cols);
    } else {
      store_block<float>(src, dst, col_stride * es, dtype, cols);
    }
  }
};

// Rows [0, n) of x (n x cols) as float32, row-major, and optionally transposed (cols x n).
// Rows [0, n) of x as float32: row-major with leading dim ldr (columns past x.cols zero),
// and, when `transposed` is given, as x.cols rows of ldt (columns past n zero).
void load_rows(const MatrixView& x, int64_t b, int64_t n, float* rows, int64_t ldr, float* transposed, int64_t ldt) {
  for (int64_t j = 0; j < n; ++j) {
    float* r = rows + j * ldr;
    x.load(b, j, r);
    std::fill(r + x.cols, r + ldr, 0.f);
  }
  if (!transposed) return;
  constexpr int64_t kTile = 16;  // transposed in tiles that stay in L1 both ways
  for (int64_t j0 = 0; j0 < n; j0 += kTile)
    for (int64_t e0 = 0; e0 < x.cols; e0 += kTile)
      for (int64_t e = e0; e < std::min(x.cols, e0 + kTile); ++e)
        for (int64_t j = j0; j < std::min(n, j0 + kTile); ++j) transposed[e * ldt + j] = rows[j * ldr + e];
  for (int64_t e = 0; e < x.cols; ++e) std::fill(transposed + e * ldt + n, transposed + (e + 1) * ldt, 0.f);
}

int64_t visible(bool causal, int64_t i, int64_t S) { return causal ? std::min(S, i + 1) : S; }

// Per-thread float32 scratch (reused across calls: no allocation once warm).
float* buffer(int which, int64_t n) {
  thread_local std::vector<float> bufs[12];
  std::vector<float>& v = bufs[which];
  if (v.size() < static_cast<size_t>(n)) v.resize(static_cast<size_t>(n));
  return v.data();
}

// A group of up to kRows query rows starting at i0: each row's visible key count, the
// largest, and the columns the tiles compute (rounded up to 16).
struct RowGroup {
  int64_t rows, m[kRows], m_max = 0, cols = 0;
  RowGroup(int64_t i0, int64_t L, int64_t S, bool causal) : rows(std::min(kRows, L - i0)) {
    for (int64_t r = 0; r < kRows; ++r) {
      m[r] = r < rows ? visible(causal, i0 + r, S) : 0;
      m_max = std::max(m_max, m[r]);
    }
    cols = round16(m_max);
  }
};

// Loads the group's rows of x (rows past the group are zero) into buf (kRows x ld), times a.
void load_group(const MatrixView& x, int64_t b, int64_t i0, const RowGroup& g, float a, float* buf, int64_t ld) {
  std::fill(buf, buf + kRows * ld, 0.f);
  for (int64_t r = 0; r < g.rows; ++r) {
    x.load(b, i0 + r, buf + r * ld);
    if (a != 1.f) scale_row(buf + r * ld, a, x.cols);
  }
}

}  // namespace

void sdpa_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                  bool causal) {
  const MatrixView Q(q), K(k), V(v), O(out);
  const int64_t N = static_cast<int64_t>(Q.batch_offset.size());
  const int64_t L = q.size(-2), S = k.size(-2), E = q.size(-1), Ev = v.size(-1), Evp = round16(Ev);
  float* lse_p = lse.data_ptr<float>();
  constexpr int64_t kBlock = 128;  // query rows that share one widened copy of their keys and values
  const int64_t blocks = (L + kBlock - 1) / kBlock;
  parallel_for(0, N * blocks, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / blocks, i0 = (t % blocks) * kBlock, i1 = std::min(L, i0 + kBlock);
      const int64_t n = causal ? std::min(S, i1) : S, ldk = round16(n);  // keys any row of the block sees
      float* kr = buffer(0, n * E);
      float* kt = buffer(1, E * ldk);
      float* vr = buffer(2, n * Evp);
      float* qs = buffer(3, kRows * E);
      float* p = buffer(4, kRows * ldk);
      float* o = buffer(5, kRows * Evp);
      load_rows(K, b, n, kr, E, kt, ldk);
      load_rows(V, b, n, vr, Evp, nullptr, 0);
      for (int64_t g0 = i0; g0 < i1; g0 += kRows) {
        const RowGroup g(g0, i1, S, causal);
        load_group(Q, b, g0, g, static_cast<float>(scale), qs, E);
        std::fill(p, p + kRows * ldk, 0.f);
        tile_accumulate(qs, E, E, kt, ldk, g.cols, p, ldk);
        for (int64_t r = 0; r < kRows; ++r) {  // p := softmax over the visible keys, 0 past them
          float* pr = p + r * ldk;
          const int64_t m = g.m[r];
          if (m > 0) {
            const float mx = row_max(pr, m);
            const float l = exp_shifted(pr, pr, m, mx, 0.f, 1.f);
            scale_row(pr, 1.f / l, m);
            if (r < g.rows) lse_p[b * L + g0 + r] = mx + std::log(l);
          } else if (r < g.rows) {
            lse_p[b * L + g0 + r] = -std::numeric_limits<float>::infinity();
          }
          std::fill(pr + m, pr + g.cols, 0.f);
        }
        std::fill(o, o + kRows * Evp, 0.f);
        tile_accumulate(p, ldk, g.m_max, vr, Evp, Evp, o, Evp);
        for (int64_t r = 0; r < g.rows; ++r) O.store(b, g0 + r, o + r * Evp);
      }
    }
  });
}

namespace {

// Whether the AVX-512 BF16 kernels apply: the CPU has them, bfloat16 tensors with
// contiguous rows, nothing empty.
bool bf16_kernels_apply(std::initializer_list<const Tensor*> ts) {
  const CpuFeatures& f = cpu_features();
  bool ok = f.avx512f && f.avx512bw && f.avx512vl && f.avx512_bf16;
  for (const Tensor* t : ts) ok = ok && t->dtype() == kBFloat16 && t->numel() > 0 && t->stride(-1) == 1;
  return ok;
}

std::atomic<bool> amx_allowed{true};

// Whether those kernels run on AMX tiles: the CPU has AMX-BF16 and the OS grants it.
bool use_amx() { return amx_allowed.load(std::memory_order_relaxed) && cpu_features().amx_bf16; }

// Batch entry b's first row of a bfloat16 matrix, as raw bits.
uint16_t* bf16_rows(const MatrixView& m, int64_t b) { return reinterpret_cast<uint16_t*>(m.row(b, 0)); }

// Thread-local scratch of `elems` 16-bit values (buffer() counts floats).
uint16_t* halves(int which, int64_t elems) { return reinterpret_cast<uint16_t*>(buffer(which, (elems + 1) / 2)); }

}  // namespace

void set_sdpa_amx(bool allowed) { amx_allowed.store(allowed, std::memory_order_relaxed); }
bool sdpa_uses_amx() { return use_amx(); }

bool sdpa_forward_bf16(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                       double scale, bool causal) {
  if (!bf16_kernels_apply({&q, &k, &v, &out})) return false;
  float* lse_p = lse.defined() ? lse.data_ptr<float>() : nullptr;
  const MatrixView Q(q), K(k), V(v), O(out);
  const int64_t N = static_cast<int64_t>(Q.batch_offset.size());
  const int64_t L = q.size(-2), S = k.size(-2), E = q.size(-1), Ev = v.size(-1);
  constexpr int64_t kBlock = 128;  // query rows that share one packed copy of their keys and values
  const int64_t blocks = (L + kBlock - 1) / kBlock;
  const bool amx = use_amx();
  parallel_for(0, N * blocks, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / blocks, i0 = (t % blocks) * kBlock, i1 = std::min(L, i0 + kBlock);
      const int64_t n = causal ? std::min(S, i1) : S;  // keys any row of the block sees
      const detail::Bf16AttentionScratch sz =
          amx ? detail::attention_block_scratch_amx(n, E, Ev) : detail::attention_block_scratch(n, E, Ev);
      (amx ? detail::attention_block_amx
           : detail::attention_block_avx512bf16)({.q = bf16_rows(Q, b),
                                                  .k = bf16_rows(K, b),
                                                  .v = bf16_rows(V, b),
                                                  .q_row = Q.row_stride,
                                                  .k_row = K.row_stride,
                                                  .v_row = V.row_stride,
                                                  .out = bf16_rows(O, b),
                                                  .out_row = O.row_stride,
                                                  .i0 = i0,
                                                  .i1 = i1,
                                                  .n = n,
                                                  .E = E,
                                                  .Ev = Ev,
                                                  .causal = causal,
                                                  .scale = static_cast<float>(scale),
                                                  .k_pairs = halves(1, sz.k_pairs),
                                                  .v_pairs = halves(2, sz.v_pairs),
                                                  .q_group = halves(3, sz.q_group),
                                                  .scores = buffer(4, sz.scores),
                                                  .probs = halves(5, sz.probs),
                                                  .tile = buffer(6, sz.tile),
                                                  .lse = lse_p ? lse_p + b * L : nullptr});
    }
  });
  return true;
}

bool sdpa_backward_bf16(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& g, const Tensor& q,
                        const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse, double scale,
                        bool causal) {
  if (!bf16_kernels_apply({&q, &k, &v, &g, &out})) return false;
  for (const Tensor* d : {&dq, &dk, &dv})
    if (d->defined() && !bf16_kernels_apply({d})) return false;
  const MatrixView Q(q), K(k), V(v), G(g), O(out);
  std::optional<MatrixView> DQ, DK, DV;
  if (dq.defined()) DQ.emplace(dq);
  if (dk.defined()) DK.emplace(dk);
  if (dv.defined()) DV.emplace(dv);
  auto rows = [](const std::optional<MatrixView>& m, int64_t b) { return m ? bf16_rows(*m, b) : nullptr; };
  auto stride = [](const std::optional<MatrixView>& m) { return m ? m->row_stride : 0; };
  const int64_t N = static_cast<int64_t>(Q.batch_offset.size());
  const int64_t L = q.size(-2), S = k.size(-2), E = q.size(-1), Ev = v.size(-1);
  const bool amx = use_amx();
  const detail::Bf16BackwardScratch sz =
      amx ? detail::attention_backward_scratch_amx(S, E, Ev) : detail::attention_backward_scratch(S, E, Ev);
  parallel_for(0, N, 1, [&](int64_t b0, int64_t b1) {  // one batch entry per task: its dk, dv sum over every row
    for (int64_t b = b0; b < b1; ++b) {
      (amx ? detail::attention_backward_amx
           : detail::attention_backward_avx512bf16)({.q = bf16_rows(Q, b),
                                                     .k = bf16_rows(K, b),
                                                     .v = bf16_rows(V, b),
                                                     .g = bf16_rows(G, b),
                                                     .o = bf16_rows(O, b),
                                                     .lse = lse.data_ptr<float>() + b * L,
                                                     .q_row = Q.row_stride,
                                                     .k_row = K.row_stride,
                                                     .v_row = V.row_stride,
                                                     .g_row = G.row_stride,
                                                     .o_row = O.row_stride,
                                                     .dq = rows(DQ, b),
                                                     .dk = rows(DK, b),
                                                     .dv = rows(DV, b),
                                                     .dq_row = stride(DQ),
                                                     .dk_row = stride(DK),
                                                     .dv_row = stride(DV),
                                                     .L = L,
                                                     .S = S,
                                                     .E = E,
                                                     .Ev = Ev,
                                                     .causal = causal,
                                                     .scale = static_cast<float>(scale),
                                                     .scratch16 = halves(3, sz.halves),
                                                     .scratch32 = buffer(4, sz.floats)});
    }
  });
  return true;
}

namespace {

// The rows of a (..., rows, n) band of a product-path matrix: the last dim contiguous, the
// batch dims collapsing to one stride (a narrow in the last two dims of a contiguous matrix).
struct ScoreRows {
  char* base;
  int64_t es, rows, batch_stride, row_stride;
  explicit ScoreRows(const Tensor& t)
      : base(static_cast<char*>(t.raw_data())),
        es(static_cast<int64_t>(element_size(t.dtype()))),
        rows(t.size(-2)),
        batch_stride(t.dim() > 2 ? t.stride(-3) : 0),
        row_stride(t.stride(-2)) {
    bool ok = t.size(-1) <= 1 || t.stride(-1) == 1;
    for (int64_t d = 0; d + 3 < t.dim(); ++d)
      ok = ok && (t.size(d) == 1 || t.stride(d) == t.stride(d + 1) * t.size(d + 1));
    TC_CHECK(ok, "scaled_dot_product_attention", "internal: a score band of shape ", shape_str(t.sizes()),
             " and strides ", shape_str(t.strides()), " is not a row band of a contiguous matrix");
  }
  char* row(int64_t r) const { return base + ((r / rows) * batch_stride + (r % rows) * row_stride) * es; }
};

void store_row(const float* src, char* dst, DType dt, int64_t n) {
  if (dt == kBFloat16)
    float_to_bf16(src, reinterpret_cast<BFloat16*>(dst), n);
  else if (dt == kFloat16)
    float_to_half(src, reinterpret_cast<Half*>(dst), n);
  else
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
}

// The row pass of the product path: row(r, buf) computes row r of `out`'s band (n floats)
// into buf, which is then stored into out (float32, or rounded once to 16 bits).
template <class Row>
void for_each_score_row(const Tensor& out, Row row) {
  const int64_t n = out.size(-1), rows = n > 0 ? out.numel() / n : 0;
  const ScoreRows O(out);
  const DType dt = out.dtype();
  parallel_for(0, rows, std::max<int64_t>(1, 4096 / std::max<int64_t>(n, 1)), [&](int64_t r0, int64_t r1) {
    float* buf = buffer(0, n);
    for (int64_t r = r0; r < r1; ++r) {
      row(r, buf);
      store_row(buf, O.row(r), dt, n);
    }
  });
}

}  // namespace

void sdpa_probs(const Tensor& p, const Tensor& s, double scale, bool causal, int64_t first_row, bool keep_float) {
  const int64_t n = s.size(-1), R = s.size(-2);
  const ScoreRows Sr(s);
  const float sc = static_cast<float>(scale);
  // Through buf: p may be s itself.
  for_each_score_row(p, [&](int64_t r, float* buf) {
    float* sr = reinterpret_cast<float*>(Sr.row(r));
    const int64_t m = causal ? std::min(n, first_row + r % R + 1) : n;  // keys j <= i of row i
    softmax_scaled_row(sr, buf, m, n, sc);
    if (keep_float) std::memcpy(sr, buf, static_cast<size_t>(n) * sizeof(float));
  });
}

void sdpa_probs_backward(const Tensor& ds, const Tensor& dp, const Tensor& p, double scale) {
  const int64_t n = p.size(-1);
  const ScoreRows P(p), DP(dp);
  const float sc = static_cast<float>(scale);
  for_each_score_row(ds, [&](int64_t r, float* buf) {
    softmax_backward_scaled_row(reinterpret_cast<const float*>(DP.row(r)), reinterpret_cast<const float*>(P.row(r)),
                                buf, n, sc);
  });
}

void sdpa_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& g, const Tensor& q,
                   const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse, double scale, bool causal) {
  const MatrixView Q(q), K(k), V(v), O(out), G(g);
  std::optional<MatrixView> DQ, DK, DV;
  if (dq.defined()) DQ.emplace(dq);
  if (dk.defined()) DK.emplace(dk);
  if (dv.defined()) DV.emplace(dv);
  const int64_t N = static_cast<int64_t>(Q.batch_offset.size());
  const int64_t L = q.size(-2), S = k.size(-2), E = q.size(-1), Ev = v.size(-1);
  const int64_t Ep = round16(E), Evp = round16(Ev), lds = round16(S);
  const float* lse_p = lse.data_ptr<float>();
  const float sc = static_cast<float>(scale);
  // One batch index per task: its dk and dv sum over every query row.
  parallel_for(0, N, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      float* kr = buffer(0, S * Ep);
      float* kt = buffer(1, E * lds);
      float* vr = buffer(2, S * Evp);
      float* vt = buffer(3, Ev * lds);
      float* dkr = buffer(4, S * Ep);
      float* dvr = buffer(5, S * Evp);
      float* qs = buffer(6, kRows * Ep);
      float* go = buffer(7, kRows * Evp);
      float* o = buffer(8, kRows * Evp);
      float* p = buffer(9, kRows * lds);
      float* ds = buffer(10, kRows * lds);
      float* dqr = buffer(11, kRows * Ep);
      load_rows(K, b, S, kr, Ep, kt, lds);
      load_rows(V, b, S, vr, Evp, vt, lds);
      std::fill(dkr, dkr + S * Ep, 0.f);
      std::fill(dvr, dvr + S * Evp, 0.f);
      for (int64_t g0 = 0; g0 < L; g0 += kRows) {
        const RowGroup grp(g0, L, S, causal);
        load_group(Q, b, g0, grp, sc, qs, Ep);
        load_group(G, b, g0, grp, 1.f, go, Evp);
        load_group(O, b, g0, grp, 1.f, o, Evp);
        std::fill(p, p + kRows * lds, 0.f);
        std::fill(ds, ds + kRows * lds, 0.f);
        tile_accumulate(qs, Ep, E, kt, lds, grp.cols, p, lds);     // the forward's scores
        tile_accumulate(go, Evp, Ev, vt, lds, grp.cols, ds, lds);  // dp_j = g . v_j
        for (int64_t r = 0; r < kRows; ++r) {
          float* pr = p + r * lds;
          float* dsr = ds + r * lds;
          const int64_t m = grp.m[r];
          if (m > 0) {
            (void)exp_shifted(pr, pr, m, lse_p[b * L + g0 + r], 0.f, 1.f);  // the forward's probabilities
            const float D = row_dot(go + r * Evp, o + r * Evp, Ev);         // sum_j p_j dp_j
            for (int64_t j = 0; j < m; ++j) dsr[j] = pr[j] * (dsr[j] - D);
          }
          std::fill(pr + m, pr + grp.cols, 0.f);
          std::fill(dsr + m, dsr + grp.cols, 0.f);
        }
        tile_update(p, lds, grp.m_max, go, Evp, Evp, dvr, Evp);  // dv_j += p_j g
        tile_update(ds, lds, grp.m_max, qs, Ep, Ep, dkr, Ep);    // dk_j += ds_j (scale q)
        std::fill(dqr, dqr + kRows * Ep, 0.f);
        tile_accumulate(ds, lds, grp.m_max, kr, Ep, Ep, dqr, Ep);  // dq = scale sum_j ds_j k_j
        for (int64_t r = 0; DQ && r < grp.rows; ++r) {
          scale_row(dqr + r * Ep, sc, E);
          DQ->store(b, g0 + r, dqr + r * Ep);
        }
      }
      for (int64_t j = 0; DK && j < S; ++j) DK->store(b, j, dkr + j * Ep);
      for (int64_t j = 0; DV && j < S; ++j) DV->store(b, j, dvr + j * Evp);
    }
  });
}

}  // namespace tc::cpu
