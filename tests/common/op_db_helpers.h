// Internal to the op table (op_db.cpp, op_db_nn.cpp): sample makers, value and layout
// helpers and broadcasting shared by the op families.
#pragma once
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <utility>

#include "common/op_db.h"
#include "common/references.h"

namespace tc::testing::db {

using amp::CastPolicy;
using Ts = std::vector<Tensor>;
using Refs = std::vector<RefOut>;
constexpr double kInfD = std::numeric_limits<double>::infinity();

inline const std::vector<DType> kAll = {kFloat32, kBFloat16, kFloat16, kFloat64};

// ------------------------------------------------------------------ values and layouts

inline int64_t numel_of(const Shape& s) { return std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<>()); }

inline Shape row_strides(const Shape& s) {
  Shape st(s.size());
  int64_t k = 1;
  for (int64_t d = static_cast<int64_t>(s.size()) - 1; d >= 0; --d) {
    st[d] = k;
    k *= s[d];
  }
  return st;
}

inline Tensor U(const Shape& s, DType dt, double lo, double hi, uint64_t seed) { return uniform(s, dt, lo, hi, seed); }

// Shape s, stored with its last two dims swapped (a transposed view).
inline Tensor Ut(const Shape& s, DType dt, double lo, double hi, uint64_t seed) {
  Shape t = s;
  std::swap(t[t.size() - 1], t[t.size() - 2]);
  const int64_t n = static_cast<int64_t>(s.size());
  return uniform(t, dt, lo, hi, seed).transpose(n - 1, n - 2);
}

// Shape s, every other element of a twice-as-long last dim.
inline Tensor Us(const Shape& s, DType dt, double lo, double hi, uint64_t seed) {
  Shape t = s;
  t.back() *= 2;
  return uniform(t, dt, lo, hi, seed).slice(static_cast<int64_t>(s.size()) - 1, 0, t.back(), 2);
}

// (N, C, H, W) stored channels-last (NHWC memory viewed NCHW).
inline Tensor Ucl(const Shape& s, DType dt, double lo, double hi, uint64_t seed) {
  return uniform({s[0], s[2], s[3], s[1]}, dt, lo, hi, seed).permute({0, 3, 1, 2});
}

// Distinct values (shuffled multiples of 1/8, exact in every floating dtype for up to
// 512 elements): maxima are unambiguous and stable under gradcheck's steps.
inline Tensor distinct(const Shape& s, DType dt, uint64_t seed) {
  const int64_t n = numel_of(s);
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>(i - n / 2) / 8.0;
  std::shuffle(v.begin(), v.end(), std::mt19937_64(seed));
  return tensor(v, {n}, kFloat64).reshape(s).to(dt);
}

// Few distinct values (multiples of 1/4 in [0, 1]): ties everywhere.
inline Tensor with_ties(const Shape& s, DType dt, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<double> v(static_cast<size_t>(numel_of(s)));
  for (auto& e : v) e = static_cast<double>(gen() % 5) / 4.0;
  return tensor(v, {numel_of(s)}, kFloat64).reshape(s).to(dt);
}

inline Tensor cond_of(const Shape& s, uint64_t seed) { return gt(uniform(s, kFloat32, -1, 1, seed), 0.0); }

inline Tensor ints(const std::vector<int64_t>& v, const Shape& s) {
  return tensor(v, {static_cast<int64_t>(v.size())}).reshape(s);
}

inline std::vector<int64_t> int_values(const Tensor& t) {
  std::vector<int64_t> r;
  for (double v : t.to_vector()) r.push_back(static_cast<int64_t>(v));
  return r;
}

inline double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : t.to_vector()) m = std::max(m, std::fabs(v));
  return m;
}

// Accumulation bound of n terms of size up to `term` (pairwise or blocked summation).
inline double acc_of(int64_t n, double term) {
  return n <= 0 ? 0.0 : static_cast<double>(n) * term * std::max(1.0, std::log2(static_cast<double>(n)));
}

inline Sample make(std::string desc, Ts inputs, OpCall op, RefFn ref, double acc = 0) {
  Sample s;
  s.desc = std::move(desc);
  s.inputs = std::move(inputs);
  s.op = std::move(op);
  s.ref = std::move(ref);
  s.acc = acc;
  return s;
}

inline Sample no_grad(Sample s) {
  s.gradcheck = false;
  return s;
}

inline OpInfo entry(std::string name, std::string variant, CastPolicy policy, std::vector<int> grad_inputs,
                    std::function<std::vector<Sample>(DType)> samples) {
  OpInfo e;
  e.name = std::move(name);
  e.variant = std::move(variant);
  e.dtypes = kAll;
  e.policy = policy;
  e.grad_inputs = std::move(grad_inputs);
  e.samples = std::move(samples);
  return e;
}

inline std::map<DType, Tol> exact_tol() {
  return {{kFloat32, {0, 0}}, {kBFloat16, {0, 0}}, {kFloat16, {0, 0}}, {kFloat64, {0, 0}}};
}

// ------------------------------------------------------------------ broadcasting

inline Shape broadcast_shapes(const Shape& a, const Shape& b) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    out[i] = x == 1 ? y : x;
  }
  return out;
}

// x's values broadcast to `out` by index arithmetic (right-aligned, size-1 dims repeat).
inline std::vector<double> broadcast_values(const Tensor& x, const Shape& out) {
  const std::vector<double> v = x.to_vector();
  const Shape& s = x.sizes();
  const Shape st = row_strides(s);
  const int64_t off = static_cast<int64_t>(out.size() - s.size());
  const int64_t n = numel_of(out);
  std::vector<double> r(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i, idx = 0;
    for (int64_t d = static_cast<int64_t>(out.size()) - 1; d >= 0; --d) {
      const int64_t c = rem % out[d];
      rem /= out[d];
      if (d >= off && s[d - off] != 1) idx += c * st[d - off];
    }
    r[i] = v[idx];
  }
  return r;
}

// The families of op_db_nn.cpp: linear algebra, convolution and pooling, neural-network
// ops, losses.
void add_nn_ops_and_losses(std::vector<OpInfo>& db);

}  // namespace tc::testing::db
