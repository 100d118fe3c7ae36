// Internal: the class-index loss kernels (cross_entropy, nll_loss).
//
// Rows are the input seen along its class dim (rows.h: any layout, 16-bit widened per row).
// Per-row losses are float64 and summed serially, so results do not depend on the thread
// count.
#pragma once
#include <vector>

#include "backend/class_targets.h"
#include "core/tensor_impl.h"

namespace tc::cpu {

// Class-index targets as the kernels read them.
struct ClassTargets {
  int64_t cdim = 0;  // the class dim of the input (1, or 0 for unbatched (C))
  int64_t classes = 0;
  int64_t ignore_index = -100;
  std::vector<int64_t> target;  // one per row, row-major over the non-class dims
  std::vector<double> weight;   // per class; empty: all ones
};

// t.target = target (int64 or int32, any layout), each checked to be t.ignore_index or in
// [0, t.classes): "[op] target 12 is out of bounds for 10 classes".
void read_class_targets(ClassTargets& t, const Tensor& target, const char* op);

// The divisor of reduction='mean': the summed weights of the non-ignored targets.
double class_weight_sum(const ClassTargets& t);

// The forward kernels write out: with `reduce`, a 0-d tensor holding the sum of the row
// losses divided by `divisor`; otherwise one loss per row (out has the non-class shape).
// Each value rounds once to out's dtype.

// cross_entropy with label smoothing; lse (contiguous (rows, 2), float32, or float64 for
// float64 input) receives each row's max and log-sum-exp for the backward.
void cross_entropy_forward(const Tensor& out, const Tensor& lse, const Tensor& input, const ClassTargets& t,
                           double label_smoothing, bool reduce, double divisor);

// gx (input's shape and dtype, any layout) = the gradient, softmax rebuilt from lse. The
// incoming gradient of row r is g_rows[r] (contiguous, one per row) when g_rows is defined,
// else g_scale.
void cross_entropy_backward(const Tensor& gx, const Tensor& input, const Tensor& lse, const ClassTargets& t,
                            const Tensor& g_rows, double g_scale, double label_smoothing);

void nll_loss_forward(const Tensor& out, const Tensor& input, const ClassTargets& t, bool reduce, double divisor);
// gx (contiguous, input's shape and dtype) = -weight[target] * g at each row's target,
// zero elsewhere.
void nll_loss_backward(const Tensor& gx, const ClassTargets& t, const Tensor& g_rows, double g_scale);

// The kernels of the table (backend/kernels.def): the targets read and checked on the host
// at once (kept in `host`), the divisor of reduction='mean' a float64 tensor of one element
// written by the forward and read by the backward, the incoming gradient a tensor (one per
// row when per_row, else 0-d).
backend::ClassTargets class_targets(const Tensor& target, const Tensor& weight, int64_t cdim, int64_t classes,
                                    int64_t ignore_index, const char* op);
void cross_entropy_forward(const Tensor& out, const Tensor& lse, const Tensor& divisor, const Tensor& input,
                           const backend::ClassTargets& t, double label_smoothing, bool reduce);
void cross_entropy_backward(const Tensor& gx, const Tensor& input, const Tensor& lse, const backend::ClassTargets& t,
                            const Tensor& g, bool per_row, const Tensor& divisor, double label_smoothing);
void nll_loss_forward(const Tensor& out, const Tensor& divisor, const Tensor& input, const backend::ClassTargets& t,
                      bool reduce);
void nll_loss_backward(const Tensor& gx, const backend::ClassTargets& t, const Tensor& g, bool per_row,
                       const Tensor& divisor);

}  // namespace tc::cpu
