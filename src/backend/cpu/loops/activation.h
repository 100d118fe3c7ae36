// Internal: activation kernels whose loops are hand-written rather than a scalar lambda
// through map1/map2 (GELU: erf/tanh forms vectorized with the fast_math functions; on
// 16-bit tensors, tables of the float32 loops' rounded results, one entry per bit pattern).
#pragma once
#include "core/tensor_impl.h"

namespace tc::cpu {

// An activation fused into another kernel: a GEMM's epilogue (onednn/matmul.h), or
// activation_and_derivative below.
enum class Activation { kNone, kRelu, kGelu, kGeluTanh };

// out = gelu(x), x broadcast to out's shape; the tanh approximation when tanh_approx.
// float64 and 64-bit integer operands compute in double with std::erf/tanh, the rest in
// float32 with the ISA-cloned loops, rounding once to out's dtype (a contiguous 16-bit x
// into out of its dtype and shape: the table below).
void gelu(const Tensor& out, const Tensor& x, bool tanh_approx);

// dx = g * gelu'(x), g and x broadcast to dx's shape.
void gelu_backward(const Tensor& dx, const Tensor& g, const Tensor& x, bool tanh_approx);

// The forward pass of an activation whose backward is a product: y = act(h) and, in h's
// place, act'(h) (for ReLU 1 where h > 0, else 0, as relu's backward). y and h contiguous,
// one floating dtype; computed in float32 (double for float64) and rounded once each (for
// bfloat16 and float16, looked up: the float32 results for every bit pattern, made once).
void activation_and_derivative(const Tensor& y, const Tensor& h, Activation act);

// y = act(h) for contiguous 16-bit floating y and h of one dtype, from the table
// activation_and_derivative reads: the same bits as its y.
void activation_value(const Tensor& y, const Tensor& h, Activation act);

// That table for act (not kNone) and a 16-bit dt: 2^16 entries, entry b holding act's bits
// in its low half and act''s in its high for the value of bit pattern b (made on first use,
// kept for the process).
const uint32_t* activation_table(Activation act, DType dt);

}  // namespace tc::cpu
