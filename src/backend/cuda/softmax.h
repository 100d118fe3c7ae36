// Internal: softmax and log_softmax on CUDA tensors.
#pragma once
#include "tensorcast/tensor.h"

namespace tc::gpu {

// cpu::softmax_forward/backward's contracts (backend/cpu/loops/softmax.h) on one CUDA device:
// any layouts, the rows along `dim`; one block per row, float32 math (float64 for float64)
// with the max subtracted, rounding once.
void softmax_forward(const Tensor& y, const Tensor& x, int64_t dim, bool log);
void softmax_backward(const Tensor& gx, const Tensor& g, const Tensor& y, int64_t dim, bool log);

// The probabilities of scaled_dot_product_attention's product path, one pass per row:
// p = softmax(scale * s) along the last dim of the contiguous float32 scores s (..., L, S),
// keys j > i at probability 0 under `causal`; p contiguous, s's shape, float32 or 16-bit
// (rounded once). cpu::sdpa_probs's contract.
void sdpa_probs(const Tensor& p, const Tensor& s, double scale, bool causal);
// Its backward to the scores, scaled and rounded once: ds = scale * p * (dp - sum(dp * p))
// per row, from float32 p and dp (contiguous, p's shape) into ds (contiguous, any floating
// dtype): softmax's backward, the scale and the cast in one pass.
void sdpa_probs_backward(const Tensor& ds, const Tensor& dp, const Tensor& p, double scale);

}  // namespace tc::gpu
