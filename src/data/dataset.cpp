// Dataset's default batch, TensorDataset and the row gather every tensor-backed dataset uses.
#include "tensorcast/data/dataset.h"

#include <cstring>
#include <vector>

#include "data/gather.h"
#include "tensorcast/ops.h"

namespace tc::data {

void check_index(int64_t index, int64_t size) {
  TC_CHECK(index >= 0 && index < size, "data", "index ", index, " is out of range for a dataset of ", size,
           " examples; valid indices are 0 to ", size - 1);
}

Tensor gather_rows(const Tensor& src, std::span<const int64_t> indices) {
  // One memcpy per row: the rows of a contiguous tensor are contiguous byte ranges.
  const int64_t n = src.size(0);
  Shape shape = src.sizes();
  shape[0] = static_cast<int64_t>(indices.size());
  Tensor out = empty(shape, src.dtype());
  const size_t row = src.numel() == 0 ? 0 : src.nbytes() / static_cast<size_t>(n);
  const auto* from = static_cast<const unsigned char*>(src.raw_data());
  auto* to = static_cast<unsigned char*>(out.raw_data());
  for (size_t i = 0; i < indices.size(); ++i) {
    check_index(indices[i], n);
    std::memcpy(to + i * row, from + static_cast<size_t>(indices[i]) * row, row);
  }
  return out;
}

Example Dataset::get_batch(std::span<const int64_t> indices) const {
  std::vector<Tensor> data, target;
  data.reserve(indices.size());
  target.reserve(indices.size());
  for (int64_t i : indices) {
    Example e = get(i);
    data.push_back(std::move(e.data));
    target.push_back(std::move(e.target));
  }
  TC_CHECK(!data.empty(), "data", "get_batch needs at least one index");
  return {stack(data), stack(target)};
}

TensorDataset::TensorDataset(Tensor data, Tensor targets) { set_tensors(std::move(data), std::move(targets)); }

void TensorDataset::set_tensors(Tensor data, Tensor targets) {
  TC_CHECK(data.defined() && targets.defined(), "data", "TensorDataset needs defined data and targets tensors");
  TC_CHECK(data.dim() >= 1 && targets.dim() >= 1, "data",
           "TensorDataset needs tensors with a first (example) dim, got data ", shape_str(data.sizes()),
           " and targets ", shape_str(targets.sizes()));
  TC_CHECK(data.size(0) == targets.size(0), "data", "TensorDataset got ", data.size(0), " data rows ",
           shape_str(data.sizes()), " but ", targets.size(0), " targets ", shape_str(targets.sizes()),
           "; pass one target per example");
  TC_CHECK(data.device().is_cpu() && targets.device().is_cpu(), "data",
           "TensorDataset holds CPU tensors; move batches to the device after loading");
  // Detached, contiguous copies-or-handles: the gather reads raw rows, and the prefetch
  // thread must not touch autograd metadata.
  data_ = data.detach().contiguous();
  targets_ = targets.detach().contiguous();
}

int64_t TensorDataset::size() const { return data_.defined() ? data_.size(0) : 0; }

Example TensorDataset::get(int64_t index) const {
  check_index(index, size());
  return {data_.select(0, index), targets_.select(0, index)};
}

Example TensorDataset::get_batch(std::span<const int64_t> indices) const {
  return {gather_rows(data_, indices), gather_rows(targets_, indices)};
}

}  // namespace tc::data
