// Internal: dropout's mask and masking kernels on CUDA tensors.
#pragma once
#include <cstdint>

#include "tensorcast/tensor.h"

namespace tc::gpu {

// cpu::dropout_mask/dropout_apply's contracts (backend/cpu/loops/dropout.h) on one CUDA device.
// The mask is the CPU's counter-based hash of (key, element index), so a key gives the same
// mask bits on either device; the masked scale computes as the CPU does (float32 for
// 16-bit data, rounded once), so the outputs match it bit for bit too.
void dropout_mask(const Tensor& mask, uint64_t key, double p);
void dropout_apply(const Tensor& out, const Tensor& v, const Tensor& mask, double scale);

}  // namespace tc::gpu
