// Internal: layer_norm and batch_norm on CUDA tensors.
#pragma once
#include "backend/cpu/loops/norm.h"
#include "tensorcast/tensor.h"

namespace tc::gpu {

// cpu::layer_norm_forward/backward's contracts (backend/cpu/loops/norm.h) on one CUDA device:
// one block per row for the statistics and dx (sums in float64, as the CPU's double
// lanes), one thread per column for dweight/dbias (rows summed in order).
void layer_norm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, int64_t M, int64_t N, double eps);
void layer_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& g, const Tensor& x,
                         const Tensor& mean, const Tensor& rstd, const Tensor& weight, int64_t M, int64_t N);

// cpu::batch_norm_forward/backward's contracts on one CUDA device (every tensor on it):
// each channel's B * S elements are reduced in chunks of ~8192, one block each (per-thread
// sums in float64, as the CPU's double lanes, then the block's tree), and the chunks'
// partial sums are added in order by one thread per channel: no atomics, a split that
// depends on the shape only, so the same bits every run. Then one thread per element
// normalizes or forms dx. The running statistics move on the device (no host sync) with
// the CPU's formula and roundings.
void batch_norm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, const Tensor& running_mean, const Tensor& running_var,
                        const cpu::BnGeometry& geo, bool use_batch, bool update_running, double momentum, double eps);
void batch_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& g, const Tensor& x,
                         const Tensor& mean, const Tensor& rstd, const Tensor& weight, const cpu::BnGeometry& geo,
                         bool use_batch);

}  // namespace tc::gpu
