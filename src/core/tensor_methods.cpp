// Tensor copies, casts, in-place updates, and the method forms of common ops.
#include "backend/cpu/loops.h"
#include "core/tensor_impl.h"
#include "ops/impl.h"
#include "tensorcast/ops.h"

namespace tc {

using autograd::record;

Tensor Tensor::to(DType dt) const {
  if (dtype() == dt) return *this;
  Tensor out = make_tensor(sizes(), dt, device());
  cpu::copy_into(out, *this);
  // A cast is differentiable: the gradient is cast back (the engine also casts it to the
  // input's dtype, so this is where fp32 parameters get fp32 grads through 16-bit ops).
  return record("to", out, {*this}, [src = dtype()](const Tensor& g, const std::vector<bool>&) {
    return std::vector<Tensor>{g.to(src)};
  });
}

Tensor Tensor::to(Device d) const {
  if (device() == d) return *this;
  TC_FAIL("to", "device ", d, " is not available in this build (tensor is on ", device(), ")");
}

Tensor Tensor::clone() const {
  Tensor out = make_tensor(sizes(), dtype(), device());
  cpu::copy_into(out, *this);
  return record("clone", out, {*this}, [](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{g}; });
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

Tensor Tensor::detach() const {
  TC_CHECK(defined(), "detach", "called on an undefined tensor");
  return make_view(*this, sizes(), strides(), storage_offset());
}

namespace {
void check_inplace(const Tensor& t, const char* op) {
  TC_CHECK(t.defined(), op, "called on an undefined tensor");
  TC_CHECK(!(is_grad_enabled() && t.requires_grad()), op,
           "a leaf tensor that requires grad (or a tensor with a grad_fn) is being used in an in-place "
           "operation; wrap it in tc::NoGradGuard");
}
}  // namespace

Tensor& Tensor::fill_(double v) {
  check_inplace(*this, "fill_");
  double value = v;
  cpu::copy_into(*this, from_blob(&value, {}, kFloat64));
  return *this;
}

Tensor& Tensor::zero_() { return fill_(0.0); }

Tensor& Tensor::copy_(const Tensor& src) {
  check_inplace(*this, "copy_");
  TC_CHECK(src.defined(), "copy_", "source is undefined");
  cpu::copy_into(*this, src);
  return *this;
}

Tensor& Tensor::add_(const Tensor& other, double alpha) {
  check_inplace(*this, "add_");
  Tensor r;
  {
    NoGradGuard g;
    r = impl::add(*this, other, alpha);  // in-place ops are not autocast (as PyTorch)
  }
  TC_CHECK(r.sizes() == sizes(), "add_", "output with shape ", shape_str(sizes()),
           " doesn't match the broadcast shape ", shape_str(r.sizes()));
  cpu::copy_into(*this, r);
  return *this;
}

Tensor& Tensor::mul_(const Tensor& other) {
  check_inplace(*this, "mul_");
  Tensor r;
  {
    NoGradGuard g;
    r = impl::mul(*this, other);
  }
  TC_CHECK(r.sizes() == sizes(), "mul_", "output with shape ", shape_str(sizes()),
           " doesn't match the broadcast shape ", shape_str(r.sizes()));
  cpu::copy_into(*this, r);
  return *this;
}

Tensor& Tensor::mul_(double v) {
  check_inplace(*this, "mul_");
  Tensor r;
  {
    NoGradGuard g;
    r = impl::mul(*this, v);
  }
  cpu::copy_into(*this, r);
  return *this;
}

// The method forms call the public ops, so they go through the dispatcher (autocast) too.
Tensor Tensor::sum() const { return tc::sum(*this); }
Tensor Tensor::sum(const Shape& dims, bool keepdim) const { return tc::sum(*this, dims, keepdim); }
Tensor Tensor::mean() const { return tc::mean(*this); }
Tensor Tensor::mean(const Shape& dims, bool keepdim) const { return tc::mean(*this, dims, keepdim); }
Tensor Tensor::exp() const { return tc::exp(*this); }
Tensor Tensor::log() const { return tc::log(*this); }
Tensor Tensor::sqrt() const { return tc::sqrt(*this); }
Tensor Tensor::abs() const { return tc::abs(*this); }
Tensor Tensor::neg() const { return tc::neg(*this); }
Tensor Tensor::pow(double e) const { return tc::pow(*this, e); }
Tensor Tensor::relu() const { return tc::relu(*this); }
Tensor Tensor::sigmoid() const { return tc::sigmoid(*this); }
Tensor Tensor::tanh() const { return tc::tanh(*this); }
Tensor Tensor::matmul(const Tensor& o) const { return tc::matmul(*this, o); }
Tensor Tensor::argmax(std::optional<int64_t> dim, bool keepdim) const { return tc::argmax(*this, dim, keepdim); }

}  // namespace tc
