// layer_norm and batch_norm kernels: rows of contiguous data loaded in the compute type
// (row_io.h), statistics from two passes in double lanes (layer_norm's rows of whole
// 16-float vectors on AVX-512: norm_kernels.h, one pass of shifted moments in double),
// the affine parameters folded in.
#include "backend/cpu/loops/norm.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "backend/cpu/loops/fast_math.h"
#include "backend/cpu/loops/row_io.h"
#include "backend/cpu/x86/norm_kernels.h"
#include "tensorcast/convert.h"
#include "tensorcast/parallel.h"

namespace tc::cpu {

namespace {

// Elements of work per thread at least: a row of layer_norm costs ~0.5 ns per element, so
// 8192 elements are ~4 us against ~1 us to start and join a parallel region.
constexpr int64_t kGrain = 8192;

// Splits `rows` rows of `cols` elements into a fixed number of chunks that depends only on
// the problem size (never on the thread count), so per-chunk partial sums combine in the
// same order on every machine and results are reproducible.
int64_t num_chunks(int64_t rows, int64_t cols) {
  const int64_t by_work = std::max<int64_t>(1, rows * std::max<int64_t>(cols, 1) / kGrain);
  return std::max<int64_t>(1, std::min<int64_t>({rows, by_work, 64}));
}

// The n elements of contiguous t as C: t's own data when it already is C, else converted
// into buf. nullptr when t is undefined (no affine parameter).
template <class C>
const C* compute_data(const Tensor& t, int64_t n, std::vector<C>& buf) {
  if (!t.defined()) return nullptr;
  if (t.dtype() != dtype_of<C>) buf.resize(static_cast<size_t>(n));
  return load_row<C>(t.raw_data(), t.dtype(), 0, n, buf.data());
}

// Stores v into the contiguous tensor t (undefined: not wanted).
template <class C>
void store_vector(const Tensor& t, const std::vector<C>& v) {
  if (t.defined() && !v.empty()) store_row<C>(v.data(), t.raw_data(), t.dtype(), 0, static_cast<int64_t>(v.size()));
}

// ------------------------------------------------------------------ layer_norm

// One row of the forward: mean and rstd from two passes in double, then
// y = (x - mean) * rstd (* w) (+ b) in one pass. With a residual row rr the row is
// x + rr, written to sr first.
template <class C>
[[gnu::always_inline]] inline void ln_forward_row(const C* xr, const C* rr, C* sr, int64_t N, const C* wp, const C* bp,
                                                  double eps, C* y, C* mean, C* rstd) {
  if (rr) {
    // The sum written first and summed from L1 after: taking the sum in the same loop kept
    // GCC's double lanes on the stack (a store-to-load chain per iteration, ~2x slower).
    for (int64_t j = 0; j < N; ++j) sr[j] = xr[j] + rr[j];
    xr = sr;
  }
  const double mu = row_sum_double(xr, N) / static_cast<double>(N);
  const double var = row_sq_dev(xr, N, mu) / static_cast<double>(N);  // biased, two-pass
  const double rs = 1.0 / std::sqrt(var + eps);
  *mean = static_cast<C>(mu);
  *rstd = static_cast<C>(rs);
  const C m = static_cast<C>(mu), s = static_cast<C>(rs);
  for (int64_t j = 0; j < N; ++j) {
    C v = (xr[j] - m) * s;
    if (wp) v *= wp[j];
    if (bp) v += bp[j];
    y[j] = v;
  }
}

// The float rows compiled per ISA (the loops vectorize 2-4x wider than baseline x86-64).
TC_SIMD_CLONES void ln_forward_row_f32(const float* xr, const float* rr, float* sr, int64_t N, const float* wp,
                                       const float* bp, double eps, float* y, float* mean, float* rstd) {
  ln_forward_row(xr, rr, sr, N, wp, bp, eps, y, mean, rstd);
}

// Rows of whole 16-float vectors on a CPU with AVX-512 take norm_kernels.h's row math,
// whatever the dtypes: the fused and the separate add and norm then give the same bits.
bool avx512_rows(int64_t N) {
  const CpuFeatures& cpu = cpu_features();
  return cpu.avx512f && cpu.avx512bw && N % 16 == 0;
}

// Those rows in one kernel where every operand is float32 or bfloat16 (else false: the
// loop below converts the rows).
bool ln_forward_avx512(const Tensor& x, const Tensor& residual, const Tensor& sum, const float* wp, const float* bp,
                       double eps, int64_t M, int64_t N, const Tensor& out, float* mean, float* rstd) {
  const bool add = residual.defined();
  for (const Tensor* t : {&x, &residual, &sum, &out})
    if ((add || (t != &residual && t != &sum)) && t->dtype() != kFloat32 && t->dtype() != kBFloat16) return false;
  const detail::LnRows p{x.raw_data(),
                         x.dtype() == kBFloat16,
                         add ? residual.raw_data() : nullptr,
                         add && residual.dtype() == kBFloat16,
                         add ? residual.numel() / N : 1,
                         add ? sum.raw_data() : nullptr,
                         add && sum.dtype() == kBFloat16,
                         wp,
                         bp,
                         eps,
                         N,
                         out.raw_data(),
                         out.dtype() == kBFloat16,
                         mean,
                         rstd,
                         cpu_features().avx512_bf16};
  parallel_for(0, M, std::max<int64_t>(1, kGrain / N), [&](int64_t r0, int64_t r1) {
    thread_local std::vector<float> buf;
    if (buf.size() < static_cast<size_t>(N + 16)) buf.resize(static_cast<size_t>(N + 16));
    const auto at = reinterpret_cast<uintptr_t>(buf.data());
    detail::ln_forward_rows(p, r0, r1, reinterpret_cast<float*>((at + 63) / 64 * 64));
  });
  return true;
}

// The rows of layer_norm(x), or with a residual of layer_norm(sum = x + residual) writing
// the sum too (row r adds residual row r % R): the sum rounds to its dtype before the
// statistics, so the result is the separate add's and layer_norm's, bit for bit.
template <class C>
void ln_forward(const Tensor& x, const Tensor& residual, const Tensor& sum, const C* wp, const C* bp, double eps,
                int64_t M, int64_t N, const Tensor& out, C* mean, C* rstd) {
  bool vectors = false;
  if constexpr (std::is_same_v<C, float>) {
    vectors = avx512_rows(N);
    if (vectors && ln_forward_avx512(x, residual, sum, wp, bp, eps, M, N, out, mean, rstd)) return;
  }
  const DType xdt = x.dtype(), odt = out.dtype();
  const void* xp = x.raw_data();
  void* op = out.raw_data();
  const bool direct = odt == dtype_of<C>;  // rows written in place, else converted from a buffer
  const bool add = residual.defined();
  const DType rdt = add ? residual.dtype() : xdt, sdt = add ? sum.dtype() : xdt;
  const void* rp = add ? residual.raw_data() : nullptr;
  void* sp = add ? sum.raw_data() : nullptr;
  const int64_t R = add ? residual.numel() / N : 1;
  parallel_for(0, M, std::max<int64_t>(1, kGrain / std::max<int64_t>(N, 1)), [&](int64_t r0, int64_t r1) {
    const auto n = static_cast<size_t>(N);
    std::vector<C> xbuf(xdt == dtype_of<C> ? 0 : n), ybuf(direct ? 0 : n), rbuf(add && rdt != dtype_of<C> ? n : 0),
        sbuf(add && sdt != dtype_of<C> ? n : 0);
    for (int64_t r = r0; r < r1; ++r) {
      const C* xr = load_row<C>(xp, xdt, r * N, N, xbuf.data());
      const C* rr = nullptr;  // a residual row the row kernel adds (into sr) itself
      C* sr = nullptr;
      if (add) {
        rr = load_row<C>(rp, rdt, (r % R) * N, N, rbuf.data());
        if (sdt == dtype_of<C>) {
          sr = static_cast<C*>(sp) + r * N;
        } else {  // a 16-bit sum: rounded first, then read back as the norm's input
          for (int64_t j = 0; j < N; ++j) sbuf[j] = xr[j] + rr[j];
          store_row<C>(sbuf.data(), sp, sdt, r * N, N);
          xr = load_row<C>(sp, sdt, r * N, N, sbuf.data());
          rr = nullptr;
        }
      }
      C* yr = direct ? static_cast<C*>(op) + r * N : ybuf.data();
      if constexpr (std::is_same_v<C, float>) {
        if (vectors) {  // float16 operands: converted here, the row on ln_forward_avx512's kernel
          if (rr) {
            for (int64_t j = 0; j < N; ++j) sr[j] = xr[j] + rr[j];
            xr = sr;
          }
          detail::ln_finish_row(xr, N, wp, bp, eps, yr, mean + r, rstd + r);
        } else {
          ln_forward_row_f32(xr, rr, sr, N, wp, bp, eps, yr, mean + r, rstd + r);
        }
      } else
        ln_forward_row(xr, rr, sr, N, wp, bp, eps, yr, mean + r, rstd + r);
      if (!direct) store_row<C>(ybuf.data(), op, odt, r * N, N);
    }
  });
}

// One row of the backward: dw += g xhat, db += g, and (dx given) dx = rstd (gw - mean(gw)
// - xhat mean(gw xhat)) with gw = g w. xhat and gw: N elements of scratch. One pass takes
// xhat, gw, dw, db and both row sums (an OpenMP simd reduction: vector lanes of C, as
// PyTorch's CPU kernel sums; the sums in double, in passes of their own, read each row
// twice more), a second writes dx.
template <class C>
[[gnu::always_inline]] inline void ln_backward_row(const C* xr, const C* gr, C m, C s, const C* wp, int64_t N, C* dwc,
                                                   C* dbc, C* dx, C* xhat, C* gw) {
  C sq = 0, sqx = 0;
#pragma omp simd reduction(+ : sq, sqx)
  for (int64_t j = 0; j < N; ++j) {
    const C xh = (xr[j] - m) * s, q = wp ? gr[j] * wp[j] : gr[j];
    xhat[j] = xh;
    gw[j] = q;
    if (dwc) dwc[j] += gr[j] * xh;
    if (dbc) dbc[j] += gr[j];
    sq += q;
    sqx += q * xh;
  }
  if (!dx) return;
  const C a = sq / static_cast<C>(N), b = sqx / static_cast<C>(N);
  for (int64_t j = 0; j < N; ++j) dx[j] = s * (gw[j] - a - xhat[j] * b);
}

TC_SIMD_CLONES void ln_backward_row_f32(const float* xr, const float* gr, float m, float s, const float* wp, int64_t N,
                                        float* dwc, float* dbc, float* dx, float* xhat, float* gw) {
  ln_backward_row(xr, gr, m, s, wp, N, dwc, dbc, dx, xhat, gw);
}

// dx[j] += p[j]: a loop of its own, so that dx is rounded before the addition (not fused
// into the multiply that made it).
template <class C>
[[gnu::noinline]] void add_row(C* dx, const C* p, int64_t N) {
  for (int64_t j = 0; j < N; ++j) dx[j] += p[j];
}

template <class C>
void ln_backward(const Tensor& g, const Tensor& x, const C* mean, const C* rstd, const C* wp, int64_t M, int64_t N,
                 const Tensor& dx, const Tensor& dx_plus, std::vector<C>* dw, std::vector<C>* db) {
  const DType gdt = g.dtype(), xdt = x.dtype();
  const void* gp = g.raw_data();
  const void* xp = x.raw_data();
  void* dxp = dx.defined() ? dx.raw_data() : nullptr;
  const bool direct = dx.defined() && dx.dtype() == dtype_of<C>;  // dx rows written in place
  TC_CHECK(!dx_plus.defined() ||
               (direct && dx_plus.dtype() == dx.dtype() && dx_plus.is_contiguous() && dx_plus.numel() == dx.numel()),
           "layer_norm", "internal: a gradient to add into dx must be contiguous, of dx's size and compute dtype");
  const C* plus = dx_plus.defined() ? static_cast<const C*>(dx_plus.raw_data()) : nullptr;
  const int64_t chunks = num_chunks(M, N);
  // Per-chunk partial sums for dw/db: no atomics, deterministic combination order.
  std::vector<C> dw_part(dw ? static_cast<size_t>(chunks * N) : 0, C(0));
  std::vector<C> db_part(db ? static_cast<size_t>(chunks * N) : 0, C(0));
  parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
    const auto n = static_cast<size_t>(N);
    std::vector<C> xbuf(xdt == dtype_of<C> ? 0 : n), gbuf(gdt == dtype_of<C> ? 0 : n), xhat(n), gw(n),
        dxbuf(direct ? 0 : n);
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t r0 = c * M / chunks, r1 = (c + 1) * M / chunks;
      C* dwc = dw ? dw_part.data() + c * N : nullptr;
      C* dbc = db ? db_part.data() + c * N : nullptr;
      for (int64_t r = r0; r < r1; ++r) {
        const C* xr = load_row<C>(xp, xdt, r * N, N, xbuf.data());
        const C* gr = load_row<C>(gp, gdt, r * N, N, gbuf.data());
        C* dxr = !dx.defined() ? nullptr : direct ? static_cast<C*>(dxp) + r * N : dxbuf.data();
        if constexpr (std::is_same_v<C, float>)
          ln_backward_row_f32(xr, gr, mean[r], rstd[r], wp, N, dwc, dbc, dxr, xhat.data(), gw.data());
        else
          ln_backward_row(xr, gr, mean[r], rstd[r], wp, N, dwc, dbc, dxr, xhat.data(), gw.data());
        if (plus) add_row(dxr, plus + r * N, N);  // the row is in L1
        if (dxr && !direct) store_row<C>(dxbuf.data(), dxp, dx.dtype(), r * N, N);
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

// ------------------------------------------------------------------ batch_norm

template <class C>
void bn_forward(const Tensor& x, const BnGeometry& geo, bool use_batch, const std::vector<C>& rm,
                const std::vector<C>& rv, const C* wp, const C* bp, double eps, const Tensor& out, C* mean_out,
                C* rstd_out, std::vector<double>& batch_var) {
  const DType xdt = x.dtype(), odt = out.dtype();
  const void* xp = x.raw_data();
  void* op = out.raw_data();
  const int64_t S = geo.S;
  const double count = static_cast<double>(geo.count());
  parallel_for(0, geo.Ch, std::max<int64_t>(1, kGrain / std::max<int64_t>(geo.count(), 1)),
               [&](int64_t c0, int64_t c1) {
                 std::vector<C> buf(static_cast<size_t>(S)), ybuf(static_cast<size_t>(S));
                 for (int64_t c = c0; c < c1; ++c) {
                   double mu, var;
                   if (use_batch) {
                     double s = 0;
                     for (int64_t n = 0; n < geo.B; ++n)
                       s += row_sum_double(load_row<C>(xp, xdt, geo.row(n, c), S, buf.data()), S);
                     mu = s / count;
                     double q = 0;
                     for (int64_t n = 0; n < geo.B; ++n)
                       q += row_sq_dev(load_row<C>(xp, xdt, geo.row(n, c), S, buf.data()), S, mu);
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
                   const double scale = rs * (wp ? static_cast<double>(wp[c]) : 1.0);
                   const C sc = static_cast<C>(scale);
                   const C sh = static_cast<C>((bp ? static_cast<double>(bp[c]) : 0.0) - mu * scale);
                   for (int64_t n = 0; n < geo.B; ++n) {
                     const C* xr = load_row<C>(xp, xdt, geo.row(n, c), S, buf.data());
                     for (int64_t j = 0; j < S; ++j) ybuf[j] = xr[j] * sc + sh;
                     store_row<C>(ybuf.data(), op, odt, geo.row(n, c), S);
                   }
                 }
               });
}

// running = (1 - momentum) running + momentum * batch statistic (the unbiased variance,
// PyTorch's convention), in double, rounding once to the buffer's dtype.
template <class C>
void bn_update_running(const Tensor& running_mean, const Tensor& running_var, const C* mean,
                       const std::vector<double>& batch_var, const BnGeometry& geo, double momentum) {
  const double n = static_cast<double>(geo.count());
  std::vector<double> old_m = to_compute_vector<double>(running_mean);
  std::vector<double> old_v = to_compute_vector<double>(running_var);
  for (int64_t c = 0; c < geo.Ch; ++c) {
    old_m[c] = (1.0 - momentum) * old_m[c] + momentum * static_cast<double>(mean[c]);
    old_v[c] = (1.0 - momentum) * old_v[c] + momentum * batch_var[c] * n / (n - 1.0);
  }
  for (const auto& [t, v] : {std::pair{&running_mean, &old_m}, std::pair{&running_var, &old_v}})
    store_block<double>(v->data(), static_cast<char*>(t->raw_data()),
                        t->stride(0) * static_cast<int64_t>(element_size(t->dtype())), t->dtype(), geo.Ch);
}

template <class C>
void bn_backward(const Tensor& g, const Tensor& x, const BnGeometry& geo, bool use_batch, const C* mean, const C* rstd,
                 const C* wp, const Tensor& dx, std::vector<C>* dw, std::vector<C>* db) {
  const DType gdt = g.dtype(), xdt = x.dtype();
  const void* gp = g.raw_data();
  const void* xp = x.raw_data();
  const int64_t S = geo.S;
  const double count = static_cast<double>(geo.count());
  if (dw) dw->assign(static_cast<size_t>(geo.Ch), C(0));
  if (db) db->assign(static_cast<size_t>(geo.Ch), C(0));
  parallel_for(0, geo.Ch, std::max<int64_t>(1, kGrain / std::max<int64_t>(geo.count(), 1)),
               [&](int64_t c0, int64_t c1) {
                 std::vector<C> xbuf(static_cast<size_t>(S)), gbuf(static_cast<size_t>(S)), tmp(static_cast<size_t>(S));
                 for (int64_t c = c0; c < c1; ++c) {
                   const C m = mean[c], s = rstd[c];
                   double sum_g = 0, sum_gx = 0;  // sum g and sum g*xhat
                   for (int64_t n = 0; n < geo.B; ++n) {
                     const C* xr = load_row<C>(xp, xdt, geo.row(n, c), S, xbuf.data());
                     const C* gr = load_row<C>(gp, gdt, geo.row(n, c), S, gbuf.data());
                     for (int64_t j = 0; j < S; ++j) tmp[j] = gr[j] * ((xr[j] - m) * s);
                     sum_g += row_sum_double(gr, S);
                     sum_gx += row_sum_double(tmp.data(), S);
                   }
                   if (dw) (*dw)[c] = static_cast<C>(sum_gx);
                   if (db) (*db)[c] = static_cast<C>(sum_g);
                   if (!dx.defined()) continue;
                   const C k = static_cast<C>(wp ? static_cast<double>(wp[c]) * s : static_cast<double>(s));
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

void layer_norm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, int64_t M, int64_t N, double eps) {
  add_layer_norm_forward(Tensor(), out, mean, rstd, x, Tensor(), weight, bias, M, N, eps);
}

void add_layer_norm_forward(const Tensor& sum, const Tensor& out, const Tensor& mean, const Tensor& rstd,
                            const Tensor& x, const Tensor& residual, const Tensor& weight, const Tensor& bias,
                            int64_t M, int64_t N, double eps) {
  if (M == 0 || N == 0) return;
  dispatch_compute(residual.defined() ? sum.dtype() : x.dtype(), [&]<class C>() {
    std::vector<C> wbuf, bbuf;
    const C* wp = compute_data<C>(weight, N, wbuf);
    const C* bp = compute_data<C>(bias, N, bbuf);
    ln_forward<C>(x, residual, sum, wp, bp, eps, M, N, out, mean.data_ptr<C>(), rstd.data_ptr<C>());
  });
}

void layer_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& g, const Tensor& x,
                         const Tensor& mean, const Tensor& rstd, const Tensor& weight, int64_t M, int64_t N,
                         const Tensor& dx_plus) {
  if (M == 0 || N == 0) {
    for (const Tensor* t : {&dx, &dweight, &dbias})
      if (t->defined()) fill_zero(*t);
    return;
  }
  dispatch_compute(x.dtype(), [&]<class C>() {
    std::vector<C> wbuf, dw, db;
    const C* wp = compute_data<C>(weight, N, wbuf);
    ln_backward<C>(g, x, mean.data_ptr<C>(), rstd.data_ptr<C>(), wp, M, N, dx, dx_plus,
                   dweight.defined() ? &dw : nullptr, dbias.defined() ? &db : nullptr);
    store_vector<C>(dweight, dw);
    store_vector<C>(dbias, db);
  });
}

void batch_norm_forward(const Tensor& out, const Tensor& mean, const Tensor& rstd, const Tensor& x,
                        const Tensor& weight, const Tensor& bias, const Tensor& running_mean, const Tensor& running_var,
                        const BnGeometry& geo, bool use_batch, bool update_running, double momentum, double eps) {
  dispatch_compute(x.dtype(), [&]<class C>() {
    std::vector<C> wbuf, bbuf, rm, rv;
    const C* wp = compute_data<C>(weight, geo.Ch, wbuf);
    const C* bp = compute_data<C>(bias, geo.Ch, bbuf);
    if (!use_batch) {
      rm = to_compute_vector<C>(running_mean);
      rv = to_compute_vector<C>(running_var);
    }
    std::vector<double> batch_var(static_cast<size_t>(geo.Ch), 0.0);
    bn_forward<C>(x, geo, use_batch, rm, rv, wp, bp, eps, out, mean.data_ptr<C>(), rstd.data_ptr<C>(), batch_var);
    if (update_running) bn_update_running<C>(running_mean, running_var, mean.data_ptr<C>(), batch_var, geo, momentum);
  });
}

void batch_norm_backward(const Tensor& dx, const Tensor& dweight, const Tensor& dbias, const Tensor& g, const Tensor& x,
                         const Tensor& mean, const Tensor& rstd, const Tensor& weight, const BnGeometry& geo,
                         bool use_batch) {
  dispatch_compute(x.dtype(), [&]<class C>() {
    std::vector<C> wbuf, dw, db;
    const C* wp = compute_data<C>(weight, geo.Ch, wbuf);
    bn_backward<C>(g, x, geo, use_batch, mean.data_ptr<C>(), rstd.data_ptr<C>(), wp, dx,
                   dweight.defined() ? &dw : nullptr, dbias.defined() ? &db : nullptr);
    store_vector<C>(dweight, dw);
    store_vector<C>(dbias, db);
  });
}

}  // namespace tc::cpu
