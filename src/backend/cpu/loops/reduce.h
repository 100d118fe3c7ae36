// Internal: the CPU reduction kernels behind sum, mean, var, max/min and argmax/argmin.
//
// A reduction splits the input's dims into two groups, the kept (output) dims and the
// reduced dims, and coalesces each group on its own, so no data is ever permuted or
// copied. Two loop shapes cover the common layouts:
//   * inner: the reduced elements of one output form contiguous runs (reducing the last
//     dims of a contiguous tensor); each output sums its runs in blocks.
//   * outer: the kept innermost dim is contiguous in memory (reducing leading dims, as a
//     bias gradient (N, C) -> (C)); rows are added into a float32 row buffer.
// Sums accumulate in float32 (float64 for float64, int64 for integers) with pairwise
// summation over blocks, so the error grows with log(n), not n. The work split depends
// only on the shapes, never on the thread count, so results are reproducible.
#pragma once
#include <vector>

#include "core/tensor_impl.h"

namespace tc::cpu {

// out (contiguous; numel = product of the kept dims) = sum over the dims with
// reduced[d] of x, divided by `divisor`. Float inputs accumulate in float32/float64,
// integer/bool inputs in int64 (out must then be int64; divisor is ignored).
void sum_kernel(const Tensor& out, const Tensor& x, const std::vector<bool>& reduced, double divisor = 1.0);

// out = sum((x - mean)^2) / max(0, N - correction) over the reduced dims (two passes, the
// mean kept in the accumulation type). If `mean_out` is defined (contiguous, float32 for
// 16-bit/float32 inputs, float64 for float64, numel = kept elements) it receives the mean.
void var_kernel(const Tensor& out, const Tensor& mean_out, const Tensor& x, const std::vector<bool>& reduced,
                int64_t correction);

// Max (is_max) or min over dim `dim`, or over all elements in row-major order when dim
// is -1. Writes values (x's dtype) and/or indices (int64) when defined, both contiguous
// over the kept dims. First index wins ties; the first NaN wins over everything.
// The reduced extent must be non-empty.
void minmax_kernel(const Tensor& values, const Tensor& indices, const Tensor& x, int64_t dim, bool is_max);

// grad_in (contiguous, zero-filled, shape of the max/min input) [.., index[o], ..] = g[o]
// along `dim`: the backward of max/min along a dim. g and index are contiguous over the
// kept dims; grad_in has g's dtype.
void scatter_along_dim(const Tensor& grad_in, const Tensor& g, const Tensor& index, int64_t dim);

}  // namespace tc::cpu
