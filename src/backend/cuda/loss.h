// Internal: the class-index losses on CUDA tensors.
#pragma once
#include "backend/class_targets.h"
#include "tensorcast/tensor.h"

namespace tc::gpu {

// Class-index targets on the device, as the CUDA kernels read them. Nothing is read or
// checked on the host: a target outside [0, classes) that is not ignore_index is recorded
// by the forward's kernel and raised at the next CUDA class-loss call on the device
// (class_targets or a backward) as the CPU's error, "[cross_entropy] target 12 is out of
// bounds for 10 classes (found on cuda:0 by an earlier call's kernel)"; meanwhile its row
// counts as ignored (loss 0, no gradient, not in the divisor), so no kernel reads outside
// the input.
using ClassTargets = backend::ClassTargets;

// The targets of `op` (int64 or int32, any layout, on a CUDA device) and class weights
// (undefined, or any floating dtype, moved to the targets' device) as ClassTargets: the
// targets as they are when contiguous int64, else a contiguous int64 copy; the weights as a
// float64 copy. First raises an out-of-range target an earlier call's kernel recorded.
// Queues work on the current stream only (no synchronisation).
ClassTargets class_targets(const Tensor& target, const Tensor& weight, int64_t cdim, int64_t classes,
                           int64_t ignore_index, const char* op);

// cpu::cross_entropy_forward/backward and nll_loss_forward/backward's contracts
// (backend/cpu/loops/loss.h) on one CUDA device, with the reduction's divisor on the device:
// - forward: with `reduce`, out (0-d) = the sum of the row losses (float64, fixed order)
//   divided by 1, or with `divisor` defined (a float64 tensor of one element on the device:
//   reduction='mean') by the summed weights of the counted targets, also summed in float64
//   in a fixed order and written to `divisor` for the backward (0 / 0 = NaN when every
//   target is ignored, as on the CPU); else one loss per row. Row losses are float64 as on
//   the CPU (equal to rounding: the CPU sums serially).
// - backward: the incoming gradient of row r is g[r] (contiguous, one per row) when
//   `per_row`, else g[0] (one element, any floating dtype) divided by divisor[0] (by 1 when
//   divisor is undefined), read by the kernel: nothing goes through the host.
void cross_entropy_forward(const Tensor& out, const Tensor& lse, const Tensor& divisor, const Tensor& input,
                           const ClassTargets& t, double label_smoothing, bool reduce);
void cross_entropy_backward(const Tensor& gx, const Tensor& input, const Tensor& lse, const ClassTargets& t,
                            const Tensor& g, bool per_row, const Tensor& divisor, double label_smoothing);
void nll_loss_forward(const Tensor& out, const Tensor& divisor, const Tensor& input, const ClassTargets& t,
                      bool reduce);
void nll_loss_backward(const Tensor& gx, const ClassTargets& t, const Tensor& g, bool per_row, const Tensor& divisor);

}  // namespace tc::gpu
