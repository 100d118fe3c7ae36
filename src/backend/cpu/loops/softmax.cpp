// softmax and log_softmax rows: load (widening 16-bit to float32), subtract the row max,
// exp/sum, normalize, store once in the output dtype. Every layout runs the same row
// math; rows along a non-last or non-contiguous dim are loaded through RowView (grouped
// where adjacent), so the output is written once and 16-bit data is widened per row only.
#include "backend/cpu/loops/softmax.h"

#include <vector>

#include "backend/cpu/loops/rows.h"

namespace tc::cpu {

namespace {

template <bool Log>
void forward(const Tensor& y, const Tensor& x, int64_t dim) {
  if (x.numel() == 0) return;
  const RowView xv = row_view(x, dim);
  const RowView yv = row_view(y, dim);
  with_compute_type(x.dtype(), [&]<class C>(C) {
    parallel_rows(xv.rows, xv.len, [&](int64_t r0, int64_t r1) {
      const int64_t n = xv.len;
      auto math = [n](const C* x, C* o) {
        if constexpr (Log) {
          const LogSumExp<C> l = row_logsumexp(x, n);
          for (int64_t i = 0; i < n; ++i) o[i] = (x[i] - l.max) - l.log_sum;
        } else {
          const C inv = C(1) / exp_shifted(x, o, n, row_max(x, n), C(0), C(1));
          for (int64_t i = 0; i < n; ++i) o[i] *= inv;
        }
      };
      std::vector<C> buf;
      for_row_groups(xv, r0, r1, [&](int64_t r, int64_t w) {
        buf.resize(static_cast<size_t>(2 * w * n));
        if (w == 1) {
          C* o = yv.out<C>(r, buf.data() + n);
          math(xv.load<C>(r, buf.data()), o);
          yv.store<C>(r, o);
          return;
        }
        C* in = buf.data();
        C* out = in + w * n;
        xv.load_rows<C>(r, w, in);
        for (int64_t j = 0; j < w; ++j) math(in + j * n, out + j * n);
        yv.store_rows<C>(r, w, out);
      });
    });
  });
}

template <bool Log>
void backward(const Tensor& gx, const Tensor& g, const Tensor& y, int64_t dim) {
  if (y.numel() == 0) return;
  const RowView gv = row_view(g, dim);
  const RowView yv = row_view(y, dim);
  const RowView ov = row_view(gx, dim);
  with_compute_type(y.dtype(), [&]<class C>(C) {
    parallel_rows(yv.rows, yv.len, [&](int64_t r0, int64_t r1) {
      const int64_t n = yv.len;
      auto math = [n](const C* gr, const C* yr, C* o) {
        if constexpr (Log) {
          exp_shifted(yr, o, n, C(0), C(0), row_sum(gr, n));  // o = exp(y) * sum(g)
          for (int64_t i = 0; i < n; ++i) o[i] = gr[i] - o[i];
        } else {
          const C s = row_dot(gr, yr, n);
          for (int64_t i = 0; i < n; ++i) o[i] = yr[i] * (gr[i] - s);
        }
      };
      std::vector<C> buf;
      for_row_groups(yv, r0, r1, [&](int64_t r, int64_t w) {
        buf.resize(static_cast<size_t>(3 * w * n));
        C* gb = buf.data();
        C* yb = gb + w * n;
        C* ob = yb + w * n;
        if (w == 1) {
          C* o = ov.out<C>(r, ob);
          math(gv.load<C>(r, gb), yv.load<C>(r, yb), o);
          ov.store<C>(r, o);
          return;
        }
        gv.load_rows<C>(r, w, gb);
        yv.load_rows<C>(r, w, yb);
        for (int64_t j = 0; j < w; ++j) math(gb + j * n, yb + j * n, ob + j * n);
        ov.store_rows<C>(r, w, ob);
      });
    });
  });
}

}  // namespace

void softmax_forward(const Tensor& y, const Tensor& x, int64_t dim, bool log) {
  log ? forward<true>(y, x, dim) : forward<false>(y, x, dim);
}

void softmax_backward(const Tensor& gx, const Tensor& g, const Tensor& y, int64_t dim, bool log) {
  log ? backward<true>(gx, g, y, dim) : backward<false>(gx, g, y, dim);
}

}  // namespace tc::cpu
