// Row gather for tensor-backed datasets (internal).
#pragma once
#include <span>

#include "tensorcast/tensor.h"

namespace tc::data {

// Rows `indices` of the contiguous CPU tensor `src` (first dim), copied with one memcpy
// each into a new tensor (indices.size(), ...). Indices are range-checked.
Tensor gather_rows(const Tensor& src, std::span<const int64_t> indices);

}  // namespace tc::data
