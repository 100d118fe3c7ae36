// The class-index losses on CUDA tensors (loss.h), one block per row for cross_entropy
// (the row's max, log-sum-exp and loss, as the CPU kernel computes them), one thread per
// row for nll_loss. Per-row losses are float64; the reduction is reduce.cu's sum.
#include <cmath>
#include <vector>

#include "backend/cuda/convert.cuh"
#include "backend/cuda/copy.h"
#include "backend/cuda/loss.h"
#include "backend/cuda/reduce.h"
#include "backend/cuda/row_reduce.cuh"
#include "backend/cuda/rows.cuh"
#include "tensorcast/factories.h"

namespace tc::gpu {
namespace {

struct Targets {
  const int64_t* target;  // one per row
  const double* weight;   // per class, or null (all ones)
  int64_t ignore_index;
  int64_t classes;
};

// The targets and weights on the device for one call (kept alive by the returned tensors
// until the kernels are queued; freed on the stream, after them).
struct DeviceTargets {
  Tensor target, weight;
  Targets view(const cpu::ClassTargets& t) const {
    return {static_cast<const int64_t*>(target.raw_data()),
            weight.defined() ? static_cast<const double*>(weight.raw_data()) : nullptr, t.ignore_index, t.classes};
  }
};
template <class T>
Tensor upload(const std::vector<T>& host, DType dt, Device device) {
  const Shape shape{static_cast<int64_t>(host.size())};
  Tensor d = make_tensor(shape, dt, device);
  transfer(d, from_blob(const_cast<T*>(host.data()), shape, dt));
  return d;
}
DeviceTargets to_device(const cpu::ClassTargets& t, Device device) {
  DeviceTargets d;
  d.target = upload(t.target, kInt64, device);
  if (!t.weight.empty()) d.weight = upload(t.weight, kFloat64, device);
  return d;
}

// Rows<1>: the input along its class dim. lse: (rows, 2) of C; loss: rows doubles.
template <class C>
__global__ void cross_entropy_forward_kernel(Rows<1> x, Targets t, C* lse, double* loss, double eps) {
  __shared__ C scratch[32];
  __shared__ double scratch_d[32];
  for (int64_t r = blockIdx.x; r < x.count; r += gridDim.x) {
    const int64_t tr = t.target[r];
    if (tr == t.ignore_index) {  // uniform across the block
      if (threadIdx.x == 0) loss[r] = 0, lse[2 * r] = lse[2 * r + 1] = 0;
      continue;
    }
    int64_t base[1];
    x.rows.offsets(r, base);
    const char* row = x.ptr[0] + base[0];
    auto at = [&](int64_t k) { return load_as<C>(row + k * x.step[0], x.dtype[0]); };
    C m = -INFINITY;
    for (int64_t k = threadIdx.x; k < x.length; k += blockDim.x) m = MaxOp{}(m, at(k));
    m = block_reduce(m, MaxOp{}, scratch);
    C s = 0;
    for (int64_t k = threadIdx.x; k < x.length; k += blockDim.x) s += exp(at(k) - m);
    s = block_reduce(s, SumOp{}, scratch);
    const C log_sum = ::log(s);
    // -log p_k = log_sum - (x_k - max); the smoothing term sums w_k * (-log p_k), all >= 0
    double smooth = 0;
    if (eps > 0) {
      for (int64_t k = threadIdx.x; k < x.length; k += blockDim.x)
        smooth += (t.weight ? t.weight[k] : 1.0) * static_cast<double>(log_sum - (at(k) - m));
      smooth = block_reduce(smooth, SumOp{}, scratch_d);
    }
    if (threadIdx.x == 0) {
      lse[2 * r] = m;
      lse[2 * r + 1] = log_sum;
      const double wt = t.weight ? t.weight[tr] : 1.0;
      double v = wt * static_cast<double>(log_sum - (at(tr) - m));
      if (eps > 0) v = (1 - eps) * v + eps / static_cast<double>(t.classes) * smooth;
      loss[r] = v;
    }
  }
}

// Rows<2>: gx, input. scale: one per row (g_rows, any floating dtype) or g_scale for all.
template <class C>
__global__ void cross_entropy_backward_kernel(Rows<2> r2, Targets t, const C* lse, const char* g_rows, DType g_dtype,
                                              int64_t g_es, double g_scale, double eps, double wall) {
  const C smooth_k = static_cast<C>(eps / static_cast<double>(t.classes));
  for (int64_t r = blockIdx.x; r < r2.count; r += gridDim.x) {
    int64_t base[2];
    r2.rows.offsets(r, base);
    char* out = r2.ptr[0] + base[0];
    const char* in = r2.ptr[1] + base[1];
    const int64_t tr = t.target[r];
    if (tr == t.ignore_index) {
      for (int64_t k = threadIdx.x; k < r2.length; k += blockDim.x)
        store_from<C>(out + k * r2.step[0], r2.dtype[0], C(0));
      continue;
    }
    const C s = g_rows ? load_as<C>(g_rows + r * g_es, g_dtype) : C(g_scale);
    const C wt = t.weight ? static_cast<C>(t.weight[tr]) : C(1);
    const C a = s * (static_cast<C>(1 - eps) * wt + smooth_k * static_cast<C>(wall));
    const C m = lse[2 * r], log_sum = lse[2 * r + 1];
    for (int64_t k = threadIdx.x; k < r2.length; k += blockDim.x) {
      C o = a * exp(load_as<C>(in + k * r2.step[1], r2.dtype[1]) - m - log_sum);
      if (k == tr) o -= s * static_cast<C>(1 - eps) * wt;
      if (eps > 0) o -= s * smooth_k * (t.weight ? static_cast<C>(t.weight[k]) : C(1));
      store_from<C>(out + k * r2.step[0], r2.dtype[0], o);
    }
  }
}

__global__ void nll_forward_kernel(Rows<1> x, Targets t, double* loss) {
  for (int64_t r = global_index(); r < x.count; r += grid_stride()) {
    const int64_t tr = t.target[r];
    if (tr == t.ignore_index) {
      loss[r] = 0;
      continue;
    }
    int64_t base[1];
    x.rows.offsets(r, base);
    const double v = load_as<double>(x.ptr[0] + base[0] + tr * x.step[0], x.dtype[0]);
    loss[r] = -(t.weight ? t.weight[tr] : 1.0) * v;
  }
}

// gx is zero-filled and contiguous (rows, classes) in row-major row order.
template <class C>
__global__ void nll_backward_kernel(Rows<1> gx, Targets t, const char* g_rows, DType g_dtype, int64_t g_es,
                                    double g_scale) {
  for (int64_t r = global_index(); r < gx.count; r += grid_stride()) {
    const int64_t tr = t.target[r];
    if (tr == t.ignore_index) continue;
    const C s = g_rows ? load_as<C>(g_rows + r * g_es, g_dtype) : C(g_scale);
    int64_t base[1];
    gx.rows.offsets(r, base);
    store_from<C>(gx.ptr[0] + base[0] + tr * gx.step[0], gx.dtype[0],
                  -(t.weight ? static_cast<C>(t.weight[tr]) : C(1)) * s);
  }
}

// out = the row losses: their sum / divisor (0-d) when reduce, else one per row.
void store_losses(const Tensor& out, const Tensor& loss, bool reduce, double divisor) {
  if (reduce)  // summed and divided in float64, rounded once; 0 / 0 = NaN when every target is ignored (PyTorch)
    sum_kernel(out, loss, {true}, divisor);
  else
    copy_into(out, make_view(loss, out.sizes(), contiguous_strides(out.sizes()), 0));
}

// A forward: the row losses (float64, one per row) by launch(rows, targets, loss, stream),
// then stored or reduced into out.
template <class Launch>
void forward_losses(const Tensor& out, const Tensor& input, const cpu::ClassTargets& t, bool reduce, double divisor,
                    const char* op, Launch launch) {
  const Device device = input.device();
  const Rows<1> x = make_rows<1>({&input}, t.cdim, op);
  const Tensor loss = make_tensor({x.count}, kFloat64, device);
  if (x.count > 0) {
    const DeviceTargets dt = to_device(t, device);
    DeviceGuard guard(device);
    launch(x, dt.view(t), static_cast<double*>(loss.raw_data()), current_raw_stream(device));
    TC_CUDA_CHECK(cudaGetLastError(), op);
  }
  store_losses(out, loss, reduce, divisor);
}

}  // namespace

void cross_entropy_forward(const Tensor& out, const Tensor& lse, const Tensor& input, const cpu::ClassTargets& t,
                           double label_smoothing, bool reduce, double divisor) {
  forward_losses(out, input, t, reduce, divisor, "cross_entropy",
                 [&](const Rows<1>& x, const Targets& targets, double* loss, cudaStream_t stream) {
                   with_compute_type(input.dtype(), [&]<class C>() {
                     cross_entropy_forward_kernel<C><<<row_blocks(x.count), row_threads(x.length), 0, stream>>>(
                         x, targets, static_cast<C*>(lse.raw_data()), loss, label_smoothing);
                   });
                 });
}

void cross_entropy_backward(const Tensor& gx, const Tensor& input, const Tensor& lse, const cpu::ClassTargets& t,
                            const Tensor& g_rows, double g_scale, double label_smoothing) {
  const Device device = input.device();
  const Rows<2> r = make_rows<2>({&gx, &input}, t.cdim, "cross_entropy_backward");
  if (r.count == 0) return;
  double wall = static_cast<double>(t.classes);  // the sum of all class weights
  if (!t.weight.empty()) {
    wall = 0;
    for (double w : t.weight) wall += w;
  }
  const DeviceTargets dt = to_device(t, device);
  const Tensor& g = g_rows;  // contiguous (the op makes it so)
  DeviceGuard guard(device);
  const cudaStream_t stream = current_raw_stream(device);
  with_compute_type(input.dtype(), [&]<class C>() {
    cross_entropy_backward_kernel<C><<<row_blocks(r.count), row_threads(r.length), 0, stream>>>(
        r, dt.view(t), static_cast<const C*>(lse.raw_data()),
        g.defined() ? static_cast<const char*>(g.raw_data()) : nullptr, g.defined() ? g.dtype() : kFloat32,
        g.defined() ? static_cast<int64_t>(element_size(g.dtype())) : 0, g_scale, label_smoothing, wall);
  });
  TC_CUDA_CHECK(cudaGetLastError(), "cross_entropy_backward");
}

void nll_loss_forward(const Tensor& out, const Tensor& input, const cpu::ClassTargets& t, bool reduce, double divisor) {
  forward_losses(out, input, t, reduce, divisor, "nll_loss",
                 [](const Rows<1>& x, const Targets& targets, double* loss, cudaStream_t stream) {
                   nll_forward_kernel<<<blocks_for(x.count), kThreads, 0, stream>>>(x, targets, loss);
                 });
}

void nll_loss_backward(const Tensor& gx, const cpu::ClassTargets& t, const Tensor& g_rows, double g_scale) {
  const Device device = gx.device();
  fill(gx, 0.0);
  const Rows<1> r = make_rows<1>({&gx}, t.cdim, "nll_loss_backward");
  if (r.count == 0) return;
  const DeviceTargets dt = to_device(t, device);
  const Tensor& g = g_rows;  // contiguous (the op makes it so)
  DeviceGuard guard(device);
  with_compute_type(gx.dtype(), [&]<class C>() {
    nll_backward_kernel<C><<<blocks_for(r.count), kThreads, 0, current_raw_stream(device)>>>(
        r, dt.view(t), g.defined() ? static_cast<const char*>(g.raw_data()) : nullptr,
        g.defined() ? g.dtype() : kFloat32, g.defined() ? static_cast<int64_t>(element_size(g.dtype())) : 0, g_scale);
  });
  TC_CUDA_CHECK(cudaGetLastError(), "nll_loss_backward");
}

}  // namespace tc::gpu
