// Internal: reductions on CUDA tensors.
#pragma once
#include <vector>

#include "tensorcast/tensor.h"

namespace tc::gpu {

// cpu::sum_kernel's contract (backend/cpu/reduce.h) on one CUDA device: out (contiguous,
// numel = the kept elements) = the sum over the dims with reduced[d] of x, divided by
// divisor; float inputs accumulate in float32 (float64 for float64), integer and bool
// ones in int64. One block per output element sums its reduced elements in a strided
// loop and a tree in shared memory (a different order than the CPU's pairwise blocks:
// the results agree to the accumulation's rounding, not bit for bit).
void sum_kernel(const Tensor& out, const Tensor& x, const std::vector<bool>& reduced, double divisor = 1.0);

}  // namespace tc::gpu
