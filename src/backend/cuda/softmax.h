// Internal: softmax and log_softmax on CUDA tensors.
#pragma once
#include "tensorcast/tensor.h"

namespace tc::gpu {

// cpu::softmax_forward/backward's contracts (backend/cpu/softmax.h) on one CUDA device:
// any layouts, the rows along `dim`; one block per row, float32 math (float64 for float64)
// with the max subtracted, rounding once.
void softmax_forward(const Tensor& y, const Tensor& x, int64_t dim, bool log);
void softmax_backward(const Tensor& gx, const Tensor& g, const Tensor& y, int64_t dim, bool log);

}  // namespace tc::gpu
