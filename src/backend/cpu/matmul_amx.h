// Internal: 16-bit products whose b is a weight (linear's forward x w^T and its input's
// gradient g w) on the CPU's AMX tiles, where oneDNN 2.6 runs them at ~2/3 of the tiles'
// rate.
#pragma once
#include "tensorcast/tensor.h"

namespace tc::cpu {

// c = a @ b (+ bias) (* mul) for bfloat16 a (m, k) with unit column stride, bfloat16 b
// (k, n) either row-major (unit column stride) or a transposed row-major matrix (unit row
// stride: w^T), bias undefined or bfloat16 (n), c bfloat16 or float32 (m, n) with unit
// column stride, mul undefined or of c's dtype and shape with unit column stride: the
// float32 sums plus the bias, times the multiplier, rounded once to c's dtype. Runs on AMX
// (backend/cpu/matmul_amx_kernel.cpp) where it applies and beats oneDNN: the CPU has
// AMX-BF16, m >= 2048, or m >= 1024 with k >= 1024 (fewer rows do not pay for packing b),
// and m, n, k are multiples of 32. Returns false (c untouched) elsewhere. Each element is summed in the order of k
// whatever the thread count (the threads split c's rows), so the bits do not depend on it.
bool matmul_amx_into(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& c, const Tensor& mul);

// Whether matmul_amx_into may run (default true; false: oneDNN takes every product, for
// tests and comparisons).
void set_matmul_amx(bool allowed);

}  // namespace tc::cpu
