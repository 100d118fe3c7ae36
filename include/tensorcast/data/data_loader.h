/// \file
/// DataLoader: batches of a Dataset with seeded per-epoch shuffling, drop_last, a
/// background prefetch thread and an exact, resumable position.
///
/// \code{.cpp}
///   auto train = std::make_shared<tc::data::FashionMNIST>();
///   tc::data::DataLoader loader(train, tc::data::DataLoaderOptions().batch_size(128).shuffle(true));
///   for (int e = 0; e < epochs; ++e)
///     for (auto& batch : loader) { ... batch.data (B,1,28,28), batch.target (B) ... }
/// \endcode
///
/// Each range-for runs the rest of the current epoch, from the loader's position, and a
/// completed pass moves the position to the next epoch's first batch. Breaking out
/// mid-epoch keeps the position: the next range-for resumes at the next unseen batch.
#pragma once
#include <concepts>
#include <cstdint>
#include <iterator>
#include <memory>
#include <type_traits>
#include <vector>

#include "tensorcast/data/dataset.h"
#include "tensorcast/state_dict.h"

namespace tc::data {

/// Options of DataLoader (libtorch's DataLoaderOptions).
struct DataLoaderOptions {
  DataLoaderOptions() = default;
  /// Batches of batch_size.
  explicit DataLoaderOptions(int64_t batch_size) : batch_size_(batch_size) {}
  TC_ARG(int64_t, batch_size) = 1;  ///< examples per batch
  TC_ARG(bool, shuffle) = false;    ///< a new permutation each epoch (see seed)
  /// Drops the last batch of an epoch when it would be smaller than batch_size.
  TC_ARG(bool, drop_last) = false;
  /// Epoch e is shuffled with seed + e, by the loader's own generator (the global tc
  /// generator is untouched), so an order depends on nothing but (seed, epoch, size).
  TC_ARG(uint64_t, seed) = 0;
  /// Batches prepared ahead by a background thread; 0 gathers on the calling thread.
  TC_ARG(int64_t, prefetch) = 2;
  /// Batches in page-locked host memory (Tensor::pin_memory, done by the prefetch thread),
  /// so `batch.data.to(gpu, /*non_blocking=*/true)` runs asynchronously. Ignored where no
  /// CUDA device is usable (PyTorch warns and ignores it too).
  TC_ARG(bool, pin_memory) = false;
  /// Data parallelism (PyTorch's DistributedSampler): this loader reads shard `rank` of
  /// `num_replicas` (R). Epoch e's permutation P of the n examples is computed as for one
  /// process (seed + e, or 0..n-1 unshuffled), so it is the same on every rank. Then:
  /// \verbatim
  ///   - without drop_last, P is padded to ceil(n/R)*R by appending its own first elements
  ///     (cyclically, P[0], P[1], ..., again from P[0] when n < R), so every example is read;
  ///   - with drop_last, P is cut to floor(n/R)*R (n < R leaves nothing: an error);
  /// \endverbatim
  /// rank r takes positions r, r+R, r+2R, ... (strided), and that shard is batched as usual
  /// (drop_last also drops the shard's last partial batch).
  /// Consequences the data-parallel code relies on:
  /// \verbatim
  ///   - every rank has the same size() (so every rank runs the same collectives);
  ///   - rank r's batch j of size b holds positions j*b*R + i*R + r (i < b) of the padded
  ///     P, so the union over ranks of batch j is, as a set, positions [j*b*R, (j+1)*b*R) of
  ///     the padded P: batch j of a one-process loader with batch size b*R over that order.
  ///     When n is a multiple of R (e.g. of R*b), nothing is padded or cut, and this is
  ///     exactly batch j of DataLoader(dataset, batch_size(b*R)) with the same seed/shuffle.
  /// \endverbatim
  /// epoch_order(e) returns this rank's shard, and state() records num_replicas and rank.
  TC_ARG(int64_t, num_replicas) = 1;
  TC_ARG(int64_t, rank) = 0;  ///< this process's shard, 0 <= rank < num_replicas
};

namespace detail {
struct Pass;
struct Cursor;
}  // namespace detail

/// Batches of a Dataset, in order or shuffled per epoch, prefetched in the background and resumable (state()).
class DataLoader {
 public:
  /// Batches of `dataset` (shared, not copied).
  DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options = {});
  /// Convenience: copies or moves a concrete dataset (tensor-backed datasets are handles,
  /// so this does not copy their data).
  template <class D>
  requires std::derived_from<std::remove_cvref_t<D>, Dataset> DataLoader(D&& dataset, DataLoaderOptions options = {})
      : DataLoader(std::shared_ptr<const Dataset>(std::make_shared<std::remove_cvref_t<D>>(std::forward<D>(dataset))),
                   options) {}
  ~DataLoader();  ///< stops and joins a running prefetch thread
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  /// Input iterator over one pass; owns the pass's prefetch thread (joined when the
  /// iterator is destroyed, e.g. on `break`). A worker's exception is rethrown here.
  class Iterator {
   public:
    /// \name Iterator traits
    /// @{

    /// What std::iterator_traits reads: an input iterator over Examples.
    using iterator_category = std::input_iterator_tag;
    using value_type = Example;
    using difference_type = std::ptrdiff_t;
    using pointer = Example*;
    using reference = Example&;
    /// @}
    /// The current batch.
    Example& operator*() { return current_; }
    /// The current batch.
    Example* operator->() { return &current_; }
    /// Moves to the next batch (rethrowing a worker's exception).
    Iterator& operator++();
    /// True past the epoch's last batch.
    bool operator==(std::default_sentinel_t) const noexcept { return done_; }

   private:
    friend class DataLoader;
    explicit Iterator(std::shared_ptr<detail::Pass> pass);
    void fetch();
    std::shared_ptr<detail::Pass> pass_;
    Example current_;
    bool done_ = false;
  };

  Iterator begin();  ///< starts (or resumes) the current epoch at the loader's position
  /// The end of the pass (a sentinel).
  std::default_sentinel_t end() const noexcept { return {}; }

  int64_t size() const;           ///< batches per epoch (of this rank's shard)
  int64_t epoch() const;          ///< epoch of the next batch
  int64_t batch_index() const;    ///< index in its epoch of the next batch
  void set_epoch(int64_t epoch);  ///< position := first batch of `epoch`
  /// The dataset read.
  const Dataset& dataset() const { return *dataset_; }
  /// The options, as constructed.
  const DataLoaderOptions& options() const { return options_; }
  /// Dataset indices of every batch of `epoch`, in order (before batching).
  std::vector<int64_t> epoch_order(int64_t epoch) const;

  /// {epoch, batch, seed, batch_size, dataset_size, shuffle, drop_last, num_replicas, rank}
  /// as int64 scalars (states without the last two load as one process).
  /// load_state restores the position and seed, so the next batch is exactly the one an
  /// uninterrupted run would have produced; it refuses a state saved for another batch
  /// size, dataset size, shuffle or drop_last setting, another num_replicas (a position does
  /// not carry over to another world size: catch the error and restart the epoch) or
  /// another rank (the position is the same on every rank, but each loads its own).
  StateDict state() const;
  /// Restores a state() (see state()).
  void load_state(const StateDict& sd);

 private:
  void stop_pass();
  int64_t shard_size() const;  ///< examples per epoch for this rank
  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions options_;
  std::shared_ptr<detail::Cursor> cursor_;
  std::weak_ptr<detail::Pass> pass_;
};

}  // namespace tc::data
