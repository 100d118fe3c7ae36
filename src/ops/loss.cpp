// Class-index losses: cross_entropy (fused log-softmax + nll) and nll_loss, with PyTorch
// semantics for class weights, ignore_index, reductions and label smoothing.
//
// cross_entropy reads each row of logits once in the forward (log-sum-exp and the picked
// logit together) and keeps only one log-sum-exp per row for the backward, which rebuilds
// softmax on the fly: grad = (softmax - onehot) * weight * g / normalizer, also one pass.
// Per-row losses are summed serially in float64 so results do not depend on the thread count.
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "ops/pointwise.h"
#include "ops/rows.h"
#include "ops/impl.h"

namespace tc::impl {

namespace {

// Everything the class-index losses share once the inputs are checked.
struct ClassLoss {
  int64_t cdim = 0;              // the class dim of the input (1, or 0 for unbatched (C))
  int64_t classes = 0;
  std::vector<int64_t> target;   // one per row, row-major over the non-class dims
  std::vector<double> weight;    // empty: all ones
  Shape loss_shape;              // shape of reduction='none'
};

ClassLoss check_class_loss(const char* op, const Tensor& input, const Tensor& target, const Tensor& weight,
                           int64_t ignore_index) {
  TC_CHECK(input.defined() && target.defined(), op, "got an undefined input or target tensor");
  TC_CHECK(is_floating(input.dtype()), op, "expected floating input, got ", dtype_name(input.dtype()),
           " of shape ", shape_str(input.sizes()));
  TC_CHECK(input.dim() >= 1, op, "expected input of shape (C), (N, C) or (N, C, d1, ...), got a 0-d tensor");
  TC_CHECK(target.dtype() == kInt64 || target.dtype() == kInt32, op,
           "expected target of dtype int64 (class indices), got ", dtype_name(target.dtype()), " of shape ",
           shape_str(target.sizes()));
  TC_CHECK(input.device() == target.device(), op, "expected input and target on the same device, got ",
           input.device(), " and ", target.device());
  ClassLoss c;
  c.cdim = input.dim() == 1 ? 0 : 1;
  c.classes = input.size(c.cdim);
  c.loss_shape = input.sizes();
  c.loss_shape.erase(c.loss_shape.begin() + c.cdim);
  TC_CHECK(target.sizes() == c.loss_shape, op, "expected target of shape ", shape_str(c.loss_shape),
           " for input of shape ", shape_str(input.sizes()), ", got target of shape ", shape_str(target.sizes()));
  if (weight.defined()) {
    TC_CHECK(is_floating(weight.dtype()) && weight.dim() == 1 && weight.size(0) == c.classes, op,
             "expected a floating weight of shape ", shape_str({c.classes}), " for ", c.classes, " classes, got ",
             dtype_name(weight.dtype()), " of shape ", shape_str(weight.sizes()));
    c.weight = weight.to_vector();
  }
  const Tensor t = target.contiguous();
  const int64_t n = t.numel();
  c.target.resize(static_cast<size_t>(n));
  if (n > 0 && t.dtype() == kInt64) {
    std::memcpy(c.target.data(), t.raw_data(), static_cast<size_t>(n) * sizeof(int64_t));
  } else if (n > 0) {
    const int32_t* p = t.data_ptr<int32_t>();
    for (int64_t i = 0; i < n; ++i) c.target[i] = p[i];
  }
  for (int64_t v : c.target)
    TC_CHECK(v == ignore_index || (v >= 0 && v < c.classes), op, "target ", v, " is out of bounds for ",
             c.classes, " classes");
  return c;
}

// Reduces per-row losses; `wsum` is the mean's divisor (sum of picked weights, or count).
Tensor reduce_rows(const std::vector<double>& loss, Reduction reduction, double wsum, const Shape& none_shape,
                   DType dt, Device device) {
  if (reduction == kNone) {
    Tensor out = make_tensor(none_shape, dt, device);
    cpu::store_block<double>(loss.data(), static_cast<char*>(out.raw_data()),
                             static_cast<int64_t>(element_size(dt)), dt, static_cast<int64_t>(loss.size()));
    return out;
  }
  double total = 0;
  for (double v : loss) total += v;
  if (reduction == kMean) total /= wsum;  // 0 / 0 = NaN when every target is ignored (PyTorch)
  Tensor out = make_tensor({}, dt, device);
  cpu::store_block<double>(&total, static_cast<char*>(out.raw_data()), 1, dt, 1);
  return out;
}

// The divisor of reduction='mean': the summed weights of the non-ignored targets.
double mean_divisor(const ClassLoss& c, int64_t ignore_index) {
  double s = 0;
  for (int64_t t : c.target)
    if (t != ignore_index) s += c.weight.empty() ? 1.0 : c.weight[static_cast<size_t>(t)];
  return s;
}

// The incoming gradient as one scale per row: g / divisor for mean, g for sum, g[r] for none.
template <class C>
std::vector<C> row_scales(const Tensor& g, Reduction reduction, double divisor, int64_t rows) {
  if (reduction != kNone) {
    double s = g.item_double();
    if (reduction == kMean) s /= divisor;
    return std::vector<C>(static_cast<size_t>(rows), static_cast<C>(s));
  }
  std::vector<C> out(static_cast<size_t>(rows));
  const Tensor gc = g.contiguous();
  cpu::load_block<C>(static_cast<const char*>(gc.raw_data()), static_cast<int64_t>(element_size(gc.dtype())),
                     gc.dtype(), out.data(), rows);
  return out;
}

}  // namespace

Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight, int64_t ignore_index,
                     Reduction reduction, double label_smoothing) {
  const char* op = "cross_entropy";
  ClassLoss c = check_class_loss(op, input, target, weight, ignore_index);
  TC_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0, op, "label_smoothing must be in [0, 1], got ",
           label_smoothing);
  const ops::RowView xv = ops::row_view(input, c.cdim);
  const int64_t rows = static_cast<int64_t>(c.target.size());
  const int64_t ncls = c.classes;
  const double eps = label_smoothing;
  double wall = static_cast<double>(ncls);  // sum of all class weights
  if (!c.weight.empty()) {
    wall = 0;
    for (double w : c.weight) wall += w;
  }
  auto shared = std::make_shared<ClassLoss>(std::move(c));
  const ClassLoss& cl = *shared;
  std::vector<double> loss(static_cast<size_t>(rows));
  Tensor out = ops::with_compute_type(input.dtype(), [&]<class C>(C) {
    auto lse = std::make_shared<std::vector<ops::LogSumExp<C>>>(static_cast<size_t>(rows));
    // One row: log-sum-exp and the loss together, from the row as loaded.
    auto math = [&](int64_t r, const C* b) {
      const int64_t t = cl.target[r];
      if (t == ignore_index) {
        loss[r] = 0;
        (*lse)[r] = {0, 0};
        return;
      }
      const ops::LogSumExp<C> l = ops::row_logsumexp(b, ncls);
      (*lse)[r] = l;
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
    ops::parallel_rows(rows, ncls, [&](int64_t r0, int64_t r1) {
      std::vector<C> buf;
      ops::for_row_groups(xv, r0, r1, [&](int64_t r, int64_t w) {
        buf.resize(static_cast<size_t>(w * ncls));
        if (w == 1) return math(r, xv.load<C>(r, buf.data()));
        xv.load_rows<C>(r, w, buf.data());
        for (int64_t j = 0; j < w; ++j) math(r + j, buf.data() + j * ncls);
      });
    });
    const double divisor = reduction == kMean ? mean_divisor(cl, ignore_index) : 1.0;
    Tensor res = reduce_rows(loss, reduction, divisor, cl.loss_shape, input.dtype(), input.device());
    return autograd::record(
        op, res, {input},
        [x = input.detach(), shared, lse, reduction, divisor, ignore_index, eps, wall](
            const Tensor& g, const std::vector<bool>&) {
          const ClassLoss& cl = *shared;
          const int64_t rows = static_cast<int64_t>(cl.target.size());
          const int64_t ncls = cl.classes;
          const std::vector<C> scale = row_scales<C>(g, reduction, divisor, rows);
          Tensor gx = make_tensor(x.sizes(), x.dtype(), x.device());
          const ops::RowView xv = ops::row_view(x, cl.cdim);
          const ops::RowView gv = ops::row_view(gx, cl.cdim);
          const C smooth_k = static_cast<C>(eps / static_cast<double>(ncls));
          // One row: o = (1-eps) w_t s (p - onehot) + eps/C s (wall p - w), p rebuilt from lse.
          auto math = [&](int64_t r, const C* b, C* o) {
            const int64_t t = cl.target[r];
            if (t == ignore_index) {
              std::fill(o, o + ncls, C(0));
              return;
            }
            const C s = scale[r];
            const ops::LogSumExp<C> l = (*lse)[r];
            const C wt = cl.weight.empty() ? C(1) : static_cast<C>(cl.weight[t]);
            const C a = s * (static_cast<C>(1 - eps) * wt + smooth_k * static_cast<C>(wall));
            ops::exp_shifted(b, o, ncls, l.max, l.log_sum, a);  // a * softmax
            o[t] -= s * static_cast<C>(1 - eps) * wt;
            if (eps > 0) {
              if (cl.weight.empty())
                for (int64_t k = 0; k < ncls; ++k) o[k] -= s * smooth_k;
              else
                for (int64_t k = 0; k < ncls; ++k) o[k] -= s * smooth_k * static_cast<C>(cl.weight[k]);
            }
          };
          ops::parallel_rows(rows, ncls, [&](int64_t r0, int64_t r1) {
            std::vector<C> buf;
            ops::for_row_groups(xv, r0, r1, [&](int64_t r, int64_t w) {
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
          return std::vector<Tensor>{gx};
        });
  });
  return out;
}

Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight, int64_t ignore_index,
                Reduction reduction) {
  const char* op = "nll_loss";
  auto shared = std::make_shared<ClassLoss>(check_class_loss(op, input, target, weight, ignore_index));
  const ClassLoss& cl = *shared;
  const ops::RowView xv = ops::row_view(input, cl.cdim);
  const int64_t rows = static_cast<int64_t>(cl.target.size());
  std::vector<double> loss(static_cast<size_t>(rows));
  ops::with_compute_type(input.dtype(), [&]<class C>(C) {
    for (int64_t r = 0; r < rows; ++r) {  // one element per row: too little work to split
      const int64_t t = cl.target[r];
      if (t == ignore_index) {
        loss[r] = 0;
        continue;
      }
      C v;
      cpu::load_block<C>(xv.row(r) + t * xv.byte_stride(), 1, xv.dtype, &v, 1);
      loss[r] = -(cl.weight.empty() ? 1.0 : cl.weight[t]) * static_cast<double>(v);
    }
  });
  const double divisor = reduction == kMean ? mean_divisor(cl, ignore_index) : 1.0;
  Tensor res = reduce_rows(loss, reduction, divisor, cl.loss_shape, input.dtype(), input.device());
  return autograd::record(op, res, {input},
                          [x = input.detach(), shared, reduction, divisor, ignore_index](
                              const Tensor& g, const std::vector<bool>&) {
                            const ClassLoss& cl = *shared;
                            const int64_t rows = static_cast<int64_t>(cl.target.size());
                            Tensor gx = make_tensor(x.sizes(), x.dtype(), x.device());
                            std::memset(gx.raw_data(), 0, gx.nbytes());  // all-zero bits are +0 in every float dtype
                            const ops::RowView gv = ops::row_view(gx, cl.cdim);
                            const std::vector<double> scale = row_scales<double>(g, reduction, divisor, rows);
                            for (int64_t r = 0; r < rows; ++r) {
                              const int64_t t = cl.target[r];
                              if (t == ignore_index) continue;
                              const double v = -(cl.weight.empty() ? 1.0 : cl.weight[t]) * scale[r];
                              cpu::store_block<double>(&v, gv.row(r) + t * gv.byte_stride(), 1, gv.dtype, 1);
                            }
                            return std::vector<Tensor>{gx};
                          });
}

}  // namespace tc::impl
