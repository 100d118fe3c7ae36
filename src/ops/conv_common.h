// Internal: argument helpers shared by the convolution and pooling ops.
#pragma once
#include <string_view>

#include "tensorcast/tensor.h"

namespace tc::op_util {

// Expands a 1- or 2-element parameter ({3} means {3, 3}, as an int does in PyTorch); an
// empty one takes `fallback`. Throws "[op] stride must have 1 or 2 elements ...".
inline void pair_param(const char* op, const char* what, const Shape& v, int64_t fallback, int64_t out[2]) {
  TC_CHECK(v.size() <= 2, op, what, " must have 1 or 2 elements, got ", shape_str(v));
  out[0] = v.empty() ? fallback : v[0];
  out[1] = v.empty() ? fallback : v.back();
  const bool padding = std::string_view(what) == "padding";
  TC_CHECK(padding ? (out[0] >= 0 && out[1] >= 0) : (out[0] > 0 && out[1] > 0), op, what, " must be ",
           padding ? "non-negative" : "positive", ", got ", shape_str(v));
}

// oneDNN reads any positive strides (a permuted view is reordered directly) but not the
// zero strides of an expanded tensor, so those are materialized.
inline Tensor dnnl_ready(const Tensor& t) {
  if (!t.defined()) return t;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.stride(d) <= 0 && t.size(d) > 1) return t.contiguous();
  return t;
}

}  // namespace tc::op_util
