// Internal: the GradScaler's kernels on CUDA (PyTorch's _amp_foreach_non_finite_check_and_unscale_).
#pragma once
#include <vector>

#include "tensorcast/tensor.h"

namespace tc::gpu {

// cpu::amp_non_finite_check_and_unscale_'s contract (backend/cpu/amp_kernels.h) on one
// CUDA device: found_inf and inv_scale are 0-d float32 tensors on that device and are read
// and written there (no host sync). The gradients of a list go in few launches (up to 64
// dense tensors each, PyTorch's multi_tensor_apply idea); a non-dense one is unscaled
// through a dense copy.
void amp_non_finite_check_and_unscale_(const std::vector<Tensor>& grads, const Tensor& found_inf,
                                       const Tensor& inv_scale);

}  // namespace tc::gpu
