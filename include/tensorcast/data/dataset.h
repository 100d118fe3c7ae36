/// \file
/// Datasets: an indexable collection of examples {data, target}, libtorch's Dataset idea.
/// A DataLoader asks a dataset for whole batches (get_batch), so a dataset that holds its
/// examples as rows of one tensor gathers a batch with one memcpy per row.
#pragma once
#include <cstdint>
#include <span>

#include "tensorcast/tensor.h"

namespace tc::data {

/// One example, or a batch of them (data (B, ...), target (B, ...)).
struct Example {
  Tensor data;    ///< the input (a batch: stacked along a new first dimension)
  Tensor target;  ///< the label or target
};

/// An indexable dataset. get and get_batch must be safe to call from a DataLoader's
/// prefetch thread while the owning thread does other work: they must not mutate state
/// shared with other callers (all datasets here are immutable after construction).
class Dataset {
 public:
  virtual ~Dataset() = default;
  /// The number of examples.
  virtual int64_t size() const = 0;
  /// Example `index` (0 <= index < size()).
  virtual Example get(int64_t index) const = 0;
  /// Examples `indices` stacked along a new first dim. The default stacks get(i); datasets
  /// override it with a gather that avoids per-example tensors.
  virtual Example get_batch(std::span<const int64_t> indices) const;
};

/// Examples are the rows of `data` and `targets` (same first dim). The tensors are made
/// contiguous once; get(i) returns views of row i, get_batch copies rows with memcpy.
class TensorDataset : public Dataset {
 public:
  /// Examples are rows of data and targets (same first dimension).
  TensorDataset(Tensor data, Tensor targets);
  /// The first dimension of data.
  int64_t size() const override;
  /// Row `index` of data and of targets.
  Example get(int64_t index) const override;
  Example get_batch(std::span<const int64_t> indices) const override;
  /// All inputs.
  const Tensor& data() const noexcept { return data_; }
  /// All targets.
  const Tensor& targets() const noexcept { return targets_; }

 protected:
  TensorDataset() = default;
  void set_tensors(Tensor data, Tensor targets);  ///< for subclasses that load in their constructor

 private:
  Tensor data_;
  Tensor targets_;
};

/// Throws "[data] index i is out of range for a dataset of n examples" unless 0 <= i < n.
void check_index(int64_t index, int64_t size);

}  // namespace tc::data
