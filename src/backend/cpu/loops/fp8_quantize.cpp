// The fp8 recipes' quantization passes (fp8_quantize.h).
#include "backend/cpu/loops/fp8_quantize.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tensorcast/error.h"
#include "tensorcast/float8.h"
#include "tensorcast/half.h"
#include "tensorcast/parallel.h"

namespace tc::cpu {
namespace {

constexpr const char* kOp = "fp8";
constexpr int64_t kTile = 32;  // rows per tile of a column pass: one MX block

void check_input(const Tensor& x) {
  TC_CHECK(x.device().is_cpu() && x.dim() == 2 && x.is_contiguous() &&
               (x.dtype() == kFloat32 || x.dtype() == kBFloat16 || x.dtype() == kFloat16),
           kOp, "the fp8 quantization passes take a contiguous 2-d float32, bf16 or fp16 CPU tensor, got ",
           dtype_name(x.dtype()), " on ", x.device());
}

// f(const T* x) for x's element type.
template <class F>
void with_input(const Tensor& x, F&& f) {
  switch (x.dtype()) {
    case kBFloat16:
      return f(static_cast<const BFloat16*>(x.raw_data()));
    case kFloat16:
      return f(static_cast<const Half*>(x.raw_data()));
    default:
      return f(static_cast<const float*>(x.raw_data()));
  }
}

// The saturating cast: clamp to the largest finite value (NaN passes), then round to nearest even.
template <class Code>
uint8_t saturate(float v) {
  constexpr float m = std::is_same_v<Code, Float8_e4m3fn> ? 448.0f : 57344.0f;
  return Code(v < -m ? -m : (v > m ? m : v)).x;
}

template <class F>
void with_code(DType dt, F&& f) {
  TC_CHECK(dt == kFloat8_e4m3fn || dt == kFloat8_e5m2, kOp, "expected float8_e4m3fn or float8_e5m2 codes, got ",
           dtype_name(dt));
  if (dt == kFloat8_e4m3fn)
    f(Float8_e4m3fn{});
  else
    f(Float8_e5m2{});
}

// Folds |v| into a running maximum that a NaN sticks to.
inline float fold_amax(float a, float v) {
  const float m = std::abs(v);
  return (std::isnan(a) || std::isnan(m)) ? std::numeric_limits<float>::quiet_NaN() : std::max(a, m);
}

int64_t blocks_of(int64_t n, int64_t block) { return block > 0 ? (n + block - 1) / block : 0; }

}  // namespace

void fp8_row_block_amax(const Tensor& x, int64_t block, float* amax) {
  check_input(x);
  const int64_t rows = x.size(0), cols = x.size(1), nb = blocks_of(cols, block);
  with_input(x, [&](const auto* xv) {
    parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t b = 0; b < nb; ++b) {
          float a = 0.0f;
          for (int64_t c = b * block, e = std::min(cols, c + block); c < e; ++c)
            a = fold_amax(a, static_cast<float>(xv[r * cols + c]));
          amax[r * nb + b] = a;
        }
    });
  });
}

void fp8_column_block_amax(const Tensor& x, int64_t block, float* amax) {
  check_input(x);
  const int64_t rows = x.size(0), cols = x.size(1), nb = blocks_of(rows, block);
  std::fill(amax, amax + cols * nb, 0.0f);
  with_input(x, [&](const auto* xv) {
    // Each thread owns a range of columns and reads them row after row (contiguous runs).
    parallel_for(0, cols, 64, [&](int64_t c0, int64_t c1) {
      for (int64_t r = 0; r < rows; ++r) {
        float* a = amax + r / block;
        for (int64_t c = c0; c < c1; ++c) a[c * nb] = fold_amax(a[c * nb], static_cast<float>(xv[r * cols + c]));
      }
    });
  });
}

void fp8_quantize_rows(const Tensor& x, const float* scale, int64_t row_stride, int64_t block, DType dt, void* codes,
                       int64_t out_cols) {
  check_input(x);
  const int64_t rows = x.size(0), cols = x.size(1);
  TC_CHECK(out_cols >= cols && block > 0, kOp, "fp8_quantize_rows: ", out_cols, " output columns for ", cols);
  auto* out = static_cast<uint8_t*>(codes);
  with_code(dt, [&]<class Code>(Code) {
    with_input(x, [&](const auto* xv) {
      parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1)), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const float* s = scale + r * row_stride;
          uint8_t* o = out + r * out_cols;
          for (int64_t c = 0; c < cols; ++c) o[c] = saturate<Code>(static_cast<float>(xv[r * cols + c]) * s[c / block]);
          std::fill(o + cols, o + out_cols, uint8_t{0});
        }
      });
    });
  });
}

void fp8_quantize_columns(const Tensor& x, const float* scale, int64_t block, DType dt, void* codes, int64_t out_rows) {
  check_input(x);
  const int64_t rows = x.size(0), cols = x.size(1), nb = blocks_of(rows, block);
  TC_CHECK(out_rows >= rows && block > 0, kOp, "fp8_quantize_columns: ", out_rows, " output rows for ", rows);
  auto* out = static_cast<uint8_t*>(codes);
  with_code(dt, [&]<class Code>(Code) {
    with_input(x, [&](const auto* xv) {
      parallel_for(0, cols, 64, [&](int64_t c0, int64_t c1) {
        // Tiles of kTile rows: reads run along x's rows, writes along the output's.
        for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
          const int64_t r1 = std::min(rows, r0 + kTile);
          for (int64_t c = c0; c < c1; ++c) {
            uint8_t* o = out + c * out_rows;
            const float* s = scale + c * nb;
            for (int64_t r = r0; r < r1; ++r)
              o[r] = saturate<Code>(static_cast<float>(xv[r * cols + c]) * s[r / block]);
          }
        }
        for (int64_t c = c0; c < c1; ++c) std::fill(out + c * out_rows + rows, out + (c + 1) * out_rows, uint8_t{0});
      });
    });
  });
}

}  // namespace tc::cpu
