#include "common/references.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

namespace tc::testing::ref {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

std::vector<std::vector<double>> groups(const Tensor& x, const std::vector<bool>& mask) {
  const std::vector<double> v = x.to_vector();
  const Shape& s = x.sizes();
  int64_t n_out = 1;
  for (size_t d = 0; d < s.size(); ++d)
    if (!mask[d]) n_out *= s[d];
  std::vector<std::vector<double>> g(static_cast<size_t>(n_out));
  for (size_t i = 0; i < v.size(); ++i) {
    int64_t rem = static_cast<int64_t>(i), o = 0, mul = 1;
    for (int64_t d = static_cast<int64_t>(s.size()) - 1; d >= 0; --d) {
      const int64_t c = rem % s[d];
      rem /= s[d];
      if (!mask[d]) {
        o += c * mul;
        mul *= s[d];
      }
    }
    g[o].push_back(v[i]);
  }
  return g;
}

std::pair<double, int64_t> extreme(const std::vector<double>& g, bool is_max) {
  size_t best = 0;
  for (size_t k = 0; k < g.size(); ++k) {
    if (std::isnan(g[k])) return {g[k], static_cast<int64_t>(k)};
    if (is_max ? g[k] > g[best] : g[k] < g[best]) best = k;
  }
  return {g[best], static_cast<int64_t>(best)};
}

double sum(const std::vector<double>& g) { return std::accumulate(g.begin(), g.end(), 0.0); }

double var(const std::vector<double>& g, int64_t correction) {
  const double n = static_cast<double>(g.size());
  const double m = sum(g) / n;
  double ss = 0;
  for (double v : g) ss += (v - m) * (v - m);
  return ss / std::max(0.0, n - static_cast<double>(correction));
}

std::vector<double> softmax(const std::vector<double>& v, const Shape& shape, int64_t dim, bool log) {
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= shape[d];
  for (size_t d = dim + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t n = shape.empty() ? 1 : shape[dim];
  std::vector<double> out(v.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t k) { return (o * n + k) * inner + i; };
      double m = -kInf;
      for (int64_t k = 0; k < n; ++k) m = std::max(m, v[at(k)]);
      double s = 0;
      for (int64_t k = 0; k < n; ++k) s += std::exp(v[at(k)] - m);
      for (int64_t k = 0; k < n; ++k) out[at(k)] = log ? v[at(k)] - m - std::log(s) : std::exp(v[at(k)] - m) / s;
    }
  return out;
}

std::vector<double> layer_norm(const Tensor& x, int64_t N, const Tensor& w, const Tensor& b, double eps) {
  return layer_norm(x.to_vector(), N, w, b, eps);
}

std::vector<double> layer_norm(const std::vector<double>& xv, int64_t N, const Tensor& w, const Tensor& b, double eps) {
  std::vector<double> out(xv.size());
  const std::vector<double> wv = w.defined() ? w.to_vector() : std::vector<double>(N, 1.0);
  const std::vector<double> bv = b.defined() ? b.to_vector() : std::vector<double>(N, 0.0);
  for (size_t r = 0; r < xv.size() / N; ++r) {
    double m = 0, v = 0;
    for (int64_t j = 0; j < N; ++j) m += xv[r * N + j];
    m /= N;
    for (int64_t j = 0; j < N; ++j) v += (xv[r * N + j] - m) * (xv[r * N + j] - m);
    v /= N;
    for (int64_t j = 0; j < N; ++j) out[r * N + j] = (xv[r * N + j] - m) / std::sqrt(v + eps) * wv[j] + bv[j];
  }
  return out;
}

ShapedValues matmul(const Tensor& a, const Tensor& b) {
  const std::vector<double> av = a.to_vector(), bv = b.to_vector();
  Shape as = a.sizes(), bs = b.sizes();
  const bool a1 = as.size() == 1, b1 = bs.size() == 1;
  if (a1) as = {1, as[0]};
  if (b1) bs = {bs[0], 1};
  const int64_t nd = static_cast<int64_t>(std::max(as.size(), bs.size()));
  as.insert(as.begin(), nd - as.size(), 1);
  bs.insert(bs.begin(), nd - bs.size(), 1);
  const int64_t n = as[nd - 2], k = as[nd - 1], m = bs[nd - 1];
  Shape batch;
  for (int64_t d = 0; d < nd - 2; ++d) batch.push_back(as[d] == 1 ? bs[d] : as[d]);
  const int64_t nb = std::accumulate(batch.begin(), batch.end(), int64_t{1}, std::multiplies<>());
  ShapedValues r;
  r.shape = batch;
  if (!a1) r.shape.push_back(n);
  if (!b1) r.shape.push_back(m);
  r.values.assign(static_cast<size_t>(nb * n * m), 0.0);
  for (int64_t bi = 0; bi < nb; ++bi) {
    int64_t rem = bi, oa = 0, ob = 0, sa = 1, sb = 1;
    for (int64_t d = nd - 3; d >= 0; --d) {
      const int64_t i = rem % batch[d];
      rem /= batch[d];
      if (as[d] != 1) oa += i * sa;
      if (bs[d] != 1) ob += i * sb;
      sa *= as[d];
      sb *= bs[d];
    }
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p) acc += av[(oa * n + i) * k + p] * bv[(ob * k + p) * m + j];
        r.values[(bi * n + i) * m + j] = acc;
      }
  }
  return r;
}

std::vector<double> class_loss(const std::vector<double>& x, const Shape& shape, const std::vector<int64_t>& t,
                               const std::vector<double>& w, int64_t ignore, Reduction red, double eps, bool nll) {
  const bool unbatched = shape.size() == 1;
  const int64_t n = unbatched ? 1 : shape[0], c = unbatched ? shape[0] : shape[1];
  int64_t inner = 1;
  for (size_t d = 2; d < shape.size(); ++d) inner *= shape[d];
  std::vector<double> loss;
  double total = 0, denom = 0;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t k) { return x[(b * c + k) * inner + i]; };
      const int64_t target = t[b * inner + i];
      if (target == ignore) {
        loss.push_back(0);
        continue;
      }
      double lse = 0;
      if (!nll) {
        double m = -kInf;
        for (int64_t k = 0; k < c; ++k) m = std::max(m, at(k));
        double s = 0;
        for (int64_t k = 0; k < c; ++k) s += std::exp(at(k) - m);
        lse = m + std::log(s);
      }
      auto wk = [&](int64_t k) { return w.empty() ? 1.0 : w[k]; };
      double l = -(1 - eps) * wk(target) * (at(target) - lse);
      for (int64_t k = 0; k < c && eps > 0; ++k) l -= eps / c * wk(k) * (at(k) - lse);
      loss.push_back(l);
      total += l;
      denom += wk(target);
    }
  if (red == kNone) return loss;
  return {red == kSum ? total : total / denom};
}

}  // namespace tc::testing::ref
