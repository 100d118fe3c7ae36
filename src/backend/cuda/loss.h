// Internal: the class-index losses on CUDA tensors.
#pragma once
#include "backend/cpu/loss.h"  // ClassTargets: the targets and weights, read and checked on the host
#include "tensorcast/tensor.h"

namespace tc::gpu {

// cpu::cross_entropy_forward/backward and nll_loss_forward/backward's contracts
// (backend/cpu/loss.h) on one CUDA device (input, out, lse, gx and g_rows there; the
// targets and class weights go over with each call). Row losses are float64 as on the CPU;
// a reduction sums them on the device in a fixed order (the CPU sums serially: equal to
// rounding).
void cross_entropy_forward(const Tensor& out, const Tensor& lse, const Tensor& input, const cpu::ClassTargets& t,
                           double label_smoothing, bool reduce, double divisor);
void cross_entropy_backward(const Tensor& gx, const Tensor& input, const Tensor& lse, const cpu::ClassTargets& t,
                            const Tensor& g_rows, double g_scale, double label_smoothing);
void nll_loss_forward(const Tensor& out, const Tensor& input, const cpu::ClassTargets& t, bool reduce, double divisor);
void nll_loss_backward(const Tensor& gx, const cpu::ClassTargets& t, const Tensor& g_rows, double g_scale);

}  // namespace tc::gpu
