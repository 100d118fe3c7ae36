// Float64 references shared by the op table (common/op_db.cpp) and the hand-written tests:
// plain loops over row-major float64 values (Tensor::to_vector), never the tensorcast op
// they check.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "tensorcast/tensorcast.h"

namespace tc::testing::ref {

// Row-major float64 values and their shape.
struct ShapedValues {
  Shape shape;
  std::vector<double> values;
};

// The values of x that a reduction over the dims where `mask` is true combines into each
// output element (outputs row-major over the kept dims), each group in increasing flat
// order (so, for one reduced dim, in index order along it).
std::vector<std::vector<double>> groups(const Tensor& x, const std::vector<bool>& mask);

// max (is_max) or min of `g` and its index: the first index wins ties, the first NaN wins
// over everything.
std::pair<double, int64_t> extreme(const std::vector<double>& g, bool is_max);

// Sum of `g` in index order.
double sum(const std::vector<double>& g);

// Two-pass variance of `g`: sum of squared deviations from the mean over n - correction
// (inf or NaN when that is not positive).
double var(const std::vector<double>& g, int64_t correction);

// softmax (log: log_softmax) of row-major `v` with `shape` along `dim` (0 for a 0-d shape),
// with the maximum subtracted first.
std::vector<double> softmax(const std::vector<double>& v, const Shape& shape, int64_t dim, bool log);

// layer_norm of x over rows of its last N = numel(normalized_shape) values: (x - mean) /
// sqrt(biased variance + eps), then * w + b (undefined: 1 and 0).
std::vector<double> layer_norm(const Tensor& x, int64_t N, const Tensor& w, const Tensor& b, double eps);
std::vector<double> layer_norm(const std::vector<double>& xv, int64_t N, const Tensor& w, const Tensor& b, double eps);

// a (..., n, k) @ b (..., k, m) by a triple loop, with NumPy batch broadcasting and 1-d
// rules (a 1-d a is a row, a 1-d b a column, and that dim is dropped from the result).
ShapedValues matmul(const Tensor& a, const Tensor& b);

// cross_entropy (nll: nll_loss, x already holds log-probabilities) of logits `x` of `shape`
// ((C), (N, C) or (N, C, d...)), row-major, with class targets `t` (row-major over the
// shape less its class dim), class weights `w` (empty: all 1), ignore_index, label
// smoothing `eps` and the reduction, as PyTorch defines them. kNone: one loss per target
// (0 where ignored); kSum: their total; kMean: the total over the sum of the (not
// ignored) targets' weights.
std::vector<double> class_loss(const std::vector<double>& x, const Shape& shape, const std::vector<int64_t>& t,
                               const std::vector<double>& w, int64_t ignore, Reduction red, double eps, bool nll);

}  // namespace tc::testing::ref
