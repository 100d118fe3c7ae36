// Internal: reductions on CUDA tensors.
#pragma once
#include <vector>

#include "tensorcast/tensor.h"

namespace tc::gpu {

// cpu::sum_kernel's contract (backend/cpu/loops/reduce.h) on one CUDA device: out (contiguous,
// numel = the kept elements) = the sum over the dims with reduced[d] of x, divided by
// divisor; float inputs accumulate in float32 (float64 for float64), integer and bool
// ones in int64. One block per output element sums its reduced elements in a strided
// loop and a tree in shared memory (a different order than the CPU's pairwise blocks:
// the results agree to the accumulation's rounding, not bit for bit).
void sum_kernel(const Tensor& out, const Tensor& x, const std::vector<bool>& reduced, double divisor = 1.0);

// cpu::var_kernel's contract on one CUDA device: one block per output element, two passes
// over its reduced elements (the mean, then the squared deviations from it), each summed in
// float32 (float64 for float64) per thread and combined in a fixed tree: deterministic,
// equal to the CPU's pairwise sums to the accumulation's rounding.
void var_kernel(const Tensor& out, const Tensor& mean_out, const Tensor& x, const std::vector<bool>& reduced,
                int64_t correction);

// cpu::minmax_kernel's contract on one CUDA device (values and indices contiguous there).
// Every element is ranked by one total order: a NaN above everything (the lowest index
// among NaNs first), then the better value, then the lower index; its unique winner is the
// CPU's answer (first NaN, else first index of the best value), whatever split the kernels
// use. Along a dim: one block per row, or one thread per row for short rows and rows whose
// elements are strided (coalesced across rows); over all elements: blocks of partial
// winners, combined by a second kernel.
void minmax_kernel(const Tensor& values, const Tensor& indices, const Tensor& x, int64_t dim, bool is_max);

// cpu::scatter_along_dim's contract (grad_in, g and index contiguous on one CUDA device).
void scatter_along_dim(const Tensor& grad_in, const Tensor& g, const Tensor& index, int64_t dim);

}  // namespace tc::gpu
