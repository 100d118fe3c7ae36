// Elementwise losses: mse_loss and binary_cross_entropy_with_logits (PyTorch semantics).
// 'mean' and 'sum' are fused reductions in the backend (backend/cpu/loops/loss_pointwise.h,
// backend/cuda/loss_pointwise.h), deterministic for any thread count.
#include "backend/kernels.h"
#include "core/tensor_impl.h"
#include "ops/impl.h"
#include "ops/pointwise.h"
#include "tensorcast/autograd.h"

namespace tc::impl {

namespace {

// A 0-d tensor holding `v` in the compute precision for dt (float32, or float64).
Tensor compute_scalar(DType dt, double v, Device device) {
  return full({}, v, TensorOptions(dt == kFloat64 ? kFloat64 : kFloat32).device(device));
}

// The 0-d output of a fused 'mean'/'sum' reduction, and its divisor.
Tensor reduced_output(DType dt, Device device) { return make_tensor({}, dt, device); }
double divisor_for(Reduction reduction, double numel) { return reduction == kMean ? numel : 1.0; }

// The incoming gradient of a loss as an operand: g itself for 'none', else the scalar
// g * k (k = 1/numel for mean) kept in float32/float64 so it is not rounded to 16 bits:
// a 0-d tensor on g's device, multiplied there in float64 and rounded once (no host read).
Tensor grad_operand(const Tensor& g, Reduction reduction, double numel, DType dt) {
  if (reduction == kNone) return g;
  const double k = reduction == kMean ? 1.0 / numel : 1.0;
  return op_util::map2(g, full({}, k, TensorOptions(kFloat64).device(g.device())), dt == kFloat64 ? kFloat64 : kFloat32,
                       "loss_backward", fn::Mul{});
}

// grad_operand in recorded ops, for backward with create_graph: g, or g / numel for mean.
Tensor recorded_grad_operand(const Tensor& g, Reduction reduction, double numel) {
  return reduction == kMean ? impl::mul(g, 1.0 / numel) : g;
}

void check_loss_pair(const char* op, const Tensor& input, const Tensor& target) {
  TC_CHECK(input.defined() && target.defined(), op, "got an undefined input or target tensor");
  TC_CHECK(is_floating(input.dtype()) && is_floating(target.dtype()), op, "expected floating input and target, got ",
           dtype_name(input.dtype()), " ", shape_str(input.sizes()), " and ", dtype_name(target.dtype()), " ",
           shape_str(target.sizes()));
  op_util::check_same_device(op, input, target);
}

}  // namespace

// ------------------------------------------------------------------ mse_loss

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction) {
  const char* op = "mse_loss";
  check_loss_pair(op, input, target);
  const Shape shape = broadcast_shapes(input.sizes(), target.sizes(), op);
  const DType dt = promote_types(input.dtype(), target.dtype());
  const double numel = static_cast<double>(shape_numel(shape));
  Tensor out;
  if (reduction == kNone) {
    out = op_util::map2(input, target, dt, op, fn::SquaredDifference{});
  } else {
    out = reduced_output(dt, input.device());
    backend::kernels_for(input.device()).mse_loss_sum(out, input, target, divisor_for(reduction, numel));
  }
  // x and t saved as they are: with create_graph the gradients are recorded as functions of them.
  return autograd::record(
      op, out, {input, target},
      [x = input, t = target, reduction, numel, dt, shape](const Tensor& g, const std::vector<bool>& needs) {
        // d/dx (x - t)^2 = 2 (x - t); the target gets the negation.
        const Tensor d = is_grad_enabled()
                             ? impl::mul(impl::mul(impl::sub(x, t), 2.0), recorded_grad_operand(g, reduction, numel))
                             : op_util::map3(x, t, grad_operand(g, reduction, numel, dt), dt, "mse_loss_backward",
                                             fn::MseBackward{});
        Tensor gx, gt;
        if (needs[0]) gx = shape == x.sizes() ? d : impl::sum_to_size(d, x.sizes());
        if (needs[1]) gt = shape == t.sizes() ? impl::neg(d) : impl::sum_to_size(impl::neg(d), t.sizes());
        return std::vector<Tensor>{gx, gt};
      },
      autograd::Differentiable::kTwice);
}

// ------------------------------------------------------------------ binary_cross_entropy_with_logits

namespace {

bool broadcastable_to(const Shape& s, const Shape& to) {
  if (s.size() > to.size()) return false;
  const size_t lead = to.size() - s.size();
  for (size_t d = 0; d < s.size(); ++d)
    if (s[d] != 1 && s[d] != to[lead + d]) return false;
  return true;
}

// The gradients of loss = w (pw t softplus(-x) + (1 - t) softplus(x)) in recorded ops,
// for backward with create_graph (gs: the incoming gradient as recorded_grad_operand
// gives it): by x, gs w ((1 - t) sigmoid(x) - pw t sigmoid(-x)); by t,
// gs w (pw softplus(-x) - softplus(x)).
std::vector<Tensor> bce_with_logits_grads(const Tensor& x, const Tensor& t, const Tensor& w, const Tensor& pw,
                                          const Tensor& gs, const std::vector<bool>& needs) {
  const Tensor gw = impl::mul(gs, w);
  Tensor gx, gt;
  if (needs[0]) {
    const Tensor pos = impl::mul(impl::mul(pw, t), impl::sigmoid(impl::neg(x)));
    const Tensor neg = impl::mul(impl::add(impl::neg(t), 1.0), impl::sigmoid(x));
    gx = impl::mul(gw, impl::sub(neg, pos));
  }
  if (needs[1]) gt = impl::mul(gw, impl::sub(impl::mul(pw, impl::softplus(impl::neg(x))), impl::softplus(x)));
  return {gx, gt};
}

}  // namespace

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const Tensor& weight,
                                        const Tensor& pos_weight, Reduction reduction) {
  const char* op = "binary_cross_entropy_with_logits";
  check_loss_pair(op, input, target);
  TC_CHECK(target.sizes() == input.sizes(), op, "target of shape ", shape_str(target.sizes()),
           " must have the same shape as input of shape ", shape_str(input.sizes()));
  const DType dt = promote_types(input.dtype(), target.dtype());
  auto optional_operand = [&](const Tensor& t, const char* what) {
    if (!t.defined()) return compute_scalar(dt, 1.0, input.device());
    TC_CHECK(is_floating(t.dtype()), op, what, " must be floating, got ", dtype_name(t.dtype()));
    op_util::check_same_device(op, input, t);
    TC_CHECK(broadcastable_to(t.sizes(), input.sizes()), op, what, " of shape ", shape_str(t.sizes()),
             " cannot be broadcast to input of shape ", shape_str(input.sizes()));
    return t;
  };
  const Tensor w = optional_operand(weight, "weight");
  const Tensor pw = optional_operand(pos_weight, "pos_weight");
  const double numel = static_cast<double>(input.numel());
  Tensor out;
  if (reduction == kNone) {
    out = make_tensor(input.sizes(), dt, input.device());
    backend::kernels_for(input.device()).bce_with_logits(out, input, target, w, pw);
  } else {
    out = reduced_output(dt, input.device());
    backend::kernels_for(input.device()).bce_with_logits_sum(out, input, target, w, pw, divisor_for(reduction, numel));
  }
  return autograd::record(
      op, out, {input, target},
      [x = input, t = target, w = w.detach(), pw = pw.detach(), reduction, numel, dt](const Tensor& g,
                                                                                      const std::vector<bool>& needs) {
        if (is_grad_enabled())
          return bce_with_logits_grads(x, t, w, pw, recorded_grad_operand(g, reduction, numel), needs);
        const Tensor gs = grad_operand(g, reduction, numel, dt);
        Tensor gx = needs[0] ? make_tensor(x.sizes(), dt, x.device()) : Tensor();
        Tensor gt = needs[1] ? make_tensor(x.sizes(), dt, x.device()) : Tensor();
        backend::kernels_for(x.device()).bce_with_logits_backward(gx, gt, x, t, w, pw, gs);
        return std::vector<Tensor>{gx, gt};
      },
      autograd::Differentiable::kTwice);
}

}  // namespace tc::impl
