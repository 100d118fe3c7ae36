// Internal: the geometry of a 2-d convolution and of a pooling window, shared by the
// oneDNN kernels, the direct loops, the meta device and CUDA.
#pragma once
#include <cstdint>

namespace tc::cpu {

struct ConvParams {
  int64_t stride[2] = {1, 1};
  int64_t padding[2] = {0, 0};
  int64_t dilation[2] = {1, 1};  // PyTorch's convention: 1 = dense
  int64_t groups = 1;
};

// Output spatial size of one dim (PyTorch's formula).
inline int64_t conv_out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

struct PoolParams {
  int64_t kernel[2] = {1, 1};
  int64_t stride[2] = {1, 1};
  int64_t padding[2] = {0, 0};
  int64_t dilation[2] = {1, 1};  // PyTorch's convention: 1 = dense
  int64_t out[2] = {1, 1};       // output H, W (ceil_mode already applied)
};

}  // namespace tc::cpu
