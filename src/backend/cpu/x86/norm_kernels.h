// Internal: layer_norm's forward rows on AVX-512 (norm_avx512bf16.cpp): norm.cpp takes them on
// CPUs with AVX-512 F and BW for rows of a multiple of 16 elements in float32 compute,
// whatever the dtypes (the same float row gives the same bits, fused with the residual's
// add or not).
// Plain pointers only: that file is compiled for AVX-512 and must share no inline code
// with the rest of the library.
#pragma once
#include <cstdint>

namespace tc::cpu::detail {

// Rows [r0, r1) of y = layer_norm(s) (* w) (+ b) over n elements (a multiple of 16), with
// s = x, or s = x + residual (residual row r % residual_rows) written to `sum` rounded to
// its dtype, the statistics taken of s as rounded. Each operand is float32 or bfloat16
// (its flag); w, b: n floats or null. mean and rstd (floats, one a row): the mean and
// 1 / sqrt(biased variance + eps), both summed in double lanes (two passes: the sum, then
// squared deviations). scratch: n floats.
// The dtypes other than float32 and bfloat16 (float16) go through ln_finish_row: the
// statistics and output (float) of a float row s, as ln_forward_rows computes them.
struct LnRows {
  const void* x;
  bool x_bf16;
  const void* residual;  // or null
  bool residual_bf16;
  int64_t residual_rows;
  void* sum;  // written when residual is given
  bool sum_bf16;
  const float* w;
  const float* b;
  double eps;
  int64_t n;
  void* out;
  bool out_bf16;
  float* mean;
  float* rstd;
  bool hw_bf16;  // the CPU has AVX512-BF16 (its rounding instruction)
};
void ln_forward_rows(const LnRows& p, int64_t r0, int64_t r1, float* scratch);
void ln_finish_row(const float* s, int64_t n, const float* w, const float* b, double eps, float* y, float* mean,
                   float* rstd);

}  // namespace tc::cpu::detail
