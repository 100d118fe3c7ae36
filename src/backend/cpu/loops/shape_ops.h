// Internal: the copy kernel behind cat (and so stack).
#pragma once
#include <vector>

#include "core/tensor_impl.h"

namespace tc::cpu {

// Copies `parts` one after another along `dim` into contiguous `out`: part i lands at
// offset starts[i] and has out's shape except along dim; parts without elements are
// skipped (their shape does not matter). Contiguous parts already in out's dtype are
// copied row by row with memcpy; the rest go through the strided converting copy.
void cat_into(const Tensor& out, const std::vector<Tensor>& parts, const std::vector<int64_t>& starts, int64_t dim);

}  // namespace tc::cpu
