// dropout: inverted dropout with a mask drawn from the seeded global generator.
//
// One 64-bit key is taken from the generator per call and the kernel hashes it with the
// element index (backend/cpu/loops/dropout.h), so the mask depends only on the seed and the
// element index, never on the thread count or the device (backend/cuda/dropout.h hashes the
// same way).
#include "backend/kernels.h"
#include "core/random.h"
#include "core/tensor_impl.h"
#include "ops/impl.h"
#include "tensorcast/autograd.h"

namespace tc::impl {

namespace {

// The masked, scaled copy of v (forward and backward alike), contiguous in v's dtype.
Tensor apply_mask(const Tensor& v_in, const Tensor& mask, double scale) {
  const Tensor v = v_in.detach().contiguous();
  Tensor out = make_tensor(v.sizes(), v.dtype(), v.device());
  backend::kernels_for(v.device()).dropout_apply(out, v, mask, scale);
  return out;
}

// g masked and scaled as dropout's backward, recorded as an op of g: it is linear, so its
// own backward (with create_graph) is itself again.
Tensor masked_gradient(const Tensor& g, const Tensor& mask, double scale) {
  return autograd::record(
      "dropout_backward", apply_mask(g, mask, scale), {g},
      [mask, scale](const Tensor& gg, const std::vector<bool>&) {
        return std::vector<Tensor>{masked_gradient(gg, mask, scale)};
      },
      autograd::Differentiable::kTwice);
}

}  // namespace

Tensor dropout(const Tensor& x, double p, bool training) {
  constexpr const char* op = "dropout";
  TC_CHECK(x.defined(), op, "got an undefined input");
  TC_CHECK(p >= 0.0 && p <= 1.0, op, "dropout probability has to be between 0 and 1, but got ", p);
  if (!training || p == 0.0) return x;
  TC_CHECK(is_floating(x.dtype()), op, "expected a floating input, got ", dtype_name(x.dtype()), " of shape ",
           shape_str(x.sizes()));
  uint64_t key;
  {
    Generator& gen = default_generator();
    std::lock_guard<std::mutex> lock(gen.mutex);
    key = gen.engine();
  }
  // The mask is uint8 in x's logical (row-major) order, so it broadcasts onto any layout of x.
  Tensor mask = make_tensor(x.sizes(), kUInt8, x.device());
  backend::kernels_for(x.device()).dropout_mask(mask, key, p);
  const double scale = p == 1.0 ? 0.0 : 1.0 / (1.0 - p);
  Tensor out = apply_mask(x, mask, scale);
  return autograd::record(
      op, out, {x},
      [mask, scale](const Tensor& g, const std::vector<bool>&) {
        return std::vector<Tensor>{masked_gradient(g, mask, scale)};
      },
      autograd::Differentiable::kTwice);
}

}  // namespace tc::impl
