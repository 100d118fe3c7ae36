// Internal (nvcc only): tensors seen as rows along one dim, for the row kernels (softmax,
// the class losses): the other dims index the rows in row-major order, through a coalesced
// Geometry over each tensor's byte strides, so any layout runs without a copy.
#pragma once
#include <algorithm>
#include <array>

#include "backend/cuda/launch.h"

namespace tc::gpu {

template <int N>
struct Rows {
  int64_t count = 0, length = 0;
  Geometry<N> rows;      // byte offsets of each row's first element, per tensor
  int64_t step[N] = {};  // byte stride along the row, per tensor
  char* ptr[N] = {};
  DType dtype[N] = {};
};

template <int N>
Rows<N> make_rows(const std::array<const Tensor*, N>& ts, int64_t dim, const char* op) {
  Rows<N> r;
  const Tensor& ref = *ts[0];
  Shape sizes;
  std::array<Shape, N> strides;
  for (int64_t d = 0; d < ref.dim(); ++d) {
    if (d == dim) continue;
    sizes.push_back(ref.size(d));
    for (int k = 0; k < N; ++k)
      strides[k].push_back(ts[k]->stride(d) * static_cast<int64_t>(element_size(ts[k]->dtype())));
  }
  r.rows = make_geometry<N>(sizes, strides, op);
  r.count = shape_numel(sizes);
  r.length = ref.dim() == 0 ? 1 : ref.size(dim);
  for (int k = 0; k < N; ++k) {
    TC_CHECK(ts[k]->device() == ref.device() && ts[k]->sizes() == ref.sizes(), op, "operands must match on one device");
    r.step[k] = (ref.dim() == 0 ? 1 : ts[k]->stride(dim)) * static_cast<int64_t>(element_size(ts[k]->dtype()));
    r.ptr[k] = static_cast<char*>(ts[k]->raw_data());
    r.dtype[k] = ts[k]->dtype();
  }
  return r;
}

// Blocks for one block per row (the kernels loop past 65535 rows).
inline unsigned row_blocks(int64_t rows) {
  return static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>(rows, 1), 65535));
}

}  // namespace tc::gpu
