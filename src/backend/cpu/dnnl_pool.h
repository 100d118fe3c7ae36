// Internal: 2-d max and average pooling on oneDNN (pooling_v2, which has dilation).
//
// Inputs are contiguous NCHW; outputs are new contiguous tensors. Max pooling in training
// mode returns oneDNN's workspace (where each maximum came from), which the backward needs.
// float16 goes through float32 where oneDNN has no optimized fp16 pooling.
#pragma once
#include "backend/cpu/pool_params.h"
#include "tensorcast/tensor.h"

namespace tc::cpu {

enum class PoolKind : uint8_t { Max, AvgIncludePad, AvgExcludePad };

struct PoolResult {
  Tensor out;
  Tensor workspace;  // max pooling only: bytes in oneDNN's format; keep for the backward
};

PoolResult dnnl_pool2d_forward(const Tensor& x, const PoolParams& p, PoolKind kind);
Tensor dnnl_pool2d_backward(const Tensor& grad_out, const Tensor& workspace, const Shape& input_sizes,
                            DType dtype, const PoolParams& p, PoolKind kind);

}  // namespace tc::cpu
