// The class-index losses on CUDA tensors (loss.h), one block per row for cross_entropy
// (the row's max, log-sum-exp and loss, as the CPU kernel computes them), one thread per
// row for nll_loss. Per-row losses are float64; a reduction sums them, and for 'mean' the
// weights of the counted targets, in one block in a fixed order (float64).
//
// Nothing goes through the host: the targets and class weights stay on the device, the
// range check is deferred (deferred_error.cuh: a bad target is recorded by the forward's
// kernel and raised at the next class-loss call on the device), the 'mean' divisor is
// computed and kept on the device, and the backward's kernels read the incoming gradient
// (and that divisor) from device memory.
#include <cmath>

#include "backend/cuda/convert.cuh"
#include "backend/cuda/copy.h"
#include "backend/cuda/deferred_error.cuh"
#include "backend/cuda/loss.h"
#include "backend/cuda/row_reduce.cuh"
#include "backend/cuda/rows.cuh"
#include "tensorcast/factories.h"

namespace tc::gpu {
namespace {

// The op a deferred record names (DeferredError::code).
constexpr int32_t kCrossEntropy = 0, kNllLoss = 1;

// Raises the error an earlier class-loss kernel on `device` recorded, if any.
void raise_recorded(Device device) {
  if (const auto e = take_deferred_error(device, DeferredSlot::kClassLoss)) [[unlikely]]
    TC_FAIL(e->code == kNllLoss ? "nll_loss" : "cross_entropy", "target ", e->value, " is out of bounds for ", e->bound,
            " classes (found on ", device, " by an earlier call's kernel)");
}

struct Targets {
  const int64_t* target;  // one per row
  const double* weight;   // per class, or null (all ones)
  int64_t ignore_index;
  int64_t classes;

  __device__ __forceinline__ double w(int64_t k) const { return weight ? weight[k] : 1.0; }
};

Targets view(const ClassTargets& t) {
  return {static_cast<const int64_t*>(t.target.raw_data()),
          t.weight.defined() ? static_cast<const double*>(t.weight.raw_data()) : nullptr, t.ignore_index, t.classes};
}

// The class of row r, or -1 for a row that does not count: its target is ignore_index, or
// out of [0, classes) (then recorded in `bad` when given, and never used as an index).
__device__ __forceinline__ int64_t class_of(const Targets& t, int64_t r, DeferredError* bad = nullptr,
                                            int32_t code = 0) {
  const int64_t k = t.target[r];
  if (k == t.ignore_index) return -1;
  if (k < 0 || k >= t.classes) [[unlikely]] {
    if (bad) record_deferred_error(bad, k, t.classes, code);
    return -1;
  }
  return k;
}

// The backward's incoming gradient: g[r] per row, or g[0] / divisor (float64, as the CPU's
// g.item_double() / divisor) for every row.
struct Grad {
  const char* ptr;
  DType dtype;
  int64_t es;  // bytes per element
  bool per_row;
  const double* divisor;  // null: 1

  template <class C>
  __device__ __forceinline__ C at(int64_t r) const {
    if (per_row) return load_as<C>(ptr + r * es, dtype);
    return static_cast<C>(load_as<double>(ptr, dtype) / (divisor ? *divisor : 1.0));
  }
};

Grad grad_view(const Tensor& g, bool per_row, const Tensor& divisor, int64_t rows, const char* op) {
  TC_CHECK(g.defined() && is_floating(g.dtype()) && g.is_contiguous() && g.numel() == (per_row ? rows : 1), op,
           "expected a contiguous floating gradient of ", per_row ? rows : 1, " elements, got ",
           g.defined() ? dtype_name(g.dtype()) : "undefined", g.defined() ? shape_str(g.sizes()) : "");
  TC_CHECK(!divisor.defined() || (divisor.dtype() == kFloat64 && divisor.numel() == 1), op,
           "expected a float64 divisor of one element");
  return {static_cast<const char*>(g.raw_data()), g.dtype(), static_cast<int64_t>(element_size(g.dtype())), per_row,
          divisor.defined() ? static_cast<const double*>(divisor.raw_data()) : nullptr};
}

// Threads of a one-block sum over n values: a multiple of the warp size, up to 1024.
unsigned sum_threads(int64_t n) {
  unsigned t = 32;
  while (t < 1024 && t < n) t *= 2;
  return t;
}

// Rows<1>: the input along its class dim. lse: (rows, 2) of C; loss: rows doubles.
template <class C>
__global__ void cross_entropy_forward_kernel(Rows<1> x, Targets t, C* lse, double* loss, double eps,
                                             DeferredError* bad) {
  __shared__ C scratch[32];
  __shared__ double scratch_d[32];
  for (int64_t r = blockIdx.x; r < x.count; r += gridDim.x) {
    const int64_t tr = class_of(t, r, threadIdx.x == 0 ? bad : nullptr, kCrossEntropy);
    if (tr < 0) {  // uniform across the block
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
        smooth += t.w(k) * static_cast<double>(log_sum - (at(k) - m));
      smooth = block_reduce(smooth, SumOp{}, scratch_d);
    }
    if (threadIdx.x == 0) {
      lse[2 * r] = m;
      lse[2 * r + 1] = log_sum;
      double v = t.w(tr) * static_cast<double>(log_sum - (at(tr) - m));
      if (eps > 0) v = (1 - eps) * v + eps / static_cast<double>(t.classes) * smooth;
      loss[r] = v;
    }
  }
}

// Rows<2>: gx, input. wall: the sum of all class weights (null: no weights, `classes`).
template <class C>
__global__ void cross_entropy_backward_kernel(Rows<2> r2, Targets t, const C* lse, Grad g, double eps,
                                              const double* wall) {
  const C smooth_k = static_cast<C>(eps / static_cast<double>(t.classes));
  for (int64_t r = blockIdx.x; r < r2.count; r += gridDim.x) {
    int64_t base[2];
    r2.rows.offsets(r, base);
    char* out = r2.ptr[0] + base[0];
    const char* in = r2.ptr[1] + base[1];
    const int64_t tr = class_of(t, r);
    if (tr < 0) {  // uniform across the block
      for (int64_t k = threadIdx.x; k < r2.length; k += blockDim.x)
        store_from<C>(out + k * r2.step[0], r2.dtype[0], C(0));
      continue;
    }
    const C s = g.at<C>(r);
    const C wt = static_cast<C>(t.w(tr));
    const C a =
        s * (static_cast<C>(1 - eps) * wt + smooth_k * static_cast<C>(wall ? *wall : static_cast<double>(t.classes)));
    const C m = lse[2 * r], log_sum = lse[2 * r + 1];
    for (int64_t k = threadIdx.x; k < r2.length; k += blockDim.x) {
      C o = a * exp(load_as<C>(in + k * r2.step[1], r2.dtype[1]) - m - log_sum);
      if (k == tr) o -= s * static_cast<C>(1 - eps) * wt;
      if (eps > 0) o -= s * smooth_k * (t.weight ? static_cast<C>(t.weight[k]) : C(1));
      store_from<C>(out + k * r2.step[0], r2.dtype[0], o);
    }
  }
}

__global__ void nll_forward_kernel(Rows<1> x, Targets t, double* loss, DeferredError* bad) {
  for (int64_t r = global_index(); r < x.count; r += grid_stride()) {
    const int64_t tr = class_of(t, r, bad, kNllLoss);
    if (tr < 0) {
      loss[r] = 0;
      continue;
    }
    int64_t base[1];
    x.rows.offsets(r, base);
    const double v = load_as<double>(x.ptr[0] + base[0] + tr * x.step[0], x.dtype[0]);
    loss[r] = -t.w(tr) * v;
  }
}

// gx is zero-filled. In float64 as the CPU's: -weight[target] * g, rounded once.
__global__ void nll_backward_kernel(Rows<1> gx, Targets t, Grad g) {
  for (int64_t r = global_index(); r < gx.count; r += grid_stride()) {
    const int64_t tr = class_of(t, r);
    if (tr < 0) continue;
    int64_t base[1];
    gx.rows.offsets(r, base);
    store_from<double>(gx.ptr[0] + base[0] + tr * gx.step[0], gx.dtype[0], -t.w(tr) * g.at<double>(r));
  }
}

// One block: out (one element of dtype odt) = the sum of the rows' losses divided by 1, or,
// with `divisor`, by the summed weights of the counted targets, which go to *divisor. Both
// sums in float64 in a fixed order (per-thread strided sums, then block_reduce's tree);
// 0 / 0 = NaN when no target counts, as on the CPU.
__global__ void reduce_losses_kernel(const double* loss, Targets t, int64_t rows, double* divisor, char* out,
                                     DType odt) {
  __shared__ double scratch[32];
  double s = 0, w = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    s += loss[r];
    if (divisor) {
      const int64_t k = class_of(t, r);
      if (k >= 0) w += t.w(k);
    }
  }
  s = block_reduce(s, SumOp{}, scratch);
  if (divisor) w = block_reduce(w, SumOp{}, scratch);  // uniform across the block
  if (threadIdx.x == 0) {
    if (divisor) *divisor = w;
    store_from<double>(out, odt, s / (divisor ? w : 1.0));
  }
}

// One block: *out = the sum of v[0..n) (float64, fixed order).
__global__ void sum_doubles_kernel(const double* v, int64_t n, double* out) {
  __shared__ double scratch[32];
  double s = 0;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += v[i];
  s = block_reduce(s, SumOp{}, scratch);
  if (threadIdx.x == 0) *out = s;
}

void check_targets(const ClassTargets& t, Device device, int64_t rows, const char* op) {
  TC_CHECK(t.target.defined() && t.target.device() == device && t.target.dtype() == kInt64 &&
               t.target.is_contiguous() && t.target.numel() == rows,
           op, "expected ", rows, " contiguous int64 targets on ", device);
  TC_CHECK(!t.weight.defined() || (t.weight.device() == device && t.weight.dtype() == kFloat64 &&
                                   t.weight.is_contiguous() && t.weight.numel() == t.classes),
           op, "expected ", t.classes, " contiguous float64 class weights on ", device);
}

// A forward: the row losses (float64, one per row) by launch(rows, targets, loss, bad,
// stream), then stored, or reduced into out (and the divisor).
template <class Launch>
void forward_losses(const Tensor& out, const Tensor& divisor, const Tensor& input, const ClassTargets& t, bool reduce,
                    const char* op, Launch launch) {
  const Device device = input.device();
  TC_CHECK(device.is_cuda() && out.device() == device, op, "expected input and output on one CUDA device, got ",
           input.device(), " and ", out.device());
  TC_CHECK(!divisor.defined() || (divisor.device() == device && divisor.dtype() == kFloat64 && divisor.numel() == 1),
           op, "expected a float64 divisor of one element on ", device);
  const Rows<1> x = make_rows<1>({&input}, t.cdim, op);
  check_targets(t, device, x.count, op);
  const Tensor loss = make_tensor({x.count}, kFloat64, device);
  double* lp = static_cast<double*>(loss.raw_data());
  const Targets tv = view(t);
  DeviceGuard guard(device);
  const cudaStream_t stream = current_raw_stream(device);
  if (x.count > 0) {
    launch(x, tv, lp, deferred_error_record(device, DeferredSlot::kClassLoss), stream);
    TC_CUDA_CHECK(cudaGetLastError(), op);
  }
  if (reduce) {
    TC_CHECK(out.numel() == 1, op, "expected a one-element output for a reduction, got ", shape_str(out.sizes()));
    reduce_losses_kernel<<<1, sum_threads(x.count), 0, stream>>>(
        lp, tv, x.count, divisor.defined() ? static_cast<double*>(divisor.raw_data()) : nullptr,
        static_cast<char*>(out.raw_data()), out.dtype());
    TC_CUDA_CHECK(cudaGetLastError(), op);
  } else {
    copy_into(out, make_view(loss, out.sizes(), contiguous_strides(out.sizes()), 0));
  }
}

}  // namespace

ClassTargets class_targets(const Tensor& target, const Tensor& weight, int64_t cdim, int64_t classes,
                           int64_t ignore_index, const char* op) {
  const Device device = target.device();
  TC_CHECK(device.is_cuda(), op, "expected targets on a CUDA device, got ", device);
  TC_CHECK(target.dtype() == kInt64 || target.dtype() == kInt32, op, "expected int64 or int32 targets, got ",
           dtype_name(target.dtype()));
  raise_recorded(device);
  ClassTargets t;
  t.cdim = cdim;
  t.classes = classes;
  t.ignore_index = ignore_index;
  if (target.dtype() == kInt64 && target.is_contiguous()) {
    t.target = target;
  } else {  // an int64 copy in row-major order, on the device
    t.target = make_tensor(target.sizes(), kInt64, device);
    copy_into(t.target, target);
  }
  if (weight.defined()) {  // a float64 copy on the device, as the CPU reads the weights once per call
    TC_CHECK(is_floating(weight.dtype()) && weight.numel() == classes, op, "expected ", classes,
             " floating class weights, got ", dtype_name(weight.dtype()), " of shape ", shape_str(weight.sizes()));
    t.weight = make_tensor({classes}, kFloat64, device);
    copy_into(t.weight, weight.device() == device ? weight.reshape({classes}) : weight.reshape({classes}).to(device));
  }
  return t;
}

void cross_entropy_forward(const Tensor& out, const Tensor& lse, const Tensor& divisor, const Tensor& input,
                           const ClassTargets& t, double label_smoothing, bool reduce) {
  forward_losses(out, divisor, input, t, reduce, "cross_entropy",
                 [&](const Rows<1>& x, const Targets& targets, double* loss, DeferredError* bad, cudaStream_t stream) {
                   with_compute_type(input.dtype(), [&]<class C>() {
                     cross_entropy_forward_kernel<C><<<row_blocks(x.count), row_threads(x.length), 0, stream>>>(
                         x, targets, static_cast<C*>(lse.raw_data()), loss, label_smoothing, bad);
                   });
                 });
}

void cross_entropy_backward(const Tensor& gx, const Tensor& input, const Tensor& lse, const ClassTargets& t,
                            const Tensor& g, bool per_row, const Tensor& divisor, double label_smoothing) {
  constexpr const char* op = "cross_entropy_backward";
  const Device device = input.device();
  raise_recorded(device);
  const Rows<2> r = make_rows<2>({&gx, &input}, t.cdim, op);
  check_targets(t, device, r.count, op);
  if (r.count == 0) return;
  const Grad gv = grad_view(g, per_row, divisor, r.count, op);
  DeviceGuard guard(device);
  const cudaStream_t stream = current_raw_stream(device);
  Tensor wall;  // the sum of all class weights
  if (t.weight.defined()) {
    wall = make_tensor({1}, kFloat64, device);
    sum_doubles_kernel<<<1, sum_threads(t.classes), 0, stream>>>(static_cast<const double*>(t.weight.raw_data()),
                                                                 t.classes, static_cast<double*>(wall.raw_data()));
    TC_CUDA_CHECK(cudaGetLastError(), op);
  }
  with_compute_type(input.dtype(), [&]<class C>() {
    cross_entropy_backward_kernel<C><<<row_blocks(r.count), row_threads(r.length), 0, stream>>>(
        r, view(t), static_cast<const C*>(lse.raw_data()), gv, label_smoothing,
        wall.defined() ? static_cast<const double*>(wall.raw_data()) : nullptr);
  });
  TC_CUDA_CHECK(cudaGetLastError(), op);
}

void nll_loss_forward(const Tensor& out, const Tensor& divisor, const Tensor& input, const ClassTargets& t,
                      bool reduce) {
  forward_losses(out, divisor, input, t, reduce, "nll_loss",
                 [](const Rows<1>& x, const Targets& targets, double* loss, DeferredError* bad, cudaStream_t stream) {
                   nll_forward_kernel<<<blocks_for(x.count), kThreads, 0, stream>>>(x, targets, loss, bad);
                 });
}

void nll_loss_backward(const Tensor& gx, const ClassTargets& t, const Tensor& g, bool per_row, const Tensor& divisor) {
  constexpr const char* op = "nll_loss_backward";
  const Device device = gx.device();
  raise_recorded(device);
  fill(gx, 0.0);
  const Rows<1> r = make_rows<1>({&gx}, t.cdim, op);
  check_targets(t, device, r.count, op);
  if (r.count == 0) return;
  const Grad gv = grad_view(g, per_row, divisor, r.count, op);
  DeviceGuard guard(device);
  nll_backward_kernel<<<blocks_for(r.count), kThreads, 0, current_raw_stream(device)>>>(r, view(t), gv);
  TC_CUDA_CHECK(cudaGetLastError(), op);
}

}  // namespace tc::gpu
