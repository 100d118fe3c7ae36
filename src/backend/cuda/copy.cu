// Copies, casts and fills on CUDA tensors, and copies between devices (copy.h).
//
// One kernel template per (destination, source) dtype pair walks the destination's elements
// in row-major order and finds both addresses from the (coalesced) strides. Values go
// through float, or double when either dtype is float64/int64/int32, and are stored with
// tensorcast's own conversions (tensorcast/half.h, constexpr, so the same code runs on the
// device): the CPU's copy_into rules, so a cast gives the same bits on either device.
#include <cstring>
#include <type_traits>

#include "backend/cuda/convert.cuh"
#include "backend/cuda/copy.h"
#include "backend/cuda/launch.h"
#include "core/cuda_runtime.h"
#include "core/tensor_impl.h"
#include "tensorcast/half.h"

namespace tc::gpu {
namespace {

template <class D, class S>
__global__ void copy_contiguous_kernel(D* __restrict__ dst, const S* __restrict__ src, int64_t n) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) dst[i] = convert_value<D>(src[i]);
}

template <class D, class S>
__global__ void copy_strided_kernel(D* dst, const S* src, int64_t n, Geometry<2> g) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    int64_t off[2];
    g.offsets(i, off);
    dst[off[0]] = convert_value<D>(src[off[1]]);
  }
}

template <class D>
__global__ void fill_kernel(D* dst, int64_t n, Geometry<1> g, D value) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    int64_t off[1];
    g.offsets(i, off);
    dst[off[0]] = value;
  }
}

}  // namespace

void copy_into(const Tensor& dst, const Tensor& src) {
  TC_CHECK(dst.device() == src.device() && dst.device().is_cuda(), "copy_",
           "expected both tensors on one CUDA device, got ", dst.device(), " and ", src.device(),
           " (use Tensor::to(device) to move between devices)");
  const int64_t n = dst.numel();
  if (n == 0) return;
  const Geometry<2> g =
      make_geometry<2>(dst.sizes(), {dst.strides(), broadcast_strides(src, dst.sizes(), "copy_")}, "copy_");
  DeviceGuard guard(dst.device());
  const cudaStream_t stream = current_raw_stream(dst.device());
  dispatch_dtype(dst.dtype(), [&]<class D>() {
    dispatch_dtype(src.dtype(), [&]<class S>() {
      D* d = static_cast<D*>(dst.raw_data());
      const S* s = static_cast<const S*>(src.raw_data());
      if (g.ndim == 1 && g.strides[0][0] == 1 && g.strides[1][0] == 1)
        copy_contiguous_kernel<D, S><<<blocks_for(n), kThreads, 0, stream>>>(d, s, n);
      else
        copy_strided_kernel<D, S><<<blocks_for(n), kThreads, 0, stream>>>(d, s, n, g);
    });
  });
  TC_CUDA_CHECK(cudaGetLastError(), "copy_");
}

void fill(const Tensor& t, double value) {
  const int64_t n = t.numel();
  if (n == 0) return;
  const Geometry<1> g = make_geometry<1>(t.sizes(), {t.strides()}, "fill_");
  DeviceGuard guard(t.device());
  const cudaStream_t stream = current_raw_stream(t.device());
  dispatch_dtype(t.dtype(), [&]<class D>() {
    const D v = convert_value<D>(value);  // once, on the host, by the copy's rules
    fill_kernel<D><<<blocks_for(n), kThreads, 0, stream>>>(static_cast<D*>(t.raw_data()), n, g, v);
  });
  TC_CUDA_CHECK(cudaGetLastError(), "fill_");
}

void transfer(const Tensor& dst, const Tensor& src, bool non_blocking) {
  TC_CHECK(dst.sizes() == src.sizes() && dst.dtype() == src.dtype(), "to",
           "a copy between devices needs equal sizes and dtypes, got ", shape_str(src.sizes()), " ", src.dtype(),
           " and ", shape_str(dst.sizes()), " ", dst.dtype());
  if (dst.numel() == 0) return;
  // Both sides must be dense with one layout: then the bytes are one run.
  TC_CHECK(dst.strides() == src.strides() && !dense_stride_order(src.sizes(), src.strides()).empty(), "to",
           "a copy between devices needs two dense tensors of one layout (make the source contiguous first)");
  const size_t bytes = static_cast<size_t>(src.numel()) * element_size(src.dtype());
  const Device gpu = dst.device().is_cuda() ? dst.device() : src.device();
  DeviceGuard guard(gpu);
  const cudaStream_t stream = current_raw_stream(gpu);
  if (src.device().is_cuda() && dst.device().is_cuda() && src.device() != dst.device()) {
    TC_CUDA_CHECK(
        cudaMemcpyPeerAsync(dst.raw_data(), dst.device().index, src.raw_data(), src.device().index, bytes, stream),
        "to");
    return;
  }
  const cudaMemcpyKind kind = dst.device().is_cpu()   ? cudaMemcpyDeviceToHost
                              : src.device().is_cpu() ? cudaMemcpyHostToDevice
                                                      : cudaMemcpyDeviceToDevice;
  TC_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), bytes, kind, stream), "to");
  // Pinned host memory makes the copy truly asynchronous: the host block must outlive it
  // (keep_alive_until holds its Storage until the stream passes this point). From pageable
  // memory cudaMemcpyAsync returns once the bytes are staged, so the source may go at once.
  const Tensor& host = kind == cudaMemcpyDeviceToHost ? dst : src;
  if (kind != cudaMemcpyDeviceToDevice && host.impl()->storage->pinned)
    cuda::detail::keep_alive_until(host.impl()->storage, gpu, stream);
  // The host reads dst as soon as this returns, unless the caller asked for a non-blocking
  // copy into pinned memory (then, as in PyTorch, it synchronizes before reading).
  if (kind == cudaMemcpyDeviceToHost && !(non_blocking && dst.impl()->storage->pinned))
    TC_CUDA_CHECK(cudaStreamSynchronize(stream), "to");
}

}  // namespace tc::gpu
