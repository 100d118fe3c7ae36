// embedding: row gather from a (V, D) table; backward scatter-adds gradient rows into a
// zero (V, D) table, accumulating 16-bit gradients in float32 and rounding once.
#include <cstring>
#include <memory>

#include "ops/pointwise.h"
#include "ops/row_io.h"
#include "tensorcast/autograd.h"
#include "ops/impl.h"

namespace tc::impl {

namespace {

constexpr int64_t kGrain = 32768;

// Indices as int64 (row-major), each checked against the table's V rows.
std::shared_ptr<const std::vector<int64_t>> read_indices(const Tensor& indices, int64_t V) {
  auto ids = std::make_shared<std::vector<int64_t>>(static_cast<size_t>(indices.numel()));
  const Tensor ic = indices.contiguous();
  if (ic.dtype() == kInt64) {
    const int64_t* p = ic.data_ptr<int64_t>();
    std::copy(p, p + ic.numel(), ids->begin());
  } else {
    const int32_t* p = ic.data_ptr<int32_t>();
    std::copy(p, p + ic.numel(), ids->begin());
  }
  for (int64_t v : *ids) TC_CHECK(v >= 0 && v < V, "embedding", "index ", v, " is out of range for ", V, " rows");
  return ids;
}

template <class C>
Tensor embedding_backward(const Tensor& g, const std::vector<int64_t>& ids, int64_t V, int64_t D, DType wdt) {
  const int64_t K = static_cast<int64_t>(ids.size());
  // Accumulate straight into the result when it already has the compute dtype; 16-bit
  // weights accumulate in a float32 table that is rounded once at the end.
  const bool direct = wdt == dtype_of<C>;
  Tensor out = direct ? zeros({V, D}, wdt) : make_tensor({V, D}, wdt);
  std::vector<C> table(direct ? 0 : static_cast<size_t>(V * D), C(0));
  C* acc = direct ? out.data_ptr<C>() : table.data();
  const DType gdt = g.dtype();
  const void* gp = g.raw_data();
  // Threads own disjoint column ranges and each scans every index: no races, and the
  // accumulation order (index order) is the same for any thread count.
  parallel_for(0, D, std::max<int64_t>(1, kGrain / std::max<int64_t>(K, 1)), [&](int64_t d0, int64_t d1) {
    const int64_t w = d1 - d0;
    std::vector<C> buf(static_cast<size_t>(w));
    for (int64_t k = 0; k < K; ++k) {
      const C* gr = ops::load_row<C>(gp, gdt, k * D + d0, w, buf.data());
      C* dst = acc + ids[k] * D + d0;
      for (int64_t j = 0; j < w; ++j) dst[j] += gr[j];
    }
  });
  if (!direct && V * D > 0) ops::store_row<C>(table.data(), out.raw_data(), wdt, 0, V * D);
  return out;
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  constexpr const char* op = "embedding";
  TC_CHECK(weight.defined() && indices.defined(), op, "got an undefined tensor");
  TC_CHECK(weight.dim() == 2, op, "expected weight of shape (num_embeddings, embedding_dim), got ",
           shape_str(weight.sizes()));
  TC_CHECK(indices.dtype() == kInt64 || indices.dtype() == kInt32, op, "expected int64 or int32 indices, got ",
           dtype_name(indices.dtype()), " of shape ", shape_str(indices.sizes()));
  ops::check_same_device(op, weight, indices);
  const int64_t V = weight.size(0), D = weight.size(1);
  auto ids = read_indices(indices.detach(), V);
  const int64_t K = static_cast<int64_t>(ids->size());

  Shape out_shape = indices.sizes();
  out_shape.push_back(D);
  Tensor out = make_tensor(out_shape, weight.dtype(), weight.device());
  const Tensor wc = weight.detach().contiguous();
  const size_t row_bytes = static_cast<size_t>(D) * element_size(weight.dtype());
  const char* src = static_cast<const char*>(wc.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  if (row_bytes > 0) {
    parallel_for(0, K, std::max<int64_t>(1, kGrain / std::max<int64_t>(D, 1)), [&](int64_t b, int64_t e) {
      for (int64_t k = b; k < e; ++k) std::memcpy(dst + k * row_bytes, src + (*ids)[k] * row_bytes, row_bytes);
    });
  }
  return autograd::record(op, out, {weight}, [ids, V, D, wdt = weight.dtype()](const Tensor& g, const std::vector<bool>&) {
    const Tensor gc = g.contiguous();
    return std::vector<Tensor>{ops::dispatch_compute(wdt, [&]<class C>() {
      return embedding_backward<C>(gc, *ids, V, D, wdt);
    })};
  });
}

}  // namespace tc::impl
