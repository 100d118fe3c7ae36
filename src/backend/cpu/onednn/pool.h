// Internal: 2-d max and average pooling on oneDNN (pooling_v2, which has dilation).
//
// Channels-last inputs (NHWC memory, onednn/plan.h's is_channels_last) run natively and give
// channels-last outputs; other inputs run as contiguous NCHW with contiguous outputs. Max pooling in training
// mode returns oneDNN's workspace (where each maximum came from), which the backward needs.
// float16 goes through float32 where oneDNN has no optimized fp16 pooling.
#pragma once
#include "backend/cpu/window_params.h"
#include "tensorcast/tensor.h"

namespace tc::cpu {

enum class PoolKind : uint8_t { Max, AvgIncludePad, AvgExcludePad };

struct PoolResult {
  Tensor out;
  Tensor workspace;  // max pooling only: bytes in oneDNN's format; keep for the backward
};

PoolResult dnnl_pool2d_forward(const Tensor& x, const PoolParams& p, PoolKind kind);

// What dnnl_pool2d_forward of an input of these sizes allocates besides its output: whether
// a 16-bit input goes through float32 copies (no optimized 16-bit kernel here) and the max
// pooling workspace's bytes. From metadata alone (the meta device plans with it).
struct PoolPlanInfo {
  bool through_float32 = false;
  int64_t workspace_bytes = 0;
};
PoolPlanInfo dnnl_pool2d_plan_info(const Shape& input_sizes, DType dtype, const PoolParams& p, PoolKind kind,
                                   bool channels_last);
// input_channels_last: the forward input's layout (is_channels_last); grad_out may have any
// strides; grad_input comes in the forward input's layout.
Tensor dnnl_pool2d_backward(const Tensor& grad_out, const Tensor& workspace, const Shape& input_sizes, DType dtype,
                            const PoolParams& p, PoolKind kind, bool input_channels_last = false);

}  // namespace tc::cpu
