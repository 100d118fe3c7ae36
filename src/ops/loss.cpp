// Class-index losses: cross_entropy (fused log-softmax + nll) and nll_loss, with PyTorch
// semantics for class weights, ignore_index, reductions and label smoothing. The row
// kernels are the device's (backend/kernels.def).
#include <memory>
#include <vector>

#include "backend/kernels.h"
#include "core/tensor_impl.h"
#include "ops/impl.h"
#include "tensorcast/autograd.h"

namespace tc::impl {

namespace {

// The class dim of a class-index loss's input (1, or 0 for unbatched (C)) and the class count.
struct ClassDims {
  int64_t cdim = 0;
  int64_t classes = 0;
};

// Checks the inputs of a class-index loss: returns its class dims and the loss's non-class shape.
ClassDims check_class_inputs(const char* op, const Tensor& input, const Tensor& target, const Tensor& weight,
                             Shape& loss_shape) {
  TC_CHECK(input.defined() && target.defined(), op, "got an undefined input or target tensor");
  TC_CHECK(is_floating(input.dtype()), op, "expected floating input, got ", dtype_name(input.dtype()), " of shape ",
           shape_str(input.sizes()));
  TC_CHECK(input.dim() >= 1, op, "expected input of shape (C), (N, C) or (N, C, d1, ...), got a 0-d tensor");
  TC_CHECK(target.dtype() == kInt64 || target.dtype() == kInt32, op,
           "expected target of dtype int64 (class indices), got ", dtype_name(target.dtype()), " of shape ",
           shape_str(target.sizes()));
  TC_CHECK(input.device() == target.device(), op, "expected input and target on the same device, got ", input.device(),
           " and ", target.device());
  ClassDims c;
  c.cdim = input.dim() == 1 ? 0 : 1;
  c.classes = input.size(c.cdim);
  loss_shape = input.sizes();
  loss_shape.erase(loss_shape.begin() + c.cdim);
  TC_CHECK(target.sizes() == loss_shape, op, "expected target of shape ", shape_str(loss_shape), " for input of shape ",
           shape_str(input.sizes()), ", got target of shape ", shape_str(target.sizes()));
  if (weight.defined())
    TC_CHECK(is_floating(weight.dtype()) && weight.dim() == 1 && weight.size(0) == c.classes, op,
             "expected a floating weight of shape ", shape_str({c.classes}), " for ", c.classes, " classes, got ",
             dtype_name(weight.dtype()), " of shape ", shape_str(weight.sizes()));
  return c;
}

// The targets and class weights of a class-index loss as the device's kernels read them.
std::shared_ptr<const backend::ClassTargets> class_targets(const char* op, const ClassDims& dims, const Tensor& input,
                                                           const Tensor& target, const Tensor& weight,
                                                           int64_t ignore_index) {
  return std::make_shared<const backend::ClassTargets>(
      backend::kernels_for(input.device()).class_targets(target, weight, dims.cdim, dims.classes, ignore_index, op));
}

// The incoming gradient of a loss as its backward kernels read it: on the loss's device,
// contiguous.
Tensor device_grad(const Tensor& g, Device device) { return (g.device() == device ? g : g.to(device)).contiguous(); }

// The loss tensor: 0-d for mean and sum, the non-class shape for none.
Tensor loss_output(Reduction reduction, const Shape& loss_shape, const Tensor& input) {
  return make_tensor(reduction == kNone ? loss_shape : Shape{}, input.dtype(), input.device());
}

// Backward with create_graph, in recorded ops. The loss is linear in the log-probabilities
// (cross_entropy) or in the input (nll_loss): sum(coef * logp) with a constant coef of the
// input's shape, -w[t] (1 - eps) at each row's target plus -eps w[c] / C at every class c,
// zero in ignored rows, over the weighted count of targets for 'mean'. Built from ops, so
// it serves both devices.
Tensor class_loss_coefficients(const Tensor& x, const Tensor& target, const Tensor& weight, int64_t cdim,
                               int64_t ignore_index, Reduction reduction, double eps) {
  const int64_t classes = x.size(cdim);
  Shape along_classes(static_cast<size_t>(x.dim()), 1);
  along_classes[cdim] = classes;
  const Tensor t = target.unsqueeze(cdim);
  const Tensor valid = ne(t, static_cast<double>(ignore_index)).to(x.dtype());
  const Tensor w = weight.defined() ? weight.detach().to(x.dtype()).reshape(along_classes)
                                    : ones(along_classes, TensorOptions(x.dtype()).device(x.device()));
  const Tensor classes_idx =
      arange(static_cast<double>(classes), TensorOptions(kInt64).device(x.device())).reshape(along_classes);
  Tensor a = impl::mul(impl::mul(eq(t, classes_idx).to(x.dtype()), w), valid);  // w[t] at each target
  const Tensor divisor = reduction == kMean ? impl::sum(a) : Tensor();
  if (eps > 0)
    a = impl::add(impl::mul(a, 1.0 - eps), impl::mul(impl::mul(valid, w), eps / static_cast<double>(classes)));
  if (divisor.defined()) a = impl::div(a, divisor);
  return impl::neg(a);
}

// The input's gradient, in recorded ops, from the incoming gradient g (of the loss's
// shape for 'none', else 0-d): g coef for nll_loss (x gives only its shape: the gradient
// does not depend on it), and through log_softmax's backward, g coef - softmax(x)
// sum(g coef), for cross_entropy.
Tensor class_loss_grad(const Tensor& g, const Tensor& x, const Tensor& target, const Tensor& weight, int64_t cdim,
                       int64_t ignore_index, Reduction reduction, double eps, bool log_softmax) {
  Tensor gx = g.to(x.dtype());
  if (gx.device() != x.device()) gx = gx.to(x.device());
  if (reduction == kNone) gx = gx.unsqueeze(cdim);
  gx = impl::mul(gx, class_loss_coefficients(x, target, weight, cdim, ignore_index, reduction, eps));
  if (!log_softmax) return gx;
  return impl::sub(gx, impl::mul(impl::softmax(x, cdim), impl::sum(gx, {cdim}, true)));
}

}  // namespace

Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight, int64_t ignore_index,
                     Reduction reduction, double label_smoothing) {
  const char* op = "cross_entropy";
  Shape loss_shape;
  const ClassDims dims = check_class_inputs(op, input, target, weight, loss_shape);
  TC_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0, op, "label_smoothing must be in [0, 1], got ",
           label_smoothing);
  const auto targets = class_targets(op, dims, input, target, weight, ignore_index);
  const Device device = input.device();
  // Each row's max and log-sum-exp, kept for the backward in the compute precision.
  const Tensor lse = make_tensor({shape_numel(loss_shape), 2}, input.dtype() == kFloat64 ? kFloat64 : kFloat32, device);
  // reduction='mean': its divisor, computed by the forward on the device, read there by the backward
  const Tensor divisor = reduction == kMean ? make_tensor({1}, kFloat64, device) : Tensor();
  Tensor res = loss_output(reduction, loss_shape, input);
  backend::kernels_for(device).cross_entropy_forward(res, lse, divisor, input, *targets, label_smoothing,
                                                     reduction != kNone);
  return autograd::record(
      op, res, {input},
      [x = input, target = target.detach(), weight = weight.defined() ? weight.detach() : Tensor(), cdim = dims.cdim,
       ignore_index, targets, lse, reduction, divisor, label_smoothing](const Tensor& g, const std::vector<bool>&) {
        if (is_grad_enabled())
          return std::vector<Tensor>{
              class_loss_grad(g, x, target, weight, cdim, ignore_index, reduction, label_smoothing, true)};
        Tensor gx = make_tensor(x.sizes(), x.dtype(), x.device());
        backend::kernels_for(x.device())
            .cross_entropy_backward(gx, x, lse, *targets, device_grad(g, x.device()), reduction == kNone, divisor,
                                    label_smoothing);
        return std::vector<Tensor>{gx};
      },
      autograd::Differentiable::kTwice);
}

Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight, int64_t ignore_index,
                Reduction reduction) {
  const char* op = "nll_loss";
  Shape loss_shape;
  const ClassDims dims = check_class_inputs(op, input, target, weight, loss_shape);
  const auto targets = class_targets(op, dims, input, target, weight, ignore_index);
  const Tensor divisor = reduction == kMean ? make_tensor({1}, kFloat64, input.device()) : Tensor();
  Tensor res = loss_output(reduction, loss_shape, input);
  backend::kernels_for(input.device()).nll_loss_forward(res, divisor, input, *targets, reduction != kNone);
  return autograd::record(
      op, res, {input},
      [x = input.detach(), target = target.detach(), weight = weight.defined() ? weight.detach() : Tensor(),
       cdim = dims.cdim, ignore_index, targets, reduction, divisor](const Tensor& g, const std::vector<bool>&) {
        if (is_grad_enabled())
          return std::vector<Tensor>{class_loss_grad(g, x, target, weight, cdim, ignore_index, reduction, 0.0, false)};
        Tensor gx = make_tensor(x.sizes(), x.dtype(), x.device());
        backend::kernels_for(x.device())
            .nll_loss_backward(gx, *targets, device_grad(g, x.device()), reduction == kNone, divisor);
        return std::vector<Tensor>{gx};
      },
      autograd::Differentiable::kTwice);
}

}  // namespace tc::impl
