// embedding: row gather from a (V, D) table; backward scatter-adds gradient rows into a
// zero (V, D) table (backend/cpu/loops/embedding.h; recorded with create_graph), accumulating
// 16-bit gradients in float32 and rounding once. On CUDA the range check reports at the
// next call instead (backend/cuda/embedding.h).
#include "backend/kernels.h"
#include "core/tensor_impl.h"
#include "ops/impl.h"
#include "ops/pointwise.h"
#include "tensorcast/autograd.h"

namespace tc::impl {

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  constexpr const char* op = "embedding";
  TC_CHECK(weight.defined() && indices.defined(), op, "got an undefined tensor");
  TC_CHECK(weight.dim() == 2, op, "expected weight of shape (num_embeddings, embedding_dim), got ",
           shape_str(weight.sizes()));
  TC_CHECK(indices.dtype() == kInt64 || indices.dtype() == kInt32, op, "expected int64 or int32 indices, got ",
           dtype_name(indices.dtype()), " of shape ", shape_str(indices.sizes()));
  op_util::check_same_device(op, weight, indices);
  const int64_t V = weight.size(0), D = weight.size(1);
  // A copy of the indices, checked against V: the backward must not see later changes.
  const Tensor ids = make_tensor(indices.sizes(), kInt64, indices.device());
  const backend::Kernels& kernels = backend::kernels_for(weight.device());
  kernels.embedding_indices(ids, indices.detach(), V);

  Shape out_shape = indices.sizes();
  out_shape.push_back(D);
  Tensor out = make_tensor(out_shape, weight.dtype(), weight.device());
  kernels.embedding_gather(out, weight.detach().contiguous(), ids);
  return autograd::record(
      op, out, {weight},
      [ids, V, D, wdt = weight.dtype()](const Tensor& g, const std::vector<bool>&) {
        const Tensor gc = g.contiguous();
        Tensor gw = make_tensor({V, D}, wdt, ids.device());
        backend::kernels_for(ids.device()).embedding_scatter_add(gw, gc, ids);
        if (!is_grad_enabled()) return std::vector<Tensor>{gw};
        // create_graph: the scatter-add is linear in g; its derivative by g gathers the
        // same rows of gg, which is this op again.
        return std::vector<Tensor>{autograd::record(
            "embedding_backward", gw, {g},
            [ids](const Tensor& gg, const std::vector<bool>&) { return std::vector<Tensor>{impl::embedding(gg, ids)}; },
            autograd::Differentiable::kTwice)};
      },
      autograd::Differentiable::kTwice);
}

}  // namespace tc::impl
