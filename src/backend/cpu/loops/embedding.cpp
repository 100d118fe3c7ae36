// embedding's kernels: index reading, row gather (memcpy per row) and the scatter-add.
#include "backend/cpu/loops/embedding.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cpu/loops/row_io.h"

namespace tc::cpu {

namespace {

constexpr int64_t kGrain = 32768;

template <class C>
void scatter_add(const Tensor& out, const Tensor& g, const int64_t* ids, int64_t K) {
  const int64_t V = out.size(0), D = out.size(1);
  const DType wdt = out.dtype();
  // Accumulate straight into the result when it already has the compute dtype; 16-bit
  // weights accumulate in a float32 table that is rounded once at the end.
  const bool direct = wdt == dtype_of<C>;
  if (direct) fill_zero(out);
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
      const C* gr = load_row<C>(gp, gdt, k * D + d0, w, buf.data());
      C* dst = acc + ids[k] * D + d0;
      for (int64_t j = 0; j < w; ++j) dst[j] += gr[j];
    }
  });
  if (!direct && V * D > 0) store_row<C>(table.data(), out.raw_data(), wdt, 0, V * D);
}

}  // namespace

void embedding_indices(const Tensor& ids, const Tensor& indices, int64_t rows) {
  const Tensor ic = as_contiguous(indices);
  int64_t* out = ids.data_ptr<int64_t>();
  const int64_t n = ic.numel();
  if (ic.dtype() == kInt64) {
    const int64_t* p = ic.data_ptr<int64_t>();
    std::copy(p, p + n, out);
  } else {
    const int32_t* p = ic.data_ptr<int32_t>();
    std::copy(p, p + n, out);
  }
  for (int64_t i = 0; i < n; ++i)
    TC_CHECK(out[i] >= 0 && out[i] < rows, "embedding", "index ", out[i], " is out of range for ", rows, " rows");
}

void embedding_gather(const Tensor& out, const Tensor& weight, const Tensor& ids) {
  const int64_t K = ids.numel(), D = weight.size(1);
  const size_t row_bytes = static_cast<size_t>(D) * element_size(weight.dtype());
  if (row_bytes == 0) return;
  const int64_t* idx = ids.data_ptr<int64_t>();
  const char* src = static_cast<const char*>(weight.raw_data());
  char* dst = static_cast<char*>(out.raw_data());
  parallel_for(0, K, std::max<int64_t>(1, kGrain / std::max<int64_t>(D, 1)), [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) std::memcpy(dst + k * row_bytes, src + idx[k] * row_bytes, row_bytes);
  });
}

void embedding_scatter_add(const Tensor& grad_weight, const Tensor& g, const Tensor& ids) {
  dispatch_compute(grad_weight.dtype(),
                   [&]<class C>() { scatter_add<C>(grad_weight, g, ids.data_ptr<int64_t>(), ids.numel()); });
}

}  // namespace tc::cpu
