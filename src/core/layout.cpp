// Dense memory layouts (declared in core/tensor_impl.h): PyTorch's memory-format
// preservation, so channels-last activations stay channels-last through casts and
// elementwise ops. Geometry only; the layout-preserving cast that copies through them is
// the backend's (backend/cpu/loops/cast_dense.cpp).
#include <algorithm>

#include "core/tensor_impl.h"

namespace tc {

Shape dense_stride_order(const Shape& sizes, const Shape& strides) {
  Shape order, big;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return {};
    (sizes[d] == 1 ? order : big).push_back(static_cast<int64_t>(d));  // size-1 strides do not matter
  }
  std::stable_sort(big.begin(), big.end(), [&](int64_t a, int64_t b) { return strides[a] > strides[b]; });
  int64_t expected = 1;
  for (size_t i = big.size(); i-- > 0;) {
    if (strides[big[i]] != expected) return {};
    expected *= sizes[big[i]];
  }
  order.insert(order.end(), big.begin(), big.end());
  return order;
}

Shape strides_for_order(const Shape& sizes, const Shape& order) {
  Shape st(sizes.size(), 0);
  int64_t next = 1;
  for (size_t i = order.size(); i-- > 0;) {
    st[order[i]] = next;
    next *= sizes[order[i]];
  }
  const Shape cont = contiguous_strides(sizes);  // size-1 dims: what a contiguous tensor has
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] == 1) st[d] = cont[d];
  return st;
}

Tensor empty_like_layout(const Tensor& t, DType dtype) {
  if (t.is_contiguous()) return make_tensor(t.sizes(), dtype, t.device());
  const Shape order = dense_stride_order(t.sizes(), t.strides());
  if (order.empty()) return make_tensor(t.sizes(), dtype, t.device());
  Tensor base = make_tensor({shape_numel(t.sizes())}, dtype, t.device());
  return make_view(base, t.sizes(), strides_for_order(t.sizes(), order), 0);
}

Tensor memory_order_view(const Tensor& t, const Shape& order) {
  Shape sz, st;
  for (int64_t d : order) {
    sz.push_back(t.size(d));
    st.push_back(t.stride(d));
  }
  return make_view(t, sz, st, t.storage_offset());
}

Shape broadcast_strides(const Tensor& t, const Shape& shape, const char* op) {
  const Shape& ts = t.sizes();
  TC_CHECK(ts.size() <= shape.size(), op, "cannot broadcast shape ", shape_str(ts), " to ", shape_str(shape));
  Shape out(shape.size(), 0);
  const size_t lead = shape.size() - ts.size();
  for (size_t d = 0; d < ts.size(); ++d) {
    if (ts[d] == shape[lead + d])
      out[lead + d] = t.strides()[d];
    else
      TC_CHECK(ts[d] == 1, op, "cannot broadcast shape ", shape_str(ts), " to ", shape_str(shape));
  }
  return out;
}

}  // namespace tc
