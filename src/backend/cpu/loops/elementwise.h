// Internal: the CPU elementwise machinery every pointwise op, cast and copy uses.
//
// for_each_run walks N operands broadcast to one shape, coalescing dimensions so that
// contiguous data is one long run, and splits the index space across the intra-op
// threads. map_blocks builds on it: operands of any dtype and stride are loaded as the
// compute type C (float, or double for float64) into small stack blocks, the op's block
// function runs on contiguous C arrays (auto-vectorized), and results are stored back
// converting to the output dtype. 16-bit data is thus computed in float32 and rounded once.
#pragma once
#include <algorithm>
#include <array>
#include <cstring>

#include "core/tensor_impl.h"
#include "tensorcast/convert.h"
#include "tensorcast/parallel.h"

namespace tc::cpu {

inline constexpr int kMaxDims = 16;
inline constexpr int64_t kBlock = 256;            // elements per stack block
inline constexpr int64_t kGrainElements = 32768;  // below this, one thread

struct Operand {
  char* data;
  DType dtype;
  const Shape* strides;  // element strides, broadcast to the iteration shape (0 = repeated)
};

template <int N>
struct RunGeometry {
  int ndim = 0;
  int64_t sizes[kMaxDims];       // outermost first
  int64_t strides[N][kMaxDims];  // bytes
  char* base[N];
  int64_t numel = 1;
};

template <int N>
RunGeometry<N> make_geometry(const std::array<Operand, N>& ops, const Shape& shape) {
  RunGeometry<N> g;
  TC_CHECK(shape.size() <= static_cast<size_t>(kMaxDims), "elementwise", "at most ", kMaxDims,
           " dimensions are supported, got ", shape.size());
  for (int k = 0; k < N; ++k) g.base[k] = ops[k].data;
  // No elements: nothing to walk, and the byte strides of a (0, 2^62) shape would overflow.
  if (std::find(shape.begin(), shape.end(), int64_t{0}) != shape.end()) {
    g.ndim = 1;
    g.sizes[0] = 0;
    for (int k = 0; k < N; ++k) g.strides[k][0] = 0;
    g.numel = 0;
    return g;
  }
  // Drop size-1 dims, then merge neighbours whose strides chain for every operand.
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    const int nd = g.ndim;
    bool merge = nd > 0;
    for (int k = 0; k < N && merge; ++k) {
      const int64_t es = static_cast<int64_t>(element_size(ops[k].dtype));
      merge = g.strides[k][nd - 1] == (*ops[k].strides)[d] * es * shape[d];
    }
    if (merge) {
      g.sizes[nd - 1] *= shape[d];
      for (int k = 0; k < N; ++k)
        g.strides[k][nd - 1] = (*ops[k].strides)[d] * static_cast<int64_t>(element_size(ops[k].dtype));
    } else {
      g.sizes[nd] = shape[d];
      for (int k = 0; k < N; ++k)
        g.strides[k][nd] = (*ops[k].strides)[d] * static_cast<int64_t>(element_size(ops[k].dtype));
      g.ndim = nd + 1;
    }
  }
  for (int d = 0; d < g.ndim; ++d) g.numel *= g.sizes[d];
  if (g.ndim == 0) {  // a scalar: one run of length 1
    g.ndim = 1;
    g.sizes[0] = 1;
    for (int k = 0; k < N; ++k) g.strides[k][0] = 0;
  }
  return g;
}

// Calls run(ptrs, byte_strides, n) for every innermost run of elements in [begin, end).
template <int N, class Run>
void walk_range(const RunGeometry<N>& g, int64_t begin, int64_t end, Run& run) {
  const int nd = g.ndim;
  int64_t coord[kMaxDims];
  int64_t rem = begin;
  for (int d = nd - 1; d >= 0; --d) {
    coord[d] = rem % g.sizes[d];
    rem /= g.sizes[d];
  }
  int64_t inner_strides[N];
  for (int k = 0; k < N; ++k) inner_strides[k] = g.strides[k][nd - 1];
  int64_t i = begin;
  while (i < end) {
    char* ptrs[N];
    for (int k = 0; k < N; ++k) {
      char* p = g.base[k];
      for (int d = 0; d < nd; ++d) p += coord[d] * g.strides[k][d];
      ptrs[k] = p;
    }
    const int64_t n = std::min(g.sizes[nd - 1] - coord[nd - 1], end - i);
    run(ptrs, inner_strides, n);
    i += n;
    coord[nd - 1] += n;
    for (int d = nd - 1; d > 0 && coord[d] == g.sizes[d]; --d) {
      coord[d] = 0;
      ++coord[d - 1];
    }
  }
}

template <int N, class Run>
void for_each_run(const std::array<Operand, N>& ops, const Shape& shape, Run run) {
  const RunGeometry<N> g = make_geometry<N>(ops, shape);
  if (g.numel == 0) return;
  parallel_for(0, g.numel, kGrainElements, [&](int64_t b, int64_t e) {
    Run local = run;
    walk_range<N>(g, b, e, local);
  });
}

// Loads n elements of dtype `dt` at byte stride `stride` as C.
template <class C>
void load_block(const char* p, int64_t stride, DType dt, C* dst, int64_t n);
// Stores n C values to dtype `dt` at byte stride `stride`.
template <class C>
void store_block(const C* src, char* p, int64_t stride, DType dt, int64_t n);

extern template void load_block<float>(const char*, int64_t, DType, float*, int64_t);
extern template void load_block<double>(const char*, int64_t, DType, double*, int64_t);
extern template void store_block<float>(const float*, char*, int64_t, DType, int64_t);
extern template void store_block<double>(const double*, char*, int64_t, DType, int64_t);

// out = f(inputs...) where `block(n, const C* const* in, C* out)` computes n contiguous
// elements. `out` must already have the broadcast shape of the inputs.
template <class C, int NIn, class Block>
void map_blocks(const Tensor& out, const std::array<Tensor, NIn>& in, const char* op, Block block) {
  constexpr int N = NIn + 1;
  // A CUDA tensor reaching a CPU loop (an op without a CUDA kernel yet, called inside
  // another op or by the autograd engine) is refused before its memory is read.
  TC_CHECK(out.device().is_cpu(), op, "no CUDA kernel yet for this op (tensor on ", out.device(), ")");
  // 8-bit floats are storage types: copy_into converts them, no arithmetic loop does.
  if (is_float8(out.dtype())) fail_float8_op(op, out.dtype());
  for (const Tensor& t : in)
    if (is_float8(t.dtype())) fail_float8_op(op, t.dtype());
  std::array<Shape, N> strides;
  std::array<Operand, N> ops;
  strides[0] = out.strides();
  ops[0] = {static_cast<char*>(out.raw_data()), out.dtype(), &strides[0]};
  for (int k = 0; k < NIn; ++k) {
    strides[k + 1] = broadcast_strides(in[k], out.sizes(), op);
    ops[k + 1] = {static_cast<char*>(in[k].raw_data()), in[k].dtype(), &strides[k + 1]};
  }
  const DType odt = out.dtype();
  std::array<DType, NIn> idt;
  for (int k = 0; k < NIn; ++k) idt[k] = in[k].dtype();
  constexpr DType cdt = dtype_of<C>;
  for_each_run<N>(ops, out.sizes(), [&](char** ptrs, const int64_t* st, int64_t n) {
    alignas(64) C ibuf[NIn > 0 ? NIn : 1][kBlock];
    alignas(64) C obuf[kBlock];
    for (int64_t j = 0; j < n; j += kBlock) {
      const int64_t m = std::min(kBlock, n - j);
      const C* iptr[NIn > 0 ? NIn : 1];
      for (int k = 0; k < NIn; ++k) {
        const char* p = ptrs[k + 1] + j * st[k + 1];
        if (idt[k] == cdt && st[k + 1] == static_cast<int64_t>(sizeof(C))) {
          iptr[k] = reinterpret_cast<const C*>(p);
        } else {
          load_block<C>(p, st[k + 1], idt[k], ibuf[k], m);
          iptr[k] = ibuf[k];
        }
      }
      char* op0 = ptrs[0] + j * st[0];
      if (odt == cdt && st[0] == static_cast<int64_t>(sizeof(C))) {
        block(m, iptr, reinterpret_cast<C*>(op0));
      } else {
        block(m, iptr, obuf);
        store_block<C>(obuf, op0, st[0], odt, m);
      }
    }
  });
}

// The compute type for a dtype: double for float64 and 64-bit integers, else float.
inline bool computes_in_double(DType t) { return t == kFloat64 || t == kInt64 || t == kInt32; }

// Elementwise helpers over a per-element functor f(C...) -> C, dispatching C.
template <class F>
void unary_map(const Tensor& out, const Tensor& x, const char* op, F f) {
  auto body = [&]<class C>() {
    map_blocks<C, 1>(out, {x}, op, [&](int64_t n, const C* const* in, C* o) {
      const C* a = in[0];
      for (int64_t i = 0; i < n; ++i) o[i] = f(a[i]);
    });
  };
  if (computes_in_double(out.dtype()) || computes_in_double(x.dtype()))
    body.template operator()<double>();
  else
    body.template operator()<float>();
}

template <class F>
void binary_map(const Tensor& out, const Tensor& a, const Tensor& b, const char* op, F f, bool compute_double) {
  auto body = [&]<class C>() {
    map_blocks<C, 2>(out, {a, b}, op, [&](int64_t n, const C* const* in, C* o) {
      const C* x = in[0];
      const C* y = in[1];
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
    });
  };
  if (compute_double)
    body.template operator()<double>();
  else
    body.template operator()<float>();
}

template <class F>
void ternary_map(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c, const char* op, F f,
                 bool compute_double) {
  auto body = [&]<class C>() {
    map_blocks<C, 3>(out, {a, b, c}, op, [&](int64_t n, const C* const* in, C* o) {
      for (int64_t i = 0; i < n; ++i) o[i] = f(in[0][i], in[1][i], in[2][i]);
    });
  };
  if (compute_double)
    body.template operator()<double>();
  else
    body.template operator()<float>();
}

// Strided copy with dtype conversion and broadcasting of src to dst's shape.
void copy_into(const Tensor& dst, const Tensor& src);
// Every element of t = value, rounded once to t's dtype (fill.cpp).
void fill(const Tensor& t, double value);

// t itself when contiguous, else a contiguous copy. Unlike Tensor::contiguous it records
// nothing (no autograd node, no profiler entry): kernels call it on their operands.
Tensor as_contiguous(const Tensor& t);

// Sets every element of t (any dtype and strides) to zero; contiguous data is cleared with
// memset across the threads, as Tensor::zero_ does.
void fill_zero(const Tensor& t);

}  // namespace tc::cpu
