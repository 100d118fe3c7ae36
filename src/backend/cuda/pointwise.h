// Internal: pointwise kernels on CUDA tensors for the functors of backend/pointwise_fns.h
// (every functor of its lists), with cpu::unary_map/binary_map/ternary_map's contract: any
// dtypes and strides, inputs broadcast to out's shape, computed in float (double when
// compute_double) and rounded once into out's dtype.
#pragma once
#include "backend/pointwise_fns.h"
#include "tensorcast/tensor.h"

namespace tc::gpu {

// Defined (explicitly instantiated for the listed functors) in pointwise.cu.
template <class F>
void unary_map(const Tensor& out, const Tensor& x, const char* op, F f, bool compute_double);
template <class F>
void binary_map(const Tensor& out, const Tensor& a, const Tensor& b, const char* op, F f, bool compute_double);
template <class F>
void ternary_map(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c, const char* op, F f,
                 bool compute_double);

}  // namespace tc::gpu
