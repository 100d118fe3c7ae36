// The training loop (see trainer.h).
#include "trainer.h"

#include <fcntl.h>
#include <tensorcast/allocator.h>
#include <tensorcast/amp/autocast.h>
#include <tensorcast/amp/grad_scaler.h>
#include <tensorcast/amp/numerics.h>
#include <tensorcast/autograd.h>
#include <tensorcast/cuda.h>
#include <tensorcast/data/data_loader.h>
#include <tensorcast/dist/ddp.h>
#include <tensorcast/error.h>
#include <tensorcast/io/checkpoint.h>
#include <tensorcast/io/safetensors.h>
#include <tensorcast/ops.h>
#include <tensorcast/optim/adamw.h>
#include <tensorcast/optim/schedulers.h>
#include <tensorcast/optim/sgd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <numbers>

#include "json.h"
#include "models.h"
#include "progress.h"
#include "task_data.h"
#include "tensorboard.h"

namespace tcli {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

Precision resolve_precision(const std::string& flag, tc::Device device) {
  if (flag == "fp32") return {"fp32", tc::kFloat32, ""};
  if (flag == "bf16") return {"bf16", tc::kBFloat16, ""};
  if (flag == "fp16") return {"fp16", tc::kFloat16, ""};
  if (flag == "bf16-pure") return {"bf16-pure", tc::kBFloat16, "", /*pure=*/true};
  if (flag != "auto")
    throw tc::Error("[cli] unknown precision '" + flag + "' (use auto, fp32, bf16, fp16 or bf16-pure)");
  if (device.is_cuda()) {
    if (tc::amp::is_bf16_supported(device.type))
      return {"bf16", tc::kBFloat16,
              "this GPU has bf16 Tensor Cores: bf16 autocast runs the products at 16-bit speed with fp32's exponent "
              "range, so no loss scaler is needed"};
    return {"fp16", tc::kFloat16,
            "this GPU has no bf16 Tensor Cores (compute capability below 8.0): fp16 autocast with a GradScaler"};
  }
  if (tc::amp::is_bf16_supported(tc::kCPU))
    return {"bf16", tc::kBFloat16,
            "this CPU has native bf16 math (AVX-512 BF16/AMX): bf16 autocast halves the activations' memory at fp32's "
            "speed or better (16-bit products run on the faster of the bf16 and fp32 kernels, tensorcast/gemm16.h); "
            "bf16 has fp32's exponent range and needs no loss scaler"};
  return {"fp32", tc::kFloat32,
          "this CPU has no native bf16 math, so 16-bit autocast would run slower than fp32 here (on a GPU, auto "
          "picks bf16, or fp16 with a GradScaler)"};
}

fs::path absolute_path(const std::string& path, const std::string& flag) {
  std::error_code ec;
  fs::path r = fs::absolute(path, ec);
  if (ec)
    throw tc::Error("[cli] " + flag + " " + path + ": cannot make the path absolute: " + ec.message() +
                    " (was the working directory removed?)");
  return r;
}

tc::Device resolve_device(const std::string& flag) {
  tc::Device device;
  try {
    device = tc::Device(flag);
  } catch (const tc::Error&) {
    throw tc::Error("[cli] --device expects cpu, cuda or cuda:N, got '" + flag + "'");
  }
  if (device.is_cuda()) {
    if (!tc::cuda::is_available())
      throw tc::Error("[cli] --device " + flag + ": no usable CUDA device (" + tc::cuda::unavailable_reason() +
                      "); train on the CPU with --device cpu");
    if (device.index >= tc::cuda::device_count())
      throw tc::Error("[cli] --device " + flag + ": this machine has " + std::to_string(tc::cuda::device_count()) +
                      " CUDA device(s), numbered from 0");
  }
  return device;
}

namespace {

std::string fmt_double(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

bool is_explicit(const TrainConfig& c, const std::string& flag) {
  return std::find(c.explicit_flags.begin(), c.explicit_flags.end(), flag) != c.explicit_flags.end();
}

// Takes a setting from the checkpoint's metadata unless the user set the flag; a flag
// that contradicts the checkpoint is an error (a resumed run must be the same run).
void adopt(const TrainConfig& c, const tc::io::Metadata& meta, const std::string& key, const std::string& flag,
           const std::string& current, const std::function<void(const std::string&)>& set, const std::string& dir) {
  const auto it = meta.find(key);
  if (it == meta.end()) return;
  if (is_explicit(c, flag) && it->second != current)
    throw tc::Error("[cli] --resume " + dir + ": the checkpoint was written with " + flag + " " + it->second +
                    ", not " + current + "; drop " + flag + " to continue that run");
  set(it->second);
}

// Checkpoint metadata is text from a file: parsed strictly, with errors naming the key.
int64_t meta_int(const std::string& v, const std::string& key, const std::string& dir, int64_t lo, int64_t hi) {
  int64_t x = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size() || x < lo || x > hi)
    throw tc::Error("[cli] --resume " + dir + ": checkpoint metadata '" + key + "' is \"" + v +
                    "\", expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                    "]; the checkpoint is damaged");
  return x;
}

double meta_double(const std::string& v, const std::string& key, const std::string& dir) {
  char* end = nullptr;
  errno = 0;
  const double x = v.empty() ? 0.0 : std::strtod(v.c_str(), &end);
  if (v.empty() || errno != 0 || end != v.c_str() + v.size() || !std::isfinite(x) || x < 0)
    throw tc::Error("[cli] --resume " + dir + ": checkpoint metadata '" + key + "' is \"" + v +
                    "\", expected a finite non-negative number; the checkpoint is damaged");
  return x;
}

// a * b for step counts, or an error naming what overflowed.
int64_t checked_steps(int64_t a, int64_t b, const std::string& what) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) throw tc::Error("[cli] " + what + " overflows a 64-bit step count");
  return r;
}

// Resolves a user path for comparisons ("ck" and "./ck/" are the same directory).
fs::path normalized(const std::string& p) {
  std::error_code ec;
  fs::path r = fs::absolute(p, ec);
  if (!ec) r = fs::weakly_canonical(r, ec);
  return ec ? fs::path(p) : r;
}

}  // namespace

void check_output_path(const std::string& path, const std::string& flag) {
  if (path.empty()) return;
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw tc::Error("[cli] " + flag + " " + path + " is a directory; pass a file name");
  const fs::path parent = absolute_path(path, flag).parent_path();
  if (!fs::is_directory(parent, ec))
    throw tc::Error("[cli] " + flag + " " + path + ": directory " + parent.string() +
                    " does not exist; create it first");
  // Can a file be created there? Asked now, by creating one, rather than after training
  // (permissions, a read-only mount or a pseudo-filesystem all answer here).
  const fs::path probe = parent / (".tensorcast-write-probe-" + std::to_string(::getpid()));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    throw tc::Error("[cli] " + flag + " " + path + ": cannot create files in " + parent.string() + ": " +
                    std::strerror(errno) + "; pass a writable place");
  ::close(fd);
  ::unlink(probe.c_str());
}

namespace {

struct Evaluation {
  double accuracy = -1, loss = 0, bits_per_byte = -1;
};

Evaluation evaluate(Model& model, const tc::data::Dataset& test, const Precision& prec, tc::Device device) {
  tc::NoGradGuard no_grad;
  model.module->eval();
  // A non-owning handle: the loader only reads the dataset during this call.
  tc::data::DataLoader loader(std::shared_ptr<const tc::data::Dataset>(&test, [](const tc::data::Dataset*) {}),
                              tc::data::DataLoaderOptions(model.language_model ? 64 : 1000).prefetch(0));
  double loss_sum = 0, correct = 0, count = 0, batches_weight = 0;
  // Data parallel: rank r evaluates batches r, r + world, ...; the sums are added below.
  const int world = tc::dist::world_size(), rank = tc::dist::rank();
  int64_t k = -1;
  for (auto& batch : loader) {
    if (++k % world != rank) continue;
    tc::Tensor logits, loss;
    const tc::Tensor target = batch.target.to(device);
    {
      tc::amp::AutocastGuard autocast(device.type, prec.compute == tc::kFloat32 ? tc::kBFloat16 : prec.compute,
                                      prec.compute != tc::kFloat32);
      logits = model.forward(batch.data.to(device));
      loss = model_loss(model, logits, target);
    }
    const double n = static_cast<double>(target.numel());
    loss_sum += loss.item<double>() * n;
    batches_weight += n;
    if (!model.language_model) {
      correct += (tc::argmax(logits, 1) == target).to(tc::kFloat32).sum().item<double>();
      count += n;
    }
  }
  model.module->train();
  if (world > 1) {
    const tc::Tensor sums =
        tc::tensor(std::vector<double>{loss_sum, correct, count, batches_weight}, {4}, tc::kFloat64);
    tc::dist::all_reduce(sums);
    const std::vector<double> v = sums.to_vector();
    loss_sum = v[0], correct = v[1], count = v[2], batches_weight = v[3];
  }
  Evaluation e;
  e.loss = batches_weight > 0 ? loss_sum / batches_weight : 0;
  if (model.language_model)
    e.bits_per_byte = e.loss / std::numbers::ln2;
  else
    e.accuracy = count > 0 ? correct / count : 0;
  return e;
}

// The loss averaged over the data-parallel ranks: the loss of the global batch.
double mean_over_ranks(const tc::Tensor& loss) {
  const tc::Tensor v = loss.detach().to(tc::kFloat64).reshape({1});
  tc::dist::all_reduce(v, tc::dist::ReduceOp::Avg);
  return v.item<double>();
}

// The gradients' global L2 norm, unscaled (divided by the loss scale they carry).
double grad_norm(const std::vector<tc::Tensor>& params, double loss_scale) {
  double sum = 0;
  for (const auto& p : params)
    if (p.grad().defined()) {
      const tc::Tensor g = p.grad().to(tc::kFloat32);
      sum += (g * g).sum().item<double>();
    }
  return std::sqrt(sum) / loss_scale;
}

// Bytes of the weights and of every tensor of the optimizer's state (moments, float32
// master copies, Kahan compensation): what --precision bf16-pure saves.
int64_t weight_state_bytes(const std::vector<tc::Tensor>& params, const tc::optim::Optimizer& optimizer) {
  int64_t bytes = 0;
  for (const auto& p : params) bytes += p.nbytes();
  for (const auto& [name, t] : optimizer.state_dict())
    if (name.rfind("state.", 0) == 0 && t.is_floating_point()) bytes += t.nbytes();  // not the step counts
  return bytes;
}

tc::optim::WeightUpdate weight_update_mode(const std::string& name) {
  return name == "kahan" ? tc::optim::WeightUpdate::PureKahan : tc::optim::WeightUpdate::Pure;
}

double zero_fraction(const std::vector<tc::Tensor>& params) {
  double zeros = 0, total = 0;
  for (const auto& p : params) {
    const tc::Tensor g = p.grad();
    if (!g.defined()) continue;
    zeros += (g == 0.0).to(tc::kFloat32).sum().item<double>();
    total += static_cast<double>(g.numel());
  }
  return total > 0 ? zeros / total : 0;
}

// Whether this step's loss or gradients hold inf/NaN (no GradScaler watches them). With
// --on-nonfinite stop, throws before anything is applied or saved, naming the step and the
// first non-finite gradient; with skip, returns true so the caller drops the step.
bool nonfinite_step(double loss, const std::vector<tc::Tensor>& params, const tc::nn::NamedTensors& named, int64_t step,
                    const TrainConfig& cfg) {
  std::vector<tc::Tensor> grads;
  grads.reserve(params.size());
  for (const auto& p : params) grads.push_back(p.grad());
  const bool bad_loss = !std::isfinite(loss);
  if (!bad_loss && !tc::amp::found_nonfinite(grads)) return false;
  if (cfg.on_nonfinite == "skip") return true;
  std::string what = bad_loss ? "the loss is " + std::string(std::isnan(loss) ? "nan" : "inf") : "the loss is finite";
  const int64_t first = tc::amp::first_nonfinite(grads);
  if (first >= 0) {
    std::string name = "parameter " + std::to_string(first);
    if (first < static_cast<int64_t>(named.size())) name = named[static_cast<size_t>(first)].first;
    what += (bad_loss ? " and" : " but") + std::string(" the gradient of ") + name + " holds inf/NaN";
  }
  throw tc::Error(
      "[train] step " + std::to_string(step) + ": " + what +
      "; the run diverged and was stopped before applying that step" +
      (cfg.checkpoint_dir.empty() ? "" : " (the last checkpoint in " + cfg.checkpoint_dir + " is untouched)") +
      ". Lower --lr, use fp16 with its GradScaler, or pass --on-nonfinite skip|continue");
}

}  // namespace

int64_t restore_training_state(const tc::io::TrainingState& state, tc::nn::Module& module,
                               tc::optim::Optimizer& optimizer, tc::amp::GradScaler& scaler, bool use_scaler,
                               tc::data::DataLoader& loader, tc::optim::LRScheduler* scheduler, std::string* note) {
  module.load_state_dict(state.model);
  optimizer.load_state_dict(state.optimizer);
  if (use_scaler && !state.scaler.empty()) scaler.load_state_dict(state.scaler);
  // Rank 0 wrote the checkpoint; the position (epoch, batch) is the same on every rank.
  tc::StateDict position = state.data_loader;
  // Read as the loader reads its state: a float or NaN entry is an error naming the key,
  // never a cast out of range.
  const int64_t saved_world =
      position.count("num_replicas") ? tc::read_state_int(position, "num_replicas", "data", 1, INT32_MAX) : 1;
  if (saved_world != tc::dist::world_size()) {
    // Another world size shards the data differently: the position cannot carry over, so
    // the interrupted epoch starts again (model, optimizer and scaler resume exactly).
    const int64_t epoch = position.count("epoch") ? tc::read_state_int(position, "epoch", "data", 0) : 0;
    loader.set_epoch(epoch);
    if (note)
      *note = "the checkpoint was written by " + std::to_string(saved_world) + " process(es), this run has " +
              std::to_string(tc::dist::world_size()) + ": model, optimizer and scaler resume exactly; the data " +
              "position restarts epoch " + std::to_string(epoch + 1);
    if (state.rng.defined()) tc::set_rng_state(state.rng);
    if (scheduler) {
      tc::StateDict sd = scheduler->state_dict();
      sd["last_epoch"] = tc::state_int(state.step);
      scheduler->load_state_dict(sd);
    }
    return state.step;
  }
  if (position.count("rank")) position["rank"] = tc::state_int(tc::dist::rank());
  loader.load_state(position);
  // Every step consumes one batch, so the step count and the loader's position agree in
  // any checkpoint this trainer wrote; a disagreement means a damaged or foreign file.
  int64_t expected = 0;
  if (__builtin_mul_overflow(loader.epoch(), loader.size(), &expected) ||
      __builtin_add_overflow(expected, loader.batch_index(), &expected) || expected != state.step)
    throw tc::Error("[cli] checkpoint step " + std::to_string(state.step) +
                    " does not match its data loader position (epoch " + std::to_string(loader.epoch()) + ", batch " +
                    std::to_string(loader.batch_index()) + " of " + std::to_string(loader.size()) +
                    "); the checkpoint is damaged");
  if (state.rng.defined()) tc::set_rng_state(state.rng);
  if (scheduler) {  // the lr is a closed-form function of the step: jump to it
    tc::StateDict sd = scheduler->state_dict();
    sd["last_epoch"] = tc::state_int(state.step);
    scheduler->load_state_dict(sd);
  }
  return state.step;
}

TrainResult run_training(const TrainConfig& config) {
  TrainConfig cfg = config;
  TrainResult result;
  if (tc::dist::rank() != 0) {  // data parallel: rank 0 alone prints and writes files
    cfg.quiet = true;
    cfg.metrics_path.clear();
    cfg.tensorboard_dir.clear();
    cfg.numerics_json.clear();
  }

  // ---- everything that can fail on bad input, before anything is written
  std::optional<tc::io::TrainingState> resume;
  double previous_seconds = 0;
  if (!cfg.resume_dir.empty()) {
    std::error_code ec;
    if (!fs::exists(cfg.resume_dir, ec))
      throw tc::Error("[cli] --resume " + cfg.resume_dir +
                      ": no such directory; pass the --checkpoint DIR of an earlier run");
    if (fs::is_directory(cfg.resume_dir, ec) && !tc::io::has_checkpoint(cfg.resume_dir))
      throw tc::Error("[cli] --resume " + cfg.resume_dir + " holds no " + tc::io::kCheckpointFileName +
                      "; pass the --checkpoint DIR of an earlier run");
    try {
      resume = tc::io::load_checkpoint(cfg.resume_dir);
    } catch (const tc::Error& e) {
      throw tc::Error(std::string(e.what()) +
                      " (a damaged checkpoint.safetensors may have an intact checkpoint.prev.safetensors " +
                      "beside it: move it into place, or pass another --resume directory)");
    }
    const auto& meta = resume->metadata;
    const std::string& dir = cfg.resume_dir;
    adopt(
        cfg, meta, "model", "--model", cfg.model, [&](const std::string& v) { cfg.model = v; }, dir);
    adopt(
        cfg, meta, "precision", "--precision", resolve_precision(cfg.precision, resolve_device(cfg.device)).name,
        [&](const std::string& v) { cfg.precision = v; }, dir);
    adopt(
        cfg, meta, "batch_size", "--batch-size", std::to_string(cfg.batch_size),
        [&](const std::string& v) { cfg.batch_size = meta_int(v, "batch_size", dir, 1, INT32_MAX); }, dir);
    adopt(
        cfg, meta, "seed", "--seed", std::to_string(cfg.seed),
        [&](const std::string& v) {
          cfg.seed = static_cast<uint64_t>(meta_int(v, "seed", dir, 0, std::numeric_limits<int64_t>::max()));
        },
        dir);
    adopt(
        cfg, meta, "lr", "--lr", fmt_double(cfg.lr),
        [&](const std::string& v) {
          cfg.lr = meta_double(v, "lr", dir);
          if (cfg.lr <= 0)
            throw tc::Error("[cli] --resume " + dir + ": checkpoint metadata 'lr' is " + v + ", expected > 0");
        },
        dir);
    adopt(
        cfg, meta, "lr_schedule", "--lr-schedule", cfg.lr_schedule, [&](const std::string& v) { cfg.lr_schedule = v; },
        dir);
    adopt(
        cfg, meta, "loss_weight", "--loss-weight", fmt_double(cfg.loss_weight),
        [&](const std::string& v) { cfg.loss_weight = meta_double(v, "loss_weight", dir); }, dir);
    adopt(
        cfg, meta, "optimizer", "--optimizer", cfg.optimizer, [&](const std::string& v) { cfg.optimizer = v; }, dir);
    adopt(
        cfg, meta, "weight_update", "--weight-update", cfg.weight_update,
        [&](const std::string& v) { cfg.weight_update = v; }, dir);
    adopt(
        cfg, meta, "scaler", "--no-scaler", cfg.scaler ? "1" : "0",
        [&](const std::string& v) { cfg.scaler = v == "1"; }, dir);
    if (!is_explicit(cfg, "--data"))
      if (const auto it = meta.find("data"); it != meta.end()) cfg.data = it->second;
    if (const auto it = meta.find("train_seconds"); it != meta.end())
      previous_seconds = meta_double(it->second, "train_seconds", dir);
    result.resumed = true;
    result.resumed_from_step = resume->step;
  }
  if (!cfg.checkpoint_dir.empty()) {
    std::error_code ec;
    if (fs::exists(cfg.checkpoint_dir, ec) && !fs::is_directory(cfg.checkpoint_dir, ec))
      throw tc::Error("[cli] --checkpoint " + cfg.checkpoint_dir + " is a file; pass a directory");
    const bool same_run = !cfg.resume_dir.empty() && normalized(cfg.resume_dir) == normalized(cfg.checkpoint_dir);
    if (fs::is_directory(cfg.checkpoint_dir, ec) && tc::io::has_checkpoint(cfg.checkpoint_dir) && !same_run &&
        !cfg.overwrite)
      throw tc::Error("[cli] --checkpoint " + cfg.checkpoint_dir +
                      " already holds a checkpoint of another run; pass --resume " + cfg.checkpoint_dir +
                      " to continue it, --overwrite to replace it, or another directory");
    const fs::path parent = absolute_path(cfg.checkpoint_dir, "--checkpoint").parent_path();
    if (!fs::is_directory(parent, ec))
      throw tc::Error("[cli] --checkpoint " + cfg.checkpoint_dir + ": directory " + parent.string() +
                      " does not exist; create it first");
  }
  check_output_path(cfg.metrics_path, "--metrics");
  check_output_path(cfg.numerics_json, "--numerics-json");
  if (cfg.optimizer != "adamw" && cfg.optimizer != "sgd")
    throw tc::Error("[cli] --optimizer expects adamw or sgd, got '" + cfg.optimizer + "'");
  if (cfg.weight_update != "kahan" && cfg.weight_update != "nearest" && cfg.weight_update != "stochastic")
    throw tc::Error("[cli] --weight-update expects kahan, nearest or stochastic, got '" + cfg.weight_update + "'");

  const tc::Device device = resolve_device(cfg.device);
  const Precision prec = resolve_precision(cfg.precision, device);
  if (device.is_cuda()) {
    if (prec.pure)
      throw tc::Error(
          "[cli] --precision bf16-pure runs on the CPU only for now (the CUDA optimizers keep float32 "
          "master weights); use --precision bf16 with --device " +
          cfg.device);
  }
  const bool use_scaler = prec.compute == tc::kFloat16 && cfg.scaler;
  const int64_t bytes_before_data = tc::memory_stats().current_bytes;
  TaskData data = load_task_data(cfg.model, cfg.data, cfg.seed);
  // The dataset stays in memory for the whole run; the peak we report is what training adds.
  const int64_t data_bytes = tc::memory_stats().current_bytes - bytes_before_data;

  tc::manual_seed(cfg.seed);
  Model model = build_model(cfg.model);
  tc::amp::set_autocast_cache_keeps_training_copies(model.keeps_weight_copies);
  // Before the optimizer: it makes its state where, and as, the parameters are.
  if (device.is_cuda()) model.module->to(device);
  if (prec.pure) model.module->to(tc::kBFloat16);
  std::vector<tc::Tensor> params = model.module->parameters();
  std::unique_ptr<tc::optim::Optimizer> optimizer_holder;
  if (cfg.optimizer == "sgd")
    optimizer_holder = std::make_unique<tc::optim::SGD>(params, tc::optim::SGDOptions(cfg.lr).momentum(0.9));
  else
    optimizer_holder = std::make_unique<tc::optim::AdamW>(params, tc::optim::AdamWOptions(cfg.lr).weight_decay(0.0));
  tc::optim::Optimizer& optimizer = *optimizer_holder;
  if (prec.pure) {
    optimizer.set_weight_update(weight_update_mode(cfg.weight_update));
    if (cfg.weight_update == "stochastic") optimizer.set_rounding(tc::optim::Rounding::Stochastic, cfg.seed);
    result.weight_update = cfg.weight_update;
  }
  tc::amp::GradScaler scaler(tc::amp::GradScalerOptions().enabled(use_scaler));
  const std::string data_name = cfg.data.empty() ? "the default data" : cfg.data;
  if (data.train->size() == 0 || data.test->size() == 0)
    throw tc::Error("[cli] " + data_name + ": the " + (data.train->size() == 0 ? "training" : "test") +
                    " set has 0 examples; pass --data with a non-empty data set");
  // --batch-size is the global batch: each of the world's processes takes 1/world of it,
  // so N processes follow the same trajectory as one (up to summation order).
  const int world = tc::dist::world_size();
  if (world > 1 && device.is_cuda())
    throw tc::Error("[cli] data-parallel runs (mpirun) train on the CPU only for now; drop --device " + cfg.device);
  if (cfg.batch_size % world != 0)
    throw tc::Error("[cli] --batch-size " + std::to_string(cfg.batch_size) +
                    " is the global batch; it must divide by " + "the " + std::to_string(world) +
                    " processes (e.g. --batch-size " + std::to_string((cfg.batch_size / world + 1) * world) + ")");
  tc::data::DataLoader loader(data.train, tc::data::DataLoaderOptions(cfg.batch_size / world)
                                              .shuffle(true)
                                              .seed(cfg.seed)
                                              .prefetch(2)
                                              .pin_memory(device.is_cuda())
                                              .num_replicas(world)
                                              .rank(tc::dist::rank()));
  std::optional<tc::dist::DistributedDataParallel> ddp;
  if (world > 1) {
    ddp.emplace(model.module, tc::dist::DistributedDataParallelOptions().bucket_cap_bytes(cfg.bucket_cap_bytes));
    tc::dist::sync_grad_scaler(scaler);
  }
  const int64_t planned_steps = checked_steps(
      cfg.epochs, loader.size(),
      "--epochs " + std::to_string(cfg.epochs) + " x " + std::to_string(loader.size()) + " steps per epoch");
  // Cosine decay over the planned epochs (not --max-steps, which only stops a run early, so
  // a run cut short and resumed follows the same schedule as one that was not).
  std::unique_ptr<tc::optim::LRScheduler> scheduler;
  if (cfg.lr_schedule == "cosine")
    scheduler = std::make_unique<tc::optim::CosineAnnealingLR>(optimizer, std::max<int64_t>(1, planned_steps));
  int64_t step = 0;
  std::string resume_note;
  if (resume) {
    try {
      step = restore_training_state(*resume, *model.module, optimizer, scaler, use_scaler, loader, scheduler.get(),
                                    &resume_note);
    } catch (const tc::Error& e) {  // name the file: the parts' own errors name only the key
      throw tc::Error("[cli] --resume " + cfg.resume_dir + " (" + tc::io::kCheckpointFileName + "): " + e.what());
    }
  }

  result.model = cfg.model;
  result.device = cfg.device;
  result.precision = prec.name;
  result.precision_reason = prec.reason;
  result.data_description = data.description;
  result.scaler = use_scaler;
  result.batch_size = cfg.batch_size;
  result.parameters = tc::nn::parameter_count(*model.module);
  result.world_size = world;

  Progress progress(cfg.progress && !cfg.quiet && stdout_is_terminal(), 100);
  auto say = [&](const std::string& s) {
    if (!cfg.quiet) progress.message(s);
  };
  {
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "tensorcast train: %s (%lld parameters), %s%s, batch %lld, %s lr %g (%s), seed %llu, %d threads",
                  model.description.c_str(), static_cast<long long>(result.parameters), prec.name.c_str(),
                  use_scaler ? " + GradScaler" : "", static_cast<long long>(cfg.batch_size),
                  cfg.optimizer == "sgd" ? "SGD (momentum 0.9)" : "AdamW", cfg.lr,
                  cfg.lr_schedule == "cosine" ? "cosine decay" : "constant", static_cast<unsigned long long>(cfg.seed),
                  tc::get_num_threads());
    say(buf);
    if (cfg.precision == "auto") say("precision auto -> " + prec.name + ": " + prec.reason);
    if (prec.pure)
      say("bf16-pure: bf16 weights and optimizer state, no float32 master copy; updates rounded " +
          std::string(cfg.weight_update == "kahan"     ? "to nearest with Kahan compensation"
                      : cfg.weight_update == "nearest" ? "to nearest (small updates are lost)"
                                                       : "stochastically"));
    if (prec.compute == tc::kFloat16 && !cfg.scaler)
      say("fp16 without a GradScaler: small gradients may underflow to zero (this run shows what the scaler prevents)");
    if (prec.compute != tc::kFloat16 && !cfg.scaler)
      say("note: --no-scaler has no effect in " + prec.name + " (only fp16 uses a GradScaler)");
    say("data: " + data.description);
    if (world > 1)
      say("data parallel: " + std::to_string(world) + " processes (MPI), " + std::to_string(cfg.batch_size / world) +
          " examples each per step, gradients all-reduced in " + std::to_string(ddp->bucket_parameter_names().size()) +
          " bucket(s) during backward");
    if (resume)
      say("resumed from " + cfg.resume_dir + " at step " + std::to_string(step) + " (epoch " +
          std::to_string(loader.epoch() + 1) + ", batch " + std::to_string(loader.batch_index()) + ")");
    if (!resume_note.empty()) say(resume_note);
  }

  JsonLinesWriter metrics;
  if (!cfg.metrics_path.empty()) metrics = JsonLinesWriter(cfg.metrics_path, /*append=*/resume.has_value());
  std::optional<TensorBoardLog> tensorboard;
  if (!cfg.tensorboard_dir.empty()) tensorboard.emplace(cfg.tensorboard_dir);
  std::optional<tc::amp::NumericsReport> numerics;
  if (cfg.numerics_report) numerics.emplace(cfg.numerics_every);

  auto save = [&](int64_t epoch_done) {
    if (cfg.checkpoint_dir.empty() || tc::dist::rank() != 0) return;
    tc::io::TrainingState st;
    st.model = model.module->state_dict();
    st.optimizer = optimizer.state_dict();
    st.scaler = scaler.state_dict();
    st.data_loader = loader.state();
    st.rng = tc::get_rng_state();
    st.epoch = epoch_done;
    st.step = step;
    const std::string data_path =
        cfg.data.empty() ? cfg.data : absolute_path(cfg.data, "--data").lexically_normal().string();
    st.metadata = {{"model", cfg.model},
                   {"precision", prec.name},
                   {"scaler", cfg.scaler ? "1" : "0"},  // the choice (--no-scaler), not whether fp16 used it
                   {"weight_update", cfg.weight_update},
                   {"optimizer", cfg.optimizer},
                   {"loss_weight", fmt_double(cfg.loss_weight)},
                   {"batch_size", std::to_string(cfg.batch_size)},
                   {"lr", fmt_double(cfg.lr)},
                   {"lr_schedule", cfg.lr_schedule},
                   {"seed", std::to_string(cfg.seed)},
                   {"data", data_path},
                   {"train_seconds", fmt_double(previous_seconds + result.train_seconds)}};
    tc::io::save_checkpoint(cfg.checkpoint_dir, st);
    // The weights alone, for PyTorch / safetensors users (and byte comparisons).
    tc::io::save_safetensors(fs::path(cfg.checkpoint_dir) / "model.safetensors", model.module->state_dict(),
                             {{"model", cfg.model}, {"step", std::to_string(step)}});
  };

  const int64_t per_epoch = loader.size();
  const int64_t total_steps = cfg.max_steps > 0 ? std::min(cfg.max_steps, planned_steps) : planned_steps;
  const bool check_nonfinite = !use_scaler && cfg.on_nonfinite != "continue";
  const auto named = model.module->named_parameters();
  // The peak the report gives: what training adds on its device (the dataset stays on the CPU).
  auto training_peak_bytes = [&] {
    return device.is_cuda() ? tc::memory_stats(device).peak_bytes : tc::memory_stats().peak_bytes - data_bytes;
  };
  tc::reset_peak_memory_stats(device);
  const auto t_start = Clock::now();
  double step_seconds = 0;  // time spent in training steps in this process
  int64_t steps_here = 0;
  auto limit_reached = [&] { return cfg.max_steps > 0 && step >= cfg.max_steps; };

  while (loader.epoch() < cfg.epochs && !limit_reached()) {
    const int64_t epoch = loader.epoch();  // 0-based
    double loss_sum = 0;
    int64_t loss_count = 0;
    for (auto& batch : loader) {
      const auto t0 = Clock::now();
      // From pinned memory: the copies queue behind the previous step without waiting.
      if (device.is_cuda()) batch = {batch.data.to(device, true), batch.target.to(device, true)};
      optimizer.zero_grad(/*set_to_none=*/true);
      if (numerics) numerics->begin_step(step + 1);
      tc::Tensor loss;
      {
        tc::amp::AutocastGuard autocast(device.type, prec.compute == tc::kFloat32 ? tc::kBFloat16 : prec.compute,
                                        prec.compute != tc::kFloat32);
        const tc::Tensor logits =
            numerics ? model.forward_hooked(batch.data, [&](const std::string& layer,
                                                            const tc::Tensor& y) { return numerics->watch(y, layer); })
                     : model.forward(batch.data);
        loss = model_loss(model, logits, batch.target);
      }
      // --loss-weight scales the objective (as an auxiliary-loss weight or 1/K gradient
      // accumulation does) and so every gradient; the logged loss stays unweighted.
      scaler.scale(cfg.loss_weight == 1.0 ? loss : loss * cfg.loss_weight).backward();
      const bool log_now = (step + 1) % cfg.log_every == 0 || step + 1 == total_steps ||
                           (cfg.max_steps > 0 && step + 1 >= cfg.max_steps);
      if (numerics) {
        numerics->record_gradients(named);
        numerics->before_update(named);
      }
      StepRecord rec;
      if (cfg.track_zero_grads) rec.zero_grad_fraction = zero_fraction(params);
      rec.loss_scale = scaler.get_scale();                     // the scale this step's gradients carry
      rec.lr = optimizer.param_groups()[0].options->get_lr();  // the lr of this step
      rec.loss = world > 1 ? mean_over_ranks(loss) : loss.item<double>();
      const double norm = tensorboard && log_now ? grad_norm(params, rec.loss_scale) : -1;
      bool stepped = false;
      if (check_nonfinite && nonfinite_step(rec.loss, params, named, step + 1, cfg)) {
        ++result.nonfinite_steps;  // --on-nonfinite skip: drop the step, as a scaler would
        if (numerics) numerics->record_overflow(step + 1, named);
        optimizer.zero_grad(/*set_to_none=*/true);
      } else {
        scaler.step(optimizer);
        scaler.update();
        stepped = !scaler.last_step().skipped;  // on CUDA, waits for the device's answer
        if (numerics && stepped) numerics->after_update(named);
        if (numerics && !stepped)
          say("step " + std::to_string(step + 1) +
              ": inf/NaN, step skipped; first non-finite: " + numerics->record_overflow(step + 1, named));
      }
      if (scheduler) scheduler->step();
      const auto t1 = Clock::now();
      ++step;
      ++steps_here;
      rec.step = step;
      rec.epoch = epoch + 1;
      rec.skipped = !stepped;
      rec.skipped_total = scaler.steps_skipped() + result.nonfinite_steps;
      rec.step_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
      step_seconds += std::chrono::duration<double>(t1 - t0).count();
      result.train_seconds = step_seconds;
      rec.seconds = previous_seconds + step_seconds;
      result.steps_log.push_back(rec);
      loss_sum += rec.loss;
      ++loss_count;

      if (metrics.is_open() && (step % cfg.log_every == 0 || step == total_steps || limit_reached())) {
        JsonObject o;
        o.add("step", step)
            .add("epoch", rec.epoch)
            .add("loss", rec.loss)
            .add("loss_scale", rec.loss_scale)
            .add("skipped", rec.skipped_total)
            .add("skipped_step", rec.skipped)
            .add("lr", rec.lr)
            .add("seconds", rec.seconds);
        if (rec.zero_grad_fraction >= 0) o.add("zero_grad_fraction", rec.zero_grad_fraction);
        metrics.write(o);
      }
      if (tensorboard && log_now) {
        const double elapsed = std::chrono::duration<double>(Clock::now() - t_start).count();
        tensorboard->step(step, rec.loss, rec.lr, rec.loss_scale, rec.skipped_total, norm,
                          elapsed > 0 ? steps_here * double(cfg.batch_size) / elapsed : 0, training_peak_bytes());
      }
      if (!cfg.quiet) {
        ProgressInfo pi;
        pi.epoch = epoch + 1;
        pi.epochs = cfg.epochs;
        pi.step = loader.batch_index() == 0 && loader.epoch() != epoch ? per_epoch : loader.batch_index();
        pi.steps_in_epoch = per_epoch;
        pi.global_step = step;
        pi.loss = rec.loss;
        pi.loss_scale = rec.loss_scale;
        pi.scaler = use_scaler;
        pi.skipped = rec.skipped_total;
        const double elapsed = std::chrono::duration<double>(Clock::now() - t_start).count();
        pi.samples_per_s = elapsed > 0 ? steps_here * double(cfg.batch_size) / elapsed : 0;
        pi.eta_s = steps_here > 0 ? elapsed / steps_here * double(total_steps - step) : -1;
        progress.update(pi);
      }
      if (cfg.checkpoint_every > 0 && step % cfg.checkpoint_every == 0 && !limit_reached()) save(epoch);
      if (limit_reached()) break;
    }
    // An epoch is complete when the loader has no batch of it left.
    const bool complete = loader.epoch() != epoch || loader.batch_index() >= per_epoch;
    if (complete && loader.epoch() == epoch) loader.set_epoch(epoch + 1);
    if (complete || limit_reached()) {
      const Evaluation ev = evaluate(model, *data.test, prec, device);  // sharded across ranks
      EpochRecord er;
      er.epoch = epoch + 1;
      er.step = step;
      er.train_loss = loss_count ? loss_sum / loss_count : 0;
      er.test_accuracy = ev.accuracy;
      er.test_loss = ev.loss;
      er.test_bits_per_byte = ev.bits_per_byte;
      result.epochs_log.push_back(er);
      result.test_accuracy = ev.accuracy;
      result.test_loss = ev.loss;
      result.test_bits_per_byte = ev.bits_per_byte;
      if (tensorboard) {
        tensorboard->epoch(step, ev.accuracy, ev.loss, ev.bits_per_byte);
        tensorboard->flush();
      }
      if (!cfg.quiet) {
        progress.finish();
        char buf[512];
        const double secs = previous_seconds + step_seconds;
        if (model.language_model)
          std::snprintf(buf, sizeof buf, "epoch %lld%s  step %lld  train loss %.4f  held-out %.4f bits/byte  %s%.1f s",
                        static_cast<long long>(epoch + 1), complete ? "" : " (stopped early)",
                        static_cast<long long>(step), er.train_loss, ev.bits_per_byte,
                        use_scaler ? ("loss scale " + std::to_string(int64_t(scaler.get_scale())) + "  skipped " +
                                      std::to_string(scaler.steps_skipped()) + "  ")
                                         .c_str()
                                   : "",
                        secs);
        else
          std::snprintf(buf, sizeof buf, "epoch %lld%s  step %lld  train loss %.4f  test accuracy %.2f%%  %s%.1f s",
                        static_cast<long long>(epoch + 1), complete ? "" : " (stopped early)",
                        static_cast<long long>(step), er.train_loss, 100 * ev.accuracy,
                        use_scaler ? ("loss scale " + std::to_string(int64_t(scaler.get_scale())) + "  skipped " +
                                      std::to_string(scaler.steps_skipped()) + "  ")
                                         .c_str()
                                   : "",
                        secs);
        say(buf);
      }
      save(complete ? epoch + 1 : epoch);
    }
  }
  if (steps_here == 0 && !cfg.quiet)
    say("nothing to do: the run already reached --epochs/--max-steps (" + std::to_string(step) + " steps)");

  result.epochs = std::min<int64_t>(loader.epoch(), cfg.epochs);
  result.steps = step;
  result.skipped_steps = scaler.steps_skipped() + result.nonfinite_steps;
  result.final_loss_scale = scaler.get_scale();
  result.final_loss = result.steps_log.empty() ? 0 : result.steps_log.back().loss;
  result.train_seconds = previous_seconds + step_seconds;
  result.peak_memory_bytes = std::max<int64_t>(0, training_peak_bytes());
  if (!result.steps_log.empty()) {
    std::vector<double> ms;
    for (const auto& r : result.steps_log) ms.push_back(r.step_ms);
    std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
    result.median_step_ms = ms[ms.size() / 2];
  }
  result.weight_state_bytes = weight_state_bytes(params, optimizer);
  if (numerics) {
    result.numerics_table = numerics->table();
    result.numerics = numerics->stats();
    if (!cfg.numerics_json.empty()) write_file_atomic(cfg.numerics_json, numerics_json(*numerics));
  }
  return result;
}

std::string numerics_json(const tc::amp::NumericsReport& report) {
  std::string tensors;
  for (const auto& s : report.stats()) {
    JsonObject o;
    o.add("name", s.name)
        .add("kind", s.kind)
        .add("samples", s.samples)
        .add("values", s.total)
        .add("amax", s.amax)
        .add("zero", s.share(s.zero))
        .add("fp16_flush_to_zero", s.share(s.flush))
        .add("fp16_subnormal", s.share(s.subnormal))
        .add("fp16_overflow", s.share(s.overflow))
        .add("nonfinite", s.share(s.nonfinite));
    if (s.kind == "param_grad") o.add("bf16_update_lost", s.lost_share());
    tensors += (tensors.empty() ? "\n  " : ",\n  ") + o.str();
  }
  std::string overflows;
  for (const auto& ov : report.overflows())
    overflows += (overflows.empty() ? "" : ", ") +
                 JsonObject().add("step", ov.step).add("first_nonfinite", ov.first_nonfinite).str();
  return JsonObject()
             .add("sampled_steps", report.sampled_steps())
             .add_raw("tensors", "[" + tensors + "]")
             .add_raw("overflow_steps", "[" + overflows + "]")
             .str() +
         "\n";
}

std::string summary_json(const TrainResult& r) {
  JsonObject o;
  o.add("model", r.model).add("precision", r.precision);
  if (r.device != "cpu") o.add("device", r.device);
  if (!r.weight_update.empty()) o.add("weight_update", r.weight_update);
  o.add("scaler", r.scaler)
      .add("epochs", r.epochs)
      .add("steps", r.steps)
      .add("skipped_steps", r.skipped_steps)
      .add("final_loss_scale", r.final_loss_scale)
      .add("final_loss", r.final_loss);
  if (r.test_accuracy >= 0)
    o.add("test_accuracy", r.test_accuracy);
  else
    o.add_raw("test_accuracy", "null");
  o.add("test_loss", r.test_loss);
  if (r.test_bits_per_byte >= 0) o.add("test_bits_per_byte", r.test_bits_per_byte);
  o.add("train_seconds", r.train_seconds)
      .add("peak_memory_bytes", r.peak_memory_bytes)
      .add("weight_state_bytes", r.weight_state_bytes)
      .add("median_step_ms", r.median_step_ms)
      .add("batch_size", r.batch_size)
      .add("world_size", r.world_size)
      .add("parameters", r.parameters)
      .add("resumed_from_step", r.resumed_from_step);
  return o.str() + "\n";
}

}  // namespace tcli
