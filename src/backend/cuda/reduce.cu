// Reductions on CUDA tensors (reduce.h).
#include <algorithm>
#include <type_traits>

#include "backend/cuda/convert.cuh"
#include "backend/cuda/launch.h"
#include "backend/cuda/reduce.h"
#include "backend/cuda/row_reduce.cuh"
#include "backend/cuda/rows.cuh"

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

// ---- var

// One block per output: the mean of its reduced elements, then the sum of their squared
// deviations from it, both in C (float, or double for float64), as the CPU's two passes.
template <class C>
__global__ void var_kernel_impl(char* out, DType out_dtype, int64_t out_es, C* mean_out, const char* x, DType x_dtype,
                                int64_t n_out, int64_t n_red, Geometry<1> kept, Geometry<1> red, double divisor) {
  __shared__ C scratch[32];
  for (int64_t o = blockIdx.x; o < n_out; o += gridDim.x) {
    int64_t base[1];
    kept.offsets(o, base);
    auto at = [&](int64_t r) {
      int64_t off[1];
      red.offsets(r, off);
      return load_as<C>(x + base[0] + off[0], x_dtype);
    };
    C s = 0;
    for (int64_t r = threadIdx.x; r < n_red; r += blockDim.x) s += at(r);
    // No reduced elements: a NaN mean and variance, as the CPU's.
    const C mean = n_red > 0 ? block_reduce(s, SumOp{}, scratch) / C(n_red) : C(NAN);
    C q = 0;
    for (int64_t r = threadIdx.x; r < n_red; r += blockDim.x) {
      const C d = at(r) - mean;
      q += d * d;
    }
    q = n_red > 0 ? block_reduce(q, SumOp{}, scratch) : C(NAN);
    if (threadIdx.x == 0) {
      if (mean_out) mean_out[o] = mean;
      store_from<C>(out + o * out_es, out_dtype, divisor == 1.0 ? q : q / C(divisor));
    }
  }
}

// x's dims split into the kept ones and the reduced ones, each a coalesced geometry of
// x's byte strides (the kept ones in the output's row-major order).
struct Split {
  Geometry<1> kept, red;
  int64_t n_red = 1;
};
Split split_dims(const Tensor& x, const std::vector<bool>& reduced, const char* op) {
  Shape kept_sizes, kept_strides, red_sizes, red_strides;
  const int64_t es = static_cast<int64_t>(element_size(x.dtype()));
  for (int64_t d = 0; d < x.dim(); ++d) {
    (reduced[d] ? red_sizes : kept_sizes).push_back(x.size(d));
    (reduced[d] ? red_strides : kept_strides).push_back(x.stride(d) * es);
  }
  Split s;
  s.n_red = shape_numel(red_sizes);
  s.kept = make_geometry<1>(kept_sizes, {kept_strides}, op);
  s.red = make_geometry<1>(red_sizes, {red_strides}, op);
  return s;
}

// ---- max / min

template <class C>
__device__ __forceinline__ bool is_nan(C v) {
  if constexpr (std::is_floating_point_v<C>)
    return v != v;
  else
    return false;
}

// Whether candidate (a, ia) ranks above (b, ib) in the total order of reduce.h: a NaN above
// everything, then the better value, then the lower index. An index < 0 is no candidate
// (a thread or block that saw no element).
template <bool kMax, class C>
__device__ __forceinline__ bool beats(C a, int64_t ia, C b, int64_t ib) {
  if (ia < 0) return false;
  if (ib < 0) return true;
  const bool an = is_nan(a), bn = is_nan(b);
  if (an || bn) return an && (!bn || ia < ib);
  if (kMax ? a > b : a < b) return true;
  return a == b && ia < ib;
}

// The block's winner of (v, i); every thread gets it. The order is total, so the winner is
// the same whatever the pairing. sv/si: one per warp, reused (no sync needed between calls).
template <bool kMax, class C>
__device__ void block_best(C& v, int64_t& i, C* sv, int64_t* si) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const C ov = __shfl_xor_sync(0xffffffffu, v, offset);
    const int64_t oi = __shfl_xor_sync(0xffffffffu, i, offset);
    if (beats<kMax>(ov, oi, v, i)) v = ov, i = oi;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = (blockDim.x + 31) / 32;
  __syncthreads();  // a previous call's readers are done with sv/si
  if (lane == 0) sv[warp] = v, si[warp] = i;
  __syncthreads();
  v = sv[0];
  i = si[0];
  for (int w = 1; w < warps; ++w)
    if (beats<kMax>(sv[w], si[w], v, i)) v = sv[w], i = si[w];
}

// Where a max/min writes: values (x's dtype, contiguous; null: not wanted) and indices.
struct MinmaxOut {
  char* values = nullptr;
  DType dtype = kFloat32;
  int64_t es = 0;
  int64_t* indices = nullptr;
};

template <class C>
__device__ __forceinline__ void write_best(const MinmaxOut& out, int64_t o, C v, int64_t i) {
  if (out.values) store_from<C>(out.values + o * out.es, out.dtype, v);
  if (out.indices) out.indices[o] = i;
}

// Along a dim, one block per row (long contiguous rows).
template <bool kMax, class C>
__global__ void minmax_row_block_kernel(Rows<1> x, MinmaxOut out) {
  __shared__ C sv[32];
  __shared__ int64_t si[32];
  for (int64_t r = blockIdx.x; r < x.count; r += gridDim.x) {
    int64_t base[1];
    x.rows.offsets(r, base);
    const char* row = x.ptr[0] + base[0];
    C v{};
    int64_t i = -1;
    for (int64_t k = threadIdx.x; k < x.length; k += blockDim.x) {
      const C a = load_as<C>(row + k * x.step[0], x.dtype[0]);
      if (beats<kMax>(a, k, v, i)) v = a, i = k;
    }
    block_best<kMax>(v, i, sv, si);
    if (threadIdx.x == 0) write_best(out, r, v, i);
  }
}

// Along a dim, one thread per row (short rows, or strided ones: neighbouring threads read
// neighbouring elements when the kept innermost dim is the contiguous one).
template <bool kMax, class C>
__global__ void minmax_row_thread_kernel(Rows<1> x, MinmaxOut out) {
  for (int64_t r = global_index(); r < x.count; r += grid_stride()) {
    int64_t base[1];
    x.rows.offsets(r, base);
    const char* row = x.ptr[0] + base[0];
    C v = load_as<C>(row, x.dtype[0]);
    int64_t i = 0;
    for (int64_t k = 1; k < x.length && !is_nan(v); ++k) {  // nothing beats a NaN seen first
      const C a = load_as<C>(row + k * x.step[0], x.dtype[0]);
      if (beats<kMax>(a, k, v, i)) v = a, i = k;
    }
    write_best(out, r, v, i);
  }
}

// Over all n elements (row-major flat index through g): each block's winner.
template <bool kMax, class C>
__global__ void minmax_all_partial_kernel(const char* x, DType x_dtype, int64_t n, Geometry<1> g, C* part_v,
                                          int64_t* part_i) {
  __shared__ C sv[32];
  __shared__ int64_t si[32];
  C v{};
  int64_t i = -1;
  for (int64_t k = global_index(); k < n; k += grid_stride()) {
    int64_t off[1];
    g.offsets(k, off);
    const C a = load_as<C>(x + off[0], x_dtype);
    if (beats<kMax>(a, k, v, i)) v = a, i = k;
  }
  block_best<kMax>(v, i, sv, si);
  if (threadIdx.x == 0) part_v[blockIdx.x] = v, part_i[blockIdx.x] = i;
}

// The winner of the blocks' winners (one block).
template <bool kMax, class C>
__global__ void minmax_all_final_kernel(const C* part_v, const int64_t* part_i, int64_t parts, MinmaxOut out) {
  __shared__ C sv[32];
  __shared__ int64_t si[32];
  C v{};
  int64_t i = -1;
  for (int64_t k = threadIdx.x; k < parts; k += blockDim.x)
    if (beats<kMax>(part_v[k], part_i[k], v, i)) v = part_v[k], i = part_i[k];
  block_best<kMax>(v, i, sv, si);
  if (threadIdx.x == 0) write_best(out, 0, v, i);
}

// fn.template operator()<C>() with the CPU's max/min compute type: double for float64,
// float for the other floating dtypes, int64 for integers and bool (exact for all).
template <class F>
void with_minmax_type(DType t, F&& fn) {
  if (t == kFloat64)
    fn.template operator()<double>();
  else if (is_floating(t))
    fn.template operator()<float>();
  else
    fn.template operator()<int64_t>();
}

// ---- scatter along a dim

template <class T>
__global__ void scatter_kernel(T* dst, const T* src, const int64_t* index, int64_t n, int64_t length, int64_t inner) {
  for (int64_t o = global_index(); o < n; o += grid_stride())
    dst[(o / inner) * length * inner + index[o] * inner + o % inner] = src[o];
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

namespace tc::gpu {

void var_kernel(const Tensor& out, const Tensor& mean_out, const Tensor& x, const std::vector<bool>& reduced,
                int64_t correction) {
  TC_CHECK(out.device() == x.device() && x.device().is_cuda(), "var", "expected both tensors on one CUDA device, got ",
           out.device(), " and ", x.device());
  TC_CHECK(out.is_contiguous(), "var", "the output must be contiguous");
  TC_CHECK(is_floating(x.dtype()), "var", "expected a floating dtype, got ", dtype_name(x.dtype()),
           " for a tensor of shape ", shape_str(x.sizes()));
  const int64_t n_out = out.numel();
  if (n_out == 0) return;
  const DType acc = x.dtype() == kFloat64 ? kFloat64 : kFloat32;
  if (mean_out.defined())
    TC_CHECK(mean_out.device() == x.device() && mean_out.is_contiguous() && mean_out.numel() == n_out &&
                 mean_out.dtype() == acc,
             "var", "the mean must be a contiguous ", dtype_name(acc), " tensor of ", n_out, " elements on ",
             x.device(), ", got ", dtype_name(mean_out.dtype()), " ", shape_str(mean_out.sizes()), " on ",
             mean_out.device());
  const Split s = split_dims(x, reduced, "var");
  const double divisor = static_cast<double>(std::max<int64_t>(0, s.n_red - correction));
  DeviceGuard guard(x.device());
  const cudaStream_t stream = current_raw_stream(x.device());
  with_compute_type(x.dtype(), [&]<class C>() {
    var_kernel_impl<C><<<row_blocks(n_out), row_threads(s.n_red), 0, stream>>>(
        static_cast<char*>(out.raw_data()), out.dtype(), static_cast<int64_t>(element_size(out.dtype())),
        mean_out.defined() ? static_cast<C*>(mean_out.raw_data()) : nullptr, static_cast<const char*>(x.raw_data()),
        x.dtype(), n_out, s.n_red, s.kept, s.red, divisor);
  });
  TC_CUDA_CHECK(cudaGetLastError(), "var");
}

void minmax_kernel(const Tensor& values, const Tensor& indices, const Tensor& x, int64_t dim, bool is_max) {
  const char* op = is_max ? "max" : "min";
  const Tensor& ref = values.defined() ? values : indices;
  TC_CHECK(ref.defined() && x.device().is_cuda(), op, "expected a CUDA input and an output, got ", x.device());
  const int64_t n_out = ref.numel();
  if (n_out == 0) return;
  MinmaxOut out;
  if (values.defined()) {
    TC_CHECK(values.device() == x.device() && values.is_contiguous() && values.dtype() == x.dtype(), op,
             "the values must be a contiguous ", dtype_name(x.dtype()), " tensor on ", x.device());
    out.values = static_cast<char*>(values.raw_data());
    out.dtype = values.dtype();
    out.es = static_cast<int64_t>(element_size(values.dtype()));
  }
  if (indices.defined()) {
    TC_CHECK(indices.device() == x.device() && indices.is_contiguous() && indices.dtype() == kInt64 &&
                 indices.numel() == n_out,
             op, "the indices must be a contiguous int64 tensor of ", n_out, " elements on ", x.device());
    out.indices = static_cast<int64_t*>(indices.raw_data());
  }
  const int64_t n = x.numel();
  TC_CHECK(n > 0, op, "cannot reduce over a zero-size tensor of shape ", shape_str(x.sizes()));
  DeviceGuard guard(x.device());
  const cudaStream_t stream = current_raw_stream(x.device());
  with_minmax_type(x.dtype(), [&]<class C>() {
    auto launch = [&]<bool kMax>() {
      if (dim >= 0) {
        const Rows<1> r = make_rows<1>({&x}, dim, op);
        const int64_t es = static_cast<int64_t>(element_size(x.dtype()));
        if (r.length <= 16 || (r.step[0] != es && r.count >= 4096))
          minmax_row_thread_kernel<kMax, C><<<blocks_for(r.count), kThreads, 0, stream>>>(r, out);
        else
          minmax_row_block_kernel<kMax, C><<<row_blocks(r.count), row_threads(r.length), 0, stream>>>(r, out);
        return;
      }
      Shape strides = x.strides();
      for (int64_t& st : strides) st *= static_cast<int64_t>(element_size(x.dtype()));
      const Geometry<1> g = make_geometry<1>(x.sizes(), {strides}, op);
      // Blocks by size only, each with at least one element (ceil(n / kThreads) at most).
      const int64_t parts = std::min<int64_t>(blocks_for(n), 1024);
      const Tensor part_v = make_tensor({parts}, dtype_of<C>, x.device());
      const Tensor part_i = make_tensor({parts}, kInt64, x.device());
      minmax_all_partial_kernel<kMax, C><<<static_cast<unsigned>(parts), kThreads, 0, stream>>>(
          static_cast<const char*>(x.raw_data()), x.dtype(), n, g, static_cast<C*>(part_v.raw_data()),
          static_cast<int64_t*>(part_i.raw_data()));
      minmax_all_final_kernel<kMax, C><<<1, row_threads(parts), 0, stream>>>(
          static_cast<const C*>(part_v.raw_data()), static_cast<const int64_t*>(part_i.raw_data()), parts, out);
    };
    if (is_max)
      launch.template operator()<true>();
    else
      launch.template operator()<false>();
  });
  TC_CUDA_CHECK(cudaGetLastError(), op);
}

void scatter_along_dim(const Tensor& grad_in, const Tensor& g, const Tensor& index, int64_t dim) {
  const char* op = "max/min backward";
  TC_CHECK(grad_in.device().is_cuda() && g.device() == grad_in.device() && index.device() == grad_in.device(), op,
           "expected every tensor on one CUDA device");
  TC_CHECK(grad_in.is_contiguous() && g.is_contiguous() && index.is_contiguous() && index.dtype() == kInt64 &&
               g.dtype() == grad_in.dtype() && index.numel() == g.numel(),
           op, "expected contiguous tensors, int64 indices and one gradient dtype");
  const int64_t n = g.numel();
  if (n == 0) return;
  const Shape& sz = grad_in.sizes();
  const int64_t length = sz.empty() ? 1 : sz[static_cast<size_t>(dim)];
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(dim) + 1; d < sz.size(); ++d) inner *= sz[d];
  DeviceGuard guard(grad_in.device());
  const cudaStream_t stream = current_raw_stream(grad_in.device());
  const int64_t* idx = static_cast<const int64_t*>(index.raw_data());
  auto run = [&]<class T>() {
    scatter_kernel<T><<<blocks_for(n), kThreads, 0, stream>>>(
        static_cast<T*>(grad_in.raw_data()), static_cast<const T*>(g.raw_data()), idx, n, length, inner);
  };
  switch (element_size(grad_in.dtype())) {
    case 1:
      run.template operator()<uint8_t>();
      break;
    case 2:
      run.template operator()<uint16_t>();
      break;
    case 4:
      run.template operator()<uint32_t>();
      break;
    default:
      run.template operator()<uint64_t>();
      break;
  }
  TC_CUDA_CHECK(cudaGetLastError(), op);
}

}  // namespace tc::gpu
