// Internal (nvcc only): block-wide reductions for the row kernels (one block per row).
#pragma once
#include <cuda_runtime_api.h>

namespace tc::gpu {

struct SumOp {
  template <class C>
  __device__ __forceinline__ C operator()(C a, C b) const {
    return a + b;
  }
};
struct MaxOp {  // NaN wins, so a row holding one gives NaN, as the CPU's
  template <class C>
  __device__ __forceinline__ C operator()(C a, C b) const {
    return (a != a || a > b) ? a : b;
  }
};

// v reduced over the whole block with op; every thread gets the result. `scratch` holds
// one value per warp (32 at most) and is reused: callers need no sync before the next call.
template <class C, class Op>
__device__ C block_reduce(C v, Op op, C* scratch) {
  for (int offset = 16; offset > 0; offset /= 2) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = (blockDim.x + 31) / 32;
  __syncthreads();  // a previous call's readers are done with scratch
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = scratch[0];
  for (int w = 1; w < warps; ++w) v = op(v, scratch[w]);
  return v;
}

// Threads per row block: a multiple of the warp size, up to 256, no more than the row needs.
inline int row_threads(int64_t row_length) {
  int t = 32;
  while (t < 256 && t < row_length) t *= 2;
  return t;
}

}  // namespace tc::gpu
