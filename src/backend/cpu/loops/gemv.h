// Internal: matrix-vector-like products (a batch-1 forward, a few rows): the weight is
// streamed once at memory speed, which oneDNN's GEMM kernels do not reach at these shapes
// (they pack panels for a reuse that one row does not have).
#pragma once
#include "tensorcast/tensor.h"

namespace tc::cpu {

// The most rows of c (per product) the matrix-vector kernel takes.
constexpr int64_t kGemvMaxRows = 4;

// c = a @ b (+ bias) as matmul_into (same shapes and dtypes, float32 accumulation, one
// rounding of c) when c has one batch of at most kGemvMaxRows rows and b is stored with
// unit stride along k (a transposed weight: linear) or along m (a row-major matrix).
// Returns false, having written nothing, for any other product. Every element of c is
// summed in an order fixed by k alone (not by the thread count or the operand dtypes),
// so a 16-bit product equals the float32 product of the widened operands, rounded once.
bool gemv_into(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& c);

}  // namespace tc::cpu
