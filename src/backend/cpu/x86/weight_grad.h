// Internal: a weight gradient's product dW = g^T x (g: (tokens, out), x: (tokens, in))
// on the CPU's AMX tiles, where oneDNN 2.6 is slow: a long sum into a small output.
#pragma once
#include <utility>

#include "tensorcast/tensor.h"

namespace tc::cpu {

// c = a @ b for bfloat16 a (m, k), read transposed (a.stride(0) == 1: g^T of a row-major
// g), bfloat16 b (k, n) and float32 c (m, n), both with unit column strides, no bias, on
// AMX (backend/cpu/x86/amx/weight_grad_amx.cpp) where it applies and beats oneDNN: the CPU has
// AMX-BF16, m and n are multiples of 32 and k >= 512 (a c of more than 2^18 elements in
// parts of at most that many). Returns false (c untouched) elsewhere. Each element is
// summed in the order of k whatever the thread count (the threads split c), so the bits
// do not depend on it.
// col_sums (undefined: not wanted): float32 (m), contiguous: also each row of a summed, a
// bias's gradient (the column sums of g), in the same pass over a's tiles.
bool weight_grad_into(const Tensor& a, const Tensor& b, const Tensor& c, const Tensor& col_sums = Tensor());

// {c, col_sums} as weight_grad_into makes them, in new float32 tensors; both undefined
// (nothing allocated) where the kernel does not take a and b.
std::pair<Tensor, Tensor> weight_and_bias_grads(const Tensor& a, const Tensor& b);

// Whether weight_grad_into may run (default true; false: oneDNN takes every product, for
// tests and comparisons).
void set_weight_grad_amx(bool allowed);

}  // namespace tc::cpu
