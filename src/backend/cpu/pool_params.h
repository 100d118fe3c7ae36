// Internal: geometry of a 2-d pooling window, shared by the oneDNN and direct kernels.
#pragma once
#include <cstdint>

namespace tc::cpu {

struct PoolParams {
  int64_t kernel[2] = {1, 1};
  int64_t stride[2] = {1, 1};
  int64_t padding[2] = {0, 0};
  int64_t dilation[2] = {1, 1};  // PyTorch's convention: 1 = dense
  int64_t out[2] = {1, 1};       // output H, W (ceil_mode already applied)
};

}  // namespace tc::cpu
