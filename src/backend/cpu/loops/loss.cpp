// Class-index loss kernels. cross_entropy reads each row of logits once in the forward
// (log-sum-exp and the picked logit together) and keeps only one log-sum-exp per row for
// the backward, which rebuilds softmax on the fly: grad = (softmax - onehot) * weight * g /
// normalizer, also one pass.
#include "backend/cpu/loops/loss.h"

#include <algorithm>
#include <cstring>

#include "backend/cpu/loops/rows.h"

namespace tc::cpu {

namespace {

// Writes the row losses to out as described in loss.h.
void store_losses(const Tensor& out, const std::vector<double>& loss, bool reduce, double divisor) {
  const DType dt = out.dtype();
  if (!reduce) {
    store_block<double>(loss.data(), static_cast<char*>(out.raw_data()), static_cast<int64_t>(element_size(dt)), dt,
                        static_cast<int64_t>(loss.size()));
    return;
  }
  double total = 0;
  for (double v : loss) total += v;
  total /= divisor;  // 0 / 0 = NaN when every target is ignored (PyTorch)
  store_block<double>(&total, static_cast<char*>(out.raw_data()), 1, dt, 1);
}

// The incoming gradient as one scale per row.
template <class C>
std::vector<C> row_scales(const Tensor& g_rows, double g_scale, int64_t rows) {
  if (!g_rows.defined()) return std::vector<C>(static_cast<size_t>(rows), static_cast<C>(g_scale));
  std::vector<C> out(static_cast<size_t>(rows));
  load_block<C>(static_cast<const char*>(g_rows.raw_data()), static_cast<int64_t>(element_size(g_rows.dtype())),
                g_rows.dtype(), out.data(), rows);
  return out;
}

}  // namespace

void read_class_targets(ClassTargets& t, const Tensor& target, const char* op) {
  const Tensor tt = as_contiguous(target);
  const int64_t n = tt.numel();
  t.target.resize(static_cast<size_t>(n));
  if (n > 0 && tt.dtype() == kInt64) {
    std::memcpy(t.target.data(), tt.raw_data(), static_cast<size_t>(n) * sizeof(int64_t));
  } else if (n > 0) {
    const int32_t* p = tt.data_ptr<int32_t>();
    for (int64_t i = 0; i < n; ++i) t.target[i] = p[i];
  }
  for (int64_t v : t.target)
    TC_CHECK(v == t.ignore_index || (v >= 0 && v < t.classes), op, "target ", v, " is out of bounds for ", t.classes,
             " classes");
}

double class_weight_sum(const ClassTargets& t) {
  double s = 0;
  for (int64_t k : t.target)
    if (k != t.ignore_index) s += t.weight.empty() ? 1.0 : t.weight[static_cast<size_t>(k)];
  return s;
}

void cross_entropy_forward(const Tensor& out, const Tensor& lse_out, const Tensor& input, const ClassTargets& cl,
                           double label_smoothing, bool reduce, double divisor) {
  const RowView xv = row_view(input, cl.cdim);
  const int64_t rows = static_cast<int64_t>(cl.target.size());
  const int64_t ncls = cl.classes;
  const double eps = label_smoothing;
  std::vector<double> loss(static_cast<size_t>(rows));
  with_compute_type(input.dtype(), [&]<class C>(C) {
    C* lse = lse_out.data_ptr<C>();  // (max, log_sum) per row
    // One row: log-sum-exp and the loss together, from the row as loaded.
    auto math = [&](int64_t r, const C* b) {
      const int64_t t = cl.target[r];
      if (t == cl.ignore_index) {
        loss[r] = 0;
        lse[2 * r] = lse[2 * r + 1] = 0;
        return;
      }
      const LogSumExp<C> l = row_logsumexp(b, ncls);
      lse[2 * r] = l.max;
      lse[2 * r + 1] = l.log_sum;
      // -log p_k = log_sum - (x_k - max), exact at any logit scale
      auto nlp = [&](int64_t k) { return static_cast<double>(l.log_sum - (b[k] - l.max)); };
      const double wt = cl.weight.empty() ? 1.0 : cl.weight[t];
      double v = wt * nlp(t);
      if (eps > 0) {
        double smooth = 0;  // sum_c w_c * (-log p_c): all terms >= 0, no cancellation
        if (cl.weight.empty())
          for (int64_t k = 0; k < ncls; ++k) smooth += nlp(k);
        else
          for (int64_t k = 0; k < ncls; ++k) smooth += cl.weight[k] * nlp(k);
        v = (1 - eps) * v + eps / static_cast<double>(ncls) * smooth;
      }
      loss[r] = v;
    };
    parallel_rows(rows, ncls, [&](int64_t r0, int64_t r1) {
      std::vector<C> buf;
      for_row_groups(xv, r0, r1, [&](int64_t r, int64_t w) {
        buf.resize(static_cast<size_t>(w * ncls));
        if (w == 1) return math(r, xv.load<C>(r, buf.data()));
        xv.load_rows<C>(r, w, buf.data());
        for (int64_t j = 0; j < w; ++j) math(r + j, buf.data() + j * ncls);
      });
    });
  });
  store_losses(out, loss, reduce, divisor);
}

void cross_entropy_backward(const Tensor& gx, const Tensor& input, const Tensor& lse_in, const ClassTargets& cl,
                            const Tensor& g_rows, double g_scale, double label_smoothing) {
  const int64_t rows = static_cast<int64_t>(cl.target.size());
  const int64_t ncls = cl.classes;
  const double eps = label_smoothing;
  double wall = static_cast<double>(ncls);  // sum of all class weights
  if (!cl.weight.empty()) {
    wall = 0;
    for (double w : cl.weight) wall += w;
  }
  with_compute_type(input.dtype(), [&]<class C>(C) {
    const C* lse = lse_in.data_ptr<C>();
    const std::vector<C> scale = row_scales<C>(g_rows, g_scale, rows);
    const RowView xv = row_view(input, cl.cdim);
    const RowView gv = row_view(gx, cl.cdim);
    const C smooth_k = static_cast<C>(eps / static_cast<double>(ncls));
    // One row: o = (1-eps) w_t s (p - onehot) + eps/C s (wall p - w), p rebuilt from lse.
    auto math = [&](int64_t r, const C* b, C* o) {
      const int64_t t = cl.target[r];
      if (t == cl.ignore_index) {
        std::fill(o, o + ncls, C(0));
        return;
      }
      const C s = scale[r];
      const LogSumExp<C> l{lse[2 * r], lse[2 * r + 1]};
      const C wt = cl.weight.empty() ? C(1) : static_cast<C>(cl.weight[t]);
      const C a = s * (static_cast<C>(1 - eps) * wt + smooth_k * static_cast<C>(wall));
      exp_shifted(b, o, ncls, l.max, l.log_sum, a);  // a * softmax
      o[t] -= s * static_cast<C>(1 - eps) * wt;
      if (eps > 0) {
        if (cl.weight.empty())
          for (int64_t k = 0; k < ncls; ++k) o[k] -= s * smooth_k;
        else
          for (int64_t k = 0; k < ncls; ++k) o[k] -= s * smooth_k * static_cast<C>(cl.weight[k]);
      }
    };
    parallel_rows(rows, ncls, [&](int64_t r0, int64_t r1) {
      std::vector<C> buf;
      for_row_groups(xv, r0, r1, [&](int64_t r, int64_t w) {
        buf.resize(static_cast<size_t>(2 * w * ncls));
        C* in = buf.data();
        C* out = in + w * ncls;
        if (w == 1) {
          C* o = gv.out<C>(r, out);
          math(r, xv.load<C>(r, in), o);
          gv.store<C>(r, o);
          return;
        }
        xv.load_rows<C>(r, w, in);
        for (int64_t j = 0; j < w; ++j) math(r + j, in + j * ncls, out + j * ncls);
        gv.store_rows<C>(r, w, out);
      });
    });
  });
}

void nll_loss_forward(const Tensor& out, const Tensor& input, const ClassTargets& cl, bool reduce, double divisor) {
  const RowView xv = row_view(input, cl.cdim);
  const int64_t rows = static_cast<int64_t>(cl.target.size());
  std::vector<double> loss(static_cast<size_t>(rows));
  with_compute_type(input.dtype(), [&]<class C>(C) {
    for (int64_t r = 0; r < rows; ++r) {  // one element per row: too little work to split
      const int64_t t = cl.target[r];
      if (t == cl.ignore_index) {
        loss[r] = 0;
        continue;
      }
      C v;
      load_block<C>(xv.row(r) + t * xv.byte_stride(), 1, xv.dtype, &v, 1);
      loss[r] = -(cl.weight.empty() ? 1.0 : cl.weight[t]) * static_cast<double>(v);
    }
  });
  store_losses(out, loss, reduce, divisor);
}

void nll_loss_backward(const Tensor& gx, const ClassTargets& cl, const Tensor& g_rows, double g_scale) {
  const int64_t rows = static_cast<int64_t>(cl.target.size());
  fill_zero(gx);
  const RowView gv = row_view(gx, cl.cdim);
  const std::vector<double> scale = row_scales<double>(g_rows, g_scale, rows);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = cl.target[r];
    if (t == cl.ignore_index) continue;
    const double v = -(cl.weight.empty() ? 1.0 : cl.weight[t]) * scale[r];
    store_block<double>(&v, gv.row(r) + t * gv.byte_stride(), 1, gv.dtype, 1);
  }
}

// ---- the kernels of the table

namespace {
const ClassTargets& host_targets(const backend::ClassTargets& t) {
  return *static_cast<const ClassTargets*>(t.host.get());
}
// The divisor of reduction='mean' the forward stored, 1 for the other reductions.
double stored_divisor(const Tensor& divisor) { return divisor.defined() ? *divisor.data_ptr<double>() : 1.0; }
}  // namespace

backend::ClassTargets class_targets(const Tensor& target, const Tensor& weight, int64_t cdim, int64_t classes,
                                    int64_t ignore_index, const char* op) {
  auto host = std::make_shared<ClassTargets>();
  host->cdim = cdim;
  host->classes = classes;
  host->ignore_index = ignore_index;
  if (weight.defined()) host->weight = weight.to_vector();
  read_class_targets(*host, target, op);
  backend::ClassTargets t;
  t.cdim = cdim;
  t.classes = classes;
  t.ignore_index = ignore_index;
  t.weight = weight;
  t.host = std::move(host);
  return t;
}

void cross_entropy_forward(const Tensor& out, const Tensor& lse, const Tensor& divisor, const Tensor& input,
                           const backend::ClassTargets& t, double label_smoothing, bool reduce) {
  const ClassTargets& h = host_targets(t);
  const double d = divisor.defined() ? class_weight_sum(h) : 1.0;
  if (divisor.defined()) *divisor.data_ptr<double>() = d;
  cross_entropy_forward(out, lse, input, h, label_smoothing, reduce, d);
}

void cross_entropy_backward(const Tensor& gx, const Tensor& input, const Tensor& lse, const backend::ClassTargets& t,
                            const Tensor& g, bool per_row, const Tensor& divisor, double label_smoothing) {
  if (per_row)
    cross_entropy_backward(gx, input, lse, host_targets(t), g.contiguous(), 0.0, label_smoothing);
  else
    cross_entropy_backward(gx, input, lse, host_targets(t), Tensor(), g.item_double() / stored_divisor(divisor),
                           label_smoothing);
}

void nll_loss_forward(const Tensor& out, const Tensor& divisor, const Tensor& input, const backend::ClassTargets& t,
                      bool reduce) {
  const ClassTargets& h = host_targets(t);
  const double d = divisor.defined() ? class_weight_sum(h) : 1.0;
  if (divisor.defined()) *divisor.data_ptr<double>() = d;
  nll_loss_forward(out, input, h, reduce, d);
}

void nll_loss_backward(const Tensor& gx, const backend::ClassTargets& t, const Tensor& g, bool per_row,
                       const Tensor& divisor) {
  if (per_row)
    nll_loss_backward(gx, host_targets(t), g.contiguous(), 0.0);
  else
    nll_loss_backward(gx, host_targets(t), Tensor(), g.item_double() / stored_divisor(divisor));
}

}  // namespace tc::cpu
