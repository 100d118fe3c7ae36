/// \file
/// Sharded optimizer state: ZeRO stages 1 and 2 (PyTorch's ZeroRedundancyOptimizer,
/// DeepSpeed's ZeRO), on a DistributedDataParallel's buckets.
///
/// \code{.cpp}
///   tc::dist::DistributedDataParallel ddp(model);
///   tc::optim::AdamW opt(model->parameters(), tc::optim::AdamWOptions(1e-3));
///   tc::dist::ZeroRedundancyOptimizer zero(ddp, opt, tc::dist::ZeroOptions().stage(2));
///   tc::amp::GradScaler scaler;
///   tc::dist::sync_grad_scaler(scaler);
///   for (auto& batch : loader) {                     // the loop of DDP, unchanged
///     opt.zero_grad();
///     scaler.scale(loss_fn(model->forward(batch.data), batch.target)).backward();
///     scaler.step(opt);                              // this rank's shard, then an all-gather
///     scaler.update();
///   }
/// \endcode
///
/// Rank r owns, of every bucket of n elements, the elements [r c, (r + 1) c) with
/// c = ceil(n / p): the chunk the ordered reduction already sums on rank r. The constructor
/// replaces the optimizer's parameters with views of the owned elements (1-D slices of the
/// model's parameters, in their dtype), so the optimizer keeps fp32 masters and moments of
/// about 1/p of the model. After backward each view's .grad() is its part of the averaged
/// gradient, and the model's own .grad() is freed once copied into its bucket; after every
/// step() a post-step hook all-gathers the updated values into the model's parameters, in
/// their dtype (fp32 where a bucket mixes dtypes: exact both ways).
///
/// - Stage 1 all-reduces each bucket as DDP does and keeps the buckets (full gradients, in
///   comm_dtype); stage 2 reduce-scatters them (half the bytes) and frees each bucket
///   after its reduction, so a rank holds 1/p of the gradients between backward and step.
/// - The result is bitwise DDP's for fp32 and 16-bit communication, with SGD, Adam or
///   AdamW, any WeightUpdate and nearest-even rounding: the shard's gradients are DDP's
///   values and the updates are elementwise. (Stochastic rounding draws per parameter
///   index, so its bits follow the layout; gradients left to accumulate across steps
///   without zero_grad add the averages rather than average the sums.)
/// - The GradScaler needs sync_grad_scaler: each rank checks only its shard for inf/NaN.
/// - Gradient clipping: clip_grad_norm_() below (the model's .grad() are not kept).
/// - Parameters must be contiguous and float32, bf16 or fp16.
#pragma once
#include <cstdint>
#include <filesystem>
#include <vector>

#include "tensorcast/dist/ddp.h"
#include "tensorcast/io/safetensors.h"
#include "tensorcast/optim/optimizer.h"
#include "tensorcast/state_dict.h"

namespace tc::dist {

/// Options of ZeroRedundancyOptimizer.
struct ZeroOptions {
  /// 1: shard the optimizer state; 2: the gradients too (a reduce-scatter).
  TC_ARG(int, stage) = 1;
};

/// What one rank holds, in bytes.
struct ShardMemory {
  int64_t parameters = 0;       ///< the model's parameters (replicated: the compute copy)
  int64_t gradients = 0;        ///< gradients between backward and step (buckets, shard grads)
  int64_t optimizer_state = 0;  ///< masters, moments, compensation, step counts
};

/// The unsharded state dict of `optimizer` (built over the whole model, as it was before a
/// ZeroRedundancyOptimizer sharded it) from the shard files of a run (`paths[r]` written by
/// rank r with save_shard), for a process that trains without sharding. Errors as
/// ZeroRedundancyOptimizer::load_shards.
StateDict read_shards(const std::vector<std::filesystem::path>& paths, const optim::Optimizer& optimizer,
                      const io::Metadata& expect = {});

/// The bytes of an optimizer's state (masters, moments, compensation buffers, step counts).
int64_t optimizer_state_bytes(const optim::Optimizer& optimizer);
/// What a rank of a DistributedDataParallel without ZeRO holds (for comparison).
ShardMemory replicated_memory(const DistributedDataParallel& ddp, const optim::Optimizer& optimizer);

/// ZeRO stage 1 or 2 on a DistributedDataParallel (see the top of this file).
class ZeroRedundancyOptimizer {
 public:
  /// Shards `optimizer`, which must hold no state yet (construct before the first step)
  /// and only parameters of `ddp`'s module; both must outlive this object. Every rank
  /// constructs one, with the same stage.
  ZeroRedundancyOptimizer(DistributedDataParallel& ddp, optim::Optimizer& optimizer, ZeroOptions options = {});
  ~ZeroRedundancyOptimizer();  ///< gives `ddp` back its replicated gradients; `optimizer` keeps its shard
  ZeroRedundancyOptimizer(const ZeroRedundancyOptimizer&) = delete;
  ZeroRedundancyOptimizer& operator=(const ZeroRedundancyOptimizer&) = delete;

  /// 1 or 2.
  int stage() const { return options_.stage(); }
  /// Elements of the model this rank updates (about numel / p).
  int64_t shard_numel() const;
  /// What this rank holds now.
  ShardMemory memory() const;
  /// nn::utils::clip_grad_norm_ across the shards: the norm of the whole averaged gradient
  /// (each shard's sum of |g|^norm_type in float64, gathered and added in rank order) and
  /// every shard gradient scaled by max_norm / (norm + 1e-6) when the norm exceeds
  /// max_norm. Returns the norm. With a GradScaler, call scaler.unscale_(optimizer) first.
  /// Every rank must call it.
  double clip_grad_norm_(double max_norm, double norm_type = 2.0, bool error_if_nonfinite = false);

  /// The optimizer's state as the unsharded optimizer would save it (over the model's
  /// parameters, in the order they were given), gathered from every rank: what a
  /// checkpoint holds, loadable by one process or any world size. Bitwise the state of a
  /// DDP run's optimizer where the parameters are. Every rank must call it; each gets it.
  StateDict state_dict() const;
  /// Loads a state_dict() (of any world size, or of the unsharded optimizer): each rank
  /// keeps the slices of its shard. A dict of another model is refused naming the entry.
  void load_state_dict(const StateDict& sd);

  /// Writes this rank's shard of the optimizer state to `path`, atomically: the sharded
  /// optimizer's state dict, which elements of which parameter each entry holds, and in
  /// the metadata the rank, the world size, the bucket layout and `metadata`. What a
  /// checkpoint of a model too large to gather on one rank saves (one file per rank).
  void save_shard(const std::filesystem::path& path, const io::Metadata& metadata = {}) const;
  /// Loads the state from the shard files of a run (`paths[r]` written by rank r, of any
  /// world size). On the same world size and bucket layout a rank reads its own file only;
  /// otherwise every file, and keeps its slices. A file of another rank, world size or
  /// model, one lacking an entry of `expect`'s metadata, or a set of files that leaves part
  /// of a parameter's state uncovered is refused with an error naming the file and rank.
  /// Nothing is loaded on error.
  void load_shards(const std::vector<std::filesystem::path>& paths, const io::Metadata& expect = {});

 private:
  struct Piece {
    Tensor view;               ///< the owned elements of one parameter, 1-D, sharing its storage
    int64_t offset = 0;        ///< where they start in this rank's chunk of their bucket
    size_t param = 0;          ///< the parameter's index in the optimizer as it was given
    int64_t param_offset = 0;  ///< where they start in the parameter
    size_t shard_index = 0;    ///< the view's index in the sharded optimizer
  };
  struct BucketShard {
    std::vector<Piece> pieces;
    DType gather_dtype = kFloat32;  ///< the dtype the parameters are all-gathered in
    int64_t chunk = 0;              ///< ordered_chunk of the bucket
  };
  void receive(size_t bucket, const Tensor& owned);
  std::string layout() const;
  void gather();

  DistributedDataParallel& ddp_;
  optim::Optimizer& optimizer_;
  ZeroOptions options_;
  std::vector<BucketShard> shards_;
  std::vector<Tensor> params_;                     ///< the optimizer's parameters as given, in group order
  std::vector<std::vector<size_t>> group_params_;  ///< indices into params_, per group
  int64_t hook_ = -1;
};

}  // namespace tc::dist
