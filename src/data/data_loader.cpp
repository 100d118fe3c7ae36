// DataLoader: one Pass per epoch run, whose worker thread fills a bounded queue of batches.
//
// Threading: the worker reads only immutable data (the dataset, the pass's order) and
// writes only the queue (under the mutex); the loader's position (Cursor) is touched by
// the consuming thread alone. A Pass is joined by stop(), which the iterator (via the
// Pass's destructor), a newer begin() and the loader's destructor all call.
#include "tensorcast/data/data_loader.h"

#include <bit>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>

#include "data/shuffle.h"
#include "tensorcast/cuda.h"

namespace tc::data {
namespace detail {

struct Cursor {
  int64_t epoch = 0;
  int64_t batch = 0;  // next batch to hand out in `epoch`
};

struct Pass {
  struct Item {
    Example batch;
    std::exception_ptr error;
  };

  Pass(std::shared_ptr<const Dataset> dataset, std::vector<int64_t> order, int64_t batch_size, int64_t num_batches,
       int64_t epoch, std::shared_ptr<Cursor> cursor, int64_t prefetch, bool pin)
      : dataset_(std::move(dataset)),
        order_(std::move(order)),
        batch_size_(batch_size),
        num_batches_(num_batches),
        epoch_(epoch),
        cursor_(std::move(cursor)),
        capacity_(prefetch),
        pin_(pin),
        next_(cursor_->batch) {
    if (capacity_ > 0 && next_ < num_batches_) worker_ = std::thread([this, start = next_] { run(start); });
  }
  ~Pass() { stop(); }
  Pass(const Pass&) = delete;
  Pass& operator=(const Pass&) = delete;

  Example produce(int64_t k) const {
    const int64_t begin = k * batch_size_;
    const int64_t end = std::min<int64_t>(begin + batch_size_, static_cast<int64_t>(order_.size()));
    Example batch =
        dataset_->get_batch(std::span<const int64_t>(order_.data() + begin, static_cast<size_t>(end - begin)));
    if (pin_) batch = {batch.data.pin_memory(), batch.target.pin_memory()};  // on the worker, off the loop
    return batch;
  }

  void run(int64_t start) {
    for (int64_t k = start; k < num_batches_; ++k) {
      {
        std::unique_lock lock(mutex_);
        not_full_.wait(lock, [&] { return stop_ || static_cast<int64_t>(queue_.size()) < capacity_; });
        if (stop_) return;
      }
      Item item;
      try {
        item.batch = produce(k);
      } catch (...) {
        item.error = std::current_exception();
      }
      const bool failed = item.error != nullptr;
      {
        std::lock_guard lock(mutex_);
        if (stop_) return;
        queue_.push_back(std::move(item));
      }
      not_empty_.notify_one();
      if (failed) return;
    }
  }

  // The next batch of the pass, or nullopt when it is over or was stopped. Rethrows a
  // worker's exception; the position then stays at the failed batch.
  std::optional<Example> next() {
    if (stopped_ || next_ >= num_batches_) return std::nullopt;
    Example batch;
    if (capacity_ == 0) {
      batch = produce(next_);
    } else {
      Item item;
      {
        std::unique_lock lock(mutex_);
        not_empty_.wait(lock, [&] { return !queue_.empty(); });
        item = std::move(queue_.front());
        queue_.pop_front();
      }
      not_full_.notify_one();
      if (item.error) {
        stop();
        std::rethrow_exception(item.error);
      }
      batch = std::move(item.batch);
    }
    cursor_->batch = ++next_;
    return batch;
  }

  // True when every batch of the epoch was handed out by a pass nobody stopped.
  bool completed() const { return !stopped_ && next_ >= num_batches_; }
  void advance_epoch() { *cursor_ = {epoch_ + 1, 0}; }

  void stop() {
    if (stopped_) return;
    stopped_ = true;
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    not_full_.notify_all();
    if (worker_.joinable()) worker_.join();
    queue_.clear();
  }

 private:
  const std::shared_ptr<const Dataset> dataset_;
  const std::vector<int64_t> order_;
  const int64_t batch_size_, num_batches_, epoch_;
  const std::shared_ptr<Cursor> cursor_;
  const int64_t capacity_;
  const bool pin_;
  int64_t next_;          // consumer side
  bool stopped_ = false;  // consumer side

  std::mutex mutex_;
  std::condition_variable not_full_, not_empty_;
  std::deque<Item> queue_;
  bool stop_ = false;  // guarded by mutex_
  std::thread worker_;
};

}  // namespace detail

namespace {
constexpr const char* kOp = "data";
}

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options)
    : dataset_(std::move(dataset)), options_(options), cursor_(std::make_shared<detail::Cursor>()) {
  TC_CHECK(dataset_ != nullptr, kOp, "DataLoader needs a dataset, got a null pointer");
  TC_CHECK(options_.batch_size() >= 1, kOp, "DataLoader batch_size must be at least 1, got ", options_.batch_size());
  TC_CHECK(options_.prefetch() >= 0, kOp, "DataLoader prefetch must be 0 (no thread) or more, got ",
           options_.prefetch());
  TC_CHECK(options_.num_replicas() >= 1, kOp, "DataLoader num_replicas must be at least 1, got ",
           options_.num_replicas());
  TC_CHECK(options_.rank() >= 0 && options_.rank() < options_.num_replicas(), kOp, "DataLoader rank must be in [0, ",
           options_.num_replicas(), ") for num_replicas ", options_.num_replicas(), ", got ", options_.rank());
  // drop_last cuts the permutation to floor(n / num_replicas) * num_replicas, which is 0
  // when n < num_replicas: every rank would silently read nothing, forever. (One process,
  // num_replicas 1, keeps its old behaviour: an empty dataset is an empty loader.)
  TC_CHECK(!(options_.drop_last() && options_.num_replicas() > 1 && dataset_->size() < options_.num_replicas()), kOp,
           "DataLoader with drop_last and num_replicas ", options_.num_replicas(),
           " has nothing to read: the dataset has ", dataset_->size(),
           " examples, fewer than num_replicas (without drop_last the shards are padded instead)");
}

DataLoader::~DataLoader() { stop_pass(); }

void DataLoader::stop_pass() {
  if (auto p = pass_.lock()) p->stop();
  pass_.reset();
}

int64_t DataLoader::shard_size() const {
  const int64_t n = dataset_->size(), r = options_.num_replicas();
  if (r == 1) return n;
  return options_.drop_last() ? n / r : (n + r - 1) / r;
}

int64_t DataLoader::size() const {
  const int64_t n = shard_size(), b = options_.batch_size();
  return options_.drop_last() ? n / b : (n + b - 1) / b;
}

int64_t DataLoader::epoch() const { return cursor_->epoch; }
int64_t DataLoader::batch_index() const { return cursor_->batch; }

void DataLoader::set_epoch(int64_t epoch) {
  TC_CHECK(epoch >= 0, kOp, "DataLoader epoch must be 0 or more, got ", epoch);
  stop_pass();
  *cursor_ = {epoch, 0};
}

std::vector<int64_t> DataLoader::epoch_order(int64_t epoch) const {
  const int64_t n = dataset_->size();
  std::vector<int64_t> order;
  if (options_.shuffle()) {
    order = permutation(n, options_.seed() + static_cast<uint64_t>(epoch));
  } else {
    order.resize(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), int64_t{0});
  }
  const int64_t r = options_.num_replicas();
  if (r == 1) return order;
  // PyTorch's DistributedSampler: the same permutation on every rank, padded with its own
  // first elements (or cut) to a multiple of the world size, then rank k takes k, k + r, ...
  const int64_t per = shard_size();
  std::vector<int64_t> shard(static_cast<size_t>(per));
  for (int64_t j = 0; j < per; ++j) {
    const int64_t pos = j * r + options_.rank();
    shard[static_cast<size_t>(j)] = order[static_cast<size_t>(pos % n)];
  }
  return shard;
}

DataLoader::Iterator DataLoader::begin() {
  stop_pass();  // one pass at a time: an older iterator simply ends
  const int64_t n = size();
  if (n > 0 && cursor_->batch >= n) *cursor_ = {cursor_->epoch + 1, 0};
  auto pass =
      std::make_shared<detail::Pass>(dataset_, epoch_order(cursor_->epoch), options_.batch_size(), n, cursor_->epoch,
                                     cursor_, options_.prefetch(), options_.pin_memory() && cuda::is_available());
  pass_ = pass;
  return Iterator(std::move(pass));
}

DataLoader::Iterator::Iterator(std::shared_ptr<detail::Pass> pass) : pass_(std::move(pass)) { fetch(); }

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  fetch();
  return *this;
}

void DataLoader::Iterator::fetch() {
  if (done_) return;
  if (auto batch = pass_->next()) {
    current_ = std::move(*batch);
    return;
  }
  done_ = true;
  current_ = {};
  if (pass_->completed()) {
    // The cursor is shared with the loader; advancing here makes the next range-for
    // start the next epoch, and a state() taken now says so.
    pass_->advance_epoch();
  }
  pass_.reset();  // joins the worker if this was the last reference
}

StateDict DataLoader::state() const {
  return {
      {"epoch", state_int(cursor_->epoch)},
      {"batch", state_int(cursor_->batch)},
      {"seed", state_int(std::bit_cast<int64_t>(options_.seed()))},
      {"batch_size", state_int(options_.batch_size())},
      {"dataset_size", state_int(dataset_->size())},
      {"shuffle", state_int(options_.shuffle())},
      {"drop_last", state_int(options_.drop_last())},
      {"num_replicas", state_int(options_.num_replicas())},
      {"rank", state_int(options_.rank())},
  };
}

void DataLoader::load_state(const StateDict& sd) {
  // Every entry is checked (a checkpoint file may hold anything) before anything changes.
  auto get = [&](const char* key) { return read_state_int(sd, key, kOp); };
  auto same = [&](const char* key, int64_t mine, const char* what) {
    const int64_t saved = get(key);
    TC_CHECK(saved == mine, kOp, "cannot resume the data loader: its state was saved with ", key, " ", saved,
             " but this loader has ", mine, "; ", what);
  };
  same("batch_size", options_.batch_size(), "resume with the same batch size");
  same("dataset_size", dataset_->size(), "resume with the same dataset");
  same("shuffle", options_.shuffle(), "resume with the same shuffle setting");
  same("drop_last", options_.drop_last(), "resume with the same drop_last setting");
  // Older states have no sharding keys: one process. Another world size shards the data
  // differently, so the position cannot carry over (a caller may restart the epoch).
  // The position (epoch, batch) is the same on every rank, since every rank has size()
  // batches and steps in lockstep; still, each rank must load a state saved for its own
  // rank, so a state from another rank is refused (a caller that shares one rank's state,
  // like the CLI, rewrites "rank" deliberately).
  auto get_or = [&](const char* key, int64_t fallback) { return sd.count(key) ? get(key) : fallback; };
  const int64_t replicas = get_or("num_replicas", 1), rank = get_or("rank", 0);
  TC_CHECK(replicas == options_.num_replicas(), kOp, "cannot resume the data loader: its state was saved with ",
           "num_replicas ", replicas, " but this loader has ", options_.num_replicas(),
           "; a position does not carry over to another world size (restart the epoch instead)");
  TC_CHECK(rank == options_.rank(), kOp, "cannot resume the data loader: its state was saved by rank ", rank,
           " but this loader is rank ", options_.rank(), " (the position itself is the same on every rank)");
  const int64_t epoch = get("epoch"), batch = get("batch");
  TC_CHECK(epoch >= 0 && batch >= 0 && batch <= size(), kOp, "cannot resume the data loader: position epoch ", epoch,
           " batch ", batch, " is invalid for ", size(), " batches per epoch; the checkpoint is corrupt");
  // The seed is an int64 scalar holding the uint64 bits (exact, unlike a float64).
  const auto seed = std::bit_cast<uint64_t>(get("seed"));
  stop_pass();
  options_.seed(seed);
  *cursor_ = {epoch, batch};
}

}  // namespace tc::data
