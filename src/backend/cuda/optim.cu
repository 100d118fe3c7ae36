// The optimizers' fused update on CUDA parameters (optim.h): each thread reads one gradient
// (widened, times the AMP inverse scale), runs the shared per-element update on the float32
// weight and state, and writes the 16-bit parameter back rounded to nearest even or
// stochastically (the CPU's hash of the element index, so the CPU's bits). Every element
// is read and written once, in one launch per parameter; a step the GradScaler flagged
// (found_inf set, read on the device) returns before touching anything.
#include "backend/cuda/convert.cuh"
#include "backend/cuda/launch.h"
#include "backend/cuda/optim.h"

namespace tc::gpu {
namespace {

template <class Kernel>
__global__ void fused_step_kernel(FusedStep a, int64_t grad_es, int64_t param_es, Kernel k) {
  if (a.found_inf != nullptr && *a.found_inf != 0.0f) return;  // the GradScaler skips this step
  const float inv_scale = a.inv_scale_ptr != nullptr ? *a.inv_scale_ptr : a.inv_scale;
  for (int64_t i = global_index(); i < a.numel; i += grid_stride()) {
    float g = load_as<float>(static_cast<const char*>(a.grad) + i * grad_es, a.grad_dtype);
    if (a.scaled) g *= inv_scale;
    float* s[3];
#pragma unroll
    for (int j = 0; j < 3; ++j) s[j] = a.state[j] ? a.state[j] + i : nullptr;
    k(1, &g, a.weight + i, s);
    if (!a.param16) continue;
    if (a.stochastic) {
      const uint32_t r = optim::detail::element_bits(a.sr_key, i);
      static_cast<uint16_t*>(a.param16)[i] = a.param_dtype == DType::BFloat16
                                                 ? optim::detail::bf16_stochastic(a.weight[i], r)
                                                 : optim::detail::half_stochastic(a.weight[i], r);
    } else {
      store_from<float>(static_cast<char*>(a.param16) + i * param_es, a.param_dtype, a.weight[i]);
    }
  }
}

template <class Kernel>
void launch(const FusedStep& a, const Kernel& k) {
  if (a.numel == 0) return;
  DeviceGuard guard(a.device);
  fused_step_kernel<Kernel><<<blocks_for(a.numel), kThreads, 0, current_raw_stream(a.device)>>>(
      a, static_cast<int64_t>(element_size(a.grad_dtype)), static_cast<int64_t>(element_size(a.param_dtype)), k);
  TC_CUDA_CHECK(cudaGetLastError(), "optimizer.step");
}

// The runtime flags as template arguments, one at a time (each variant is its own kernel).
template <template <class, bool, bool, bool, bool> class Kernel, class Scalars, bool... Flags>
void run(const FusedStep& a, const Scalars& k, const bool* flags) {
  if constexpr (sizeof...(Flags) == 4) {
    launch(a, Kernel<float, Flags...>{k});
  } else {
    if (flags[sizeof...(Flags)])
      run<Kernel, Scalars, Flags..., true>(a, k, flags);
    else
      run<Kernel, Scalars, Flags..., false>(a, k, flags);
  }
}

}  // namespace

void fused_sgd_step(const FusedStep& step, const optim::detail::SGDScalars<float>& k, const bool flags[4]) {
  run<optim::detail::SGDKernel>(step, k, flags);
}

void fused_adam_step(const FusedStep& step, const optim::detail::AdamScalars<float>& k, const bool flags[4]) {
  run<optim::detail::AdamKernel>(step, k, flags);
}

}  // namespace tc::gpu
