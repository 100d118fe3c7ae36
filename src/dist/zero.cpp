// ZeRO stages 1 and 2: the optimizer updates this rank's chunk of every DDP bucket.
#include "tensorcast/dist/zero.h"

#include <charconv>
#include <cmath>
#include <map>
#include <unordered_map>

#include "tensorcast/autograd.h"
#include "tensorcast/error.h"
#include "tensorcast/factories.h"
#include "tensorcast/io/safetensors.h"
#include "tensorcast/nn/utils.h"

namespace tc::dist {
namespace {

constexpr const char* kOp = "ZeroRedundancyOptimizer";

// A parameter as one flat run of elements, sharing its storage.
Tensor flat(const Tensor& param) { return param.detach().view({param.numel()}); }

}  // namespace

int64_t optimizer_state_bytes(const optim::Optimizer& optimizer) {
  int64_t bytes = 0;
  for (const auto& [key, t] : optimizer.state_dict())
    if (key.starts_with("state.")) bytes += static_cast<int64_t>(t.nbytes());
  return bytes;
}

ShardMemory replicated_memory(const DistributedDataParallel& ddp, const optim::Optimizer& optimizer) {
  return {ddp.parameter_bytes(), ddp.gradient_bytes(), optimizer_state_bytes(optimizer)};
}

ZeroRedundancyOptimizer::ZeroRedundancyOptimizer(DistributedDataParallel& ddp, optim::Optimizer& optimizer,
                                                 ZeroOptions options)
    : ddp_(ddp), optimizer_(optimizer), options_(options) {
  TC_CHECK(options_.stage() == 1 || options_.stage() == 2, kOp, "stage must be 1 or 2, got ", options_.stage());
  TC_CHECK(ddp_.shard_stage_ == 0, kOp, "this DistributedDataParallel is already sharded by another one");
  TC_CHECK(optimizer_state_bytes(optimizer_) == 0, kOp,
           "the optimizer already holds state; construct the ZeroRedundancyOptimizer before the first step");

  std::unordered_map<const TensorImpl*, size_t> group_of, index_of;
  auto& groups = optimizer_.param_groups();
  group_params_.resize(groups.size());
  for (size_t g = 0; g < groups.size(); ++g)
    for (const Tensor& p : groups[g].params) {
      group_of[p.impl()] = g;
      index_of[p.impl()] = params_.size();
      group_params_[g].push_back(params_.size());
      params_.push_back(p);
    }
  for (const auto& s : ddp_.slots_) {
    const DType dt = s.param.dtype();
    TC_CHECK(dt == kFloat32 || dt == kBFloat16 || dt == kFloat16, kOp, "parameter '", s.name, "' is ", dtype_name(dt),
             "; shards hold float32, bfloat16 or float16 parameters");
    TC_CHECK(s.param.is_contiguous(), kOp, "parameter '", s.name, "' of shape ", shape_str(s.param.sizes()),
             " is not contiguous; a shard is a run of its elements");
  }
  size_t known = 0;
  for (const auto& s : ddp_.slots_) known += group_of.count(s.param.impl());
  TC_CHECK(known == group_of.size(), kOp, "the optimizer updates ", group_of.size() - known,
           " tensor(s) that are not parameters of the DistributedDataParallel's module (or do not require grad)");

  // This rank's pieces of every bucket, each in its parameter's group.
  std::vector<std::vector<Tensor>> shard_params(groups.size());
  shards_.resize(ddp_.buckets_.size());
  for (size_t b = 0; b < ddp_.buckets_.size(); ++b) {
    const auto& bucket = ddp_.buckets_[b];
    const auto [begin, end] = DistributedDataParallel::owned_range(bucket.numel);
    BucketShard& shard = shards_[b];
    shard.chunk = ordered_chunk(bucket.numel);
    shard.gather_dtype = ddp_.slots_[bucket.slots.front()].param.dtype();
    for (size_t si : bucket.slots) {
      const auto& slot = ddp_.slots_[si];
      if (slot.param.dtype() != shard.gather_dtype) shard.gather_dtype = kFloat32;  // exact for all three
      const int64_t lo = std::max(begin, slot.offset), hi = std::min(end, slot.offset + slot.param.numel());
      const auto group = group_of.find(slot.param.impl());
      if (hi <= lo || group == group_of.end()) continue;
      Piece piece{flat(slot.param).narrow(0, lo - slot.offset, hi - lo), lo - begin, index_of.at(slot.param.impl()),
                  lo - slot.offset, shard_params[group->second].size()};
      shard_params[group->second].push_back(piece.view);
      shard.pieces.push_back(std::move(piece));
    }
  }
  // Indices in the sharded optimizer run over the groups in order.
  std::vector<size_t> group_start(groups.size(), 0);
  for (size_t g = 1; g < groups.size(); ++g) group_start[g] = group_start[g - 1] + shard_params[g - 1].size();
  for (auto& shard : shards_)
    for (auto& piece : shard.pieces) piece.shard_index += group_start[group_of.at(params_[piece.param].impl())];
  for (size_t g = 0; g < groups.size(); ++g) groups[g].params = std::move(shard_params[g]);

  ddp_.shard_stage_ = options_.stage();
  ddp_.shard_sink_ = [this](size_t bucket, const Tensor& owned) { receive(bucket, owned); };
  if (options_.stage() == 2)
    for (auto& bucket : ddp_.buckets_) {  // allocated again at each backward, freed after its reduction
      bucket.flat = Tensor();
      for (size_t s : bucket.slots) ddp_.slots_[s].view = Tensor();
    }
  hook_ = optimizer_.register_step_post_hook([this] { gather(); });
}

ZeroRedundancyOptimizer::~ZeroRedundancyOptimizer() {
  optimizer_.remove_step_post_hook(hook_);
  ddp_.shard_stage_ = 0;
  ddp_.shard_sink_ = nullptr;
}

int64_t ZeroRedundancyOptimizer::shard_numel() const {
  int64_t n = 0;
  for (const auto& shard : shards_)
    for (const auto& piece : shard.pieces) n += piece.view.numel();
  return n;
}

// The owned elements of a reduced bucket (comm_dtype) become the pieces' gradients, in
// their parameters' dtype: the values DDP would write to those elements of .grad().
void ZeroRedundancyOptimizer::receive(size_t bucket, const Tensor& owned) {
  NoGradGuard no_grad;
  for (const Piece& piece : shards_[bucket].pieces) {
    const Tensor part = owned.narrow(0, piece.offset, piece.view.numel());
    Tensor grad = piece.view.grad();
    if (grad.defined()) {
      grad.add_(part.to(grad.dtype()));  // gradients not zeroed since the last step
    } else {
      grad = empty({piece.view.numel()}, piece.view.dtype());
      grad.copy_(part);
      piece.view.set_grad(grad);
    }
  }
}

// Every rank's updated chunk of every bucket into the model's parameters. All buckets are
// queued before the first is waited for.
void ZeroRedundancyOptimizer::gather() {
  NoGradGuard no_grad;
  const int p = world_size();
  std::vector<std::pair<Tensor, std::shared_ptr<Work>>> gathered;
  for (size_t b = 0; b < shards_.size(); ++b) {
    const auto& bucket = ddp_.buckets_[b];
    const BucketShard& shard = shards_[b];
    const auto [begin, end] = DistributedDataParallel::owned_range(bucket.numel);
    Tensor mine = zeros({shard.chunk}, shard.gather_dtype);
    for (size_t si : bucket.slots) {  // every parameter's owned part, updated by the optimizer or not
      const auto& slot = ddp_.slots_[si];
      const int64_t lo = std::max(begin, slot.offset), hi = std::min(end, slot.offset + slot.param.numel());
      if (hi > lo) mine.narrow(0, lo - begin, hi - lo).copy_(flat(slot.param).narrow(0, lo - slot.offset, hi - lo));
    }
    Tensor all = empty({shard.chunk * p}, shard.gather_dtype);
    gathered.emplace_back(all, all_gather_chunks_async(mine, all));
  }
  for (size_t b = 0; b < shards_.size(); ++b) {
    auto& [all, work] = gathered[b];
    work->wait();
    for (size_t si : ddp_.buckets_[b].slots) {
      const auto& slot = ddp_.slots_[si];
      flat(slot.param).copy_(all.narrow(0, slot.offset, slot.param.numel()));
    }
  }
}

ShardMemory ZeroRedundancyOptimizer::memory() const {
  ShardMemory m = replicated_memory(ddp_, optimizer_);
  for (const auto& shard : shards_)
    for (const auto& piece : shard.pieces)
      if (piece.view.grad().defined()) m.gradients += static_cast<int64_t>(piece.view.grad().nbytes());
  return m;
}

double ZeroRedundancyOptimizer::clip_grad_norm_(double max_norm, double norm_type, bool error_if_nonfinite) {
  std::vector<Tensor> views;
  for (const auto& shard : shards_)
    for (const auto& piece : shard.pieces) views.push_back(piece.view);
  const bool inf_norm = std::isinf(norm_type);
  // Gathered and folded in rank order: the same total on every rank, NaN kept.
  auto combine = [inf_norm](double local) {
    double total = 0.0;
    bool first = true;
    for (const Tensor& t : all_gather(full({}, local, kFloat64))) {
      const double v = t.item<double>();
      total = first ? v : inf_norm ? (std::isnan(v) || std::isnan(total) ? NAN : std::max(total, v)) : total + v;
      first = false;
    }
    return total;
  };
  return nn::utils::clip_grad_norm_combined(views, max_norm, norm_type, error_if_nonfinite, combine);
}

namespace {

std::string state_key(size_t index, const std::string& field) { return "state." + std::to_string(index) + "." + field; }

// "state.12.exp_avg" -> (12, "exp_avg"); false for any other key.
bool split_state_key(const std::string& key, size_t* index, std::string* field) {
  if (!key.starts_with("state.")) return false;
  const size_t dot = key.find('.', 6);
  if (dot == std::string::npos || dot == 6 || dot + 1 == key.size()) return false;
  const std::string digits = key.substr(6, dot - 6);
  if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 18) return false;
  *index = std::stoull(digits);
  *field = key.substr(dot + 1);
  return true;
}

bool is_group_params_key(const std::string& key) {
  return key.starts_with("param_groups.") && key.ends_with(".params");
}

Tensor index_tensor(const std::vector<size_t>& ids) {
  std::vector<int64_t> v(ids.begin(), ids.end());
  return tensor(v, {static_cast<int64_t>(v.size())}, kInt64);
}

}  // namespace

StateDict ZeroRedundancyOptimizer::state_dict() const {
  NoGradGuard no_grad;
  const StateDict shard_sd = optimizer_.state_dict();
  const std::vector<std::string> fields = optimizer_.state_tensor_names();
  const auto n = static_cast<int64_t>(params_.size());
  const auto width = static_cast<int64_t>(fields.size()) + 1;
  // Per parameter: its step count and each state tensor's dtype (-1: none), from any rank
  // holding a piece of it.
  Tensor meta = full({n, width}, -1, kInt64);
  int64_t* m = meta.data_ptr<int64_t>();
  for (const auto& shard : shards_)
    for (const auto& piece : shard.pieces) {
      const auto step = shard_sd.find(state_key(piece.shard_index, "step"));
      if (step == shard_sd.end()) continue;
      int64_t* row = m + static_cast<int64_t>(piece.param) * width;
      row[0] = step->second.item<int64_t>();
      for (size_t f = 0; f < fields.size(); ++f) {
        const auto t = shard_sd.find(state_key(piece.shard_index, fields[f]));
        if (t != shard_sd.end()) row[1 + f] = static_cast<int64_t>(t->second.dtype());
      }
    }
  all_reduce(meta, ReduceOp::Max);

  StateDict out;
  for (const auto& [key, t] : shard_sd)
    if (!key.starts_with("state.") && !is_group_params_key(key)) out[key] = t;
  for (size_t g = 0; g < group_params_.size(); ++g)
    out["param_groups." + std::to_string(g) + ".params"] = index_tensor(group_params_[g]);
  for (int64_t i = 0; i < n; ++i)
    if (m[i * width] > 0) out[state_key(static_cast<size_t>(i), "step")] = state_int(m[i * width]);

  // Each state tensor is gathered bucket by bucket as the parameters are, in float32
  // (exact for every state dtype), and cut back into whole parameters.
  std::unordered_map<const TensorImpl*, size_t> index_of;
  for (size_t i = 0; i < params_.size(); ++i) index_of[params_[i].impl()] = i;
  const int p = world_size();
  for (size_t b = 0; b < shards_.size(); ++b) {
    const auto& bucket = ddp_.buckets_[b];
    for (size_t f = 0; f < fields.size(); ++f) {
      auto dtype_of = [&](size_t slot) -> int64_t {
        const auto it = index_of.find(ddp_.slots_[slot].param.impl());
        return it == index_of.end() ? -1 : m[static_cast<int64_t>(it->second) * width + 1 + static_cast<int64_t>(f)];
      };
      bool any = false;
      for (size_t si : bucket.slots) any = any || dtype_of(si) >= 0;
      if (!any) continue;  // the same decision on every rank: `meta` is global
      Tensor mine = zeros({shards_[b].chunk}, kFloat32);
      for (const auto& piece : shards_[b].pieces) {
        const auto t = shard_sd.find(state_key(piece.shard_index, fields[f]));
        if (t != shard_sd.end()) mine.narrow(0, piece.offset, piece.view.numel()).copy_(t->second);
      }
      Tensor all = empty({shards_[b].chunk * p}, kFloat32);
      all_gather_chunks_async(mine, all)->wait();
      for (size_t si : bucket.slots) {
        const int64_t dt = dtype_of(si);
        if (dt < 0) continue;
        const auto& slot = ddp_.slots_[si];
        out[state_key(index_of.at(slot.param.impl()), fields[f])] =
            all.narrow(0, slot.offset, slot.param.numel()).view(slot.param.sizes()).to(static_cast<DType>(dt)).clone();
      }
    }
  }
  return out;
}

void ZeroRedundancyOptimizer::load_state_dict(const StateDict& sd) {
  NoGradGuard no_grad;
  std::vector<std::vector<const Piece*>> pieces_of(params_.size());
  for (const auto& shard : shards_)
    for (const auto& piece : shard.pieces) pieces_of[piece.param].push_back(&piece);
  StateDict shard_sd;
  // The sharded optimizer's own group entries; its load checks the groups' options.
  for (const auto& [key, t] : optimizer_.state_dict())
    if (is_group_params_key(key)) shard_sd[key] = t;
  for (const auto& [key, t] : sd) {
    size_t i = 0;
    std::string field;
    if (is_group_params_key(key)) {
      size_t g = 0;
      const char* digits = key.data() + 13;  // after "param_groups."
      const char* digits_end = key.data() + std::max<size_t>(13, key.size() - 7);
      const auto [end, ec] = std::from_chars(digits, digits_end, g);
      TC_CHECK(ec == std::errc() && end == digits_end && end != digits, kOp, "state dict entry '", key,
               "' does not name a parameter group (param_groups.G.params)");
      TC_CHECK(g < group_params_.size() && t.numel() == static_cast<int64_t>(group_params_[g].size()), kOp,
               "state dict entry '", key, "' lists ", t.numel(), " parameters, but the optimizer's group ", g,
               g < group_params_.size() ? " has " + std::to_string(group_params_[g].size())
                                        : std::string(" does not exist"));
    } else if (!split_state_key(key, &i, &field)) {
      shard_sd[key] = t;
    } else {
      TC_CHECK(i < params_.size(), kOp, "state dict entry '", key, "' refers to parameter ", i,
               " but the optimizer has ", params_.size(), " parameters");
      const bool whole = field != "step";
      TC_CHECK(!whole || (t.defined() && t.numel() == params_[i].numel()), kOp, "state dict entry '", key,
               "' has shape ", t.defined() ? shape_str(t.sizes()) : "(undefined)", ", but parameter ", i, " has shape ",
               shape_str(params_[i].sizes()));
      for (const Piece* piece : pieces_of[i])
        shard_sd[state_key(piece->shard_index, field)] =
            whole ? t.contiguous().view({t.numel()}).narrow(0, piece->param_offset, piece->view.numel()).clone() : t;
    }
  }
  optimizer_.load_state_dict(shard_sd);
}

namespace {

constexpr const char* kPieces = "zero.pieces";  // per entry of a shard file: parameter, offset, elements

std::string describe(const std::filesystem::path& path, size_t rank) {
  return path.string() + " (the shard of rank " + std::to_string(rank) + ")";
}

const std::string& meta(const io::SafetensorsFile& f, const std::string& key, const std::string& where) {
  const auto it = f.metadata.find(key);
  TC_CHECK(it != f.metadata.end(), kOp, where, ": no '", key, "' in its metadata; not a shard file save_shard wrote");
  return it->second;
}

// Checks what every shard file of a set must agree on.
void check_shard_file(const io::SafetensorsFile& f, const std::string& where, size_t rank, size_t world, size_t params,
                      const io::Metadata& expect) {
  TC_CHECK(meta(f, "zero.rank", where) == std::to_string(rank), kOp, where, ": written by rank ",
           meta(f, "zero.rank", where), ", expected rank ", rank, " (pass the files in rank order)");
  TC_CHECK(meta(f, "zero.world_size", where) == std::to_string(world), kOp, where, ": written by a run of ",
           meta(f, "zero.world_size", where), " processes, but ", world, " files were given");
  TC_CHECK(meta(f, "zero.parameters", where) == std::to_string(params), kOp, where, ": holds the state of ",
           meta(f, "zero.parameters", where), " parameters, but this optimizer has ", params, " (another model?)");
  for (const auto& [key, value] : expect)
    TC_CHECK(meta(f, key, where) == value, kOp, where, ": its '", key, "' is ", meta(f, key, where), ", expected ",
             value, " (a file of another run or step?)");
}

// The unsharded state dict from every rank's shard file: each entry's elements put back
// where they were in its parameter, checked to cover every element exactly.
StateDict assemble_shards(const std::vector<std::filesystem::path>& paths, const std::vector<Tensor>& params,
                          const std::vector<std::vector<size_t>>& group_params, const io::Metadata& expect) {
  TC_CHECK(!paths.empty(), kOp, "no shard files given");
  StateDict full;
  std::map<std::string, int64_t> covered;  // elements written per entry
  for (size_t r = 0; r < paths.size(); ++r) {
    const std::string where = describe(paths[r], r);
    const io::SafetensorsFile f = io::load_safetensors(paths[r]);
    check_shard_file(f, where, r, paths.size(), params.size(), expect);
    const auto table_it = f.tensors.find(kPieces);
    TC_CHECK(table_it != f.tensors.end() && table_it->second.dtype() == kInt64 && table_it->second.dim() == 2 &&
                 table_it->second.size(1) == 3,
             kOp, where, ": no '", kPieces, "' table of (parameter, offset, elements) rows");
    const Tensor table = table_it->second.contiguous();
    const int64_t* rows = table.data_ptr<int64_t>();
    const int64_t pieces = table.size(0);
    for (const auto& [key, t] : f.tensors) {
      size_t j = 0;
      std::string field;
      if (key == kPieces || is_group_params_key(key)) continue;
      if (!split_state_key(key, &j, &field)) {
        if (r == 0) full[key] = t;  // options, rounding, weight update: the same on every rank
        continue;
      }
      TC_CHECK(static_cast<int64_t>(j) < pieces, kOp, where, ": entry '", key, "' has no row in '", kPieces, "'");
      const int64_t* row = rows + 3 * j;
      const int64_t i = row[0], offset = row[1], n = row[2];
      TC_CHECK(i >= 0 && i < static_cast<int64_t>(params.size()) && offset >= 0 && n >= 0 &&
                   offset + n <= params[static_cast<size_t>(i)].numel(),
               kOp, where, ": entry '", key, "' covers elements [", offset, ", ", offset + n, ") of parameter ", i,
               ", which this optimizer does not have (another model?)");
      const Tensor& param = params[static_cast<size_t>(i)];
      const std::string out = state_key(static_cast<size_t>(i), field);
      if (field == "step") {
        const auto it = full.find(out);
        TC_CHECK(it == full.end() || it->second.item<int64_t>() == t.item<int64_t>(), kOp, where, ": entry '", key,
                 "' counts ", t.item<int64_t>(), " steps of parameter ", i, ", another shard ",
                 it->second.item<int64_t>());
        full[out] = t;
        continue;
      }
      TC_CHECK(t.numel() == n, kOp, where, ": entry '", key, "' has ", t.numel(), " elements, its row says ", n);
      Tensor& dst = full[out];
      if (!dst.defined()) dst = zeros(param.sizes(), t.dtype());
      TC_CHECK(dst.dtype() == t.dtype(), kOp, where, ": entry '", key, "' is ", dtype_name(t.dtype()),
               ", another shard holds parameter ", i, "'s '", field, "' in ", dtype_name(dst.dtype()));
      dst.view({dst.numel()}).narrow(0, offset, n).copy_(t.contiguous().view({n}));
      covered[out] += n;
    }
  }
  for (const auto& [key, n] : covered) {
    size_t i = 0;
    std::string field;
    split_state_key(key, &i, &field);
    TC_CHECK(n == params[i].numel(), kOp, "the shard files ", paths.front().string(), " ... ", paths.back().string(),
             " hold ", n, " of the ", params[i].numel(), " elements of parameter ", i, "'s '", field,
             "' (a rank's file is missing, or from another run)");
  }
  for (size_t g = 0; g < group_params.size(); ++g)
    full["param_groups." + std::to_string(g) + ".params"] = index_tensor(group_params[g]);
  return full;
}

}  // namespace

std::string ZeroRedundancyOptimizer::layout() const {
  std::string out = std::to_string(world_size());
  for (const auto& bucket : ddp_.buckets_) {
    out += ',';
    out += std::to_string(bucket.numel);
  }
  return out;
}

void ZeroRedundancyOptimizer::save_shard(const std::filesystem::path& path, const io::Metadata& metadata) const {
  StateDict sd = optimizer_.state_dict();
  std::vector<const Piece*> by_index;
  for (const auto& shard : shards_)
    for (const auto& piece : shard.pieces) {
      if (by_index.size() <= piece.shard_index) by_index.resize(piece.shard_index + 1);
      by_index[piece.shard_index] = &piece;
    }
  std::vector<int64_t> rows;
  for (const Piece* piece : by_index)
    rows.insert(rows.end(), {static_cast<int64_t>(piece->param), piece->param_offset, piece->view.numel()});
  sd[kPieces] = tensor(rows, {static_cast<int64_t>(by_index.size()), 3}, kInt64);
  io::Metadata m = metadata;
  m["zero.rank"] = std::to_string(rank());
  m["zero.world_size"] = std::to_string(world_size());
  m["zero.layout"] = layout();
  m["zero.parameters"] = std::to_string(params_.size());
  io::save_safetensors(path, sd, m);
}

void ZeroRedundancyOptimizer::load_shards(const std::vector<std::filesystem::path>& paths, const io::Metadata& expect) {
  if (paths.size() == static_cast<size_t>(world_size())) {
    const auto r = static_cast<size_t>(rank());
    const std::string where = describe(paths[r], r);
    io::SafetensorsFile own = io::load_safetensors(paths[r]);
    check_shard_file(own, where, r, paths.size(), params_.size(), expect);
    if (meta(own, "zero.layout", where) == layout()) {  // the same pieces: the file is this rank's state
      own.tensors.erase(kPieces);
      optimizer_.load_state_dict(own.tensors);
      return;
    }
  }
  load_state_dict(assemble_shards(paths, params_, group_params_, expect));
}

StateDict read_shards(const std::vector<std::filesystem::path>& paths, const optim::Optimizer& optimizer,
                      const io::Metadata& expect) {
  std::vector<Tensor> params;
  std::vector<std::vector<size_t>> groups;
  for (const auto& g : optimizer.param_groups()) {
    groups.emplace_back();
    for (const Tensor& p : g.params) {
      groups.back().push_back(params.size());
      params.push_back(p);
    }
  }
  return assemble_shards(paths, params, groups, expect);
}

}  // namespace tc::dist
