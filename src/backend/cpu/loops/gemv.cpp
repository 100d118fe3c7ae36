// Matrix-vector-like products (backend/cpu/loops/gemv.h). The few rows of a are widened once
// into a zero-padded float32 buffer; the weight is read once, in blocks (float32 in place,
// bfloat16 in place and widened in registers where one widening serves, else widened into
// a float32 buffer), and multiplied into float32 accumulators by micro-kernels compiled
// per ISA. Columns of c split among threads; each element is
// summed by one thread in an order set by k, so results do not depend on the thread count.
#include "backend/cpu/loops/gemv.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backend/cpu/loops/fast_math.h"
#include "backend/cpu/loops/simd16.h"
#include "tensorcast/convert.h"
#include "tensorcast/half.h"
#include "tensorcast/parallel.h"

namespace tc::cpu {
namespace {

constexpr int64_t kBlock = 1024;  // dot layout: weight elements per pass over x (a multiple of 16)
// Row-major layout: columns accumulated in registers at a time (8 vectors: 8 independent
// FMA chains per row of b), and rows of b per pass: a pass's kSpan x kCols block of b,
// copied contiguous (rows of b a power of two apart would evict each other from L1),
// serves every row of a from L1.
constexpr int64_t kCols = 128;
constexpr int64_t kSpan = 32;

int64_t round_up(int64_t n, int64_t m) { return (n + m - 1) / m * m; }

bool gemv_dtype(DType dt) { return dt == kFloat32 || dt == kBFloat16 || dt == kFloat16; }

float load(const char* base, DType dt, int64_t i) {
  switch (dt) {
    case DType::BFloat16:
      return detail::bf16_bits_to_float(reinterpret_cast<const uint16_t*>(base)[i]);
    case DType::Float16:
      return detail::half_bits_to_float(reinterpret_cast<const uint16_t*>(base)[i]);
    default:
      return reinterpret_cast<const float*>(base)[i];
  }
}

void store(char* base, DType dt, int64_t i, float v) {
  switch (dt) {
    case DType::BFloat16:
      reinterpret_cast<uint16_t*>(base)[i] = detail::float_to_bf16_bits(v);
      break;
    case DType::Float16:
      reinterpret_cast<uint16_t*>(base)[i] = detail::float_to_half_bits(v);
      break;
    default:
      reinterpret_cast<float*>(base)[i] = v;
  }
}

// For c < COLS and r < rows: acc[r][c][l] += x[r][p] w[c * ldw + p] summed over p < n (a
// multiple of 16) with p = l (mod 16), in increasing p, where LOAD16W(w + i) is the 16
// weights at w + i as float32. One body for every weight dtype: widening is exact, so a
// 16-bit weight gives bitwise the sums of its float32 widening; and a column's sums do not
// depend on COLS (4 columns at a time give each load of x four independent FMA chains).
#define TC_DOT_BLOCK(name, COLS, WeightT, LOAD16W)                                                              \
  TC_SIMD_CLONES void name(const float* x, int64_t ldx, int64_t rows, const WeightT* w, int64_t ldw, int64_t n, \
                           float* acc) {                                                                        \
    for (int64_t r = 0; r < rows; ++r) {                                                                        \
      const float* xr = x + r * ldx;                                                                            \
      float* ar = acc + r * COLS * 16;                                                                          \
      v16 s[COLS];                                                                                              \
      for (int c = 0; c < COLS; ++c) s[c] = TC_LOAD16(ar + 16 * c);                                             \
      for (int64_t p = 0; p < n; p += 16) {                                                                     \
        const v16 xv = TC_LOAD16(xr + p);                                                                       \
        for (int c = 0; c < COLS; ++c) s[c] += xv * LOAD16W(w + c * ldw + p);                                   \
      }                                                                                                         \
      for (int c = 0; c < COLS; ++c) TC_STORE16(ar + 16 * c, s[c]);                                             \
    }                                                                                                           \
  }

using v16bits = uint16_t __attribute__((vector_size(32), aligned(2), may_alias));
using v16u32 = uint32_t __attribute__((vector_size(64)));
// bfloat16 is the top half of a float32. (float16 weights go through convert() into a
// buffer: a _Float16 vector would need clang >= 15.)
#define TC_LOAD16_BF16(p) ((v16)(__builtin_convertvector(*reinterpret_cast<const v16bits*>(p), v16u32) << 16))

TC_DOT_BLOCK(dot4_f32, 4, float, TC_LOAD16)
TC_DOT_BLOCK(dot4_bf16, 4, uint16_t, TC_LOAD16_BF16)
TC_DOT_BLOCK(dot1_f32, 1, float, TC_LOAD16)
TC_DOT_BLOCK(dot1_bf16, 1, uint16_t, TC_LOAD16_BF16)

// The 16 lanes of a dot product summed in a fixed tree.
float lane_sum(const float* l) {
  float h[8];
  for (int i = 0; i < 8; ++i) h[i] = l[i] + l[i + 8];
  for (int i = 0; i < 4; ++i) h[i] += h[i + 4];
  return (h[0] + h[2]) + (h[1] + h[3]);
}

// For r < rows, c < kCols: y[r][c] += sum over p < n of x[r][p] w[p * ldw + c], in
// increasing p, the accumulators in registers for the whole pass (LOAD16W as in
// TC_DOT_BLOCK). As there, widening is exact, so a 16-bit weight gives bitwise the sums of
// its float32 widening.
#define TC_AXPY_BLOCK(name, WeightT, LOAD16W)                                                                   \
  TC_SIMD_CLONES void name(const float* x, int64_t ldx, int64_t rows, const WeightT* w, int64_t ldw, int64_t n, \
                           float* y) {                                                                          \
    constexpr int kV = kCols / 16;                                                                              \
    for (int64_t r = 0; r < rows; ++r) {                                                                        \
      const float* xr = x + r * ldx;                                                                            \
      float* yr = y + r * kCols;                                                                                \
      v16 s[kV];                                                                                                \
      for (int v = 0; v < kV; ++v) s[v] = TC_LOAD16(yr + 16 * v);                                               \
      for (int64_t p = 0; p < n; ++p) {                                                                         \
        const float xp = xr[p];                                                                                 \
        for (int v = 0; v < kV; ++v) s[v] += xp * LOAD16W(w + p * ldw + 16 * v);                                \
      }                                                                                                         \
      for (int v = 0; v < kV; ++v) TC_STORE16(yr + 16 * v, s[v]);                                               \
    }                                                                                                           \
  }

TC_AXPY_BLOCK(axpy_f32, float, TC_LOAD16)
TC_AXPY_BLOCK(axpy_bf16, uint16_t, TC_LOAD16_BF16)

struct Product {
  int64_t rows, k;
  const float* x;  // rows x ldx: a widened, zero-padded to a multiple of 16
  int64_t ldx;
  const char* b;
  DType bdt;
  int64_t b_es, b_stride;  // b's stride in elements along the dim that is not unit-stride
  const char* bias;
  DType bias_dt;
  int64_t bias_stride;
  char* c;
  DType cdt;
  int64_t cs0, cs1;

  void write(int64_t r, int64_t j, float v) const {
    if (bias != nullptr) v += load(bias, bias_dt, j * bias_stride);
    store(c, cdt, r * cs0 + j * cs1, v);
  }

  // b(p, j) at b + (p + j * b_stride) * b_es: each column j of b is a row of the weight.
  void dot_columns(int64_t j0, int64_t j1) const {
    alignas(64) float buf[4 * kBlock];
    alignas(64) float acc[kGemvMaxRows * 4 * 16];
    for (int64_t j = j0; j < j1;) {
      const int64_t cols = j1 - j >= 4 ? 4 : 1;
      std::fill(acc, acc + rows * cols * 16, 0.0f);
      const char* wj = b + j * b_stride * b_es;
      for (int64_t p0 = 0; p0 < k; p0 += kBlock) {
        const int64_t n = std::min(kBlock, k - p0), padded = round_up(n, 16);
        const float* xp = x + p0;
        const char* w = wj + p0 * b_es;
        // A 16-bit weight feeding several rows is widened once into buf (widening in
        // registers would repeat per row); so are float16 and a partial block, zero-padded.
        if (n < padded || bdt == kFloat16 || (bdt == kBFloat16 && rows > 1)) {
          for (int64_t c = 0; c < cols; ++c) {
            convert(w + c * b_stride * b_es, bdt, buf + c * kBlock, kFloat32, n);
            std::fill(buf + c * kBlock + n, buf + c * kBlock + padded, 0.0f);
          }
          (cols == 4 ? dot4_f32 : dot1_f32)(xp, ldx, rows, buf, kBlock, padded, acc);
        } else if (bdt == kFloat32) {
          (cols == 4 ? dot4_f32 : dot1_f32)(xp, ldx, rows, reinterpret_cast<const float*>(w), b_stride, n, acc);
        } else {
          (cols == 4 ? dot4_bf16 : dot1_bf16)(xp, ldx, rows, reinterpret_cast<const uint16_t*>(w), b_stride, n, acc);
        }
      }
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) write(r, j + c, lane_sum(acc + (r * cols + c) * 16));
      j += cols;
    }
  }

  // b(p, j) at b + (p * b_stride + j) * b_es: rows of b are read in column blocks, in
  // place for one row of a when whole (float32, bfloat16), else widened into a buffer,
  // zero-padded.
  void axpy_columns(int64_t j0, int64_t j1) const {
    alignas(64) float buf[kSpan * kCols];
    alignas(64) float y[kGemvMaxRows * kCols];
    for (int64_t c0 = j0; c0 < j1; c0 += kCols) {
      const int64_t n = std::min(kCols, j1 - c0);
      const bool in_place = rows == 1 && n == kCols && (bdt == kFloat32 || bdt == kBFloat16);
      std::fill(y, y + rows * kCols, 0.0f);
      for (int64_t p0 = 0; p0 < k; p0 += kSpan) {
        const int64_t span = std::min(kSpan, k - p0);
        const char* w = b + (p0 * b_stride + c0) * b_es;
        if (in_place && bdt == kFloat32) {
          axpy_f32(x + p0, ldx, rows, reinterpret_cast<const float*>(w), b_stride, span, y);
        } else if (in_place) {
          axpy_bf16(x + p0, ldx, rows, reinterpret_cast<const uint16_t*>(w), b_stride, span, y);
        } else {
          for (int64_t p = 0; p < span; ++p) {
            convert(w + p * b_stride * b_es, bdt, buf + p * kCols, kFloat32, n);
            std::fill(buf + p * kCols + n, buf + (p + 1) * kCols, 0.0f);
          }
          axpy_f32(x + p0, ldx, rows, buf, kCols, span, y);
        }
      }
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < n; ++c) write(r, c0 + c, y[r * kCols + c]);
    }
  }
};

}  // namespace

bool gemv_into(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& c) {
  const int64_t rows = c.size(-2), m = c.size(-1), k = a.size(-1);
  if (rows > kGemvMaxRows || c.numel() != rows * m || m == 0 || k == 0) return false;
  if (!gemv_dtype(a.dtype()) || !gemv_dtype(b.dtype()) || !gemv_dtype(c.dtype())) return false;
  if (bias.defined() && !gemv_dtype(bias.dtype())) return false;
  const bool dot = b.stride(-2) == 1;  // along k: the rows of a (transposed) weight
  if (!dot && b.stride(-1) != 1) return false;

  Product pr;
  pr.rows = rows;
  pr.k = k;
  pr.ldx = round_up(k, 16);
  thread_local std::vector<float> xbuf;  // reused: no allocation per call once grown
  xbuf.assign(static_cast<size_t>(rows * pr.ldx), 0.0f);
  pr.x = xbuf.data();
  const char* pa = static_cast<const char*>(a.raw_data());
  const int64_t a_es = static_cast<int64_t>(element_size(a.dtype()));
  for (int64_t r = 0; r < rows; ++r) {
    float* xr = xbuf.data() + r * pr.ldx;
    const char* ar = pa + r * a.stride(-2) * a_es;
    if (a.stride(-1) == 1)
      convert(ar, a.dtype(), xr, kFloat32, k);
    else
      for (int64_t p = 0; p < k; ++p) xr[p] = load(ar, a.dtype(), p * a.stride(-1));
  }
  pr.b = static_cast<const char*>(b.raw_data());
  pr.bdt = b.dtype();
  pr.b_es = static_cast<int64_t>(element_size(b.dtype()));
  pr.b_stride = dot ? b.stride(-1) : b.stride(-2);
  pr.bias = bias.defined() ? static_cast<const char*>(bias.raw_data()) : nullptr;
  pr.bias_dt = bias.defined() ? bias.dtype() : kFloat32;
  pr.bias_stride = bias.defined() ? bias.stride(0) : 0;
  pr.c = static_cast<char*>(c.raw_data());
  pr.cdt = c.dtype();
  pr.cs0 = c.stride(-2);
  pr.cs1 = c.stride(-1);
  // Enough multiply-adds per task to pay for handing it to a thread; the row-major layout
  // splits in whole column blocks.
  const int64_t grain = std::max<int64_t>(dot ? 1 : kCols, 32768 / (rows * k));
  parallel_for(0, m, grain, [&](int64_t j0, int64_t j1) {
    if (dot)
      pr.dot_columns(j0, j1);
    else
      pr.axpy_columns(j0, j1);
  });
  return true;
}

}  // namespace tc::cpu
