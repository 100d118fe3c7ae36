// Internal: conv2d on CUDA tensors (cuDNN's convolution forward, backward data and backward
// filter; conv.cu).
#pragma once
#include <cstddef>
#include <utility>

#include "backend/cpu/window_params.h"  // ConvParams, conv_out_size
#include "tensorcast/tensor.h"

namespace tc::gpu {

// cpu::dnnl_conv2d_forward / _backward_data / _backward_weights' contracts
// (backend/cpu/onednn/conv.h) on one CUDA device, for float32, bfloat16, float16 and float64.
// A channels-last input (NHWC memory) runs on cuDNN's NHWC kernels and gives a
// channels-last output (and input gradient); other inputs run NCHW with contiguous NCHW
// results. Operands in another layout are copied into the one the call runs in (the
// weight too: NHWC-ordered for a channels-last call). float32 runs in full float32 (FMA
// math: no TF32; PyTorch's cuDNN default would allow it), bfloat16 and float16 on Tensor
// Cores with float32 accumulation, float64 in float64. Only algorithms cuDNN reports as
// deterministic are used. The bias is added after the convolution (a second rounding for
// 16-bit outputs, as PyTorch's); the bias gradient is sum_kernel's sum over (N, H, W). For
// 16-bit inputs with grad_dtype float32 the weight gradient is cuDNN's 16-bit result
// widened (the legacy API has no mixed-dtype filter gradient), as PyTorch's autocast gives.
// A build without cuDNN (TC_WITH_CUDNN unset) throws, saying how to reconfigure.
Tensor conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const cpu::ConvParams& p);
Tensor conv2d_backward_data(const Tensor& grad_out, const Tensor& w, const Shape& input_sizes, const cpu::ConvParams& p,
                            bool input_channels_last = false);
std::pair<Tensor, Tensor> conv2d_backward_weights(const Tensor& x, const Tensor& grad_out, const Shape& weight_sizes,
                                                  bool with_bias, const cpu::ConvParams& p, DType grad_dtype);

// The cached algorithm choices (one per pass, dtype, layout and geometry), for tests.
size_t conv2d_cache_size();

}  // namespace tc::gpu
