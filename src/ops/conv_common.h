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

}  // namespace tc::op_util
