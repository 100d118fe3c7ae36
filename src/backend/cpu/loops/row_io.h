// Internal: contiguous row loads/stores in a compute type, for the fused nn kernels
// (layer_norm, batch_norm, dropout, embedding) that walk rows of contiguous tensors
// themselves.
#pragma once
#include <cstring>
#include <vector>

#include "backend/cpu/loops/elementwise.h"

namespace tc::cpu {

// The compute type of a fused kernel: double for float64 data, float otherwise (16-bit
// data is widened to float32 and rounded once on store).
template <class F>
decltype(auto) dispatch_compute(DType dt, F&& fn) {
  if (dt == kFloat64) return fn.template operator()<double>();
  return fn.template operator()<float>();
}

// n elements of contiguous `dt` data starting at element i of `base`, as C. Returns the
// data itself when it already is C, else converts into `buf` (n elements).
template <class C>
const C* load_row(const void* base, DType dt, int64_t i, int64_t n, C* buf) {
  const size_t es = element_size(dt);
  const char* p = static_cast<const char*>(base) + static_cast<size_t>(i) * es;
  if (dt == dtype_of<C>) return reinterpret_cast<const C*>(p);
  load_block<C>(p, static_cast<int64_t>(es), dt, buf, n);
  return buf;
}

// Stores n C values to contiguous `dt` data at element i of `base`.
template <class C>
void store_row(const C* src, void* base, DType dt, int64_t i, int64_t n) {
  const size_t es = element_size(dt);
  char* p = static_cast<char*>(base) + static_cast<size_t>(i) * es;
  if (dt == dtype_of<C>) {
    if (reinterpret_cast<const char*>(src) != p) std::memcpy(p, src, static_cast<size_t>(n) * es);
    return;
  }
  store_block<C>(src, p, static_cast<int64_t>(es), dt, n);
}

// A whole (small) contiguous-or-not tensor as a vector of C; empty when undefined.
template <class C>
std::vector<C> to_compute_vector(const Tensor& t) {
  std::vector<C> v;
  if (!t.defined()) return v;
  const Tensor c = as_contiguous(t);
  v.resize(static_cast<size_t>(c.numel()));
  if (!v.empty())
    load_block<C>(static_cast<const char*>(c.raw_data()), static_cast<int64_t>(element_size(c.dtype())), c.dtype(),
                  v.data(), c.numel());
  return v;
}

// The sum of x[i] for i in [0, n) (kSquaredDeviation: of (x[i] - mu)^2) in double, over 32
// independent lanes added pairwise: vectorizes without -ffast-math, keeps long rows
// accurate, and a short row's sum is bound by the additions' count rather than one
// accumulator's latency.
template <bool kSquaredDeviation, class C>
[[gnu::always_inline]] inline double sum_in_double(const C* x, int64_t n, double mu) {
  constexpr int kLanes = 32;
  double acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      double v = static_cast<double>(x[i + l]);
      if constexpr (kSquaredDeviation) v = (v - mu) * (v - mu);
      acc[l] += v;
    }
  for (; i < n; ++i) {
    double v = static_cast<double>(x[i]);
    if constexpr (kSquaredDeviation) v = (v - mu) * (v - mu);
    acc[0] += v;
  }
  // Each width a constant, so the adds unroll into vector adds.
  for (int l = 0; l < 16; ++l) acc[l] += acc[l + 16];
  for (int l = 0; l < 8; ++l) acc[l] += acc[l + 8];
  for (int l = 0; l < 4; ++l) acc[l] += acc[l + 4];
  return (acc[0] + acc[2]) + (acc[1] + acc[3]);
}

// Sum of n values, and sum of squared deviations from `mean`, in double. Named apart from
// rows.h's float-lane row_sum, which an unqualified call would pick.
template <class C>
[[gnu::always_inline]] inline double row_sum_double(const C* p, int64_t n) {
  return sum_in_double<false>(p, n, 0.0);
}
template <class C>
[[gnu::always_inline]] inline double row_sq_dev(const C* p, int64_t n, double mean) {
  return sum_in_double<true>(p, n, mean);
}

}  // namespace tc::cpu
