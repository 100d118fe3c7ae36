// Internal: the CPU kernels of the GradScaler (PyTorch's _amp_foreach_non_finite_check_and_unscale_;
// the scale update is host code shared with the libtorch adapter, tensorcast/amp/scaler_rules.h).
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

// The kernel of the table (backend/kernels.def): amp_non_finite_check where inv_scale is undefined.
void non_finite_check_and_unscale(const std::vector<Tensor>& grads, const Tensor& found_inf, const Tensor& inv_scale);

}  // namespace tc::cpu
