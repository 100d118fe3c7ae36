// Internal: a dtype conversion that keeps the memory layout (PyTorch's memory-format
// preservation): what Tensor::to(DType) and the oneDNN paths that compute through float32
// use. A kernel (the strided, converting copy of loops.h), so it is the backend's.
#pragma once
#include "core/tensor_impl.h"

namespace tc {

// t's values in `dtype`, in t's dense layout (contiguous when t is not dense); no autograd.
// t itself when it already has `dtype` (or is undefined).
Tensor cast_dense(const Tensor& t, DType dtype);

}  // namespace tc
