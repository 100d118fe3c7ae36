// Normalization ops: layer_norm and batch_norm, with fused forward and backward kernels.
// 16-bit inputs are widened to float32 per row, statistics accumulate in double lanes and
// are kept as float32 (float64 for float64 input), and each output rounds once.
#include <algorithm>
#include <cmath>

#include "ops/pointwise.h"
#include "ops/row_io.h"
#include "tensorcast/autograd.h"
#include "tensorcast/ops.h"
#include "ops/impl.h"

namespace tc::impl {

using autograd::record;
using ops::load_row;
using ops::store_row;

namespace {

constexpr int64_t kGrain = 32768;  // elements of work below which a kernel runs on one thread

// Splits `rows` rows of `cols` elements into a fixed number of chunks that depends only on
// the problem size (never on the thread count), so per-chunk partial sums combine in the
// same order on every machine and results are reproducible.
int64_t num_chunks(int64_t rows, int64_t cols) {
  const int64_t by_work = std::max<int64_t>(1, rows * std::max<int64_t>(cols, 1) / kGrain);
  return std::max<int64_t>(1, std::min<int64_t>({rows, by_work, 64}));
}

// ------------------------------------------------------------------ layer_norm kernels

template <class C>
void layer_norm_forward(const Tensor& x, const std::vector<C>& w, const std::vector<C>& b, double eps, int64_t M,
                        int64_t N, const Tensor& out, C* mean, C* rstd) {
  const DType xdt = x.dtype(), odt = out.dtype();
  const void* xp = x.raw_data();
  void* op = out.raw_data();
  const C* wp = w.empty() ? nullptr : w.data();
  const C* bp = b.empty() ? nullptr : b.data();
  parallel_for(0, M, std::max<int64_t>(1, kGrain / std::max<int64_t>(N, 1)), [&](int64_t r0, int64_t r1) {
    std::vector<C> xbuf(static_cast<size_t>(N)), ybuf(static_cast<size_t>(N));
    for (int64_t r = r0; r < r1; ++r) {
      const C* xr = load_row<C>(xp, xdt, r * N, N, xbuf.data());
      const double mu = ops::row_sum(xr, N) / static_cast<double>(N);
      const double var = ops::row_sq_dev(xr, N, mu) / static_cast<double>(N);  // biased, two-pass
      const double rs = 1.0 / std::sqrt(var + eps);
      mean[r] = static_cast<C>(mu);
      rstd[r] = static_cast<C>(rs);
      const C m = static_cast<C>(mu), s = static_cast<C>(rs);
      C* y = ybuf.data();
      for (int64_t j = 0; j < N; ++j) y[j] = (xr[j] - m) * s;
      if (wp) for (int64_t j = 0; j < N; ++j) y[j] *= wp[j];
      if (bp) for (int64_t j = 0; j < N; ++j) y[j] += bp[j];
      store_row<C>(y, op, odt, r * N, N);
    }
  });
}

// dx = rstd * (g*w - mean(g*w) - xhat * mean(g*w*xhat)); dw = sum_rows g*xhat; db = sum_rows g.
template <class C>
void layer_norm_backward(const Tensor& g, const Tensor& x, const C* mean, const C* rstd, const std::vector<C>& w,
                         int64_t M, int64_t N, const Tensor& dx, std::vector<C>* dw, std::vector<C>* db) {
  const DType gdt = g.dtype(), xdt = x.dtype();
  const void* gp = g.raw_data();
  const void* xp = x.raw_data();
  const C* wp = w.empty() ? nullptr : w.data();
  const int64_t chunks = num_chunks(M, N);
  // Per-chunk partial sums for dw/db: no atomics, deterministic combination order.
  std::vector<C> dw_part(dw ? static_cast<size_t>(chunks * N) : 0, C(0));
  std::vector<C> db_part(db ? static_cast<size_t>(chunks * N) : 0, C(0));
  parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
    std::vector<C> xbuf(static_cast<size_t>(N)), gbuf(static_cast<size_t>(N)), xhat(static_cast<size_t>(N)),
        dxhat(static_cast<size_t>(N));
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t r0 = c * M / chunks, r1 = (c + 1) * M / chunks;
      C* dwc = dw ? dw_part.data() + c * N : nullptr;
      C* dbc = db ? db_part.data() + c * N : nullptr;
      for (int64_t r = r0; r < r1; ++r) {
        const C* xr = load_row<C>(xp, xdt, r * N, N, xbuf.data());
        const C* gr = load_row<C>(gp, gdt, r * N, N, gbuf.data());
        const C m = mean[r], s = rstd[r];
        for (int64_t j = 0; j < N; ++j) xhat[j] = (xr[j] - m) * s;
        if (dwc) for (int64_t j = 0; j < N; ++j) dwc[j] += gr[j] * xhat[j];
        if (dbc) for (int64_t j = 0; j < N; ++j) dbc[j] += gr[j];
        if (!dx.defined()) continue;
        if (wp) for (int64_t j = 0; j < N; ++j) dxhat[j] = gr[j] * wp[j];
        else std::copy(gr, gr + N, dxhat.begin());
        const C a = static_cast<C>(ops::row_sum(dxhat.data(), N) / static_cast<double>(N));
        for (int64_t j = 0; j < N; ++j) xbuf[j] = dxhat[j] * xhat[j];  // xr is no longer needed
        const C bsum = static_cast<C>(ops::row_sum(xbuf.data(), N) / static_cast<double>(N));
        for (int64_t j = 0; j < N; ++j) dxhat[j] = s * (dxhat[j] - a - xhat[j] * bsum);
        store_row<C>(dxhat.data(), dx.raw_data(), dx.dtype(), r * N, N);
      }
    }
  });
  auto combine = [&](std::vector<C>* outv, const std::vector<C>& part) {
    if (!outv) return;
    outv->assign(static_cast<size_t>(N), C(0));
    for (int64_t c = 0; c < chunks; ++c)
      for (int64_t j = 0; j < N; ++j) (*outv)[j] += part[c * N + j];
  };
  combine(dw, dw_part);
  combine(db, db_part);
}

// A 1-d tensor of `dtype` holding v (gradients of weight/bias, saved statistics).
template <class C>
Tensor vector_tensor(const std::vector<C>& v, const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  if (!v.empty()) store_row<C>(v.data(), t.raw_data(), dtype, 0, static_cast<int64_t>(v.size()));
  return t;
}

void check_floating(const char* op, const char* what, const Tensor& t) {
  TC_CHECK(is_floating(t.dtype()), op, "expected a floating ", what, ", got ", what, " of dtype ", dtype_name(t.dtype()));
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias, double eps) {
  constexpr const char* op = "layer_norm";
  TC_CHECK(x.defined(), op, "got an undefined input");
  check_floating(op, "input", x);
  const int64_t nd = static_cast<int64_t>(normalized_shape.size());
  const Shape& xs = x.sizes();
  bool match = nd >= 1 && nd <= x.dim();
  for (int64_t i = 0; match && i < nd; ++i) match = xs[x.dim() - nd + i] == normalized_shape[i];
  TC_CHECK(match, op, "normalized_shape ", shape_str(normalized_shape),
           " does not match the trailing dimensions of input of shape ", shape_str(xs));
  for (const auto& [t, name] : {std::pair{weight, "weight"}, std::pair{bias, "bias"}}) {
    if (!t.defined()) continue;
    TC_CHECK(t.sizes() == normalized_shape, op, name, " of shape ", shape_str(t.sizes()),
             " does not match normalized_shape ", shape_str(normalized_shape));
    check_floating(op, name, t);
    ops::check_same_device(op, x, t);
  }
  const int64_t N = shape_numel(normalized_shape);
  const int64_t M = N == 0 ? 0 : x.numel() / N;
  const Tensor xc = x.detach().contiguous();
  Tensor out = make_tensor(xs, x.dtype(), x.device());

  return ops::dispatch_compute(x.dtype(), [&]<class C>() {
    const DType sdt = dtype_of<C>;  // saved statistics: float32 (float64 for float64 input)
    Tensor mean = empty({M}, sdt), rstd = empty({M}, sdt);
    std::vector<C> w = ops::to_compute_vector<C>(weight), b = ops::to_compute_vector<C>(bias);
    if (M > 0 && N > 0) layer_norm_forward<C>(xc, w, b, eps, M, N, out, mean.data_ptr<C>(), rstd.data_ptr<C>());
    return record(op, out, {x, weight, bias},
                  [xc, mean, rstd, w = std::move(w), M, N, wdt = weight.defined() ? weight.dtype() : x.dtype(),
                   bdt = bias.defined() ? bias.dtype() : x.dtype(), ns = normalized_shape,
                   xdt = x.dtype()](const Tensor& g, const std::vector<bool>& needs) {
                    Tensor dx = needs[0] ? make_tensor(xc.sizes(), xdt) : Tensor();
                    std::vector<C> dw, db;
                    if (M > 0 && N > 0)
                      layer_norm_backward<C>(g.contiguous(), xc, mean.data_ptr<C>(), rstd.data_ptr<C>(), w, M, N, dx,
                                             needs[1] ? &dw : nullptr, needs[2] ? &db : nullptr);
                    else if (dx.defined())
                      dx.zero_();
                    if (needs[1] && dw.empty()) dw.assign(static_cast<size_t>(N), C(0));
                    if (needs[2] && db.empty()) db.assign(static_cast<size_t>(N), C(0));
                    return std::vector<Tensor>{dx, needs[1] ? vector_tensor<C>(dw, ns, wdt) : Tensor(),
                                               needs[2] ? vector_tensor<C>(db, ns, bdt) : Tensor()};
                  });
  });
}

// ------------------------------------------------------------------ batch_norm

namespace {

// x viewed as (B, Ch, S): channel c's data is B contiguous rows of S elements.
struct BnGeometry {
  int64_t B, Ch, S;
  int64_t count() const { return B * S; }
  int64_t row(int64_t n, int64_t c) const { return (n * Ch + c) * S; }
};

template <class C>
void batch_norm_forward(const Tensor& x, const BnGeometry& geo, bool use_batch, const std::vector<C>& rm,
                        const std::vector<C>& rv, const std::vector<C>& w, const std::vector<C>& b, double eps,
                        const Tensor& out, C* mean_out, C* rstd_out, std::vector<double>& batch_var) {
  const DType xdt = x.dtype(), odt = out.dtype();
  const void* xp = x.raw_data();
  void* op = out.raw_data();
  const int64_t S = geo.S;
  const double count = static_cast<double>(geo.count());
  parallel_for(0, geo.Ch, std::max<int64_t>(1, kGrain / std::max<int64_t>(geo.count(), 1)), [&](int64_t c0, int64_t c1) {
    std::vector<C> buf(static_cast<size_t>(S)), ybuf(static_cast<size_t>(S));
    for (int64_t c = c0; c < c1; ++c) {
      double mu, var;
      if (use_batch) {
        double s = 0;
        for (int64_t n = 0; n < geo.B; ++n) s += ops::row_sum(load_row<C>(xp, xdt, geo.row(n, c), S, buf.data()), S);
        mu = s / count;
        double q = 0;
        for (int64_t n = 0; n < geo.B; ++n) q += ops::row_sq_dev(load_row<C>(xp, xdt, geo.row(n, c), S, buf.data()), S, mu);
        var = q / count;  // biased: what normalization uses
        batch_var[c] = var;
      } else {
        mu = rm[c];
        var = rv[c];
      }
      const double rs = 1.0 / std::sqrt(var + eps);
      mean_out[c] = static_cast<C>(mu);
      rstd_out[c] = static_cast<C>(rs);
      // y = x * scale + shift, with the affine parameters folded in once per channel.
      const double scale = rs * (w.empty() ? 1.0 : static_cast<double>(w[c]));
      const C sc = static_cast<C>(scale);
      const C sh = static_cast<C>((b.empty() ? 0.0 : static_cast<double>(b[c])) - mu * scale);
      for (int64_t n = 0; n < geo.B; ++n) {
        const C* xr = load_row<C>(xp, xdt, geo.row(n, c), S, buf.data());
        for (int64_t j = 0; j < S; ++j) ybuf[j] = xr[j] * sc + sh;
        store_row<C>(ybuf.data(), op, odt, geo.row(n, c), S);
      }
    }
  });
}

// Training (batch statistics): dx = w*rstd*(g - mean(g) - xhat*mean(g*xhat)).
// Eval (fixed statistics): dx = g*w*rstd. Both: dw = sum g*xhat, db = sum g per channel.
template <class C>
void batch_norm_backward(const Tensor& g, const Tensor& x, const BnGeometry& geo, bool use_batch, const C* mean,
                         const C* rstd, const std::vector<C>& w, const Tensor& dx, std::vector<C>* dw,
                         std::vector<C>* db) {
  const DType gdt = g.dtype(), xdt = x.dtype();
  const void* gp = g.raw_data();
  const void* xp = x.raw_data();
  const int64_t S = geo.S;
  const double count = static_cast<double>(geo.count());
  if (dw) dw->assign(static_cast<size_t>(geo.Ch), C(0));
  if (db) db->assign(static_cast<size_t>(geo.Ch), C(0));
  parallel_for(0, geo.Ch, std::max<int64_t>(1, kGrain / std::max<int64_t>(geo.count(), 1)), [&](int64_t c0, int64_t c1) {
    std::vector<C> xbuf(static_cast<size_t>(S)), gbuf(static_cast<size_t>(S)), tmp(static_cast<size_t>(S));
    for (int64_t c = c0; c < c1; ++c) {
      const C m = mean[c], s = rstd[c];
      double sum_g = 0, sum_gx = 0;  // sum g and sum g*xhat
      for (int64_t n = 0; n < geo.B; ++n) {
        const C* xr = load_row<C>(xp, xdt, geo.row(n, c), S, xbuf.data());
        const C* gr = load_row<C>(gp, gdt, geo.row(n, c), S, gbuf.data());
        for (int64_t j = 0; j < S; ++j) tmp[j] = gr[j] * ((xr[j] - m) * s);
        sum_g += ops::row_sum(gr, S);
        sum_gx += ops::row_sum(tmp.data(), S);
      }
      if (dw) (*dw)[c] = static_cast<C>(sum_gx);
      if (db) (*db)[c] = static_cast<C>(sum_g);
      if (!dx.defined()) continue;
      const C k = static_cast<C>(w.empty() ? static_cast<double>(s) : static_cast<double>(w[c]) * s);
      const C mg = static_cast<C>(use_batch ? sum_g / count : 0.0);
      const C mgx = static_cast<C>(use_batch ? sum_gx / count : 0.0);
      for (int64_t n = 0; n < geo.B; ++n) {
        const C* xr = load_row<C>(xp, xdt, geo.row(n, c), S, xbuf.data());
        const C* gr = load_row<C>(gp, gdt, geo.row(n, c), S, gbuf.data());
        for (int64_t j = 0; j < S; ++j) tmp[j] = k * (gr[j] - mg - (xr[j] - m) * s * mgx);
        store_row<C>(tmp.data(), dx.raw_data(), dx.dtype(), geo.row(n, c), S);
      }
    }
  });
}

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  constexpr const char* op = "batch_norm";
  TC_CHECK(x.defined(), op, "got an undefined input");
  check_floating(op, "input", x);
  TC_CHECK(x.dim() >= 2, op, "expected input of shape (N, C) or (N, C, *), got ", shape_str(x.sizes()));
  TC_CHECK(running_mean.defined() == running_var.defined(), op,
           "running_mean and running_var must both be given or both be undefined");
  const Shape& xs = x.sizes();
  BnGeometry geo{xs[0], xs[1], 1};
  for (int64_t d = 2; d < x.dim(); ++d) geo.S *= xs[d];
  for (const auto& [t, name] : {std::pair{weight, "weight"}, std::pair{bias, "bias"},
                                std::pair{running_mean, "running_mean"}, std::pair{running_var, "running_var"}}) {
    if (!t.defined()) continue;
    TC_CHECK(t.dim() == 1 && t.size(0) == geo.Ch, op, name, " of shape ", shape_str(t.sizes()), " does not match the ",
             geo.Ch, " channels of input of shape ", shape_str(xs));
    check_floating(op, name, t);
    ops::check_same_device(op, x, t);
  }
  const bool use_batch = training || !running_mean.defined();
  TC_CHECK(!use_batch || geo.count() > 1, op, "expected more than 1 value per channel when training, got input of shape ",
           shape_str(xs));
  const Tensor xc = x.detach().contiguous();
  Tensor out = make_tensor(xs, x.dtype(), x.device());

  return ops::dispatch_compute(x.dtype(), [&]<class C>() {
    const DType sdt = dtype_of<C>;
    Tensor mean = empty({geo.Ch}, sdt), rstd = empty({geo.Ch}, sdt);
    std::vector<C> w = ops::to_compute_vector<C>(weight), b = ops::to_compute_vector<C>(bias);
    std::vector<C> rm, rv;
    if (!use_batch) {
      rm = ops::to_compute_vector<C>(running_mean);
      rv = ops::to_compute_vector<C>(running_var);
    }
    std::vector<double> batch_var(static_cast<size_t>(geo.Ch), 0.0);
    batch_norm_forward<C>(xc, geo, use_batch, rm, rv, w, b, eps, out, mean.data_ptr<C>(), rstd.data_ptr<C>(), batch_var);

    if (training && running_mean.defined()) {
      // In place and untracked, with the unbiased variance (PyTorch's convention).
      NoGradGuard no_grad;
      const double n = static_cast<double>(geo.count());
      std::vector<double> old_m = ops::to_compute_vector<double>(running_mean);
      std::vector<double> old_v = ops::to_compute_vector<double>(running_var);
      const C* mp = mean.data_ptr<C>();
      for (int64_t c = 0; c < geo.Ch; ++c) {
        old_m[c] = (1.0 - momentum) * old_m[c] + momentum * static_cast<double>(mp[c]);
        old_v[c] = (1.0 - momentum) * old_v[c] + momentum * batch_var[c] * n / (n - 1.0);
      }
      cpu::copy_into(running_mean, from_blob(old_m.data(), {geo.Ch}, kFloat64));
      cpu::copy_into(running_var, from_blob(old_v.data(), {geo.Ch}, kFloat64));
    }

    return record(op, out, {x, weight, bias},
                  [xc, mean, rstd, w = std::move(w), geo, use_batch, wdt = weight.defined() ? weight.dtype() : x.dtype(),
                   bdt = bias.defined() ? bias.dtype() : x.dtype(), xdt = x.dtype()](const Tensor& g,
                                                                                      const std::vector<bool>& needs) {
                    Tensor dx = needs[0] ? make_tensor(xc.sizes(), xdt) : Tensor();
                    std::vector<C> dw, db;
                    batch_norm_backward<C>(g.contiguous(), xc, geo, use_batch, mean.data_ptr<C>(), rstd.data_ptr<C>(), w,
                                           dx, needs[1] ? &dw : nullptr, needs[2] ? &db : nullptr);
                    return std::vector<Tensor>{dx, needs[1] ? vector_tensor<C>(dw, {geo.Ch}, wdt) : Tensor(),
                                               needs[2] ? vector_tensor<C>(db, {geo.Ch}, bdt) : Tensor()};
                  });
  });
}

}  // namespace tc::impl
