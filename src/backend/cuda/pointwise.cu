// Pointwise kernels on CUDA tensors (pointwise.h): one kernel per functor and compute type,
// operands of any dtype and strides (byte strides in a coalesced Geometry; broadcast dims
// have stride 0), each element loaded into the compute type, the functor applied, the
// result rounded once into the output's dtype: the CPU loops' arithmetic, element for
// element, so the two devices differ only where their math libraries do (exp, log, pow).
#include <array>

#include "backend/cuda/convert.cuh"
#include "backend/cuda/launch.h"
#include "backend/cuda/pointwise.h"

namespace tc::gpu {
namespace {

template <int N>
struct Operands {
  char* ptr[N];
  DType dtype[N];
};

template <int NIn, class C, class F>
__global__ void pointwise_kernel(Operands<NIn + 1> ops, int64_t n, Geometry<NIn + 1> g, F f) {
  for (int64_t i = global_index(); i < n; i += grid_stride()) {
    int64_t off[NIn + 1];
    g.offsets(i, off);
    C v[NIn];
#pragma unroll
    for (int k = 0; k < NIn; ++k) v[k] = load_as<C>(ops.ptr[k + 1] + off[k + 1], ops.dtype[k + 1]);
    C r;
    if constexpr (NIn == 1)
      r = f(v[0]);
    else if constexpr (NIn == 2)
      r = f(v[0], v[1]);
    else
      r = f(v[0], v[1], v[2]);
    store_from<C>(ops.ptr[0] + off[0], ops.dtype[0], r);
  }
}

template <int NIn, class F>
void launch(const Tensor& out, const std::array<const Tensor*, NIn>& in, const char* op, F f, bool compute_double) {
  TC_CHECK(out.device().is_cuda(), op, "expected a CUDA output, got ", out.device());
  for (const Tensor* t : in)
    TC_CHECK(t->device() == out.device(), op, "expected every tensor on ", out.device(), ", got one on ", t->device());
  const int64_t n = out.numel();
  if (n == 0) return;
  constexpr int N = NIn + 1;
  std::array<Shape, N> strides;
  Operands<N> ops{};
  auto bytes = [](Shape s, DType dt) {
    for (int64_t& v : s) v *= static_cast<int64_t>(element_size(dt));
    return s;
  };
  strides[0] = bytes(out.strides(), out.dtype());
  ops.ptr[0] = static_cast<char*>(out.raw_data());
  ops.dtype[0] = out.dtype();
  for (int k = 0; k < NIn; ++k) {
    strides[k + 1] = bytes(broadcast_strides(*in[k], out.sizes(), op), in[k]->dtype());
    ops.ptr[k + 1] = static_cast<char*>(in[k]->raw_data());
    ops.dtype[k + 1] = in[k]->dtype();
  }
  const Geometry<N> g = make_geometry<N>(out.sizes(), strides, op);
  DeviceGuard guard(out.device());
  const cudaStream_t stream = current_raw_stream(out.device());
  if (compute_double)
    pointwise_kernel<NIn, double, F><<<blocks_for(n), kThreads, 0, stream>>>(ops, n, g, f);
  else
    pointwise_kernel<NIn, float, F><<<blocks_for(n), kThreads, 0, stream>>>(ops, n, g, f);
  TC_CUDA_CHECK(cudaGetLastError(), op);
}

}  // namespace

template <class F>
void unary_map(const Tensor& out, const Tensor& x, const char* op, F f, bool compute_double) {
  launch<1>(out, {&x}, op, f, compute_double);
}

template <class F>
void binary_map(const Tensor& out, const Tensor& a, const Tensor& b, const char* op, F f, bool compute_double) {
  launch<2>(out, {&a, &b}, op, f, compute_double);
}

template <class F>
void ternary_map(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c, const char* op, F f,
                 bool compute_double) {
  launch<3>(out, {&a, &b, &c}, op, f, compute_double);
}

#define TC_INSTANTIATE_UNARY(F) template void unary_map<fn::F>(const Tensor&, const Tensor&, const char*, fn::F, bool);
#define TC_INSTANTIATE_BINARY(F) \
  template void binary_map<fn::F>(const Tensor&, const Tensor&, const Tensor&, const char*, fn::F, bool);
#define TC_INSTANTIATE_TERNARY(F)                                                                                  \
  template void ternary_map<fn::F>(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const char*, fn::F, \
                                   bool);
TC_UNARY_FNS(TC_INSTANTIATE_UNARY)
TC_BINARY_FNS(TC_INSTANTIATE_BINARY)
TC_TERNARY_FNS(TC_INSTANTIATE_TERNARY)

}  // namespace tc::gpu
