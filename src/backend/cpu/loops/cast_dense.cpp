// cast_dense (backend/cpu/loops/cast_dense.h): a layout-preserving dtype conversion. The layout
// helpers it uses (dense_stride_order, empty_like_layout, memory_order_view) are core's
// (core/layout.cpp).
#include "backend/cpu/loops/cast_dense.h"

#include "backend/cpu/loops/elementwise.h"
#include "backend/kernels.h"

namespace tc {

Tensor cast_dense(const Tensor& t, DType dtype) {
  if (!t.defined() || t.dtype() == dtype) return t;
  const Shape order = t.is_contiguous() ? Shape{} : dense_stride_order(t.sizes(), t.strides());
  Tensor out = empty_like_layout(t, dtype);
  const auto& copy = backend::kernels_for(t.device()).copy_into;
  if (order.empty()) {
    copy(out, t);
  } else {  // both seen in memory order: one contiguous run, the fast conversion path
    copy(memory_order_view(out, order), memory_order_view(t, order));
  }
  return out;
}

}  // namespace tc
