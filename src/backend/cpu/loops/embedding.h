// Internal: embedding's row gather and its backward scatter-add.
#pragma once
#include "core/tensor_impl.h"

namespace tc::cpu {

// ids (contiguous int64, indices' shape) = indices (int64 or int32, any layout), each
// checked against the table's `rows`: "[embedding] index 7 is out of range for 5 rows".
void embedding_indices(const Tensor& ids, const Tensor& indices, int64_t rows);

// out (contiguous (K..., D)) [k] = weight (contiguous (V, D)) [ids[k]]: a copy of each row.
void embedding_gather(const Tensor& out, const Tensor& weight, const Tensor& ids);

// grad_weight (contiguous (V, D), written entirely) = the rows of g (contiguous (K..., D))
// added into a zero table at ids. 16-bit tables accumulate in float32 and round once;
// threads own column ranges and add in index order, so results do not depend on the
// thread count.
void embedding_scatter_add(const Tensor& grad_weight, const Tensor& g, const Tensor& ids);

}  // namespace tc::cpu
