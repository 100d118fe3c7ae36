// softmax / log_softmax on CUDA tensors (softmax.h). A row is the elements along `dim`;
// the other dims index the rows (a coalesced Geometry over each tensor's byte strides), so
// any layout runs without a copy. One block per row: the max, the sum of exp(x - max), and
// the write, each a strided pass over the row with a block-wide reduction between.
#include <cmath>

#include "backend/cuda/convert.cuh"
#include "backend/cuda/launch.h"
#include "backend/cuda/row_reduce.cuh"
#include "backend/cuda/softmax.h"

namespace tc::gpu {
namespace {

template <int N>
struct Rows {
  int64_t count = 0, length = 0;
  Geometry<N> rows;      // byte offsets of each row's first element, per tensor
  int64_t step[N] = {};  // byte stride along the row, per tensor
  char* ptr[N] = {};
  DType dtype[N] = {};
};

template <int N>
Rows<N> make_rows(const std::array<const Tensor*, N>& ts, int64_t dim, const char* op) {
  Rows<N> r;
  const Tensor& ref = *ts[0];
  Shape sizes;
  std::array<Shape, N> strides;
  for (int64_t d = 0; d < ref.dim(); ++d) {
    if (d == dim) continue;
    sizes.push_back(ref.size(d));
    for (int k = 0; k < N; ++k)
      strides[k].push_back(ts[k]->stride(d) * static_cast<int64_t>(element_size(ts[k]->dtype())));
  }
  r.rows = make_geometry<N>(sizes, strides, op);
  r.count = shape_numel(sizes);
  r.length = ref.dim() == 0 ? 1 : ref.size(dim);
  for (int k = 0; k < N; ++k) {
    TC_CHECK(ts[k]->device() == ref.device() && ts[k]->sizes() == ref.sizes(), op, "operands must match on one device");
    r.step[k] = (ref.dim() == 0 ? 1 : ts[k]->stride(dim)) * static_cast<int64_t>(element_size(ts[k]->dtype()));
    r.ptr[k] = static_cast<char*>(ts[k]->raw_data());
    r.dtype[k] = ts[k]->dtype();
  }
  return r;
}

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

unsigned row_blocks(int64_t rows) {
  return static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>(rows, 1), 65535));
}

}  // namespace

void softmax_forward(const Tensor& y, const Tensor& x, int64_t dim, bool log) {
  const char* op = log ? "log_softmax" : "softmax";
  if (x.numel() == 0) return;
  const Rows<2> r = make_rows<2>({&y, &x}, dim, op);
  DeviceGuard guard(x.device());
  const cudaStream_t stream = current_raw_stream(x.device());
  const int threads = row_threads(r.length);
  if (x.dtype() == kFloat64)
    softmax_forward_kernel<double><<<row_blocks(r.count), threads, 0, stream>>>(r, log);
  else
    softmax_forward_kernel<float><<<row_blocks(r.count), threads, 0, stream>>>(r, log);
  TC_CUDA_CHECK(cudaGetLastError(), op);
}

void softmax_backward(const Tensor& gx, const Tensor& g, const Tensor& y, int64_t dim, bool log) {
  const char* op = log ? "log_softmax_backward" : "softmax_backward";
  if (y.numel() == 0) return;
  const Rows<3> r = make_rows<3>({&gx, &g, &y}, dim, op);
  DeviceGuard guard(y.device());
  const cudaStream_t stream = current_raw_stream(y.device());
  const int threads = row_threads(r.length);
  if (y.dtype() == kFloat64)
    softmax_backward_kernel<double><<<row_blocks(r.count), threads, 0, stream>>>(r, log);
  else
    softmax_backward_kernel<float><<<row_blocks(r.count), threads, 0, stream>>>(r, log);
  TC_CUDA_CHECK(cudaGetLastError(), op);
}

}  // namespace tc::gpu
