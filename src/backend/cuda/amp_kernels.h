// Internal: the GradScaler's kernels on CUDA (PyTorch's _amp_foreach_non_finite_check_and_unscale_).
#pragma once
#include <vector>

#include "tensorcast/amp/scaler_rules.h"
#include "tensorcast/tensor.h"

namespace tc::gpu {

// cpu::amp_non_finite_check_and_unscale_'s contract (backend/cpu/loops/amp_kernels.h) on one
// CUDA device: found_inf and inv_scale are 0-d float32 tensors on that device and are read
// and written there (no host sync). The gradients of a list go in few launches (up to 64
// dense tensors each, PyTorch's multi_tensor_apply idea); a non-dense one is unscaled
// through a dense copy.
void amp_non_finite_check_and_unscale_(const std::vector<Tensor>& grads, const Tensor& found_inf,
                                       const Tensor& inv_scale);

// The scale update on the device, one thread (PyTorch's _amp_update_scale_, with the rule of
// amp::try_update_scale): from found_inf (0-d float32, nonzero: an overflow), updates scale
// (0-d float32) and the trackers (0-d int32) in place and writes inv_scale = float(1 /
// double(scale)). Where the rule refuses (a backoff below min_scale), nothing changes and
// refused (0-d float32) is set to 1, for the host to raise the error when it next looks.
void amp_update_scale_(const Tensor& scale, const Tensor& growth_tracker, const Tensor& hysteresis_tracker,
                       const Tensor& inv_scale, const Tensor& found_inf, const Tensor& refused,
                       const amp::ScaleRule& rule);

}  // namespace tc::gpu
