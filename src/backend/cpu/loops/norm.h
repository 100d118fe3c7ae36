// Internal: the fused layer_norm and batch_norm kernels, forward and backward.
//
// 16-bit inputs are widened to float32 per row, the forward's statistics accumulate in
// double lanes and are kept in the statistics dtype (float32; float64 for float64 input),
// the backward's row sums in the compute dtype's vector lanes (as PyTorch's CPU kernel),
// and each output rounds once. Work splits depend only on the shapes, never on the thread count.
#pragma once
#include "core/tensor_impl.h"

namespace tc::cpu {

// layer_norm over M rows of N elements of contiguous x. out: contiguous, x's shape, any
// floating dtype (each element rounds once). mean, rstd: contiguous (M) in the statistics dtype, written for the
// backward. weight, bias: undefined or N contiguous elements of any floating dtype.
void layer_norm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, int64_t M, int64_t N, double eps);

// The same of sum = x + residual, written into `sum` in the same pass (the rows of a
// residual stream into its next norm): x and sum contiguous (M, N) rows, sum of add's
// dtype (result_type), residual contiguous R rows (R divides M, row r adds row r % R);
// out of any floating dtype (each element rounds once). The statistics are of the sum as
// rounded to its dtype: the result is add's and layer_norm's, bit for bit.
void add_layer_norm_forward(const Tensor& sum, const Tensor& out, const Tensor& mean, const Tensor& rstd,
                            const Tensor& x, const Tensor& residual, const Tensor& weight, const Tensor& bias,
                            int64_t M, int64_t N, double eps);

// dx = rstd * (g*w - mean(g*w) - xhat * mean(g*w*xhat)); dweight = sum_rows g*xhat;
// dbias = sum_rows g. g is contiguous with x's shape; each output is undefined (not
// wanted) or contiguous (dx: x's shape and dtype; dweight/dbias: N elements of their own
// floating dtype) and written entirely, zeros when there are no rows. dx_plus: undefined,
// or contiguous of dx's shape and dtype, added to dx (each element of dx rounded to its
// dtype first, so dx is the separate addition's, bit for bit) when dx's dtype is the
// compute dtype (float32, float64).
void layer_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& g, const Tensor& x,
                         const Tensor& mean, const Tensor& rstd, const Tensor& weight, int64_t M, int64_t N,
                         const Tensor& dx_plus = Tensor());

// x viewed as (B, Ch, S): channel c's data is B contiguous rows of S elements.
struct BnGeometry {
  int64_t B, Ch, S;
  int64_t count() const { return B * S; }
  int64_t row(int64_t n, int64_t c) const { return (n * Ch + c) * S; }
};

// batch_norm of contiguous x. With use_batch the batch statistics normalize (and, with
// update_running, move running_mean/running_var in place: momentum, unbiased variance);
// otherwise running_mean/running_var do. mean, rstd: contiguous (Ch) in the statistics
// dtype, what normalized. weight, bias, running_*: undefined or 1-d of Ch, any floating
// dtype (running_* any stride).
void batch_norm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, const Tensor& running_mean, const Tensor& running_var,
                        const BnGeometry& geo, bool use_batch, bool update_running, double momentum, double eps);

// Training (batch statistics): dx = w*rstd*(g - mean(g) - xhat*mean(g*xhat)).
// Eval (fixed statistics): dx = g*w*rstd. Both: dweight = sum g*xhat, dbias = sum g per
// channel. Outputs as in layer_norm_backward (dweight/dbias: Ch elements).
void batch_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& g, const Tensor& x,
                         const Tensor& mean, const Tensor& rstd, const Tensor& weight, const BnGeometry& geo,
                         bool use_batch);

}  // namespace tc::cpu
