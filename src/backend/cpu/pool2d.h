// Internal: pooling on the CPU, the kernels of the table (backend/kernels.def): oneDNN for
// float32 / bfloat16 / float16, the direct loops for float64 and for the windows oneDNN
// cannot express (computed NCHW and copied into a channels-last input's layout). Max
// pooling saves oneDNN's workspace, or the argmax indices (int64) of the direct loops.
#pragma once
#include <utility>

#include "backend/cpu/window_params.h"
#include "tensorcast/tensor.h"

namespace tc::cpu {

std::pair<Tensor, Tensor> max_pool2d_forward(const Tensor& x, const PoolParams& p, bool channels_last);
Tensor max_pool2d_backward(const Tensor& grad_out, const Tensor& saved, const Shape& input_sizes, const PoolParams& p,
                           bool channels_last);
Tensor max_pool2d_indices(const Tensor& x, const Tensor& saved, const PoolParams& p);
Tensor avg_pool2d_forward(const Tensor& x, const PoolParams& p, bool count_include_pad, bool channels_last);
Tensor avg_pool2d_backward(const Tensor& grad_out, const Shape& input_sizes, const PoolParams& p,
                           bool count_include_pad, bool channels_last);
Tensor adaptive_avg_pool2d_forward(const Tensor& x, int64_t out_h, int64_t out_w, bool channels_last);
Tensor adaptive_avg_pool2d_backward(const Tensor& grad_out, const Shape& input_sizes, bool channels_last);

}  // namespace tc::cpu
