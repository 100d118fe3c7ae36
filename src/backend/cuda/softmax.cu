// softmax / log_softmax on CUDA tensors (softmax.h). A row is the elements along `dim`;
// the other dims index the rows (a coalesced Geometry over each tensor's byte strides), so
// any layout runs without a copy. One block per row: the max, the sum of exp(x - max), and
// the write, each a strided pass over the row with a block-wide reduction between.
#include <cmath>

#include "backend/cuda/convert.cuh"
#include "backend/cuda/launch.h"
#include "backend/cuda/row_reduce.cuh"
#include "backend/cuda/rows.cuh"
#include "backend/cuda/softmax.h"

namespace tc::gpu {
namespace {

// Rows<2>: y, x.
template <class C>
__global__ void softmax_forward_kernel(Rows<2> r, bool log) {
  __shared__ C scratch[32];
  for (int64_t row = blockIdx.x; row < r.count; row += gridDim.x) {
    int64_t base[2];
    r.rows.offsets(row, base);
    const char* x = r.ptr[1] + base[1];
    char* y = r.ptr[0] + base[0];
    C m = -INFINITY;
    for (int64_t i = threadIdx.x; i < r.length; i += blockDim.x)
      m = MaxOp{}(m, load_as<C>(x + i * r.step[1], r.dtype[1]));
    m = block_reduce(m, MaxOp{}, scratch);
    C s = 0;
    for (int64_t i = threadIdx.x; i < r.length; i += blockDim.x)
      s += exp(load_as<C>(x + i * r.step[1], r.dtype[1]) - m);
    s = block_reduce(s, SumOp{}, scratch);
    const C log_s = ::log(s);
    for (int64_t i = threadIdx.x; i < r.length; i += blockDim.x) {
      const C shifted = load_as<C>(x + i * r.step[1], r.dtype[1]) - m;
      store_from<C>(y + i * r.step[0], r.dtype[0], log ? shifted - log_s : exp(shifted) / s);
    }
  }
}

// Rows<3>: gx, g, y.
template <class C>
__global__ void softmax_backward_kernel(Rows<3> r, bool log) {
  __shared__ C scratch[32];
  for (int64_t row = blockIdx.x; row < r.count; row += gridDim.x) {
    int64_t base[3];
    r.rows.offsets(row, base);
    char* gx = r.ptr[0] + base[0];
    const char* g = r.ptr[1] + base[1];
    const char* y = r.ptr[2] + base[2];
    C s = 0;  // log_softmax: sum(g); softmax: sum(g * y)
    for (int64_t i = threadIdx.x; i < r.length; i += blockDim.x) {
      const C gi = load_as<C>(g + i * r.step[1], r.dtype[1]);
      s += log ? gi : gi * load_as<C>(y + i * r.step[2], r.dtype[2]);
    }
    s = block_reduce(s, SumOp{}, scratch);
    for (int64_t i = threadIdx.x; i < r.length; i += blockDim.x) {
      const C gi = load_as<C>(g + i * r.step[1], r.dtype[1]), yi = load_as<C>(y + i * r.step[2], r.dtype[2]);
      store_from<C>(gx + i * r.step[0], r.dtype[0], log ? gi - exp(yi) * s : yi * (gi - s));
    }
  }
}

}  // namespace

void softmax_forward(const Tensor& y, const Tensor& x, int64_t dim, bool log) {
  const char* op = log ? "log_softmax" : "softmax";
  if (x.numel() == 0) return;
  const Rows<2> r = make_rows<2>({&y, &x}, dim, op);
  DeviceGuard guard(x.device());
  const cudaStream_t stream = current_raw_stream(x.device());
  const int threads = row_threads(r.length);
  with_compute_type(x.dtype(),
                    [&]<class C>() { softmax_forward_kernel<C><<<row_blocks(r.count), threads, 0, stream>>>(r, log); });
  TC_CUDA_CHECK(cudaGetLastError(), op);
}

void softmax_backward(const Tensor& gx, const Tensor& g, const Tensor& y, int64_t dim, bool log) {
  const char* op = log ? "log_softmax_backward" : "softmax_backward";
  if (y.numel() == 0) return;
  const Rows<3> r = make_rows<3>({&gx, &g, &y}, dim, op);
  DeviceGuard guard(y.device());
  const cudaStream_t stream = current_raw_stream(y.device());
  const int threads = row_threads(r.length);
  with_compute_type(
      y.dtype(), [&]<class C>() { softmax_backward_kernel<C><<<row_blocks(r.count), threads, 0, stream>>>(r, log); });
  TC_CUDA_CHECK(cudaGetLastError(), op);
}

}  // namespace tc::gpu
