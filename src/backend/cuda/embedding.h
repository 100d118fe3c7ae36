// Internal: embedding's index check, row gather and backward on CUDA tensors.
#pragma once
#include "tensorcast/tensor.h"

namespace tc::gpu {

// cpu::embedding_indices/gather/scatter_add's contracts (backend/cpu/loops/embedding.h) on one
// CUDA device, with one difference: the range check does not synchronise. An out-of-range
// index is recorded by the kernel (its row then reads as zeros and gets no gradient) and the
// CPU's error, "[embedding] index 7 is out of range for 5 rows", is raised by the next CUDA
// embedding call on the device (forward or backward). The backward is deterministic: a
// stable radix sort of the indices, then each index's gradient rows summed in position
// order (float32 for 16-bit tables, rounded once), bit for bit the CPU's for float32.
void embedding_indices(const Tensor& ids, const Tensor& indices, int64_t rows);
void embedding_gather(const Tensor& out, const Tensor& weight, const Tensor& ids);
void embedding_scatter_add(const Tensor& grad_weight, const Tensor& g, const Tensor& ids);

}  // namespace tc::gpu
