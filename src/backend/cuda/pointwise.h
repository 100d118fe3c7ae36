// Internal: pointwise kernels on CUDA tensors for the functors of backend/pointwise_fns.h
// (the TC_CUDA_*_FNS lists), with cpu::unary_map/binary_map/ternary_map's contract: any
// dtypes and strides, inputs broadcast to out's shape, computed in float (double when
// compute_double) and rounded once into out's dtype.
#pragma once
#include <type_traits>

#include "backend/pointwise_fns.h"
#include "tensorcast/tensor.h"

namespace tc::gpu {

// Whether F has CUDA kernels (is in one of the lists).
template <class F>
struct has_pointwise_kernel : std::false_type {};
#define TC_HAS_KERNEL(F) \
  template <>            \
  struct has_pointwise_kernel<fn::F> : std::true_type {};
TC_CUDA_UNARY_FNS(TC_HAS_KERNEL)
TC_CUDA_BINARY_FNS(TC_HAS_KERNEL)
TC_CUDA_TERNARY_FNS(TC_HAS_KERNEL)
#undef TC_HAS_KERNEL

// Defined (explicitly instantiated for the listed functors) in pointwise.cu.
template <class F>
void unary_map(const Tensor& out, const Tensor& x, const char* op, F f, bool compute_double);
template <class F>
void binary_map(const Tensor& out, const Tensor& a, const Tensor& b, const char* op, F f, bool compute_double);
template <class F>
void ternary_map(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c, const char* op, F f,
                 bool compute_double);

}  // namespace tc::gpu
