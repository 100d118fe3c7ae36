// Internal: the passes behind the fp8 recipes' quantizations (amp/fp8.cpp), each reading the
// 16- or 32-bit values once and writing 8-bit codes with no float32 copy in between.
//
// x is a (rows, cols) matrix of float32, bf16 or fp16, contiguous, on the CPU. Scales are
// per block: along the rows a block is `block` consecutive elements of a row (block = cols:
// one per row); along the columns, `block` consecutive elements of a column. A code is the
// saturating cast of x * scale (float32 product, clamped to the format's largest value,
// rounded to nearest even; NaN stays NaN): what clamp(x * s).to(fp8) gives.
#pragma once
#include <cstdint>

#include "core/tensor_impl.h"

namespace tc::cpu {

// amax[r * nblocks + b] = max |x| over block b of row r (nblocks = ceil(cols / block)); NaN
// where the block holds one.
void fp8_row_block_amax(const Tensor& x, int64_t block, float* amax);
// amax[c * nblocks + b] = max |x| over block b of column c (nblocks = ceil(rows / block)).
void fp8_column_block_amax(const Tensor& x, int64_t block, float* amax);

// codes (rows, out_cols >= cols, 8-bit `dt`): element (r, c) from x(r, c) * scale[r *
// row_stride + c / block] (row_stride 0: scale[c / block] for every row); columns past cols
// are zero.
void fp8_quantize_rows(const Tensor& x, const float* scale, int64_t row_stride, int64_t block, DType dt, void* codes,
                       int64_t out_cols);
// codes (cols, out_rows >= rows): the transpose, element (c, r) from x(r, c) * scale[c *
// nblocks + r / block], nblocks = ceil(rows / block); elements past rows are zero.
void fp8_quantize_columns(const Tensor& x, const float* scale, int64_t block, DType dt, void* codes, int64_t out_rows);

}  // namespace tc::cpu
