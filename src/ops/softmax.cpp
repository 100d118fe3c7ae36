// softmax and log_softmax along any dim, with their backward formulas; the row kernels
// are in backend/cpu/softmax.cpp and backend/cuda/softmax.cu.
#include "backend/cpu/softmax.h"

#include <vector>

#include "backend/cuda/softmax.h"
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

Tensor softmax_op(const char* op, const Tensor& x, int64_t dim, bool log) {
  check_softmax_input(op, x);
  const int64_t d = wrap_dim(dim, x.dim(), op);
  Tensor y = make_tensor(x.sizes(), x.dtype(), x.device());
  (x.device().is_cuda() ? gpu::softmax_forward : cpu::softmax_forward)(y, x, d, log);
  return autograd::record(op, y, {x}, [y = y.detach(), d, log](const Tensor& g, const std::vector<bool>&) {
    const Tensor gy = g.to(y.dtype());
    Tensor gx = make_tensor(y.sizes(), y.dtype(), y.device());
    (y.device().is_cuda() ? gpu::softmax_backward : cpu::softmax_backward)(gx, gy, y, d, log);
    return std::vector<Tensor>{gx};
  });
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_op("softmax", x, dim, false); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_op("log_softmax", x, dim, true); }

}  // namespace tc::impl
