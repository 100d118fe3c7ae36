// The non-template parts of custom autograd functions (tensorcast/autograd_function.h).
#include "tensorcast/autograd_function.h"

namespace tc::autograd {

void AutogradContext::save_for_backward(const std::vector<Tensor>& tensors) {
  saved_.clear();
  saved_.reserve(tensors.size());
  for (const Tensor& t : tensors) saved_.push_back(t.defined() ? t.detach() : t);
}

const std::vector<Tensor>& AutogradContext::get_saved_variables() const { return saved_; }

namespace detail {

Tensor fresh_output(const Tensor& out, const std::vector<Tensor>& inputs) {
  TC_CHECK(out.defined(), "autograd::Function", "forward returned an undefined tensor");
  for (const Tensor& in : inputs)
    if (in.is_same(out)) return out.detach();
  return out;
}

}  // namespace detail
}  // namespace tc::autograd
