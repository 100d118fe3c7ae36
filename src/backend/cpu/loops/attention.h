// Internal: fused scaled dot product attention, forward and backward (FlashAttention's
// algorithm for a CPU core's caches).
//
// Per (batch, query block) the keys and values a block can see are widened to float32
// once, a query row's scores s = (scale q) k^T are computed, softmaxed and multiplied by v
// without the (L, S) score matrix ever existing in memory; under is_causal a row reads only
// the keys j <= i (PyTorch's top-left causal mask), so the half of the products above the
// diagonal is never computed. The forward saves each row's log-sum-exp; the backward
// recomputes the probabilities from it (FlashAttention-2's backward) rather than reading a
// saved (L, S) matrix. 16-bit data computes in float32 and each output rounds once.
#pragma once
#include "core/tensor_impl.h"

namespace tc::cpu {

// q (..., L, E), k (..., S, E), v (..., S, Ev), out (..., L, Ev): one floating dtype (not
// float64), the same batch dims, any strides. lse: contiguous float32 (batch, L), written
// for the backward (log of each row's softmax denominator, scores included).
void sdpa_forward(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                  bool causal);

// Gradients of the forward above for the incoming gradient g (out's shape): dq, dk, dv
// (each undefined when not wanted, else q's/k's/v's shape and dtype, any strides; written
// entirely). out and lse are the forward's.
void sdpa_backward(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& g, const Tensor& q,
                   const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse, double scale, bool causal);

// The forward above for bfloat16 q, k, v whose rows are contiguous, on the AVX-512 BF16
// dot products (twice the float32 kernel's rate): the probabilities rounded once to
// bfloat16 for the product with v, as the product path rounds them. lse as sdpa_forward's,
// or undefined where no backward will run. False, having done nothing, where the CPU lacks
// the instructions or the inputs do not qualify.
bool sdpa_forward_bf16(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                       double scale, bool causal);

// The gradients of that forward on the same instructions: dq, dk, dv as sdpa_backward's
// (undefined when not wanted), g the output's gradient, out and lse the forward's (the
// probabilities are recomputed from lse, softmax's backward's row term is g . out, and
// both feed one pass). False, having done nothing, where the CPU lacks the instructions
// or the inputs do not qualify.
bool sdpa_backward_bf16(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& g, const Tensor& q,
                        const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse, double scale,
                        bool causal);

// Where the CPU has AMX-BF16 (and the OS grants it), the two functions above multiply on
// AMX tiles; set_sdpa_amx(false) keeps them on the AVX-512 BF16 dot products (for tests
// and benchmarks: both give the same rounding points). sdpa_uses_amx: whether they do now.
void set_sdpa_amx(bool allowed);
bool sdpa_uses_amx();

// The probabilities of the product path (ops/attention.cpp, where this CPU multiplies 16-bit
// matrices natively): p = softmax(scale * s) along the last dim of float32 scores s
// (..., rows, n), a band of rows [first_row, first_row + rows) and keys [0, n) of an
// (..., L, S) matrix; under `causal` row i sees the keys j <= i (the band holds them all)
// and the others get probability 0. p: s's shape, float32 (may be s itself) or 16-bit
// (rounded once); keep_float also writes the float32 probabilities over s (for a backward
// that needs both). s and p: last dim contiguous, batch dims of one stride (a narrow of a
// contiguous matrix). One pass per row.
void sdpa_probs(const Tensor& p, const Tensor& s, double scale, bool causal, int64_t first_row = 0,
                bool keep_float = false);
// Its backward to the scores, scaled and rounded once: ds = scale * p * (dp - sum(dp * p))
// per row, from float32 p and dp into ds (float32 or 16-bit; all three of one shape and
// laid out as sdpa_probs's): softmax's backward, the scale and the cast in one pass.
void sdpa_probs_backward(const Tensor& ds, const Tensor& dp, const Tensor& p, double scale);

}  // namespace tc::cpu
