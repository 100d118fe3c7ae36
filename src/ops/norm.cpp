// Normalization ops: layer_norm and batch_norm. The fused forward and backward kernels
// are in backend/cpu/loops/norm.cpp (on CUDA: backend/cuda/norm.cu); saved statistics are float32 (float64 for float64
// input).
#include "backend/cpu/loops/norm.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "autograd/nodes.h"
#include "backend/kernels.h"
#include "core/tensor_impl.h"
#include "ops/impl.h"
#include "ops/pointwise.h"
#include "tensorcast/autograd.h"
#include "tensorcast/ops.h"

namespace tc::impl {

using autograd::record;

namespace {

void check_floating(const char* op, const char* what, const Tensor& t) {
  TC_CHECK(is_floating(t.dtype()), op, "expected a floating ", what, ", got ", what, " of dtype ",
           dtype_name(t.dtype()));
}

// The dtype of the saved mean and rstd: the kernels' compute dtype.
DType stats_dtype(DType x) { return x == kFloat64 ? kFloat64 : kFloat32; }

// An affine parameter as the kernels read it: detached, contiguous (undefined stays so).
Tensor param(const Tensor& t) { return t.defined() ? t.detach().contiguous() : Tensor(); }

// A gradient buffer of `shape` in `dtype` on `device` when `needed`, else undefined.
Tensor grad_buffer(bool needed, const Shape& shape, DType dtype, Device device = Device{}) {
  return needed ? make_tensor(shape, dtype, device) : Tensor();
}

}  // namespace

namespace {

// layer_norm's checks of its arguments; returns N, the elements of a normalized row.
int64_t check_layer_norm(const char* op, const Tensor& x, const Shape& normalized_shape, const Tensor& weight,
                         const Tensor& bias) {
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
    op_util::check_same_device(op, x, t);
  }
  return shape_numel(normalized_shape);
}

// layer_norm's gradients in recorded ops, for backward with create_graph: the statistics
// are recomputed from x (in the kernels' compute dtype) so that the result is a function
// of x and the weight that differentiates again.
std::vector<Tensor> layer_norm_grads(const Tensor& g, const Tensor& x, const Tensor& weight, const Shape& ns,
                                     double eps, const std::vector<bool>& needs) {
  const DType sdt = stats_dtype(x.dtype());
  auto wide = [sdt](const Tensor& t) { return t.defined() && t.dtype() != sdt ? t.to(sdt) : t; };
  const Tensor xs = wide(x), gs = wide(g);
  Shape dims;
  for (int64_t d = x.dim() - static_cast<int64_t>(ns.size()); d < x.dim(); ++d) dims.push_back(d);
  const Tensor xm = impl::sub(xs, impl::mean(xs, dims, true));
  const Tensor rstd = impl::rsqrt(impl::add(impl::mean(impl::mul(xm, xm), dims, true), eps));
  const Tensor xhat = impl::mul(xm, rstd);
  Tensor dx, dw, db;
  if (needs[0]) {  // rstd (gh - mean(gh) - xhat mean(gh xhat)), gh = g w
    const Tensor gh = weight.defined() ? impl::mul(gs, wide(weight)) : gs;
    const Tensor centered = impl::sub(gh, impl::mean(gh, dims, true));
    dx = impl::mul(rstd, impl::sub(centered, impl::mul(xhat, impl::mean(impl::mul(gh, xhat), dims, true))));
  }
  if (needs[1]) dw = impl::sum_to_size(impl::mul(gs, xhat), ns);
  if (needs[2]) db = impl::sum_to_size(gs, ns);
  return {dx, dw, db};
}

// Records out = layer_norm(x) (xc: x's values, contiguous; mean, rstd: the forward's
// statistics of its M rows of N) with the fused backward, or layer_norm_grads with
// create_graph (x, weight saved as they are for that).
Tensor record_layer_norm(const Tensor& out, const Tensor& x, const Tensor& xc, const Tensor& mean, const Tensor& rstd,
                         const Shape& normalized_shape, const Tensor& weight, const Tensor& bias, double eps, int64_t M,
                         int64_t N) {
  return record(
      "layer_norm", out, {x, weight, bias},
      [x, weight, eps, xc, mean, rstd, w = param(weight), M, N, wdt = weight.defined() ? weight.dtype() : x.dtype(),
       bdt = bias.defined() ? bias.dtype() : x.dtype(), ns = normalized_shape,
       xdt = x.dtype()](const Tensor& g, const std::vector<bool>& needs) {
        if (is_grad_enabled()) return layer_norm_grads(g, x, weight, ns, eps, needs);
        const Device dev = xc.device();
        Tensor dx = grad_buffer(needs[0], xc.sizes(), xdt, dev);
        Tensor dw = grad_buffer(needs[1], ns, wdt, dev), db = grad_buffer(needs[2], ns, bdt, dev);
        // What x's other consumers sent (a residual stream's gradient), added in dx's
        // pass: dx is computed in x's own dtype (float32, float64), so the sum rounds once
        // as the engine's addition would.
        const bool wide = xdt == kFloat32 || xdt == kFloat64;
        const Tensor acc = needs[0] && wide ? autograd::detail::take_accumulated_grad(0) : Tensor();
        backend::kernels_for(dev).layer_norm_backward(dx, dw, db, g.contiguous(), xc, mean, rstd, w, M, N, acc);
        return std::vector<Tensor>{dx, dw, db};
      },
      autograd::Differentiable::kTwice);
}

}  // namespace

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  const int64_t N = check_layer_norm("layer_norm", x, normalized_shape, weight, bias);
  const int64_t M = N == 0 ? 0 : x.numel() / N;
  const Tensor xc = x.detach().contiguous();
  Tensor out = make_tensor(x.sizes(), x.dtype(), x.device());
  const DType sdt = stats_dtype(x.dtype());
  Tensor mean = make_tensor({M}, sdt, x.device()), rstd = make_tensor({M}, sdt, x.device());
  backend::kernels_for(x.device()).layer_norm_forward(out, mean, rstd, xc, param(weight), param(bias), M, N, eps);
  return record_layer_norm(out, x, xc, mean, rstd, normalized_shape, weight, bias, eps, M, N);
}

TensorPair add_layer_norm(const Tensor& x, const Tensor& residual, const Shape& normalized_shape, const Tensor& weight,
                          const Tensor& bias, double eps, std::optional<DType> normalized_dtype) {
  constexpr const char* op = "add_layer_norm";
  const int64_t N = check_layer_norm(op, x, normalized_shape, weight, bias);
  TC_CHECK(residual.defined(), op, "got an undefined residual");
  check_floating(op, "residual", residual);
  op_util::check_same_device(op, x, residual);
  const Shape& xs = x.sizes();
  TC_CHECK(broadcast_shapes(xs, residual.sizes(), op) == xs, op, "residual of shape ", shape_str(residual.sizes()),
           " does not broadcast to input of shape ", shape_str(xs), " (the sum must have the input's shape)");
  const DType sdt = result_type(x, residual), ydt = normalized_dtype.value_or(sdt);
  TC_CHECK(is_floating(ydt), op, "expected a floating normalized_dtype, got ", dtype_name(ydt));
  const backend::Kernels& kernels = backend::kernels_for(x.device());
  if (!kernels.add_layer_norm_forward) {  // the composition: add, layer_norm in float32 (float64), the cast
    const Tensor sum = impl::add(x, residual, 1.0);
    const Tensor y = impl::layer_norm(sum.to(stats_dtype(sdt)), normalized_shape, weight, bias, eps);
    return {sum, y.to(ydt)};
  }
  const int64_t M = N == 0 ? 0 : x.numel() / N;
  // The residual as whole rows: its own (contiguous) when its shape is a trailing part of
  // the input's holding whole normalized rows, as a position embedding's, else expanded.
  const int64_t nd = static_cast<int64_t>(normalized_shape.size());
  const Shape& rs = residual.sizes();
  const bool rows = residual.dim() >= nd && std::equal(rs.begin(), rs.end(), xs.end() - residual.dim());
  const Tensor rc = rows ? residual.detach().contiguous() : residual.detach().expand(xs).contiguous();
  Tensor sum = make_tensor(xs, sdt, x.device()), out = make_tensor(xs, ydt, x.device());
  const DType st = stats_dtype(sdt);
  Tensor mean = make_tensor({M}, st, x.device()), rstd = make_tensor({M}, st, x.device());
  kernels.add_layer_norm_forward(sum, out, mean, rstd, x.detach().contiguous(), rc, param(weight), param(bias), M, N,
                                 eps);
  const Tensor sc = sum.detach();
  sum = op_util::record_add(sum, x, residual, 1.0);
  out = record_layer_norm(out, sum, sc, mean, rstd, normalized_shape, weight, bias, eps, M, N);
  // Computed in float32 (float64) and rounded once, as layer_norm in float32 and a cast: the
  // next linear writes its gradient unrounded, as for the cast.
  autograd::detail::take_grad_in(out, st);
  return {sum, out};
}

namespace {

// batch_norm in recorded ops, for its backward with create_graph: normalized by the batch's
// statistics (recomputed, so their dependence on x is differentiated), or by the running
// ones the forward used (constants).
Tensor batch_norm_composite(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& mean, const Tensor& rstd,
                            bool use_batch, double eps) {
  Shape dims{0}, along_channels(static_cast<size_t>(x.dim()), 1);
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  along_channels[1] = x.size(1);
  Tensor y;
  if (use_batch) {
    const Tensor c = impl::sub(x, impl::mean(x, dims, true));
    y = impl::mul(c, impl::rsqrt(impl::add(impl::mean(impl::mul(c, c), dims, true), eps)));
  } else {
    y = impl::mul(impl::sub(x, mean.to(x.dtype()).reshape(along_channels)), rstd.to(x.dtype()).reshape(along_channels));
  }
  if (w.defined()) y = impl::mul(y, w.reshape(along_channels));
  if (b.defined()) y = impl::add(y, b.reshape(along_channels));
  return y;
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
  cpu::BnGeometry geo{xs[0], xs[1], 1};
  for (int64_t d = 2; d < x.dim(); ++d) geo.S *= xs[d];
  for (const auto& [t, name] : {std::pair{weight, "weight"}, std::pair{bias, "bias"},
                                std::pair{running_mean, "running_mean"}, std::pair{running_var, "running_var"}}) {
    if (!t.defined()) continue;
    TC_CHECK(t.dim() == 1 && t.size(0) == geo.Ch, op, name, " of shape ", shape_str(t.sizes()), " does not match the ",
             geo.Ch, " channels of input of shape ", shape_str(xs));
    check_floating(op, name, t);
    op_util::check_same_device(op, x, t);
  }
  const bool use_batch = training || !running_mean.defined();
  TC_CHECK(!use_batch || geo.count() > 1, op,
           "expected more than 1 value per channel when training, got input of shape ", shape_str(xs));
  const Tensor xc = x.detach().contiguous();
  Tensor out = make_tensor(xs, x.dtype(), x.device());
  const DType sdt = stats_dtype(x.dtype());
  Tensor mean = make_tensor({geo.Ch}, sdt, x.device()), rstd = make_tensor({geo.Ch}, sdt, x.device());
  const Tensor w = param(weight), b = param(bias);
  // The running statistics move in place and untracked (training with buffers only).
  backend::kernels_for(x.device())
      .batch_norm_forward(out, mean, rstd, xc, w, b, running_mean, running_var, geo, use_batch,
                          training && running_mean.defined(), momentum, eps);
  // x, weight and bias are kept as they are for a backward with create_graph (x costs no
  // memory beyond xc unless it was not contiguous).
  return record(
      op, out, {x, weight, bias},
      [xc, mean, rstd, w, geo, use_batch, wdt = weight.defined() ? weight.dtype() : x.dtype(),
       bdt = bias.defined() ? bias.dtype() : x.dtype(), xdt = x.dtype(), inputs = std::vector<Tensor>{x, weight, bias},
       eps](const Tensor& g, const std::vector<bool>& needs) {
        if (is_grad_enabled())  // create_graph: the composition's gradients, recorded
          return autograd::detail::recomputed_grads(
              [&](const std::vector<Tensor>& in) {
                return batch_norm_composite(in[0], in[1], in[2], mean, rstd, use_batch, eps);
              },
              inputs, g, needs);
        const Device dev = xc.device();
        Tensor dx = grad_buffer(needs[0], xc.sizes(), xdt, dev);
        Tensor dw = grad_buffer(needs[1], {geo.Ch}, wdt, dev), db = grad_buffer(needs[2], {geo.Ch}, bdt, dev);
        backend::kernels_for(dev).batch_norm_backward(dx, dw, db, g.contiguous(), xc, mean, rstd, w, geo, use_batch);
        return std::vector<Tensor>{dx, dw, db};
      },
      autograd::Differentiable::kTwice);
}

}  // namespace tc::impl
