// Internal: the optimizers' fused update on CUDA parameters (one launch per parameter).
#pragma once
#include <cstdint>

#include "backend/optim_fns.h"
#include "tensorcast/tensor.h"

namespace tc::gpu {

// One parameter's step, as raw device pointers (src/optim fills it from its StepArgs).
struct FusedStep {
  Device device{kCUDA, 0};
  int64_t numel = 0;
  const void* grad = nullptr;  // contiguous, any floating dtype
  DType grad_dtype = kFloat32;
  bool scaled = false;  // multiply gradients by the inverse scale while reading them (AMP)
  float inv_scale = 1.0f;
  // AMP without a host read: the inverse scale and found_inf (nonzero: skip, write nothing)
  // on the device, read by the kernel; null when not used.
  const float* inv_scale_ptr = nullptr;
  const float* found_inf = nullptr;
  float* weight = nullptr;  // float32 weights updated in place: the parameter or its master copy
  void* param16 = nullptr;  // the 16-bit parameter written back from weight, or null
  DType param_dtype = kFloat32;
  bool stochastic = false;  // write param16 back rounded stochastically (else to nearest even)
  uint64_t sr_key = 0;      // stochastic rounding: hash of (seed, step, parameter index)
  float* state[3] = {};     // float32 state buffers (null: unused)
};

// The SGD and Adam/AdamW updates of backend/optim_fns.h, one thread per element, computed in
// float32 like the CPU's float32 path (flags: SGDKernel's / AdamKernel's template flags).
void fused_sgd_step(const FusedStep& step, const optim::detail::SGDScalars<float>& k, const bool flags[4]);
void fused_adam_step(const FusedStep& step, const optim::detail::AdamScalars<float>& k, const bool flags[4]);

}  // namespace tc::gpu
