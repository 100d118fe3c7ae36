// The elementwise losses on CUDA tensors (loss_pointwise.h): an N-operand pointwise kernel
// for the per-element forms and the gradients, and a fused one that sums the losses as it
// computes them. The formulas are the CPU's (backend/cpu/loops/loss_pointwise.cpp), over CUDA's
// exp/log1p; mse's squared difference is backend/pointwise_fns.h's, shared with the CPU.
#include <algorithm>
#include <array>
#include <utility>

#include "backend/cuda/convert.cuh"
#include "backend/cuda/launch.h"
#include "backend/cuda/loss_pointwise.h"
#include "backend/cuda/reduce.h"
#include "backend/cuda/row_reduce.cuh"
#include "backend/pointwise_fns.h"

namespace tc::gpu {
namespace {

// softplus(-x) = log(1 + exp(-x)) = -log(sigmoid(x)), without overflow for any x.
template <class C>
__device__ __forceinline__ C softplus_neg(C x) {
  const C ax = x < C(0) ? -x : x;
  return std::log1p(std::exp(-ax)) + (x < C(0) ? -x : C(0));
}

template <class C>
__device__ __forceinline__ C sigmoid_neg(C x) {  // sigmoid(-x), stable on both sides: exp only of -|x|
  const C e = std::exp(x < C(0) ? x : -x);
  return (x >= C(0) ? e : C(1)) / (C(1) + e);
}

// PyTorch's loss: w ((1 - t) x + lw softplus(-x)), lw = 1 + (pw - 1) t. f(x, t, w, pw).
struct BceLogits {
  template <class C>
  __device__ C operator()(C x, C t, C w, C pw) const {
    const C lw = C(1) + (pw - C(1)) * t;
    return w * ((C(1) - t) * x + lw * softplus_neg(x));
  }
};
struct BceGradInput {  // w g ((1 - t) - lw sigmoid(-x)). f(x, t, w, pw, g).
  template <class C>
  __device__ C operator()(C x, C t, C w, C pw, C g) const {
    const C lw = C(1) + (pw - C(1)) * t;
    return w * g * ((C(1) - t) - lw * sigmoid_neg(x));
  }
};
struct BceGradTarget {  // w g (-x + (pw - 1) softplus(-x)). f(x, t, w, pw, g).
  template <class C>
  __device__ C operator()(C x, C t, C w, C pw, C g) const {
    return w * g * (-x + (pw - C(1)) * softplus_neg(x));
  }
};

template <int N>
struct Operands {
  char* ptr[N];
  DType dtype[N];
};

template <class F, class C, size_t... K>
__device__ __forceinline__ C apply(const F& f, const C* v, std::index_sequence<K...>) {
  return f(v[K]...);
}

// The element of row-major index i: its NIn inputs (operands 1..NIn of ops, or 0..NIn-1
// when First = 0) loaded into C and f applied.
template <int NIn, int First, class C, class F, int N>
__device__ __forceinline__ C value_at(const Operands<N>& ops, const int64_t (&off)[N], const F& f) {
  C v[NIn];
#pragma unroll
  for (int k = 0; k < NIn; ++k) v[k] = load_as<C>(ops.ptr[k + First] + off[k + First], ops.dtype[k + First]);
  return apply(f, v, std::make_index_sequence<NIn>{});
}

// out (operand 0) = f(inputs), n elements.
template <int NIn, class C, class F>
__global__ void map_kernel(Operands<NIn + 1> ops, int64_t n, Geometry<NIn + 1> g, F f) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    int64_t off[NIn + 1];
    g.offsets(i, off);
    store_from<C>(ops.ptr[0] + off[0], ops.dtype[0], value_at<NIn, 1, C>(ops, off, f));
  }
}

// partial[block] = the sum of f(inputs) over the block's grid-stride share of the n
// elements, each loss computed in C and added in float64.
template <int NIn, class C, class F>
__global__ void sum_kernel_partial(Operands<NIn> ops, int64_t n, Geometry<NIn> g, F f, double* partial) {
  __shared__ double scratch[32];
  double acc = 0;
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    int64_t off[NIn];
    g.offsets(i, off);
    acc += static_cast<double>(value_at<NIn, 0, C>(ops, off, f));
  }
  acc = block_reduce(acc, SumOp{}, scratch);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

Shape byte_strides(Shape s, DType dt) {
  for (int64_t& v : s) v *= static_cast<int64_t>(element_size(dt));
  return s;
}

void check_on(const Tensor& t, Device device, const char* op) {
  TC_CHECK(device.is_cuda() && t.device() == device, op, "expected every tensor on one CUDA device, got ", t.device(),
           " and ", device);
}

// out = f(in...) broadcast to out's shape, in out's compute type.
template <int NIn, class F>
void map_into(const Tensor& out, const std::array<const Tensor*, NIn>& in, const char* op, F f) {
  for (const Tensor* t : in) check_on(*t, out.device(), op);
  const int64_t n = out.numel();
  if (n == 0) return;
  constexpr int N = NIn + 1;
  std::array<Shape, N> strides;
  Operands<N> ops{};
  strides[0] = byte_strides(out.strides(), out.dtype());
  ops.ptr[0] = static_cast<char*>(out.raw_data());
  ops.dtype[0] = out.dtype();
  for (int k = 0; k < NIn; ++k) {
    strides[k + 1] = byte_strides(broadcast_strides(*in[k], out.sizes(), op), in[k]->dtype());
    ops.ptr[k + 1] = static_cast<char*>(in[k]->raw_data());
    ops.dtype[k + 1] = in[k]->dtype();
  }
  const Geometry<N> g = make_geometry<N>(out.sizes(), strides, op);
  DeviceGuard guard(out.device());
  const cudaStream_t stream = current_raw_stream(out.device());
  with_compute_type(out.dtype(),
                    [&]<class C>() { map_kernel<NIn, C, F><<<blocks_for(n), kThreads, 0, stream>>>(ops, n, g, f); });
  TC_CUDA_CHECK(cudaGetLastError(), op);
}

// out (0-d) = the sum of f(in...) over `shape` (the inputs broadcast to it) / divisor.
template <int NIn, class F>
void sum_into(const Tensor& out, const Shape& shape, const std::array<const Tensor*, NIn>& in, double divisor,
              const char* op, F f) {
  TC_CHECK(out.numel() == 1, op, "expected a 0-d output, got shape ", shape_str(out.sizes()));
  for (const Tensor* t : in) check_on(*t, out.device(), op);
  const int64_t n = shape_numel(shape);
  std::array<Shape, NIn> strides;
  Operands<NIn> ops{};
  for (int k = 0; k < NIn; ++k) {
    strides[k] = byte_strides(broadcast_strides(*in[k], shape, op), in[k]->dtype());
    ops.ptr[k] = static_cast<char*>(in[k]->raw_data());
    ops.dtype[k] = in[k]->dtype();
  }
  const Geometry<NIn> g = make_geometry<NIn>(shape, strides, op);
  // Blocks by size only (the result does not depend on the device); one partial even when
  // n is 0, so an empty mean is 0 / 0 = NaN, as on the CPU.
  const int64_t blocks = std::min<int64_t>(blocks_for(n), 1024);
  const Tensor partial = make_tensor({blocks}, kFloat64, out.device());
  {
    DeviceGuard guard(out.device());
    const cudaStream_t stream = current_raw_stream(out.device());
    with_compute_type(out.dtype(), [&]<class C>() {
      sum_kernel_partial<NIn, C, F><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
          ops, n, g, f, static_cast<double*>(partial.raw_data()));
    });
    TC_CUDA_CHECK(cudaGetLastError(), op);
  }
  sum_kernel(out, partial, {true}, divisor);  // in float64, rounded once into out's dtype
}

}  // namespace

void mse_loss_sum(const Tensor& out, const Tensor& input, const Tensor& target, double divisor) {
  const Shape shape = broadcast_shapes(input.sizes(), target.sizes(), "mse_loss");
  sum_into<2>(out, shape, {&input, &target}, divisor, "mse_loss", fn::SquaredDifference{});
}

void bce_with_logits(const Tensor& out, const Tensor& x, const Tensor& t, const Tensor& w, const Tensor& pw) {
  map_into<4>(out, {&x, &t, &w, &pw}, "binary_cross_entropy_with_logits", BceLogits{});
}

void bce_with_logits_sum(const Tensor& out, const Tensor& x, const Tensor& t, const Tensor& w, const Tensor& pw,
                         double divisor) {
  sum_into<4>(out, x.sizes(), {&x, &t, &w, &pw}, divisor, "binary_cross_entropy_with_logits", BceLogits{});
}

void bce_with_logits_backward(const Tensor& gx, const Tensor& gt, const Tensor& x, const Tensor& t, const Tensor& w,
                              const Tensor& pw, const Tensor& g) {
  const char* op = "binary_cross_entropy_with_logits_backward";
  if (gx.defined()) map_into<5>(gx, {&x, &t, &w, &pw, &g}, op, BceGradInput{});
  if (gt.defined()) map_into<5>(gt, {&x, &t, &w, &pw, &g}, op, BceGradTarget{});
}

}  // namespace tc::gpu
