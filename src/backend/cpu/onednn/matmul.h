// Internal: the CPU batched matrix product behind matmul, mm, bmm and linear.
//
// float32 runs on oneDNN matmul primitives; bfloat16 and float16 on oneDNN's 16-bit
// primitive or on the float32 one over widened copies, whichever tensorcast/gemm16.h
// picks (always the latter where the CPU has no 16-bit kernel); both accumulate in
// float32. float64 (references and gradcheck only; oneDNN has none) uses a plain blocked
// loop. Primitives are costly to create, so they are cached by geometry and dtype.
#pragma once
#include <cstddef>

#include "backend/cpu/loops/activation.h"
#include "tensorcast/tensor.h"

namespace tc::cpu {

// c = a @ b (+ bias). a is (..., n, k), b (..., k, m) and c (..., n, m), all with the same
// number of dims (2..12); each batch dim of a and b equals c's or is 1 (broadcast; a
// stride-0 batch dim counts as 1). bias is undefined or 1-d of size m. a, b and bias
// share one floating dtype, except that a 16-bit product may have float32 operands that
// hold widened 16-bit values (widen_for_gemm); c has the dtype too, or is float32 for
// 16-bit inputs (the float32 accumulators are written without rounding). Inputs may have any strides (transposed views
// are not copied); c is written in place and must not overlap a or b. k == 0 gives bias (or zeros).
//
// act, mul: an epilogue for oneDNN to apply to the float32 accumulators (+ bias) before c
// is written (post-ops: one pass, one rounding): c = act(a @ b + bias) * mul, mul undefined
// or of c's shape (any floating dtype and strides). Returns false when an epilogue was asked
// for and not applied (float64, the matrix-vector kernel, k == 0, a problem oneDNN fuses
// nothing into): c then holds the plain product and the caller applies the epilogue.
//
// rounded_act (with act kNone and no mul): an activation of c's 16-bit values after their
// rounding, by activation_table (activation_value's bits: linear then the activation, as
// PyTorch rounds them), applied where the AMX kernel takes the product; returns false
// where it was not (the caller then runs activation_value over c).
bool matmul_into(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& c, const char* op,
                 Activation act = Activation::kNone, const Tensor& mul = Tensor(),
                 Activation rounded_act = Activation::kNone);

// Whether a product with 16-bit operands or output runs on the float32 kernel through
// widened float32 copies of a, b and c: mixed operand dtypes, or 16-bit products on this
// CPU's float32 path (tensorcast/gemm16.h) where the conversions pay.
bool matmul_widens(const Tensor& a, const Tensor& b, const Tensor& c);
// Whether a native 16-bit product reads a row-major copy of a rather than a itself (a
// large product of a transposed a on AMX, where that is faster).
bool matmul_copies_a(const Tensor& a, const Tensor& c);

// t widened to float32 when 16-bit products of its dtype run on the float32 kernel (so an
// operand used by several products is widened once), else t itself.
Tensor widen_for_gemm(const Tensor& t);

// Whether this CPU's oneDNN has a native matmul for `dt` (false for float16 on CPUs
// without AVX512-FP16; always false for float64).
bool native_matmul(DType dt);

// Primitives in the cache (for tests and diagnostics) and dropping them all.
size_t matmul_cache_size();
void clear_matmul_cache();

}  // namespace tc::cpu
