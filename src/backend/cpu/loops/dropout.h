// Internal: dropout's mask and masking kernels.
#pragma once
#include <cstdint>

#include "core/tensor_impl.h"

namespace tc::cpu {

// mask (contiguous uint8) [i] = 1 when element i is kept: when the counter-based hash
// splitmix64(key, i) maps to u >= p. The mask depends only on the key and the element
// index, never on the thread count.
void dropout_mask(const Tensor& mask, uint64_t key, double p);

// out = mask ? v * scale : 0 (an exact zero even for inf/NaN inputs, and for p = 1). v, out
// and mask are contiguous with v's number of elements; 16-bit values are scaled in
// float32 and rounded once.
void dropout_apply(const Tensor& out, const Tensor& v, const Tensor& mask, double scale);

}  // namespace tc::cpu
