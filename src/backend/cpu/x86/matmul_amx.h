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
// (backend/cpu/x86/amx/matmul_amx_kernel.cpp) where it applies and beats oneDNN: the CPU has
// AMX-BF16, m, n, k are multiples of 32, and m >= 2048, or m >= 1024 with k >= 1024 (fewer
// rows do not pay for packing b); or b's tiles are kept from an earlier product by the same
// unchanged b (this thread's; packed the second time b is seen at one version of its
// memory, as inference's forward passes see each weight) and m >= 512 or k >= 1024.
// Returns false (c untouched) elsewhere. Each element is summed in the order of k whatever
// the thread count (the threads split c's rows and columns), so the bits do not depend on
// it. Memory written without the library's knowledge (through data_ptr, without
// increment_version) must not be read here as b: its kept tiles would be stale.
// act_table (activation.h's activation_table), with bfloat16 c and no mul: c's rounded
// values looked up in it as the products' epilogue writes them (an activation of the
// product's bits, as a separate activation_value pass gives, in no pass of its own).
bool matmul_amx_into(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& c, const Tensor& mul,
                     const uint32_t* act_table = nullptr);

// Whether matmul_amx_into may run (default true; false: oneDNN takes every product, for
// tests and comparisons).
void set_matmul_amx(bool allowed);

}  // namespace tc::cpu
