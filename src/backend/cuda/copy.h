// Internal: copies, casts and fills on CUDA tensors (tc::gpu, the CUDA backend's namespace,
// as tc::cpu is the CPU's), and copies between the CPU and a device.
#pragma once
#include "tensorcast/tensor.h"

namespace tc::gpu {

// dst = src converted to dst's dtype, src broadcast to dst's shape; any dtypes and strides,
// both on the same CUDA device. Conversions are tensorcast's (tensorcast/half.h: round to
// nearest even, NaN kept quiet with its top payload bits), bit for bit the CPU's.
void copy_into(const Tensor& dst, const Tensor& src);

// Every element of t (any strides) set to value, converted to t's dtype once.
void fill(const Tensor& t, double value);

// dst = src across devices (CPU <-> CUDA, or two CUDA devices): same sizes and dtype; a
// dense src keeps its layout when dst has it too. The copy is queued on the device's
// current stream; a copy to the CPU waits for it, so the host may read dst at once, except
// a non_blocking one into pinned memory (the caller synchronizes, as in PyTorch). A copy
// from or to pinned memory does not wait: the pinned block is kept until the copy is done.
void transfer(const Tensor& dst, const Tensor& src, bool non_blocking = false);

}  // namespace tc::gpu
