// Internal: a tensor seen as 1-d rows along one dim, for ops that normalize or reduce
// along a dim (softmax, log_softmax, cross_entropy, nll_loss), and the row math they share.
// Contiguous rows already in the compute type are used in place; other rows (16-bit data,
// a non-last dim, a transposed view, an expanded gradient) are loaded into a small
// per-thread compute buffer, so 16-bit data is widened once per row and no full float32
// copy of a tensor is ever made. Rows of a non-last dim that sit side by side in memory
// are loaded in groups (load_rows), reading whole cache lines instead of gathering.
#pragma once
#include <algorithm>
#include <cmath>
#include <limits>

#include "backend/cpu/loops/elementwise.h"

namespace tc::cpu {

struct RowView {
  char* base = nullptr;
  DType dtype = kFloat32;
  int64_t len = 1;     // elements per row (size along dim)
  int64_t stride = 0;  // element stride along dim
  int64_t rows = 1;    // product of the other sizes
  Shape outer_sizes;   // the other dims, coalesced where their strides chain
  Shape outer_strides;

  int64_t offset(int64_t r) const {  // element offset of row r from base
    int64_t off = 0;
    for (size_t d = outer_sizes.size(); d-- > 0;) {
      off += (r % outer_sizes[d]) * outer_strides[d];
      r /= outer_sizes[d];
    }
    return off;
  }
  char* row(int64_t r) const { return base + offset(r) * static_cast<int64_t>(element_size(dtype)); }
  int64_t byte_stride() const { return stride * static_cast<int64_t>(element_size(dtype)); }
  // Rows already laid out as contiguous C can be used in place, without a copy.
  template <class C>
  bool direct() const {
    return dtype == dtype_of<C> && (stride == 1 || len <= 1);
  }

  // Row r as contiguous C: the data itself when direct, else converted into buf.
  template <class C>
  const C* load(int64_t r, C* buf) const {
    if (direct<C>()) return reinterpret_cast<const C*>(row(r));
    load_block<C>(row(r), byte_stride(), dtype, buf, len);
    return buf;
  }
  // Where to compute row r of an output: in place when direct, else in buf (then store).
  template <class C>
  C* out(int64_t r, C* buf) const {
    return direct<C>() ? reinterpret_cast<C*>(row(r)) : buf;
  }
  template <class C>
  void store(int64_t r, const C* src) const {
    if (!direct<C>()) store_block<C>(src, row(r), byte_stride(), dtype, len);
  }

  // How many rows from r on sit side by side in memory (row r + 1 starts one element after
  // row r) while each row is strided: a softmax over a non-last dim, a spatial loss.
  int64_t adjacent_rows(int64_t r) const {
    if (stride == 1 || len <= 1 || outer_sizes.empty() || outer_strides.back() != 1) return 1;
    return outer_sizes.back() - r % outer_sizes.back();
  }
  // Rows r .. r+w-1 into buf (row j at buf + j * len). Adjacent strided rows are read
  // together, w contiguous elements at a time, instead of one strided gather per row.
  template <class C>
  void load_rows(int64_t r, int64_t w, C* buf) const {
    if (w > 1 && adjacent_rows(r) >= w) {
      alignas(64) C tmp[kMaxGroup];
      const char* p = row(r);
      const int64_t es = static_cast<int64_t>(element_size(dtype)), bs = byte_stride();
      for (int64_t k = 0; k < len; ++k) {
        const C* src = tmp;
        if (dtype == dtype_of<C>)
          src = reinterpret_cast<const C*>(p + k * bs);
        else
          load_block<C>(p + k * bs, es, dtype, tmp, w);
        for (int64_t j = 0; j < w; ++j) buf[j * len + k] = src[j];
      }
      return;
    }
    for (int64_t j = 0; j < w; ++j) load_block<C>(row(r + j), byte_stride(), dtype, buf + j * len, len);
  }
  template <class C>
  void store_rows(int64_t r, int64_t w, const C* buf) const {
    if (w > 1 && adjacent_rows(r) >= w) {
      alignas(64) C tmp[kMaxGroup];
      char* p = row(r);
      const int64_t es = static_cast<int64_t>(element_size(dtype)), bs = byte_stride();
      for (int64_t k = 0; k < len; ++k) {
        if (dtype == dtype_of<C>) {
          C* dst = reinterpret_cast<C*>(p + k * bs);
          for (int64_t j = 0; j < w; ++j) dst[j] = buf[j * len + k];
          continue;
        }
        for (int64_t j = 0; j < w; ++j) tmp[j] = buf[j * len + k];
        store_block<C>(tmp, p + k * bs, es, dtype, w);
      }
      return;
    }
    for (int64_t j = 0; j < w; ++j) store_block<C>(buf + j * len, row(r + j), byte_stride(), dtype, len);
  }

  static constexpr int64_t kMaxGroup = 16;
};

// Walks rows [r0, r1) as fn(r, w): groups of w > 1 rows where `lead`'s rows are adjacent
// and strided (load_rows/store_rows then read them cache-line-wise), else single rows.
// A group's buffer stays within ~128 KiB of float (L2-resident).
template <class F>
void for_row_groups(const RowView& lead, int64_t r0, int64_t r1, F&& fn) {
  const int64_t maxw = std::clamp<int64_t>(32768 / std::max<int64_t>(lead.len, 1), 1, RowView::kMaxGroup);
  for (int64_t r = r0; r < r1;) {
    const int64_t w = std::min({maxw, r1 - r, lead.adjacent_rows(r)});
    fn(r, w);
    r += w;
  }
}

// `dim` must already be wrapped; a 0-d tensor is one row of one element.
inline RowView row_view(const Tensor& t, int64_t dim) {
  RowView v;
  v.base = static_cast<char*>(t.raw_data());
  v.dtype = t.dtype();
  if (t.dim() == 0) return v;
  v.len = t.size(dim);
  v.stride = t.stride(dim);
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (d == dim || t.size(d) == 1) continue;
    const int64_t s = t.size(d), st = t.stride(d);
    if (!v.outer_sizes.empty() && v.outer_strides.back() == st * s) {
      v.outer_sizes.back() *= s;
      v.outer_strides.back() = st;
    } else {
      v.outer_sizes.push_back(s);
      v.outer_strides.push_back(st);
    }
    v.rows *= s;
  }
  // A dim of size 0 elsewhere makes zero rows (the size-1 skip above does not hide it).
  for (int64_t d = 0; d < t.dim(); ++d)
    if (d != dim && t.size(d) == 0) v.rows = 0;
  return v;
}

// Runs fn(C{}) with C = double for float64 data, else float (16-bit computes in float32).
template <class F>
decltype(auto) with_compute_type(DType dt, F&& fn) {
  if (dt == kFloat64) return fn(double{});
  return fn(float{});
}

// Splits rows across the intra-op threads in chunks of at least ~kGrainElements elements.
template <class F>
void parallel_rows(int64_t rows, int64_t len, F&& fn) {
  const int64_t grain = std::max<int64_t>(1, kGrainElements / std::max<int64_t>(len, 1));
  parallel_for(0, rows, grain, fn);
}

// Row math on contiguous compute buffers (backend/cpu/loops/rows.cpp). The float versions are the
// hot loops of softmax and the losses: they use a vectorizable exp and are compiled for
// AVX-512 and AVX2 as well, picked at run time. The double versions use std::exp.
//
// row_max ignores NaN on purpose: a NaN element still poisons its row through exp/sum.
float row_max(const float* x, int64_t n);
double row_max(const double* x, int64_t n);
float row_sum(const float* x, int64_t n);
double row_sum(const double* x, int64_t n);
float row_dot(const float* x, const float* y, int64_t n);
double row_dot(const double* x, const double* y, int64_t n);
// y[i] = scale * exp((x[i] - m) - l) (y may alias x); returns the sum of the exp terms.
// The float exp is accurate to ~2 ulps; results below FLT_MIN flush to 0, arguments above
// 88.37 give inf (softmax and the losses only take exp of arguments <= 0).
float exp_shifted(const float* x, float* y, int64_t n, float m, float l, float scale);
double exp_shifted(const double* x, double* y, int64_t n, double m, double l, double scale);
// sum(exp(x[i] - m)) without storing.
float sum_exp_shifted(const float* x, int64_t n, float m);
double sum_exp_shifted(const double* x, int64_t n, double m);

// log(sum(exp(x))) as max + log(sum(exp(x - max))), the two parts kept apart: adding them
// would round to the ulp of the max (0.001 at 1e4 in float32) and lose x - lse. An all
// -inf row is deliberately not special-cased: -inf - -inf = NaN, as PyTorch gives.
template <class C>
struct LogSumExp {
  C max;
  C log_sum;
};

template <class C>
LogSumExp<C> row_logsumexp(const C* x, int64_t n) {
  const C m = row_max(x, n);
  return {m, std::log(sum_exp_shifted(x, n, m))};
}

}  // namespace tc::cpu
