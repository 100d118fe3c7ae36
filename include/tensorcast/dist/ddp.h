/// \file
/// Data-parallel training (torch.nn.parallel.DistributedDataParallel), on tc::dist.
///
/// \code{.cpp}
///   tc::dist::init();
///   auto model = std::make_shared<Net>();            // same seed or not: rank 0's values win
///   tc::dist::DistributedDataParallel ddp(model);    // broadcasts parameters and buffers
///   tc::amp::GradScaler scaler;
///   tc::dist::sync_grad_scaler(scaler);              // one skip/step decision for all ranks
///   for (auto& batch : loader) {                     // DataLoaderOptions().num_replicas(p).rank(r)
///     opt.zero_grad();
///     auto loss = loss_fn(model->forward(batch.data), batch.target);
///     scaler.scale(loss).backward();                 // .grad() holds the average over ranks
///     scaler.step(opt);
///     scaler.update();
///   }
/// \endcode
///
/// The model's forward is called directly: reduction hooks are on the parameters, so
/// nothing wraps the forward. Gradients are grouped in buckets (about bucket_cap_bytes, in
/// reverse registration order, which is roughly the order backward produces them; the
/// first bucket is at most 1 MiB so communication starts early). When the last gradient of
/// a bucket is accumulated, the bucket's all-reduce is queued on the communication thread
/// and runs while backward goes on; when backward ends, the remaining buckets are queued,
/// all are waited for, and the averaged values are written back to .grad(). Buckets are
/// always queued in index order, so every rank issues the same collectives in the same
/// order even when gradients complete in a different order.
///
/// Gradient accumulation: under no_sync() backward only accumulates locally; the first
/// backward outside it reduces the accumulated gradients (as in PyTorch).
///
/// Buffers (running statistics) are broadcast from rank 0 at construction only.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tensorcast/amp/grad_scaler.h"
#include "tensorcast/dist/process_group.h"
#include "tensorcast/nn/module.h"

namespace tc::dist {

/// Options of DistributedDataParallel.
struct DistributedDataParallelOptions {
  /// Bytes of gradient per bucket (PyTorch's bucket_cap_mb = 25). kOneBucket puts every
  /// gradient in one bucket (no overlap; fewest messages).
  TC_ARG(int64_t, bucket_cap_bytes) = int64_t{25} << 20;
  /// The dtype on the wire: fp32 (default) or bf16/fp16 (half the bytes). Either way the
  /// sum is taken in fp32 in rank order (all_reduce_ordered_async): the average is the same
  /// on every rank and bitwise that of one process accumulating the ranks' gradients.
  TC_ARG(DType, comm_dtype) = kFloat32;
  /// A parameter without a gradient in a backward is an error naming it (false), or counts
  /// as a zero gradient on that rank (true), as PyTorch's find_unused_parameters.
  TC_ARG(bool, find_unused_parameters) = false;
};
/// bucket_cap_bytes that puts every gradient in one bucket.
inline constexpr int64_t kOneBucket = int64_t{1} << 62;

/// What the last synchronized backward did, for benchmarks and tests (seconds on
/// tc::dist::now()'s clock).
struct SyncStats {
  int64_t buckets = 0;         ///< buckets all-reduced
  int64_t bytes = 0;           ///< payload all-reduced (wire bytes per rank: 2(p-1)/p of it for a ring)
  double first_launch = 0;     ///< when the first bucket was queued
  double first_start = 0;      ///< when the communication thread began the first bucket
  double backward_end = 0;     ///< when the engine finished the graph
  double comm_seconds = 0;     ///< sum over buckets of their communication time
  double hidden_seconds = 0;   ///< the part of comm_seconds before backward_end
  double exposed_seconds = 0;  ///< waited after backward_end
};

/// Data parallelism for a module (PyTorch's DistributedDataParallel): averages gradients across ranks in buckets,
/// overlapped with backward (see the top of this file).
class DistributedDataParallel {
 public:
  /// Wraps `module`: broadcasts rank 0's parameters and buffers and hooks the gradients.
  explicit DistributedDataParallel(std::shared_ptr<nn::Module> module, DistributedDataParallelOptions options = {});
  ~DistributedDataParallel();  ///< removes the hooks
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  /// The wrapped module.
  nn::Module& module() { return *module_; }
  /// The options, as constructed.
  const DistributedDataParallelOptions& options() const { return options_; }

  /// RAII: backward in its scope accumulates gradients locally without communicating.
  class NoSync {
   public:
    /// Turns synchronization off until destroyed.
    explicit NoSync(DistributedDataParallel& ddp) : ddp_(ddp), prev_(ddp.sync_enabled_) { ddp.sync_enabled_ = false; }
    ~NoSync() { ddp_.sync_enabled_ = prev_; }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool prev_;
  };
  /// A guard in whose scope backward does not communicate (gradient accumulation).
  [[nodiscard]] NoSync no_sync() { return NoSync(*this); }

  /// Timings of the last synchronized backward.
  const SyncStats& last_sync() const { return stats_; }
  /// Bytes of the module's parameters (those that require grad) on this rank.
  int64_t parameter_bytes() const;
  /// Bytes of gradients this rank holds: the parameters' .grad() and the buckets.
  int64_t gradient_bytes() const;
  /// Parameter names per bucket, in the order buckets are reduced.
  std::vector<std::vector<std::string>> bucket_parameter_names() const;

 private:
  friend class ZeroRedundancyOptimizer;
  struct Slot {
    std::string name;
    Tensor param;
    int64_t bucket = 0;
    int64_t offset = 0;  ///< where this parameter starts in its bucket
    Tensor view;         ///< this parameter's part of its bucket, shaped as the parameter
    int64_t hook = 0;
    bool ready = false;
  };
  struct Bucket {
    int64_t numel = 0;
    Tensor flat;  ///< comm_dtype; while sharded at stage 2, only from its first gradient to its reduction
    Tensor mine;  ///< stage 2: this rank's chunk of the reduced bucket (ordered_chunk(numel) elements)
    std::vector<size_t> slots;
    size_t pending = 0;  ///< gradients still to come in this backward
    std::shared_ptr<Work> work;
  };

  // Set by a ZeroRedundancyOptimizer: 0 writes the averaged gradients to .grad(); 1 or 2
  // hands the chunk this rank owns of each reduced bucket to `shard_sink_` and frees the
  // parameters' gradients once copied into their bucket (2 also reduce-scatters instead of
  // all-reducing, and frees each bucket after its reduction).
  int shard_stage_ = 0;
  std::function<void(size_t bucket, const Tensor& owned)> shard_sink_;
  void allocate(Bucket& b);
  // [begin, end) of a bucket of `numel` elements that this rank owns (ordered_chunk).
  static std::pair<int64_t, int64_t> owned_range(int64_t numel);
  void on_gradient(size_t slot);
  void launch_ready_buckets();
  void launch(Bucket& b);
  void finish_backward();
  void reset_step();

  std::shared_ptr<nn::Module> module_;
  DistributedDataParallelOptions options_;
  std::vector<Slot> slots_;
  std::vector<Bucket> buckets_;
  size_t next_launch_ = 0;
  bool in_backward_ = false;
  bool sync_enabled_ = true;
  SyncStats stats_;
};

/// Makes `scaler` all-reduce its found_inf with MAX before each decision, so every rank
/// skips or steps together and keeps the same scale even when gradients differ across
/// ranks (sharded optimizer state, no_sync accumulation, a rank's own overflow).
void sync_grad_scaler(amp::GradScaler& scaler);

}  // namespace tc::dist
