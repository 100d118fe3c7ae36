// Internal: the optimizers' fused update on CUDA parameters (one launch per parameter).
#pragma once
#include <cstdint>

#include "backend/optim_fns.h"
#include "tensorcast/tensor.h"

namespace tc::gpu {

using optim::detail::FusedStep;

// The SGD and Adam/AdamW updates of backend/optim_fns.h, one thread per element, computed in
// float32 like the CPU's float32 path (flags: SGDKernel's / AdamKernel's template flags).
void fused_sgd_step(const FusedStep& step, const optim::detail::SGDScalars<float>& k, const bool flags[4]);
void fused_adam_step(const FusedStep& step, const optim::detail::AdamScalars<float>& k, const bool flags[4]);

}  // namespace tc::gpu
