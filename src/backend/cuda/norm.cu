// layer_norm on CUDA tensors (norm.h). Rows are the M contiguous runs of N elements of x.
#include <cmath>

#include "backend/cuda/convert.cuh"
#include "backend/cuda/launch.h"
#include "backend/cuda/norm.h"
#include "backend/cuda/row_reduce.cuh"
#include "backend/cuda/rows.cuh"

namespace tc::gpu {
namespace {

// A contiguous tensor's raw bytes and dtype (or nothing), for kernel parameters.
struct Raw {
  char* p = nullptr;
  DType dt = kFloat32;
  int64_t es = 0;
};
Raw raw(const Tensor& t) {
  if (!t.defined()) return {};
  return {static_cast<char*>(t.raw_data()), t.dtype(), static_cast<int64_t>(element_size(t.dtype()))};
}
template <class C>
__device__ __forceinline__ C at(const Raw& r, int64_t i) {
  return load_as<C>(r.p + i * r.es, r.dt);
}

// C: the statistics type (float, or double for float64 input).
template <class C>
__global__ void ln_forward_kernel(Raw out, C* mean_out, C* rstd_out, Raw x, Raw w, Raw b, int64_t M, int64_t N,
                                  double eps) {
  __shared__ double scratch[32];
  for (int64_t r = blockIdx.x; r < M; r += gridDim.x) {
    const int64_t base = r * N;
    double s = 0;
    for (int64_t j = threadIdx.x; j < N; j += blockDim.x) s += static_cast<double>(at<C>(x, base + j));
    const C mean = static_cast<C>(block_reduce(s, SumOp{}, scratch) / static_cast<double>(N));
    double q = 0;
    for (int64_t j = threadIdx.x; j < N; j += blockDim.x) {
      const double d = static_cast<double>(at<C>(x, base + j) - mean);
      q += d * d;
    }
    const C rstd = static_cast<C>(1.0 / std::sqrt(block_reduce(q, SumOp{}, scratch) / static_cast<double>(N) + eps));
    if (threadIdx.x == 0) mean_out[r] = mean, rstd_out[r] = rstd;
    for (int64_t j = threadIdx.x; j < N; j += blockDim.x) {
      C y = (at<C>(x, base + j) - mean) * rstd;
      if (w.p) y = y * at<C>(w, j);
      if (b.p) y = y + at<C>(b, j);
      store_from<C>(out.p + (base + j) * out.es, out.dt, y);
    }
  }
}

// dx = rstd * (g*w - mean(g*w) - xhat * mean(g*w*xhat)), one block per row.
template <class C>
__global__ void ln_backward_dx_kernel(Raw dx, Raw g, Raw x, const C* mean, const C* rstd, Raw w, int64_t M, int64_t N) {
  __shared__ double scratch[32];
  for (int64_t r = blockIdx.x; r < M; r += gridDim.x) {
    const int64_t base = r * N;
    const C mu = mean[r], rs = rstd[r];
    double a = 0, bsum = 0;
    for (int64_t j = threadIdx.x; j < N; j += blockDim.x) {
      const C gw = at<C>(g, base + j) * (w.p ? at<C>(w, j) : C(1));
      a += static_cast<double>(gw);
      bsum += static_cast<double>(gw * (at<C>(x, base + j) - mu) * rs);
    }
    const C mean_gw = static_cast<C>(block_reduce(a, SumOp{}, scratch) / static_cast<double>(N));
    const C mean_gwx = static_cast<C>(block_reduce(bsum, SumOp{}, scratch) / static_cast<double>(N));
    for (int64_t j = threadIdx.x; j < N; j += blockDim.x) {
      const C gw = at<C>(g, base + j) * (w.p ? at<C>(w, j) : C(1));
      const C xhat = (at<C>(x, base + j) - mu) * rs;
      store_from<C>(dx.p + (base + j) * dx.es, dx.dt, rs * (gw - mean_gw - xhat * mean_gwx));
    }
  }
}

// dweight[j] = sum_r g*xhat, dbias[j] = sum_r g: one thread per column, rows in order.
template <class C>
__global__ void ln_backward_params_kernel(Raw dw, Raw db, Raw g, Raw x, const C* mean, const C* rstd, int64_t M,
                                          int64_t N) {
  for (int64_t j = global_index(); j < N; j += grid_stride()) {
    double sw = 0, sb = 0;
    for (int64_t r = 0; r < M; ++r) {
      const C gi = at<C>(g, r * N + j);
      sw += static_cast<double>(gi * ((at<C>(x, r * N + j) - mean[r]) * rstd[r]));
      sb += static_cast<double>(gi);
    }
    if (dw.p) store_from<double>(dw.p + j * dw.es, dw.dt, sw);
    if (db.p) store_from<double>(db.p + j * db.es, db.dt, sb);
  }
}

}  // namespace

void layer_norm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, int64_t M, int64_t N, double eps) {
  if (M == 0 || N == 0) return;
  DeviceGuard guard(x.device());
  const cudaStream_t stream = current_raw_stream(x.device());
  with_compute_type(x.dtype(), [&]<class C>() {
    ln_forward_kernel<C><<<row_blocks(M), row_threads(N), 0, stream>>>(raw(out), static_cast<C*>(mean.raw_data()),
                                                                       static_cast<C*>(rstd.raw_data()), raw(x),
                                                                       raw(weight), raw(bias), M, N, eps);
  });
  TC_CUDA_CHECK(cudaGetLastError(), "layer_norm");
}

void layer_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& g, const Tensor& x,
                         const Tensor& mean, const Tensor& rstd, const Tensor& weight, int64_t M, int64_t N) {
  if (N == 0) return;
  DeviceGuard guard(x.device());
  const cudaStream_t stream = current_raw_stream(x.device());
  with_compute_type(x.dtype(), [&]<class C>() {
    const C* mu = static_cast<const C*>(mean.raw_data());
    const C* rs = static_cast<const C*>(rstd.raw_data());
    if (dx.defined() && M > 0)
      ln_backward_dx_kernel<C>
          <<<row_blocks(M), row_threads(N), 0, stream>>>(raw(dx), raw(g), raw(x), mu, rs, raw(weight), M, N);
    if (dweight.defined() || dbias.defined())  // zeros when there are no rows
      ln_backward_params_kernel<C>
          <<<blocks_for(N), kThreads, 0, stream>>>(raw(dweight), raw(dbias), raw(g), raw(x), mu, rs, M, N);
  });
  TC_CUDA_CHECK(cudaGetLastError(), "layer_norm_backward");
}

}  // namespace tc::gpu
