// Internal: layer_norm on CUDA tensors.
#pragma once
#include "tensorcast/tensor.h"

namespace tc::gpu {

// cpu::layer_norm_forward/backward's contracts (backend/cpu/norm.h) on one CUDA device:
// one block per row for the statistics and dx (sums in float64, as the CPU's double
// lanes), one thread per column for dweight/dbias (rows summed in order).
void layer_norm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, int64_t M, int64_t N, double eps);
void layer_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& g, const Tensor& x,
                         const Tensor& mean, const Tensor& rstd, const Tensor& weight, int64_t M, int64_t N);

}  // namespace tc::gpu
