/// \file
/// Small helpers shared by the layers' option structs.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <sstream>
#include <string>

#include "tensorcast/error.h"
#include "tensorcast/tensor.h"

namespace tc::nn {

/// A pair of sizes (height, width) written as one number or two, like libtorch's
/// ExpandingArray<2>: `.stride(2)` or `.stride({2, 1})`.
struct ExpandingArray2 {
  /// One size for both.
  ExpandingArray2(int64_t v) : h(v), w(v) {}  // NOLINT: implicit, as in libtorch
  /// One or two sizes.
  ExpandingArray2(std::initializer_list<int64_t> v) : ExpandingArray2(Shape(v)) {}
  /// One or two sizes ("[nn]" error otherwise).
  ExpandingArray2(const Shape& v) {  // NOLINT
    TC_CHECK(v.size() == 1 || v.size() == 2, "nn", "expected 1 or 2 sizes, got ", shape_str(v));
    h = v[0];
    w = v.size() == 2 ? v[1] : v[0];
  }
  /// (h, w).
  Shape shape() const { return {h, w}; }
  /// Both sizes equal.
  bool operator==(const ExpandingArray2&) const = default;
  /// \name Sizes
  /// @{

  /// Height and width.
  int64_t h, w;
  /// @}
};

/// "(3, 3)", for pretty_print. (A stream, not string concatenation, which trips a false
/// -Wrestrict in GCC 12.)
inline std::string pair_str(const ExpandingArray2& a) {
  std::ostringstream os;
  os << "(" << a.h << ", " << a.w << ")";
  return os.str();
}

}  // namespace tc::nn
