// layer_norm and batch_norm on CUDA tensors (norm.h). layer_norm's rows are the M
// contiguous runs of N elements of x; batch_norm's channel c is the B runs of S elements
// at (n * Ch + c) * S.
#include <algorithm>
#include <cmath>

#include "backend/cuda/convert.cuh"
#include "backend/cuda/launch.h"
#include "backend/cuda/norm.h"
#include "backend/cuda/row_reduce.cuh"
#include "backend/cuda/rows.cuh"

namespace tc::gpu {
namespace {

// A tensor's raw bytes, dtype and the bytes from one element to the next (or nothing), for
// kernel parameters: raw() for a contiguous tensor indexed flat, vec() for a 1-d one of any
// stride (the running statistics).
struct Raw {
  char* p = nullptr;
  DType dt = kFloat32;
  int64_t es = 0;
};
Raw raw(const Tensor& t) {
  if (!t.defined()) return {};
  return {static_cast<char*>(t.raw_data()), t.dtype(), static_cast<int64_t>(element_size(t.dtype()))};
}
Raw vec(const Tensor& t) {
  if (!t.defined()) return {};
  return {static_cast<char*>(t.raw_data()), t.dtype(), t.stride(0) * static_cast<int64_t>(element_size(t.dtype()))};
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

// dweight[j] = sum_r g*xhat and dbias[j] = sum_r g in two deterministic stages, so that
// the M rows (16k for a GPT-2 batch) spread over the device instead of one thread per
// column walking them all: block (x, p) sums rows [p * rows_per_part, ...) of a tile of
// columns in double into part p; then one thread per column adds the parts in order.
template <class C>
__global__ void ln_params_partial_kernel(double* part_w, double* part_b, Raw g, Raw x, const C* mean, const C* rstd,
                                         int64_t M, int64_t N, int64_t rows_per_part) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= N) return;
  const int64_t p = blockIdx.y, r0 = p * rows_per_part, r1 = r0 + rows_per_part < M ? r0 + rows_per_part : M;
  double sw = 0, sb = 0;
  for (int64_t r = r0; r < r1; ++r) {
    const C gi = at<C>(g, r * N + j);
    sw += static_cast<double>(gi * ((at<C>(x, r * N + j) - mean[r]) * rstd[r]));
    sb += static_cast<double>(gi);
  }
  part_w[p * N + j] = sw;
  part_b[p * N + j] = sb;
}

__global__ void ln_params_finish_kernel(Raw dw, Raw db, const double* part_w, const double* part_b, int64_t parts,
                                        int64_t N) {
  for (int64_t j = global_index(); j < N; j += grid_stride()) {
    double sw = 0, sb = 0;
    for (int64_t p = 0; p < parts; ++p) {
      sw += part_w[p * N + j];
      sb += part_b[p * N + j];
    }
    if (dw.p) store_from<double>(dw.p + j * dw.es, dw.dt, sw);
    if (db.p) store_from<double>(db.p + j * db.es, db.dt, sb);
  }
}

// ------------------------------------------------------------------ batch_norm

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

// A channel's B * S elements split into `parts` chunks of `chunk` (the last may be short),
// one block each, so that few channels with many elements still fill the GPU. The split
// depends only on the shape, so every sum's order does too.
struct BnSplit {
  int64_t parts, chunk;
};
constexpr int64_t kBnChunk = 8192;  // elements per block, about
constexpr int64_t kBnMaxParts = 256;
BnSplit bn_split(int64_t count) {
  const int64_t parts = std::clamp<int64_t>(count / kBnChunk, 1, kBnMaxParts);
  return {parts, (count + parts - 1) / parts};
}
// Threads per block: a multiple of the warp size, up to 512, no more than a chunk needs.
int bn_threads(int64_t chunk) {
  int t = 32;
  while (t < 512 && t < chunk) t *= 2;
  return t;
}

// The sum of a channel's `parts` partial sums, in order.
__device__ __forceinline__ double parts_sum(const double* part, int64_t parts) {
  double s = 0;
  for (int64_t k = 0; k < parts; ++k) s += part[k];
  return s;
}

// Task t = c * parts + k sums over chunk k of channel c (per-thread sums in double, then
// the block's tree) into part[t]: x itself, or, given the first pass's partial sums
// (sums), the squared deviations from the channel's mean (two passes, as the CPU).
template <class C>
__global__ void bn_partial_kernel(double* part, const double* sums, Raw x, int64_t B, int64_t Ch, int64_t S,
                                  BnSplit split) {
  __shared__ double scratch[32];
  const int64_t count = B * S;
  for (int64_t t = blockIdx.x; t < Ch * split.parts; t += gridDim.x) {
    const int64_t c = t / split.parts, lo = (t % split.parts) * split.chunk;
    const int64_t hi = lo + split.chunk < count ? lo + split.chunk : count;
    double acc = 0;
    if (sums) {
      const double mu = parts_sum(sums + c * split.parts, split.parts) / static_cast<double>(count);
      for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        const double d = static_cast<double>(at<C>(x, bn_elem(i, c, Ch, S))) - mu;
        acc += d * d;
      }
    } else {
      for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x)
        acc += static_cast<double>(at<C>(x, bn_elem(i, c, Ch, S)));
    }
    acc = block_reduce(acc, SumOp{}, scratch);
    if (threadIdx.x == 0) part[t] = acc;
  }
}

// One thread per channel: the statistics that normalize (the batch's from the partial
// sums, or the running ones), mean and rstd for the backward, the folded affine
// coefficients coef[c] = rstd * w, coef[Ch + c] = b - mean * coef[c] (from the unrounded
// statistics, as the CPU), and the running statistics' update.
template <class C>
__global__ void bn_stats_kernel(C* mean_out, C* rstd_out, C* coef, const double* sums, const double* sqs, Raw w, Raw b,
                                Raw rm, Raw rv, int64_t count, int64_t Ch, int64_t parts, bool use_batch,
                                bool update_running, double momentum, double eps) {
  for (int64_t c = global_index(); c < Ch; c += grid_stride()) {
    double mu, var;
    if (use_batch) {
      mu = parts_sum(sums + c * parts, parts) / static_cast<double>(count);
      var = parts_sum(sqs + c * parts, parts) / static_cast<double>(count);  // biased: what normalizes
    } else {  // the running statistics, read in the compute type as the CPU's
      mu = static_cast<double>(load_as<C>(rm.p + c * rm.es, rm.dt));
      var = static_cast<double>(load_as<C>(rv.p + c * rv.es, rv.dt));
    }
    const double rs = 1.0 / std::sqrt(var + eps);
    mean_out[c] = static_cast<C>(mu);
    rstd_out[c] = static_cast<C>(rs);
    const double scale = w.p ? mul_rn(rs, static_cast<double>(at<C>(w, c))) : rs;
    coef[c] = static_cast<C>(scale);
    coef[Ch + c] = static_cast<C>(sub_rn(b.p ? static_cast<double>(at<C>(b, c)) : 0.0, mul_rn(mu, scale)));
    if (update_running) {  // momentum, the unbiased batch variance, in double, one rounding to the buffer
      const double n = static_cast<double>(count);
      char* pm = rm.p + c * rm.es;
      char* pv = rv.p + c * rv.es;
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

// Task t = c * parts + k: chunk k of channel c's sum g (part[t]) and sum g * xhat
// (part[tasks + t]).
template <class C>
__global__ void bn_backward_partial_kernel(double* part, Raw g, Raw x, const C* mean, const C* rstd, int64_t B,
                                           int64_t Ch, int64_t S, BnSplit split) {
  __shared__ double scratch[32];
  const int64_t count = B * S, tasks = Ch * split.parts;
  for (int64_t t = blockIdx.x; t < tasks; t += gridDim.x) {
    const int64_t c = t / split.parts, lo = (t % split.parts) * split.chunk;
    const int64_t hi = lo + split.chunk < count ? lo + split.chunk : count;
    const C m = mean[c], s = rstd[c];
    double sg = 0, sgx = 0;
    for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
      const int64_t e = bn_elem(i, c, Ch, S);
      const C gi = at<C>(g, e);
      sg += static_cast<double>(gi);
      sgx += static_cast<double>(mul_rn(gi, mul_rn(sub_rn(at<C>(x, e), m), s)));
    }
    sg = block_reduce(sg, SumOp{}, scratch);
    sgx = block_reduce(sgx, SumOp{}, scratch);
    if (threadIdx.x == 0) part[t] = sg, part[tasks + t] = sgx;
  }
}

// One thread per channel: dbias = sum g, dweight = sum g * xhat, and dx's coefficients
// coef[c] = w * rstd, coef[Ch + c] = mean(g), coef[2 Ch + c] = mean(g * xhat) (zeros in
// eval mode, where the statistics are constants).
template <class C>
__global__ void bn_backward_params_kernel(C* coef, Raw dw, Raw db, const double* part, const C* rstd, Raw w,
                                          int64_t count, int64_t Ch, int64_t parts, bool use_batch) {
  for (int64_t c = global_index(); c < Ch; c += grid_stride()) {
    const double sg = parts_sum(part + c * parts, parts), sgx = parts_sum(part + Ch * parts + c * parts, parts);
    if (dw.p) store_from<C>(dw.p + c * dw.es, dw.dt, static_cast<C>(sgx));
    if (db.p) store_from<C>(db.p + c * db.es, db.dt, static_cast<C>(sg));
    const double s = static_cast<double>(rstd[c]);
    coef[c] = static_cast<C>(w.p ? mul_rn(static_cast<double>(at<C>(w, c)), s) : s);
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
    if (dweight.defined() || dbias.defined()) {  // zeros when there are no rows
      // At most 1024 parts (well within gridDim.y), of at least 32 rows: the scratch stays
      // small (1024 x N x 16 bytes) and the second stage short.
      const int64_t rows_per_part = std::max<int64_t>(32, (M + 1023) / 1024);
      const int64_t parts = (M + rows_per_part - 1) / rows_per_part;
      const Tensor part = make_tensor({2, std::max<int64_t>(parts, 1), N}, kFloat64, x.device());
      double* pw = static_cast<double*>(part.raw_data());
      double* pb = pw + std::max<int64_t>(parts, 1) * N;
      if (parts > 0)
        ln_params_partial_kernel<C>
            <<<dim3(static_cast<unsigned>((N + kThreads - 1) / kThreads), static_cast<unsigned>(parts)), kThreads, 0,
               stream>>>(pw, pb, raw(g), raw(x), mu, rs, M, N, rows_per_part);
      ln_params_finish_kernel<<<blocks_for(N), kThreads, 0, stream>>>(raw(dweight), raw(dbias), pw, pb, parts, N);
    }
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
  const BnSplit split = bn_split(geo.count());
  const int64_t tasks = geo.Ch * split.parts;
  with_compute_type(x.dtype(), [&]<class C>() {
    // Scratch for this call, freed on the stream after the kernels: the partial sums and
    // the affine coefficients.
    const Tensor part = use_batch ? make_tensor({2 * tasks}, kFloat64, x.device()) : Tensor();
    const Tensor coef = make_tensor({2 * geo.Ch}, dtype_of<C>, x.device());
    double* sums = use_batch ? static_cast<double*>(part.raw_data()) : nullptr;
    double* sqs = use_batch ? sums + tasks : nullptr;
    C* cp = static_cast<C*>(coef.raw_data());
    if (use_batch) {
      const int threads = bn_threads(split.chunk);
      bn_partial_kernel<C>
          <<<row_blocks(tasks), threads, 0, stream>>>(sums, nullptr, raw(x), geo.B, geo.Ch, geo.S, split);
      bn_partial_kernel<C><<<row_blocks(tasks), threads, 0, stream>>>(sqs, sums, raw(x), geo.B, geo.Ch, geo.S, split);
    }
    bn_stats_kernel<C><<<blocks_for(geo.Ch), kThreads, 0, stream>>>(
        static_cast<C*>(mean.raw_data()), static_cast<C*>(rstd.raw_data()), cp, sums, sqs, raw(weight), raw(bias),
        vec(running_mean), vec(running_var), geo.count(), geo.Ch, split.parts, use_batch, update_running, momentum,
        eps);
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
  const BnSplit split = bn_split(geo.count());
  const int64_t tasks = geo.Ch * split.parts;
  with_compute_type(x.dtype(), [&]<class C>() {
    const Tensor part = make_tensor({2 * tasks}, kFloat64, x.device());
    const Tensor coef = make_tensor({3 * geo.Ch}, dtype_of<C>, x.device());
    double* pp = static_cast<double*>(part.raw_data());
    C* cp = static_cast<C*>(coef.raw_data());
    const C* mu = static_cast<const C*>(mean.raw_data());
    const C* rs = static_cast<const C*>(rstd.raw_data());
    bn_backward_partial_kernel<C><<<row_blocks(tasks), bn_threads(split.chunk), 0, stream>>>(
        pp, raw(g), raw(x), mu, rs, geo.B, geo.Ch, geo.S, split);
    bn_backward_params_kernel<C><<<blocks_for(geo.Ch), kThreads, 0, stream>>>(
        cp, raw(dweight), raw(dbias), pp, rs, raw(weight), geo.count(), geo.Ch, split.parts, use_batch);
    if (dx.defined() && total > 0)
      bn_backward_dx_kernel<C>
          <<<blocks_for(total), kThreads, 0, stream>>>(raw(dx), raw(g), raw(x), mu, rs, cp, geo.Ch, geo.S, total);
  });
  TC_CUDA_CHECK(cudaGetLastError(), "batch_norm_backward");
}

}  // namespace tc::gpu
