// Internal: the CUDA batched matrix product behind matmul, mm, bmm and linear (cuBLASLt).
#pragma once
#include <cstddef>

#include "tensorcast/tensor.h"

namespace tc::gpu {

// c = a @ b (+ bias), cpu::matmul_into's contract (backend/cpu/onednn/matmul.h) on one CUDA
// device: a (..., n, k), b (..., k, m), c (..., n, m) with the same number of dims, batch
// dims of a and b equal to c's or 1; bias undefined or 1-d of size m; a, b, bias of one
// floating dtype, c that dtype or float32 for 16-bit inputs. Inputs may be transposed views
// (either of the last two strides 1); others are copied first. float32 runs in full
// float32 (no TF32, PyTorch's default), 16-bit inputs on Tensor Cores with float32
// accumulation and one rounding, float64 in float64.
void matmul_into(const Tensor& a, const Tensor& b, const Tensor& bias, const Tensor& c, const char* op);

// Cached cuBLASLt algorithm choices (one per product geometry), for tests.
size_t matmul_cache_size();

}  // namespace tc::gpu
