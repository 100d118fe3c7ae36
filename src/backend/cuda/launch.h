// Internal (nvcc only): what the CUDA kernels share. Launch shapes, grid-stride indices,
// strided geometry with coalesced dims, the current stream, the dtype switch.
#pragma once
#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <initializer_list>

#include "core/cuda_runtime.h"
#include "core/tensor_impl.h"
#include "tensorcast/dtype.h"

namespace tc::gpu {

using cuda::detail::DeviceGuard;

inline cudaStream_t current_raw_stream(Device device) { return cuda::detail::raw_stream(device); }

constexpr int kThreads = 256;
// Enough blocks to fill any current GPU several times over; the kernels loop (grid
// stride) past that, so a block count never limits the size of a tensor.
inline unsigned blocks_for(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : b > 65536 ? 65536 : b);
}

__device__ __forceinline__ int64_t global_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// Row-major iteration over `sizes` with N operands' element strides, passed to a kernel by
// value. Dims of size 1 are dropped and neighbours that are one run for every operand are
// merged, so a contiguous tensor is one dim whatever its rank.
constexpr int kMaxDims = 10;
template <int N>
struct Geometry {
  int ndim = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};

  // The N element offsets of the element with row-major index i.
  __device__ __forceinline__ void offsets(int64_t i, int64_t (&off)[N]) const {
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const int64_t size = sizes[d];
      const int64_t idx = d == 0 ? i : i % size;
      i = d == 0 ? 0 : i / size;
      for (int k = 0; k < N; ++k) off[k] += idx * strides[k][d];
    }
  }
};

template <int N>
Geometry<N> make_geometry(const Shape& sizes, const std::array<Shape, N>& strides, const char* op) {
  Geometry<N> g;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;
    bool merge = g.ndim > 0;
    for (int k = 0; k < N && merge; ++k) merge = strides[k][d] * sizes[d] == g.strides[k][g.ndim - 1];
    if (merge) {  // the previous dim steps exactly over this one: one longer run
      g.sizes[g.ndim - 1] *= sizes[d];
      for (int k = 0; k < N; ++k) g.strides[k][g.ndim - 1] = strides[k][d];
      continue;
    }
    TC_CHECK(g.ndim < kMaxDims, op, "a CUDA kernel takes at most ", kMaxDims, " dims after merging, got shape ",
             shape_str(sizes));
    g.sizes[g.ndim] = sizes[d];
    for (int k = 0; k < N; ++k) g.strides[k][g.ndim] = strides[k][d];
    ++g.ndim;
  }
  if (g.ndim == 0) {  // a single element
    g.ndim = 1;
    g.sizes[0] = 1;
    for (int k = 0; k < N; ++k) g.strides[k][0] = 1;
  }
  return g;
}

// fn.template operator()<C>() with C the compute type of dtype t: double for float64, else
// float (16-bit data widens to float32, as on the CPU).
template <class F>
void with_compute_type(DType t, F&& fn) {
  if (t == DType::Float64)
    fn.template operator()<double>();
  else
    fn.template operator()<float>();
}

// fn.template operator()<B>() with the runtime flag as a template argument (one kernel per
// value, each branch-free).
template <class F>
void with_flag(bool flag, F&& fn) {
  if (flag)
    fn.template operator()<true>();
  else
    fn.template operator()<false>();
}

// fn.template operator()<T>() with T the element type of dtype t.
template <class F>
decltype(auto) dispatch_dtype(DType t, F&& fn) {
  return dispatch_all(t, "cuda", static_cast<F&&>(fn));
}

}  // namespace tc::gpu
