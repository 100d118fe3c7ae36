// softmax and log_softmax along any dim, with their backward formulas.
//
// One pass per row: load (widening 16-bit to float32), subtract the row max, exp/sum,
// normalize, store once in the input dtype. Every layout runs the same row math; rows
// along a non-last or non-contiguous dim are loaded through ops::RowView (grouped where
// adjacent), so the output is written once and 16-bit data is widened per row only.
#include <cmath>
#include <vector>

#include "ops/pointwise.h"
#include "ops/rows.h"
#include "ops/impl.h"

namespace tc::impl {

namespace {

void check_softmax_input(const char* op, const Tensor& x) {
  TC_CHECK(x.defined(), op, "got an undefined tensor");
  TC_CHECK(is_floating(x.dtype()), op, "expected a floating tensor, got ", dtype_name(x.dtype()), " of shape ",
           shape_str(x.sizes()));
}

// Forward: y = softmax(x) or log_softmax(x) along dim, y contiguous with x's shape.
template <bool Log>
Tensor softmax_forward(const Tensor& x, int64_t dim) {
  Tensor y = make_tensor(x.sizes(), x.dtype(), x.device());
  if (x.numel() == 0) return y;
  const ops::RowView xv = ops::row_view(x, dim);
  const ops::RowView yv = ops::row_view(y, dim);
  ops::with_compute_type(x.dtype(), [&]<class C>(C) {
    ops::parallel_rows(xv.rows, xv.len, [&](int64_t r0, int64_t r1) {
      const int64_t n = xv.len;
      auto math = [n](const C* x, C* o) {
        if constexpr (Log) {
          const ops::LogSumExp<C> l = ops::row_logsumexp(x, n);
          for (int64_t i = 0; i < n; ++i) o[i] = (x[i] - l.max) - l.log_sum;
        } else {
          const C inv = C(1) / ops::exp_shifted(x, o, n, ops::row_max(x, n), C(0), C(1));
          for (int64_t i = 0; i < n; ++i) o[i] *= inv;
        }
      };
      std::vector<C> buf;
      ops::for_row_groups(xv, r0, r1, [&](int64_t r, int64_t w) {
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
  return y;
}

// Backward, one pass per row over (g, y):
//   softmax:     gx = y * (g - sum(g * y))
//   log_softmax: gx = g - exp(y) * sum(g)
template <bool Log>
Tensor softmax_backward(const Tensor& g, const Tensor& y, int64_t dim) {
  Tensor gx = make_tensor(y.sizes(), y.dtype(), y.device());
  if (y.numel() == 0) return gx;
  const ops::RowView gv = ops::row_view(g, dim);
  const ops::RowView yv = ops::row_view(y, dim);
  const ops::RowView ov = ops::row_view(gx, dim);
  ops::with_compute_type(y.dtype(), [&]<class C>(C) {
    ops::parallel_rows(yv.rows, yv.len, [&](int64_t r0, int64_t r1) {
      const int64_t n = yv.len;
      auto math = [n](const C* gr, const C* yr, C* o) {
        if constexpr (Log) {
          ops::exp_shifted(yr, o, n, C(0), C(0), ops::row_sum(gr, n));  // o = exp(y) * sum(g)
          for (int64_t i = 0; i < n; ++i) o[i] = gr[i] - o[i];
        } else {
          const C s = ops::row_dot(gr, yr, n);
          for (int64_t i = 0; i < n; ++i) o[i] = yr[i] * (gr[i] - s);
        }
      };
      std::vector<C> buf;
      ops::for_row_groups(yv, r0, r1, [&](int64_t r, int64_t w) {
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
  return gx;
}

template <bool Log>
Tensor softmax_op(const char* op, const Tensor& x, int64_t dim) {
  check_softmax_input(op, x);
  const int64_t d = wrap_dim(dim, x.dim(), op);
  Tensor y = softmax_forward<Log>(x, d);
  return autograd::record(op, y, {x}, [y = y.detach(), d](const Tensor& g, const std::vector<bool>&) {
    return std::vector<Tensor>{softmax_backward<Log>(g.to(y.dtype()), y, d)};
  });
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_op<false>("softmax", x, dim); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_op<true>("log_softmax", x, dim); }

}  // namespace tc::impl
