// layer_norm and batch_norm on CUDA tensors (norm.h). layer_norm's rows are the M
// contiguous runs of N elements of x; batch_norm's channel c is the B runs of S elements
// at (n * Ch + c) * S.
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

// ------------------------------------------------------------------ batch_norm

// A 1-d tensor's raw bytes, dtype and byte step (the running statistics may be strided).
struct Vec {
  char* p = nullptr;
  DType dt = kFloat32;
  int64_t step = 0;
};
Vec vec(const Tensor& t) {
  if (!t.defined()) return {};
  return {static_cast<char*>(t.raw_data()), t.dtype(), t.stride(0) * static_cast<int64_t>(element_size(t.dtype()))};
}

// Operations rounded once each, never contracted into FMAs: the CPU's batch_norm loops
// round every product and sum, and these keep the device's results on the same bits.
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add_rn(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float sub_rn(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ double sub_rn(double a, double b) { return __dsub_rn(a, b); }

// Element i (0 <= i < B * S) of channel c.
__device__ __forceinline__ int64_t bn_elem(int64_t i, int64_t c, int64_t Ch, int64_t S) {
  const int64_t n = i / S;
  return (n * Ch + c) * S + (i - n * S);
}

// Threads per channel block: a multiple of the warp size, up to 1024 (one block per
// channel leaves SMs idle below ~2 channels per SM; wide blocks keep more loads in flight),
// no more than needed. It depends on the shape only, so the sums' order does too.
int bn_threads(int64_t count) {
  int t = 32;
  while (t < 1024 && t < count) t *= 2;
  return t;
}

// One block per channel: the statistics that normalize (the batch's, two passes, or the
// running ones), mean and rstd for the backward, the folded affine coefficients
// coef[c] = rstd * w, coef[Ch + c] = b - mean * coef[c] (from the unrounded statistics, as
// the CPU), and the running statistics' update by thread 0.
template <class C>
__global__ void bn_stats_kernel(C* mean_out, C* rstd_out, C* coef, Raw x, Raw w, Raw b, Vec rm, Vec rv, int64_t B,
                                int64_t Ch, int64_t S, bool use_batch, bool update_running, double momentum,
                                double eps) {
  __shared__ double scratch[32];
  const int64_t count = B * S;
  for (int64_t c = blockIdx.x; c < Ch; c += gridDim.x) {
    double mu, var;
    if (use_batch) {
      double s = 0;
      for (int64_t i = threadIdx.x; i < count; i += blockDim.x)
        s += static_cast<double>(at<C>(x, bn_elem(i, c, Ch, S)));
      mu = block_reduce(s, SumOp{}, scratch) / static_cast<double>(count);
      double q = 0;
      for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
        const double d = static_cast<double>(at<C>(x, bn_elem(i, c, Ch, S))) - mu;
        q += d * d;
      }
      var = block_reduce(q, SumOp{}, scratch) / static_cast<double>(count);  // biased: what normalizes
    } else {  // the running statistics, read in the compute type as the CPU's
      mu = static_cast<double>(load_as<C>(rm.p + c * rm.step, rm.dt));
      var = static_cast<double>(load_as<C>(rv.p + c * rv.step, rv.dt));
    }
    if (threadIdx.x != 0) continue;
    const double rs = 1.0 / std::sqrt(var + eps);
    mean_out[c] = static_cast<C>(mu);
    rstd_out[c] = static_cast<C>(rs);
    const double scale = w.p ? mul_rn(rs, static_cast<double>(at<C>(w, c))) : rs;
    coef[c] = static_cast<C>(scale);
    coef[Ch + c] = static_cast<C>(sub_rn(b.p ? static_cast<double>(at<C>(b, c)) : 0.0, mul_rn(mu, scale)));
    if (update_running) {  // momentum, the unbiased batch variance, in double, one rounding to the buffer
      const double n = static_cast<double>(count);
      char* pm = rm.p + c * rm.step;
      char* pv = rv.p + c * rv.step;
      const double m = add_rn(mul_rn(1.0 - momentum, load_as<double>(pm, rm.dt)),
                              mul_rn(momentum, static_cast<double>(static_cast<C>(mu))));
      const double v = add_rn(mul_rn(1.0 - momentum, load_as<double>(pv, rv.dt)),
                              __ddiv_rn(mul_rn(mul_rn(momentum, var), n), n - 1.0));
      store_from<double>(pm, rm.dt, m);
      store_from<double>(pv, rv.dt, v);
    }
  }
}

// y = x * coef[c] + coef[Ch + c], one thread per element.
template <class C>
__global__ void bn_apply_kernel(Raw out, Raw x, const C* coef, int64_t Ch, int64_t S, int64_t total) {
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const int64_t c = (i / S) % Ch;
    store_from<C>(out.p + i * out.es, out.dt, add_rn(mul_rn(at<C>(x, i), coef[c]), coef[Ch + c]));
  }
}

// One block per channel: sum g and sum g * xhat (dbias, dweight), and dx's coefficients
// coef[c] = w * rstd, coef[Ch + c] = mean(g), coef[2 Ch + c] = mean(g * xhat) (zeros in
// eval mode, where the statistics are constants).
template <class C>
__global__ void bn_backward_reduce_kernel(C* coef, Raw dw, Raw db, Raw g, Raw x, const C* mean, const C* rstd, Raw w,
                                          int64_t B, int64_t Ch, int64_t S, bool use_batch) {
  __shared__ double scratch[32];
  const int64_t count = B * S;
  for (int64_t c = blockIdx.x; c < Ch; c += gridDim.x) {
    const C m = mean[c], s = rstd[c];
    double sg = 0, sgx = 0;
    for (int64_t i = threadIdx.x; i < count; i += blockDim.x) {
      const int64_t e = bn_elem(i, c, Ch, S);
      const C gi = at<C>(g, e);
      sg += static_cast<double>(gi);
      sgx += static_cast<double>(mul_rn(gi, mul_rn(sub_rn(at<C>(x, e), m), s)));
    }
    sg = block_reduce(sg, SumOp{}, scratch);
    sgx = block_reduce(sgx, SumOp{}, scratch);
    if (threadIdx.x != 0) continue;
    if (dw.p) store_from<C>(dw.p + c * dw.es, dw.dt, static_cast<C>(sgx));
    if (db.p) store_from<C>(db.p + c * db.es, db.dt, static_cast<C>(sg));
    coef[c] =
        static_cast<C>(w.p ? mul_rn(static_cast<double>(at<C>(w, c)), static_cast<double>(s)) : static_cast<double>(s));
    coef[Ch + c] = static_cast<C>(use_batch ? sg / static_cast<double>(count) : 0.0);
    coef[2 * Ch + c] = static_cast<C>(use_batch ? sgx / static_cast<double>(count) : 0.0);
  }
}

// dx = k * (g - mean(g) - xhat * mean(g * xhat)), one thread per element.
template <class C>
__global__ void bn_backward_dx_kernel(Raw dx, Raw g, Raw x, const C* mean, const C* rstd, const C* coef, int64_t Ch,
                                      int64_t S, int64_t total) {
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const int64_t c = (i / S) % Ch;
    const C xhat = mul_rn(sub_rn(at<C>(x, i), mean[c]), rstd[c]);
    const C v = mul_rn(coef[c], sub_rn(sub_rn(at<C>(g, i), coef[Ch + c]), mul_rn(xhat, coef[2 * Ch + c])));
    store_from<C>(dx.p + i * dx.es, dx.dt, v);
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

void batch_norm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, const Tensor& running_mean, const Tensor& running_var,
                        const cpu::BnGeometry& geo, bool use_batch, bool update_running, double momentum, double eps) {
  if (geo.Ch == 0) return;
  DeviceGuard guard(x.device());
  const cudaStream_t stream = current_raw_stream(x.device());
  const int64_t total = geo.B * geo.Ch * geo.S;
  with_compute_type(x.dtype(), [&]<class C>() {
    const Tensor coef = make_tensor({2 * geo.Ch}, dtype_of<C>, x.device());  // freed on the stream, after the kernels
    C* cp = static_cast<C*>(coef.raw_data());
    bn_stats_kernel<C><<<row_blocks(geo.Ch), bn_threads(geo.count()), 0, stream>>>(
        static_cast<C*>(mean.raw_data()), static_cast<C*>(rstd.raw_data()), cp, raw(x), raw(weight), raw(bias),
        vec(running_mean), vec(running_var), geo.B, geo.Ch, geo.S, use_batch, update_running, momentum, eps);
    if (total > 0)
      bn_apply_kernel<C><<<blocks_for(total), kThreads, 0, stream>>>(raw(out), raw(x), cp, geo.Ch, geo.S, total);
  });
  TC_CUDA_CHECK(cudaGetLastError(), "batch_norm");
}

void batch_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& g, const Tensor& x,
                         const Tensor& mean, const Tensor& rstd, const Tensor& weight, const cpu::BnGeometry& geo,
                         bool use_batch) {
  if (geo.Ch == 0) return;
  DeviceGuard guard(x.device());
  const cudaStream_t stream = current_raw_stream(x.device());
  const int64_t total = geo.B * geo.Ch * geo.S;
  with_compute_type(x.dtype(), [&]<class C>() {
    const Tensor coef = make_tensor({3 * geo.Ch}, dtype_of<C>, x.device());
    C* cp = static_cast<C*>(coef.raw_data());
    const C* mu = static_cast<const C*>(mean.raw_data());
    const C* rs = static_cast<const C*>(rstd.raw_data());
    bn_backward_reduce_kernel<C><<<row_blocks(geo.Ch), bn_threads(geo.count()), 0, stream>>>(
        cp, raw(dweight), raw(dbias), raw(g), raw(x), mu, rs, raw(weight), geo.B, geo.Ch, geo.S, use_batch);
    if (dx.defined() && total > 0)
      bn_backward_dx_kernel<C>
          <<<blocks_for(total), kThreads, 0, stream>>>(raw(dx), raw(g), raw(x), mu, rs, cp, geo.Ch, geo.S, total);
  });
  TC_CUDA_CHECK(cudaGetLastError(), "batch_norm_backward");
}

}  // namespace tc::gpu
