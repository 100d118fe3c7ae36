// Internal: the CPU kernels of the GradScaler (PyTorch's _amp_foreach_non_finite_check_and_unscale_
// and _amp_update_scale_, plus Megatron's hysteresis and DeepSpeed-style scale bounds).
//
// The multi-tensor kernel lays every gradient of a list end to end in one index space and
// splits it evenly across the threads, so many small tensors cost one parallel region, not
// one per tensor. Non-finite detection reads the exponent bits (all ones = inf/NaN) with
// an integer OR-reduction, which vectorizes without -ffast-math and needs no
// per-element branch; the flag is raised once per thread, never read per tensor.
#pragma once
#include <vector>

#include "core/tensor_impl.h"

namespace tc::cpu {

// For every tensor in `grads` (floating, on the CPU, any strides): sets found_inf (0-d
// float32) to 1 if any element is inf or NaN, and multiplies every element in place by
// inv_scale (0-d float32), computing in float32 (float64 for float64 data) and rounding
// once -- PyTorch's rule, including that an inv_scale of exactly 1 writes nothing.
// found_inf is only ever raised, never cleared, so several calls accumulate into it.
void amp_non_finite_check_and_unscale_(const std::vector<Tensor>& grads, const Tensor& found_inf,
                                       const Tensor& inv_scale);

// The read-only half of the kernel above: raises found_inf, writes no gradient.
void amp_non_finite_check(const std::vector<Tensor>& grads, const Tensor& found_inf);

// True when `t` holds an inf or NaN (used for the overflow report, off the fast path).
bool has_non_finite(const Tensor& t);

// The scale-update rule. `hysteresis` = 1 is PyTorch's _amp_update_scale_; more is
// Megatron-LM's DynamicGradScaler. min_scale/max_scale of 0 mean "no bound".
struct ScaleUpdateParams {
  double growth_factor;
  double backoff_factor;
  int64_t growth_interval;
  int64_t hysteresis;
  double min_scale;
  bool clamp_min_scale;
  double max_scale;
};

// Updates scale (0-d float32), growth_tracker and hysteresis_tracker (0-d int32) in place
// from the sum of the 0-d float32 `found_infs`. Throws (changing nothing) when a backoff
// would go below min_scale and clamp_min_scale is off.
void amp_update_scale_(const Tensor& scale, const Tensor& growth_tracker, const Tensor& hysteresis_tracker,
                       const std::vector<Tensor>& found_infs, const ScaleUpdateParams& p);

}  // namespace tc::cpu
