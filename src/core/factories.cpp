// The tensor factories that need no kernel: empty, empty_like, from_blob. Those that fill
// their tensor (zeros, full, arange, rand, tensor(), ...) run the fill and copy kernels,
// so they are the ops layer's (ops/factories.cpp); all are declared in tensorcast/factories.h.
#include "tensorcast/factories.h"

#include "core/tensor_impl.h"

namespace tc {

namespace {

Tensor finish(Tensor t, const TensorOptions& o) {
  if (o.requires_grad()) t.requires_grad_(true);
  return t;
}

}  // namespace

Tensor empty(const Shape& size, TensorOptions o) { return finish(make_tensor(size, o.dtype(), o.device()), o); }

Tensor empty_like(const Tensor& t) { return empty(t.sizes(), TensorOptions(t.dtype()).device(t.device())); }

Tensor from_blob(void* data, const Shape& size, TensorOptions o) {
  return from_blob(data, size, contiguous_strides(size), o);
}

Tensor from_blob(void* data, const Shape& size, const Shape& strides, TensorOptions o) {
  TC_CHECK(size.size() == strides.size(), "from_blob", "sizes ", shape_str(size), " and strides ", shape_str(strides),
           " differ in length");
  int64_t extent = 0;
  for (size_t i = 0; i < size.size(); ++i) {
    TC_CHECK(size[i] >= 0 && strides[i] >= 0, "from_blob", "negative size or stride");
    if (size[i] > 0) extent += (size[i] - 1) * strides[i];
  }
  auto impl = std::make_shared<TensorImpl>();
  const size_t nbytes = shape_numel(size) == 0 ? 0 : static_cast<size_t>(extent + 1) * element_size(o.dtype());
  impl->storage = std::make_shared<Storage>(data, nbytes, o.device());
  impl->sizes = size;
  impl->strides = strides;
  impl->dtype = o.dtype();
  impl->inference = inference_mode_enabled();
  return finish(Tensor(std::move(impl)), o);
}

}  // namespace tc
