// Reductions on CUDA tensors (reduce.h).
#include <type_traits>

#include "backend/cuda/convert.cuh"
#include "backend/cuda/launch.h"
#include "backend/cuda/reduce.h"

namespace tc::gpu {
namespace {

constexpr int kReduceThreads = 256;

// Acc: float, double or int64_t. kept/red: x's byte strides over the kept and the reduced dims.
template <class Acc>
__global__ void sum_kernel_impl(char* out, DType out_dtype, int64_t out_es, const char* x, DType x_dtype, int64_t n_out,
                                int64_t n_red, Geometry<1> kept, Geometry<1> red, double divisor) {
  __shared__ Acc partial[kReduceThreads];
  for (int64_t o = blockIdx.x; o < n_out; o += gridDim.x) {
    int64_t base[1];
    kept.offsets(o, base);
    Acc acc = 0;
    for (int64_t r = threadIdx.x; r < n_red; r += blockDim.x) {
      int64_t off[1];
      red.offsets(r, off);
      acc += load_as<Acc>(x + base[0] + off[0], x_dtype);
    }
    partial[threadIdx.x] = acc;
    __syncthreads();
    for (int s = kReduceThreads / 2; s > 0; s /= 2) {
      if (threadIdx.x < s) partial[threadIdx.x] += partial[threadIdx.x + s];
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      if constexpr (std::is_integral_v<Acc>)
        store_from<Acc>(out + o * out_es, out_dtype, partial[0]);
      else
        store_from<Acc>(out + o * out_es, out_dtype, divisor == 1.0 ? partial[0] : partial[0] / Acc(divisor));
    }
    __syncthreads();  // partial is reused by the next output
  }
}

}  // namespace

void sum_kernel(const Tensor& out, const Tensor& x, const std::vector<bool>& reduced, double divisor) {
  TC_CHECK(out.device() == x.device() && x.device().is_cuda(), "sum", "expected both tensors on one CUDA device");
  TC_CHECK(out.is_contiguous(), "sum", "the output must be contiguous");
  const int64_t n_out = out.numel();
  if (n_out == 0) return;
  Shape kept_sizes, kept_strides, red_sizes, red_strides;
  const int64_t es = static_cast<int64_t>(element_size(x.dtype()));
  for (int64_t d = 0; d < x.dim(); ++d) {
    (reduced[d] ? red_sizes : kept_sizes).push_back(x.size(d));
    (reduced[d] ? red_strides : kept_strides).push_back(x.stride(d) * es);
  }
  const int64_t n_red = shape_numel(red_sizes);
  const Geometry<1> kept = make_geometry<1>(kept_sizes, {kept_strides}, "sum");
  const Geometry<1> red = make_geometry<1>(red_sizes, {red_strides}, "sum");
  DeviceGuard guard(x.device());
  const cudaStream_t stream = current_raw_stream(x.device());
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(n_out, 65535));
  auto run = [&]<class Acc>() {
    sum_kernel_impl<Acc><<<blocks, kReduceThreads, 0, stream>>>(
        static_cast<char*>(out.raw_data()), out.dtype(), static_cast<int64_t>(element_size(out.dtype())),
        static_cast<const char*>(x.raw_data()), x.dtype(), n_out, n_red, kept, red, divisor);
  };
  if (!is_floating(x.dtype()))
    run.template operator()<int64_t>();
  else if (x.dtype() == kFloat64)
    run.template operator()<double>();
  else
    run.template operator()<float>();
  TC_CUDA_CHECK(cudaGetLastError(), "sum");
}

}  // namespace tc::gpu
