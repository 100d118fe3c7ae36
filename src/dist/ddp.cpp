// DistributedDataParallel: bucketed gradient all-reduce overlapped with backward.
#include "tensorcast/dist/ddp.h"

#include <algorithm>
#include <cmath>

#include "tensorcast/autograd.h"
#include "tensorcast/error.h"
#include "tensorcast/factories.h"

namespace tc::dist {
namespace {

constexpr const char* kOp = "DistributedDataParallel";
constexpr int64_t kFirstBucketCap = int64_t{1} << 20;  // PyTorch's: start communicating early

// Every rank must hold the same parameters, or the buckets would not line up.
void check_same_layout(const nn::NamedTensors& params) {
  int64_t numel = 0;
  for (const auto& [name, p] : params) numel += p.numel();
  const std::vector<int64_t> local{static_cast<int64_t>(params.size()), numel};
  const Tensor hi = tensor(local), lo = tensor(local);
  all_reduce(hi, ReduceOp::Max);
  all_reduce(lo, ReduceOp::Min);
  const int64_t* h = hi.data_ptr<int64_t>();
  const int64_t* l = lo.data_ptr<int64_t>();
  TC_CHECK(h[0] == l[0] && h[1] == l[1], kOp, "ranks hold different models: this rank (", rank(), ") has ",
           params.size(), " parameters of ", numel, " elements; across ranks from ", l[0], " to ", h[0],
           " parameters of ", l[1], " to ", h[1], " elements");
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module,
                                                 DistributedDataParallelOptions options)
    : module_(std::move(module)), options_(options) {
  TC_CHECK(module_ != nullptr, kOp, "the module is null");
  TC_CHECK(is_initialized(), kOp, "call tc::dist::init() first");
  TC_CHECK(options_.bucket_cap_bytes() > 0, kOp, "bucket_cap_bytes must be positive, got ",
           options_.bucket_cap_bytes());
  const DType wire = options_.comm_dtype();
  TC_CHECK(wire == kFloat32 || wire == kBFloat16 || wire == kFloat16, kOp,
           "comm_dtype must be float32, bfloat16 or float16, got ", dtype_name(wire));

  nn::NamedTensors params;
  for (auto& [name, p] : module_->named_parameters())
    if (p.requires_grad()) params.emplace_back(name, p);
  check_same_layout(params);
  {
    NoGradGuard no_grad;  // rank 0's values everywhere, as PyTorch's constructor
    for (auto& [name, p] : module_->named_parameters()) broadcast(p, 0);
    for (auto& [name, b] : module_->named_buffers()) broadcast(b, 0);
  }

  // Buckets in reverse registration order: the last layers' gradients come first.
  const int64_t elem = static_cast<int64_t>(element_size(wire));
  const int64_t cap = options_.bucket_cap_bytes();
  const int64_t first_cap = cap == kOneBucket ? cap : std::min(cap, kFirstBucketCap);
  std::vector<std::vector<size_t>> groups;
  int64_t filled = 0;
  for (size_t k = params.size(); k-- > 0;) {
    const int64_t bytes = params[k].second.numel() * elem;
    if (groups.empty() || (filled > 0 && filled + bytes > (groups.size() == 1 ? first_cap : cap))) {
      groups.emplace_back();
      filled = 0;
    }
    groups.back().push_back(slots_.size());
    filled += bytes;
    slots_.push_back(Slot{params[k].first, params[k].second, 0, 0, Tensor(), 0, false});
  }
  buckets_.resize(groups.size());
  for (size_t b = 0; b < groups.size(); ++b) {
    Bucket& bucket = buckets_[b];
    bucket.slots = groups[b];
    for (size_t s : groups[b]) {
      Slot& slot = slots_[s];
      slot.bucket = static_cast<int64_t>(b);
      slot.offset = bucket.numel;
      bucket.numel += slot.param.numel();
    }
    allocate(bucket);
  }
  for (size_t s = 0; s < slots_.size(); ++s)
    slots_[s].hook =
        autograd::register_post_accumulate_grad_hook(slots_[s].param, [this, s](const Tensor&) { on_gradient(s); });
  reset_step();
}

DistributedDataParallel::~DistributedDataParallel() {
  for (Slot& s : slots_) autograd::remove_post_accumulate_grad_hook(s.param, s.hook);
}

std::pair<int64_t, int64_t> DistributedDataParallel::owned_range(int64_t numel) {
  const int64_t chunk = ordered_chunk(numel);
  const int64_t begin = std::min(numel, rank() * chunk);
  return {begin, std::min(numel, begin + chunk)};
}

void DistributedDataParallel::allocate(Bucket& b) {
  if (b.flat.defined()) return;
  b.flat = zeros({b.numel}, options_.comm_dtype());
  for (size_t s : b.slots) {
    Slot& slot = slots_[s];
    slot.view = b.flat.narrow(0, slot.offset, slot.param.numel()).view(slot.param.sizes());
  }
}

int64_t DistributedDataParallel::parameter_bytes() const {
  int64_t bytes = 0;
  for (const Slot& s : slots_) bytes += static_cast<int64_t>(s.param.nbytes());
  return bytes;
}

int64_t DistributedDataParallel::gradient_bytes() const {
  int64_t bytes = 0;
  for (const Slot& s : slots_)
    if (s.param.grad().defined()) bytes += static_cast<int64_t>(s.param.grad().nbytes());
  for (const Bucket& b : buckets_) {
    if (b.flat.defined()) bytes += static_cast<int64_t>(b.flat.nbytes());
    if (b.mine.defined()) bytes += static_cast<int64_t>(b.mine.nbytes());
  }
  return bytes;
}

std::vector<std::vector<std::string>> DistributedDataParallel::bucket_parameter_names() const {
  std::vector<std::vector<std::string>> out;
  for (const Bucket& b : buckets_) {
    out.emplace_back();
    for (size_t s : b.slots) out.back().push_back(slots_[s].name);
  }
  return out;
}

void DistributedDataParallel::reset_step() {
  for (Slot& s : slots_) s.ready = false;
  for (Bucket& b : buckets_) {
    b.pending = b.slots.size();
    b.work.reset();
  }
  next_launch_ = 0;
  in_backward_ = false;
}

void DistributedDataParallel::on_gradient(size_t s) {
  if (!sync_enabled_) return;
  if (!in_backward_) {
    in_backward_ = true;
    stats_ = SyncStats{};
    autograd::queue_callback([this] { finish_backward(); });
  }
  Slot& slot = slots_[s];
  if (slot.ready) return;  // a second accumulation in the same backward: already copied
  slot.ready = true;
  Bucket& bucket = buckets_[static_cast<size_t>(slot.bucket)];
  allocate(bucket);
  slot.view.copy_(slot.param.grad());  // converts to the wire dtype; reads a channels-last grad by strides
  if (shard_stage_ > 0) slot.param.set_grad(Tensor());  // the bucket holds it now
  if (--bucket.pending == 0) launch_ready_buckets();
}

void DistributedDataParallel::launch_ready_buckets() {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) launch(buckets_[next_launch_++]);
}

void DistributedDataParallel::launch(Bucket& b) {
  if (stats_.buckets == 0) stats_.first_launch = now();
  ++stats_.buckets;
  stats_.bytes += static_cast<int64_t>(b.flat.nbytes());
  if (shard_stage_ == 2) {
    if (!b.mine.defined()) b.mine = empty({ordered_chunk(b.numel)}, b.flat.dtype());
    b.work = reduce_scatter_ordered_async(b.flat, b.mine, ReduceOp::Avg);
  } else {
    b.work = all_reduce_ordered_async(b.flat, ReduceOp::Avg);
  }
}

void DistributedDataParallel::finish_backward() {
  stats_.backward_end = now();
  // Parameters this backward did not reach.
  std::string unused;
  for (Slot& s : slots_) {
    if (s.ready) continue;
    if (!options_.find_unused_parameters()) {
      unused += (unused.empty() ? "" : ", ") + s.name;
      continue;
    }
    // A zero contribution, or this rank's earlier accumulated gradient when it has one.
    allocate(buckets_[static_cast<size_t>(s.bucket)]);
    if (s.param.grad().defined())
      s.view.copy_(s.param.grad());
    else
      s.view.zero_();
    s.ready = true;
    --buckets_[static_cast<size_t>(s.bucket)].pending;
  }
  if (!unused.empty()) {
    // The buckets already queued must still complete on every rank.
    for (Bucket& b : buckets_)
      if (b.work) b.work->wait();
    reset_step();
    TC_FAIL(kOp, "rank ", rank(), ": these parameters received no gradient in this backward: ", unused,
            ". Every parameter must take part in the loss on every rank, or construct with "
            "DistributedDataParallelOptions().find_unused_parameters(true) to count them as zero.");
  }
  launch_ready_buckets();
  std::exception_ptr error;
  for (Bucket& b : buckets_) {
    try {
      b.work->wait();
    } catch (...) {
      if (!error) error = std::current_exception();
    }
  }
  const double done = now();
  stats_.exposed_seconds = done - stats_.backward_end;
  if (!buckets_.empty()) stats_.first_start = buckets_[0].work->start_time();
  for (Bucket& b : buckets_) {
    const double start = b.work->start_time(), end = b.work->end_time();
    stats_.comm_seconds += end - start;
    stats_.hidden_seconds += std::max(0.0, std::min(end, stats_.backward_end) - start);
  }
  if (error) {
    reset_step();
    std::rethrow_exception(error);
  }
  if (shard_stage_ > 0) {
    for (size_t k = 0; k < buckets_.size(); ++k) {
      Bucket& b = buckets_[k];
      const auto [begin, end] = owned_range(b.numel);
      shard_sink_(k, shard_stage_ == 2 ? b.mine.narrow(0, 0, end - begin) : b.flat.narrow(0, begin, end - begin));
      if (shard_stage_ == 2) {
        b.flat = Tensor();
        for (size_t s : b.slots) slots_[s].view = Tensor();
      }
    }
    reset_step();
    return;
  }
  {
    NoGradGuard no_grad;
    for (Slot& s : slots_) {
      Tensor g = s.param.grad();
      if (g.defined())
        g.copy_(s.view);
      else
        s.param.set_grad(s.view.to(s.param.dtype()).clone());
    }
  }
  reset_step();
}

void sync_grad_scaler(amp::GradScaler& scaler) {
  scaler.set_found_inf_reduction([](const Tensor& found_inf) { all_reduce(found_inf, ReduceOp::Max); });
}

}  // namespace tc::dist
