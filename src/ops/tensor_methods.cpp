// Tensor copies, casts, in-place updates, and the method forms of common ops: the Tensor
// methods (declared in tensorcast/tensor.h) that run kernels, record autograd nodes or
// call ops, so they live with the ops, not in core.
#include <algorithm>
#include <cstring>

#include "autograd/nodes.h"
#include "backend/cpu/loops/cast_dense.h"
#include "backend/cpu/loops/elementwise.h"
#include "backend/kernels.h"
#include "core/tensor_impl.h"
#include "ops/impl.h"
#include "ops/pointwise.h"
#include "profiler/hooks.h"
#include "tensorcast/autograd.h"
#include "tensorcast/cuda.h"
#include "tensorcast/ops.h"

namespace tc {

using autograd::record;

Tensor Tensor::to(DType dt) const {
  if (dtype() == dt) return *this;
  profiler::detail::Scope rec("to");
  Tensor out = cast_dense(*this, dt);  // keeps a dense layout (channels-last stays channels-last), as PyTorch
  // A cast is differentiable: the gradient is cast back (autograd/nodes.h: a weight's
  // gradient through a 16-bit copy arrives in its fp32).
  return autograd::detail::record_cast(out, *this);
}

namespace {
// dst = src on one device, whichever it is.
void copy_on_device(const Tensor& dst, const Tensor& src) { backend::kernels_for(dst.device()).copy_into(dst, src); }

// A dense copy of t on its own device (t itself when already dense).
Tensor dense(const Tensor& t) {
  if (!dense_stride_order(t.sizes(), t.strides()).empty() || t.numel() == 0) return t;
  Tensor out = make_tensor(t.sizes(), t.dtype(), t.device());
  copy_on_device(out, t);
  return out;
}
}  // namespace

Tensor Tensor::to(Device d, bool non_blocking) const {
  TC_CHECK(defined(), "to", "called on an undefined tensor");
  if (device() == d) return *this;
  profiler::detail::Scope rec("to");
  // A dense tensor (channels-last too) moves as one run of bytes and keeps its layout, as
  // PyTorch's preserve_format; anything else is made contiguous on its own device first.
  const Tensor src = dense(*this);
  // A non-blocking copy to the CPU lands in pinned memory (PyTorch's choice): only there can
  // the device write it while the host goes on.
  const bool pinned_out = non_blocking && d.is_cpu();
  Tensor out = make_tensor(sizes(), dtype(), d, pinned_out);
  if (!src.is_contiguous() && src.numel() > 0)
    out = make_view(make_tensor({src.numel()}, dtype(), d, pinned_out), sizes(),
                    strides_for_order(sizes(), dense_stride_order(src.sizes(), src.strides())), 0);
  backend::kernels_for(d.is_cpu() ? device() : d).transfer(out, src, non_blocking);
  return record(
      "to", out, {*this},
      [from = device()](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{g.to(from)}; },
      autograd::Differentiable::kTwice);
}

Tensor Tensor::pin_memory() const {
  TC_CHECK(defined(), "pin_memory", "called on an undefined tensor");
  TC_CHECK(device().is_cpu(), "pin_memory", "only CPU tensors can be pinned, got a tensor on ", device());
  if (is_pinned()) return *this;
  Tensor out = make_tensor(sizes(), dtype(), Device{}, /*pinned_host=*/true);
  out.copy_(detach());
  return out;
}

bool Tensor::is_pinned() const { return defined() && impl()->storage && impl()->storage->pinned; }

Tensor Tensor::clone() const {
  profiler::detail::Scope rec("clone");
  Tensor out = make_tensor(sizes(), dtype(), device());
  copy_on_device(out, *this);
  return record(
      "clone", out, {*this}, [](const Tensor& g, const std::vector<bool>&) { return std::vector<Tensor>{g}; },
      autograd::Differentiable::kTwice);
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

Tensor Tensor::contiguous(MemoryFormat format) const {
  if (format == MemoryFormat::Contiguous) return contiguous();
  TC_CHECK(dim() == 4, "contiguous", "MemoryFormat::ChannelsLast needs a 4-d (N, C, H, W) tensor, got shape ",
           shape_str(sizes()));
  if (is_contiguous(format)) return *this;
  // A row-major copy of the (N, H, W, C) view, seen as (N, C, H, W) again; differentiable
  // (permute and clone are).
  return permute({0, 2, 3, 1}).contiguous().permute({0, 3, 1, 2});
}

Tensor Tensor::detach() const {
  TC_CHECK(defined(), "detach", "called on an undefined tensor");
  return make_view(*this, sizes(), strides(), storage_offset());
}

namespace {
// Every in-place method starts here: the checks, then the version bump of the write.
void begin_inplace(const Tensor& t, const char* op) {
  TC_CHECK(t.defined(), op, "called on an undefined tensor");
  TC_CHECK(!(is_grad_enabled() && t.requires_grad()), op,
           "a leaf tensor that requires grad (or a tensor with a grad_fn) is being used in an in-place "
           "operation; wrap it in tc::NoGradGuard");
  // Outside InferenceMode an inference tensor is immutable (c10's rule): it has no version
  // counter, so a graph that saved a view of it could not see the write.
  TC_CHECK(!t.is_inference() || inference_mode_enabled(), op,
           "Inplace update to inference tensor outside InferenceMode is not allowed. You can make a clone to get a "
           "normal tensor before doing inplace update.");
  increment_version(t);
}
}  // namespace

Tensor& Tensor::fill_(double v) {
  begin_inplace(*this, "fill_");
  backend::kernels_for(device()).fill(*this, v);
  return *this;
}

Tensor& Tensor::zero_() { return fill_(0.0); }

Tensor& Tensor::copy_(const Tensor& src) {
  begin_inplace(*this, "copy_");
  TC_CHECK(src.defined(), "copy_", "source is undefined");
  if (device() == src.device()) {
    copy_on_device(*this, src);
  } else {  // across devices: move src over as it is, then copy (and cast, broadcast) there
    copy_on_device(*this, src.detach().to(device()));
  }
  return *this;
}

namespace {

// self = f(self, other) written straight into self: floating dtypes, other broadcast to
// self's shape, and no partial overlap (other is self itself or separate memory). The
// kernel computes in float (double for float64) and rounds once to self's dtype, as the
// out-of-place op followed by a copy would. Returns false when the fast path does not apply.
template <class F>
bool update_in_place(const Tensor& self, const Tensor& other, const char* op, F f) {
  if (!is_floating(self.dtype()) || !is_floating(other.dtype()) || self.device() != other.device()) return false;
  if (broadcast_shapes(self.sizes(), other.sizes(), op) != self.sizes()) return false;
  const bool same_memory = other.impl()->storage == self.impl()->storage;
  if (same_memory && !(other.storage_offset() == self.storage_offset() && other.sizes() == self.sizes() &&
                       other.strides() == self.strides()))
    return false;
  if (!self.is_contiguous()) return false;  // a strided self may repeat elements (expand): general path
  op_util::detail::run_map<2>(self, {self, other}, op, f, self.dtype() == kFloat64 || other.dtype() == kFloat64);
  return true;
}

// The general case: the out-of-place op, then a copy (casting) into self.
template <class Op>
void update_by_copy(const Tensor& self, const char* op, Op out_of_place) {
  Tensor r;
  {
    NoGradGuard g;
    r = out_of_place();  // in-place ops are not autocast (as PyTorch)
  }
  TC_CHECK(r.sizes() == self.sizes(), op, "output with shape ", shape_str(self.sizes()),
           " doesn't match the broadcast shape ", shape_str(r.sizes()));
  copy_on_device(self, r);
}

}  // namespace

Tensor& Tensor::add_(const Tensor& other, double alpha) {
  begin_inplace(*this, "add_");
  TC_CHECK(other.defined(), "add_", "other is undefined");
  const bool done = alpha == 1.0 ? update_in_place(*this, other, "add_", fn::Add{})
                                 : update_in_place(*this, other, "add_", fn::AddScaled{alpha});
  if (!done) update_by_copy(*this, "add_", [&] { return impl::add(*this, other, alpha); });
  return *this;
}

Tensor& Tensor::mul_(const Tensor& other) {
  begin_inplace(*this, "mul_");
  TC_CHECK(other.defined(), "mul_", "other is undefined");
  if (!update_in_place(*this, other, "mul_", fn::Mul{}))
    update_by_copy(*this, "mul_", [&] { return impl::mul(*this, other); });
  return *this;
}

Tensor& Tensor::mul_(double v) {
  begin_inplace(*this, "mul_");
  update_by_copy(*this, "mul_", [&] { return impl::mul(*this, v); });
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
