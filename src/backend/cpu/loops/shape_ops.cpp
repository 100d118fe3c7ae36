// cat's copy: memcpy rows of the parts that need no conversion, copy_into for the rest.
#include "backend/cpu/loops/shape_ops.h"

#include <cstring>

#include "backend/cpu/loops/elementwise.h"

namespace tc::cpu {

void cat_into(const Tensor& out, const std::vector<Tensor>& parts, const std::vector<int64_t>& starts, int64_t dim) {
  const Shape& out_shape = out.sizes();
  const DType dt = out.dtype();
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < dim; ++k) outer *= out_shape[k];
  for (int64_t k = dim + 1; k < out.dim(); ++k) inner *= out_shape[k];
  const size_t es = element_size(dt);
  const size_t out_row = static_cast<size_t>(out_shape[dim] * inner) * es;  // bytes per outer index in out
  struct Piece {
    const char* src;
    size_t offset, bytes;  // within one outer row of out
  };
  std::vector<Piece> fast;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Tensor& t = parts[i];
    if (t.numel() == 0) continue;
    const int64_t len = t.size(dim);
    if (t.dtype() == dt && t.is_contiguous()) {
      fast.push_back({static_cast<const char*>(t.raw_data()), static_cast<size_t>(starts[i] * inner) * es,
                      static_cast<size_t>(len * inner) * es});
    } else {
      Shape sizes = out_shape;
      sizes[dim] = len;
      copy_into(make_view(out, sizes, out.strides(), starts[i] * out.stride(dim)), t);
    }
  }
  if (fast.empty() || outer == 0) return;
  char* dst = static_cast<char*>(out.raw_data());
  const int64_t grain = std::max<int64_t>(1, static_cast<int64_t>((1 << 20) / std::max<size_t>(out_row, 1)));
  parallel_for(0, outer, grain, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o)
      for (const Piece& p : fast) std::memcpy(dst + o * out_row + p.offset, p.src + o * p.bytes, p.bytes);
  });
}

}  // namespace tc::cpu
