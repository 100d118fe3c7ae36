// softmax and log_softmax along any dim, with their backward formulas; the row kernels
// are in backend/cpu/loops/softmax.cpp and backend/cuda/softmax.cu.
#include <vector>

#include "autograd/nodes.h"
#include "backend/kernels.h"
#include "core/tensor_impl.h"
#include "ops/impl.h"
#include "tensorcast/autograd.h"

namespace tc::impl {

namespace {

void check_softmax_input(const char* op, const Tensor& x) {
  TC_CHECK(x.defined(), op, "got an undefined tensor");
  TC_CHECK(is_floating(x.dtype()), op, "expected a floating tensor, got ", dtype_name(x.dtype()), " of shape ",
           shape_str(x.sizes()));
}

// softmax's backward y * (g - sum(g * y)), log_softmax's g - exp(y) * sum(g), along d,
// in recorded ops: with create_graph they are differentiated again (y, the saved output,
// leads back to this node through saved_output).
Tensor softmax_backward_composite(const Tensor& g, const Tensor& y, int64_t d, bool log) {
  auto row_sum = [&](const Tensor& t) { return t.dim() == 0 ? t : impl::sum(t, {d}, true); };
  if (log) return impl::sub(g, impl::mul(impl::exp(y), row_sum(g)));
  return impl::mul(y, impl::sub(g, row_sum(impl::mul(g, y))));
}

Tensor softmax_op(const char* op, const Tensor& x, int64_t dim, bool log) {
  check_softmax_input(op, x);
  const int64_t d = wrap_dim(dim, x.dim(), op);
  Tensor y = make_tensor(x.sizes(), x.dtype(), x.device());
  backend::kernels_for(x.device()).softmax_forward(y, x, d, log);
  return autograd::record(
      op, y, {x},
      [y = y.detach(), d, log](const Tensor& g, const std::vector<bool>&) {
        const Tensor gy = g.to(y.dtype());
        if (is_grad_enabled())
          return std::vector<Tensor>{softmax_backward_composite(gy, autograd::detail::saved_output(y), d, log)};
        Tensor gx = make_tensor(y.sizes(), y.dtype(), y.device());
        backend::kernels_for(y.device()).softmax_backward(gx, gy, y, d, log);
        return std::vector<Tensor>{gx};
      },
      autograd::Differentiable::kTwice);
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_op("softmax", x, dim, false); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_op("log_softmax", x, dim, true); }

}  // namespace tc::impl
