// The training loop (see trainer.h).
#include "trainer.h"

#include <fcntl.h>
#include <tensorcast/allocator.h>
#include <tensorcast/amp/autocast.h>
#include <tensorcast/amp/fp8.h>
#include <tensorcast/amp/grad_scaler.h>
#include <tensorcast/amp/numerics.h>
#include <tensorcast/autograd.h>
#include <tensorcast/cuda.h>
#include <tensorcast/data/data_loader.h>
#include <tensorcast/dist/ddp.h>
#include <tensorcast/dist/zero.h>
#include <tensorcast/error.h>
#include <tensorcast/io/checkpoint.h>
#include <tensorcast/io/safetensors.h>
#include <tensorcast/nn/linear.h>
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

Precision resolve_precision(PrecisionChoice choice, tc::Device device, Fp8RecipeChoice recipe) {
  using P = PrecisionChoice;
  switch (choice) {
    case P::kFp8: {
      if (device.is_cuda())
        throw tc::Error(
            "[cli] --precision fp8 runs on the CPU only for now (its GEMMs emulate fp8 with float32 "
            "accumulation); use --precision bf16 on a GPU");
      Precision p{P::kFp8, tc::kBFloat16, ""};
      p.fp8 = tc::fp8::Recipe::named(setting_name(recipe));
      return p;
    }
    case P::kFp32:
      return {P::kFp32, tc::kFloat32, ""};
    case P::kBf16:
      return {P::kBf16, tc::kBFloat16, ""};
    case P::kFp16:
      return {P::kFp16, tc::kFloat16, ""};
    case P::kBf16Pure:
      return {P::kBf16Pure, tc::kBFloat16, "", /*pure=*/true};
    case P::kAuto:
      break;
  }
  if (device.is_cuda()) {
    if (tc::amp::is_bf16_supported(device.type))
      return {P::kBf16, tc::kBFloat16,
              "this GPU has bf16 Tensor Cores: bf16 autocast runs the products at 16-bit speed with fp32's exponent "
              "range, so no loss scaler is needed"};
    return {P::kFp16, tc::kFloat16,
            "this GPU has no bf16 Tensor Cores (compute capability below 8.0): fp16 autocast with a GradScaler"};
  }
  if (tc::amp::is_bf16_supported(tc::kCPU))
    return {P::kBf16, tc::kBFloat16,
            "this CPU has native bf16 math (AVX-512 BF16/AMX): bf16 autocast halves the activations' memory at fp32's "
            "speed or better (16-bit products run on the faster of the bf16 and fp32 kernels, tensorcast/gemm16.h); "
            "bf16 has fp32's exponent range and needs no loss scaler"};
  return {P::kFp32, tc::kFloat32,
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

// A setting of the checkpoint's metadata, by its name, or an error naming the key.
template <class E>
E meta_setting(const std::string& v, const std::string& key, const std::string& dir) {
  if (const std::optional<E> value = parse_setting<E>(v)) return *value;
  throw tc::Error("[cli] --resume " + dir + ": checkpoint metadata '" + key + "' is \"" + v + "\", expected " +
                  setting_names_text<E>() + "; the checkpoint is damaged");
}

// adopt for an enum setting, stored in the metadata by its name.
template <class E>
void adopt_setting(const TrainConfig& c, const tc::io::Metadata& meta, const std::string& key, const std::string& flag,
                   E& value, const std::string& dir) {
  adopt(
      c, meta, key, flag, setting_name(value), [&](const std::string& v) { value = meta_setting<E>(v, key, dir); },
      dir);
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

// ---------------------------------------------------------------- evaluation

struct Evaluation {
  double accuracy = -1, loss = 0, bits_per_byte = -1;
};

// What evaluation adds up over the test batches: the loss weighted by targets, and the
// correct predictions among `count` (classification).
struct EvalSums {
  double loss = 0, correct = 0, count = 0, weight = 0;
};

// This rank's sums: data parallel, rank r evaluates batches r, r + world, ...
EvalSums evaluation_sums(Model& model, const tc::data::Dataset& test, const Precision& prec, tc::Device device) {
  // A non-owning handle: the loader only reads the dataset during this call.
  tc::data::DataLoader loader(std::shared_ptr<const tc::data::Dataset>(&test, [](const tc::data::Dataset*) {}),
                              tc::data::DataLoaderOptions(model.language_model ? 64 : 1000).prefetch(0));
  EvalSums s;
  const int world = tc::dist::world_size(), rank = tc::dist::rank();
  int64_t k = -1;
  for (auto& batch : loader) {
    if (++k % world != rank) continue;
    tc::Tensor logits, loss;
    const tc::Tensor target = batch.target.to(device);
    {
      const AutocastRegion autocast(prec, device);
      logits = model.forward(batch.data.to(device));
      loss = model_loss(model, logits, target);
    }
    const double n = static_cast<double>(target.numel());
    s.loss += loss.item<double>() * n;
    s.weight += n;
    if (!model.language_model) {
      s.correct += (tc::argmax(logits, 1) == target).to(tc::kFloat32).sum().item<double>();
      s.count += n;
    }
  }
  return s;
}

EvalSums sum_over_ranks(const EvalSums& s) {
  if (tc::dist::world_size() == 1) return s;
  const tc::Tensor sums = tc::tensor(std::vector<double>{s.loss, s.correct, s.count, s.weight}, {4}, tc::kFloat64);
  tc::dist::all_reduce(sums);
  const std::vector<double> v = sums.to_vector();
  return {v[0], v[1], v[2], v[3]};
}

Evaluation evaluate(Model& model, const tc::data::Dataset& test, const Precision& prec, tc::Device device) {
  tc::NoGradGuard no_grad;
  model.module->eval();
  EvalSums s = evaluation_sums(model, test, prec, device);
  model.module->train();
  s = sum_over_ranks(s);
  Evaluation e;
  e.loss = s.weight > 0 ? s.loss / s.weight : 0;
  if (model.language_model)
    e.bits_per_byte = e.loss / std::numbers::ln2;
  else
    e.accuracy = s.count > 0 ? s.correct / s.count : 0;
  return e;
}

// ---------------------------------------------------------------- step statistics

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

// The LR schedule is a closed-form function of the step: a resumed run jumps to it.
void replay_schedule(tc::optim::LRScheduler* scheduler, int64_t step) {
  if (!scheduler) return;
  tc::StateDict sd = scheduler->state_dict();
  sd["last_epoch"] = tc::state_int(step);
  scheduler->load_state_dict(sd);
}

}  // namespace

int64_t restore_training_state(const tc::io::TrainingState& state, tc::nn::Module& module,
                               tc::optim::Optimizer& optimizer, tc::amp::GradScaler& scaler, bool use_scaler,
                               tc::data::DataLoader& loader, tc::optim::LRScheduler* scheduler, std::string* note,
                               const std::function<void(const tc::StateDict&)>& load_optimizer) {
  module.load_state_dict(state.model);
  if (load_optimizer)
    load_optimizer(state.optimizer);
  else
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
    replay_schedule(scheduler, state.step);
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
  replay_schedule(scheduler, state.step);
  return state.step;
}

namespace {

// ---------------------------------------------------------------- the run

// Everything a training run holds, filled in order by the steps of run_training below.
struct TrainingRun {
  TrainConfig cfg;
  TrainResult result;
  std::optional<tc::io::TrainingState> resume;  // --resume's checkpoint
  double previous_seconds = 0;                  // training time of the resumed run before this process
  tc::Device device;
  Precision prec;
  bool use_scaler = false;
  TaskData data;
  int64_t data_bytes = 0;  // the dataset, in memory for the whole run (the reported peak leaves it out)
  Model model;
  std::vector<tc::Tensor> params;
  tc::nn::NamedTensors named;
  std::unique_ptr<tc::optim::Optimizer> optimizer;
  std::optional<tc::amp::GradScaler> scaler;
  int world = 1;  // data-parallel processes
  std::optional<tc::data::DataLoader> loader;
  std::optional<tc::dist::DistributedDataParallel> ddp;
  std::optional<tc::dist::ZeroRedundancyOptimizer> zero;  // --zero: shards `optimizer` over `ddp`'s buckets
  std::unique_ptr<tc::optim::LRScheduler> scheduler;      // null: constant lr
  int64_t planned_steps = 0;                              // --epochs' steps
  int64_t total_steps = 0;                                // what this run will reach: --max-steps may stop it sooner
  int64_t step = 0;                                       // steps done, resumed ones included
  std::string resume_note;
  bool check_nonfinite = false;  // no GradScaler watches the gradients, and --on-nonfinite is not continue
  Clock::time_point t_start;
  double step_seconds = 0;  // time spent in training steps in this process
  int64_t steps_here = 0;   // steps run in this process

  bool limit_reached() const { return cfg.max_steps > 0 && step >= cfg.max_steps; }
  // The peak the report gives: what training adds on its device (the dataset stays on the CPU).
  int64_t training_peak_bytes() const {
    return device.is_cuda() ? tc::memory_stats(device).peak_bytes : tc::memory_stats().peak_bytes - data_bytes;
  }
  double elapsed_seconds() const { return std::chrono::duration<double>(Clock::now() - t_start).count(); }
  double samples_per_second() const {
    const double elapsed = elapsed_seconds();
    return elapsed > 0 ? steps_here * double(cfg.batch_size) / elapsed : 0;
  }
};

// Where a run reports: the console (progress bar and messages), --metrics, --tensorboard
// and the numerics report.
struct RunLog {
  explicit RunLog(const TrainConfig& cfg)
      : quiet(cfg.quiet), progress(cfg.progress && !cfg.quiet && stdout_is_terminal(), 100) {}
  void say(const std::string& s) {
    if (!quiet) progress.message(s);
  }
  // Opens the output files (appending to a resumed run's metrics).
  void open_outputs(const TrainConfig& cfg, bool resumed) {
    if (!cfg.metrics_path.empty()) metrics = JsonLinesWriter(cfg.metrics_path, /*append=*/resumed);
    if (!cfg.tensorboard_dir.empty()) tensorboard.emplace(cfg.tensorboard_dir);
    if (cfg.numerics_report) numerics.emplace(cfg.numerics_every);
  }

  bool quiet;
  Progress progress;
  JsonLinesWriter metrics;
  std::optional<TensorBoardLog> tensorboard;
  std::optional<tc::amp::NumericsReport> numerics;
};

// ---------------------------------------------------------------- set-up, in order:
// everything that can fail on bad input comes before anything is written.

// Data parallel: rank 0 alone prints and writes files.
TrainConfig config_for_this_rank(const TrainConfig& config) {
  TrainConfig cfg = config;
  if (tc::dist::rank() != 0) {
    cfg.quiet = true;
    cfg.metrics_path.clear();
    cfg.tensorboard_dir.clear();
    cfg.numerics_json.clear();
  }
  return cfg;
}

tc::io::TrainingState read_resume_checkpoint(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec))
    throw tc::Error("[cli] --resume " + dir + ": no such directory; pass the --checkpoint DIR of an earlier run");
  if (fs::is_directory(dir, ec) && !tc::io::has_checkpoint(dir))
    throw tc::Error("[cli] --resume " + dir + " holds no " + tc::io::kCheckpointFileName +
                    "; pass the --checkpoint DIR of an earlier run");
  try {
    return tc::io::load_checkpoint(dir);
  } catch (const tc::Error& e) {
    throw tc::Error(std::string(e.what()) +
                    " (a damaged checkpoint.safetensors may have an intact checkpoint.prev.safetensors " +
                    "beside it: move it into place, or pass another --resume directory)");
  }
}

// A resumed run is the same run: its settings come from the checkpoint, and a flag that
// contradicts them is an error.
void adopt_checkpoint_settings(TrainConfig& cfg, const tc::io::Metadata& meta, const std::string& dir) {
  adopt_setting(cfg, meta, "model", "--model", cfg.model, dir);
  // Compared resolved: a run started with auto stored what auto chose.
  adopt(
      cfg, meta, "precision", "--precision",
      resolve_precision(cfg.precision, resolve_device(cfg.device), cfg.fp8_recipe).name(),
      [&](const std::string& v) { cfg.precision = meta_setting<PrecisionChoice>(v, "precision", dir); }, dir);
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
  adopt_setting(cfg, meta, "lr_schedule", "--lr-schedule", cfg.lr_schedule, dir);
  adopt(
      cfg, meta, "loss_weight", "--loss-weight", fmt_double(cfg.loss_weight),
      [&](const std::string& v) { cfg.loss_weight = meta_double(v, "loss_weight", dir); }, dir);
  adopt_setting(cfg, meta, "optimizer", "--optimizer", cfg.optimizer, dir);
  adopt_setting(cfg, meta, "weight_update", "--weight-update", cfg.weight_update, dir);
  adopt_setting(cfg, meta, "fp8_recipe", "--fp8-recipe", cfg.fp8_recipe, dir);
  adopt(
      cfg, meta, "scaler", "--no-scaler", cfg.scaler ? "1" : "0", [&](const std::string& v) { cfg.scaler = v == "1"; },
      dir);
  if (!is_explicit(cfg, "--data"))
    if (const auto it = meta.find("data"); it != meta.end()) cfg.data = it->second;
}

void load_resume(TrainingRun& run) {
  TrainConfig& cfg = run.cfg;
  if (cfg.resume_dir.empty()) return;
  run.resume = read_resume_checkpoint(cfg.resume_dir);
  const tc::io::Metadata& meta = run.resume->metadata;
  adopt_checkpoint_settings(cfg, meta, cfg.resume_dir);
  if (const auto it = meta.find("train_seconds"); it != meta.end())
    run.previous_seconds = meta_double(it->second, "train_seconds", cfg.resume_dir);
  run.result.resumed = true;
  run.result.resumed_from_step = run.resume->step;
}

// --checkpoint names a directory that can be made, and that holds no other run's checkpoint.
void check_checkpoint_dir(const TrainConfig& cfg) {
  if (cfg.checkpoint_dir.empty()) return;
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

void choose_device_and_precision(TrainingRun& run) {
  run.device = resolve_device(run.cfg.device);
  run.prec = resolve_precision(run.cfg.precision, run.device, run.cfg.fp8_recipe);
  if (run.device.is_cuda() && run.prec.pure)
    throw tc::Error(
        "[cli] --precision bf16-pure runs on the CPU only for now (the CUDA optimizers keep float32 "
        "master weights); use --precision bf16 with --device " +
        run.cfg.device);
  run.use_scaler = run.prec.compute == tc::kFloat16 && run.cfg.scaler;
}

void load_data(TrainingRun& run) {
  const int64_t bytes_before_data = tc::memory_stats().current_bytes;
  run.data = load_task_data(run.cfg.model, run.cfg.data, run.cfg.seed);
  run.data_bytes = tc::memory_stats().current_bytes - bytes_before_data;
}

std::unique_ptr<tc::optim::Optimizer> make_optimizer(const TrainConfig& cfg, const std::vector<tc::Tensor>& params) {
  switch (cfg.optimizer) {
    case OptimizerKind::kSgd:
      return std::make_unique<tc::optim::SGD>(params, tc::optim::SGDOptions(cfg.lr).momentum(0.9));
    case OptimizerKind::kAdamW:
      break;
  }
  return std::make_unique<tc::optim::AdamW>(params, tc::optim::AdamWOptions(cfg.lr).weight_decay(0.0));
}

// bf16-pure: how the optimizer rounds each update into the bf16 weights.
void set_weight_update(tc::optim::Optimizer& optimizer, WeightUpdate mode, uint64_t seed) {
  optimizer.set_weight_update(mode == WeightUpdate::kKahan ? tc::optim::WeightUpdate::PureKahan
                                                           : tc::optim::WeightUpdate::Pure);
  if (mode == WeightUpdate::kStochastic) optimizer.set_rounding(tc::optim::Rounding::Stochastic, seed);
}

// The model from the seed, where and as it trains, then its optimizer and scaler.
void build_model_and_optimizer(TrainingRun& run) {
  const TrainConfig& cfg = run.cfg;
  tc::manual_seed(cfg.seed);
  run.model = build_model(cfg.model);
  tc::amp::set_autocast_cache_keeps_training_copies(run.model.keeps_weight_copies);
  // Before the optimizer: it makes its state where, and as, the parameters are.
  if (run.device.is_cuda()) run.model.module->to(run.device);
  if (run.prec.pure) run.model.module->to(tc::kBFloat16);
  // Delayed fp8 scaling's state is part of the model (buffers), so a resume restores it.
  if (run.prec.fp8) tc::nn::init_fp8_state(*run.model.module, *run.prec.fp8);
  run.params = run.model.module->parameters();
  run.optimizer = make_optimizer(cfg, run.params);
  if (run.prec.pure) {
    set_weight_update(*run.optimizer, cfg.weight_update, cfg.seed);
    run.result.weight_update = setting_name(cfg.weight_update);
  }
  run.scaler.emplace(tc::amp::GradScalerOptions().enabled(run.use_scaler));
}

// --batch-size is the global batch: each of the world's processes takes 1/world of it,
// so N processes follow the same trajectory as one (up to summation order).
void check_data_and_world(TrainingRun& run) {
  const TrainConfig& cfg = run.cfg;
  const std::string data_name = cfg.data.empty() ? "the default data" : cfg.data;
  if (run.data.train->size() == 0 || run.data.test->size() == 0)
    throw tc::Error("[cli] " + data_name + ": the " + (run.data.train->size() == 0 ? "training" : "test") +
                    " set has 0 examples; pass --data with a non-empty data set");
  run.world = tc::dist::world_size();
  if (run.world > 1 && run.device.is_cuda())
    throw tc::Error("[cli] data-parallel runs (mpirun) train on the CPU only for now; drop --device " + cfg.device);
  if (cfg.batch_size % run.world != 0)
    throw tc::Error("[cli] --batch-size " + std::to_string(cfg.batch_size) +
                    " is the global batch; it must divide by " + "the " + std::to_string(run.world) +
                    " processes (e.g. --batch-size " + std::to_string((cfg.batch_size / run.world + 1) * run.world) +
                    ")");
}

void make_loader(TrainingRun& run) {
  const TrainConfig& cfg = run.cfg;
  run.loader.emplace(run.data.train, tc::data::DataLoaderOptions(cfg.batch_size / run.world)
                                         .shuffle(true)
                                         .seed(cfg.seed)
                                         .prefetch(2)
                                         .pin_memory(run.device.is_cuda())
                                         .num_replicas(run.world)
                                         .rank(tc::dist::rank()));
  if (run.world > 1 || cfg.zero_stage > 0) {
    run.ddp.emplace(run.model.module,
                    tc::dist::DistributedDataParallelOptions().bucket_cap_bytes(cfg.bucket_cap_bytes));
    tc::dist::sync_grad_scaler(*run.scaler);
    if (cfg.zero_stage > 0) run.zero.emplace(*run.ddp, *run.optimizer, tc::dist::ZeroOptions().stage(cfg.zero_stage));
  }
}

// Cosine decay over the planned epochs (not --max-steps, which only stops a run early, so
// a run cut short and resumed follows the same schedule as one that was not); then the
// checkpoint's state, when resuming.
// A --zero checkpoint's metadata: the world size and the step of its shard files.
constexpr const char* kZeroWorldSize = "zero_world_size";
constexpr const char* kZeroStep = "zero_step";

fs::path shard_path(const fs::path& dir, int rank, int world, const std::string& step) {
  return dir / ("optimizer-shard-" + std::to_string(rank) + "-of-" + std::to_string(world) + "-step-" + step +
                ".safetensors");
}

// This rank's shard files but the two newest: the checkpoint's and checkpoint.prev's.
void remove_old_shards(const fs::path& dir, int rank, int world) {
  const std::string prefix = "optimizer-shard-" + std::to_string(rank) + "-of-" + std::to_string(world) + "-step-";
  std::vector<std::pair<int64_t, fs::path>> mine;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(prefix) || !name.ends_with(".safetensors")) continue;
    const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - 12);
    int64_t step = 0;
    const auto [end, err] = std::from_chars(digits.data(), digits.data() + digits.size(), step);
    if (err == std::errc() && end == digits.data() + digits.size()) mine.emplace_back(step, entry.path());
  }
  std::sort(mine.begin(), mine.end());
  for (size_t k = 0; k + 2 < mine.size(); ++k) fs::remove(mine[k].second, ec);
}

// How --resume loads the optimizer: a checkpoint of a --zero run names its ranks' shard
// files (any world size, with --zero or without: sliced again as needed); a plain one
// holds the whole state.
std::function<void(const tc::StateDict&)> optimizer_loader(TrainingRun& run) {
  const tc::io::Metadata& m = run.resume->metadata;
  const auto world = m.find(kZeroWorldSize);
  if (world == m.end()) {
    if (!run.zero) return nullptr;
    return [&run](const tc::StateDict& sd) { run.zero->load_state_dict(sd); };
  }
  const auto step = m.find(kZeroStep);
  int64_t p = 0;
  const auto [end, ec] = std::from_chars(world->second.data(), world->second.data() + world->second.size(), p);
  if (ec != std::errc() || end != world->second.data() + world->second.size() || p < 1 || p > 1 << 20 ||
      step == m.end())
    throw tc::Error("[cli] the checkpoint's '" + std::string(kZeroWorldSize) + "' and '" + kZeroStep +
                    "' do not name a set of shard files");
  std::error_code fs_ec;
  const fs::path dir = fs::is_directory(run.cfg.resume_dir, fs_ec) ? fs::path(run.cfg.resume_dir)
                                                                   : fs::path(run.cfg.resume_dir).parent_path();
  std::vector<fs::path> paths;
  for (int r = 0; r < p; ++r) paths.push_back(shard_path(dir, r, static_cast<int>(p), step->second));
  const tc::io::Metadata expect{{"step", step->second}};
  return [&run, paths, expect](const tc::StateDict&) {
    if (run.zero)
      run.zero->load_shards(paths, expect);
    else
      run.optimizer->load_state_dict(tc::dist::read_shards(paths, *run.optimizer, expect));
  };
}

void make_schedule_and_restore(TrainingRun& run) {
  const TrainConfig& cfg = run.cfg;
  const int64_t per_epoch = run.loader->size();
  run.planned_steps =
      checked_steps(cfg.epochs, per_epoch,
                    "--epochs " + std::to_string(cfg.epochs) + " x " + std::to_string(per_epoch) + " steps per epoch");
  if (cfg.lr_schedule == LrSchedule::kCosine)
    run.scheduler =
        std::make_unique<tc::optim::CosineAnnealingLR>(*run.optimizer, std::max<int64_t>(1, run.planned_steps));
  if (!run.resume) return;
  try {
    run.step = restore_training_state(*run.resume, *run.model.module, *run.optimizer, *run.scaler, run.use_scaler,
                                      *run.loader, run.scheduler.get(), &run.resume_note, optimizer_loader(run));
  } catch (const tc::Error& e) {  // name the file: the parts' own errors name only the key
    throw tc::Error("[cli] --resume " + cfg.resume_dir + " (" + tc::io::kCheckpointFileName + "): " + e.what());
  }
}

void describe_run(TrainingRun& run) {
  TrainResult& r = run.result;
  r.model = setting_name(run.cfg.model);
  r.device = run.cfg.device;
  r.precision = run.prec.name();
  r.precision_reason = run.prec.reason;
  if (run.prec.fp8) r.fp8_recipe = setting_name(run.cfg.fp8_recipe);
  r.data_description = run.data.description;
  r.scaler = run.use_scaler;
  r.batch_size = run.cfg.batch_size;
  r.parameters = tc::nn::parameter_count(*run.model.module);
  r.world_size = run.world;
}

// ---------------------------------------------------------------- the console

std::string weight_update_text(WeightUpdate mode) {
  switch (mode) {
    case WeightUpdate::kKahan:
      return "to nearest with Kahan compensation";
    case WeightUpdate::kNearest:
      return "to nearest (small updates are lost)";
    case WeightUpdate::kStochastic:
      break;
  }
  return "stochastically";
}

std::string run_line(const TrainingRun& run) {
  const TrainConfig& cfg = run.cfg;
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "tensorcast train: %s (%lld parameters), %s%s, batch %lld, %s lr %g (%s), seed %llu, %d threads",
                run.model.description.c_str(), static_cast<long long>(run.result.parameters), run.prec.name().c_str(),
                run.use_scaler ? " + GradScaler" : "", static_cast<long long>(cfg.batch_size),
                cfg.optimizer == OptimizerKind::kSgd ? "SGD (momentum 0.9)" : "AdamW", cfg.lr,
                cfg.lr_schedule == LrSchedule::kCosine ? "cosine decay" : "constant",
                static_cast<unsigned long long>(cfg.seed), tc::get_num_threads());
  return buf;
}

// What the run is, and what it makes of its flags, before the first step.
void print_header(const TrainingRun& run, RunLog& log) {
  const TrainConfig& cfg = run.cfg;
  const Precision& prec = run.prec;
  log.say(run_line(run));
  if (cfg.precision == PrecisionChoice::kAuto) log.say("precision auto -> " + prec.name() + ": " + prec.reason);
  if (prec.pure)
    log.say("bf16-pure: bf16 weights and optimizer state, no float32 master copy; updates rounded " +
            weight_update_text(cfg.weight_update));
  if (prec.compute == tc::kFloat16 && !cfg.scaler)
    log.say(
        "fp16 without a GradScaler: small gradients may underflow to zero (this run shows what the scaler prevents)");
  if (prec.compute != tc::kFloat16 && !cfg.scaler)
    log.say("note: --no-scaler has no effect in " + prec.name() + " (only fp16 uses a GradScaler)");
  log.say("data: " + run.data.description);
  if (run.world > 1)
    log.say("data parallel: " + std::to_string(run.world) + " processes (MPI), " +
            std::to_string(cfg.batch_size / run.world) + " examples each per step, gradients " +
            (run.zero && run.zero->stage() == 2 ? "reduce-scattered" : "all-reduced") + " in " +
            std::to_string(run.ddp->bucket_parameter_names().size()) + " bucket(s) during backward" +
            (run.zero ? "; optimizer state" + std::string(run.zero->stage() == 2 ? " and gradients" : "") +
                            " sharded (ZeRO stage " + std::to_string(run.zero->stage()) + ")"
                      : ""));
  if (run.resume)
    log.say("resumed from " + cfg.resume_dir + " at step " + std::to_string(run.step) + " (epoch " +
            std::to_string(run.loader->epoch() + 1) + ", batch " + std::to_string(run.loader->batch_index()) + ")");
  if (!run.resume_note.empty()) log.say(run.resume_note);
}

// ---------------------------------------------------------------- checkpoints

tc::io::Metadata checkpoint_metadata(const TrainingRun& run) {
  const TrainConfig& cfg = run.cfg;
  const std::string data_path =
      cfg.data.empty() ? cfg.data : absolute_path(cfg.data, "--data").lexically_normal().string();
  return {{"model", setting_name(cfg.model)},
          {"precision", run.prec.name()},
          {"scaler", cfg.scaler ? "1" : "0"},  // the choice (--no-scaler), not whether fp16 used it
          {"weight_update", setting_name(cfg.weight_update)},
          {"fp8_recipe", setting_name(cfg.fp8_recipe)},
          {"optimizer", setting_name(cfg.optimizer)},
          {"loss_weight", fmt_double(cfg.loss_weight)},
          {"batch_size", std::to_string(cfg.batch_size)},
          {"lr", fmt_double(cfg.lr)},
          {"lr_schedule", setting_name(cfg.lr_schedule)},
          {"seed", std::to_string(cfg.seed)},
          {"data", data_path},
          {"train_seconds", fmt_double(run.previous_seconds + run.result.train_seconds)}};
}

// --checkpoint: the whole training state (rank 0 writes it), and the weights alone. With
// --zero each rank first writes its optimizer shard, named by step, and rank 0's checkpoint
// then names the set; a rank's older shards go once the new checkpoint is in place, but
// those of the checkpoint before it (checkpoint.prev.safetensors) stay. A rank killed
// midway leaves the last complete checkpoint and its shards as they were.
void save_checkpoint(const TrainingRun& run, int64_t epoch_done) {
  const TrainConfig& cfg = run.cfg;
  if (cfg.checkpoint_dir.empty()) return;
  const fs::path dir(cfg.checkpoint_dir);
  const std::string step = std::to_string(run.step);
  if (run.zero) {
    std::error_code ec;
    fs::create_directories(dir, ec);  // a failure shows in the write below
    run.zero->save_shard(shard_path(dir, tc::dist::rank(), run.world, step), {{"step", step}});
    tc::dist::barrier();
  }
  if (tc::dist::rank() == 0) {
    tc::io::TrainingState st;
    st.model = run.model.module->state_dict();
    if (!run.zero) st.optimizer = run.optimizer->state_dict();
    st.scaler = run.scaler->state_dict();
    st.data_loader = run.loader->state();
    st.rng = tc::get_rng_state();
    st.epoch = epoch_done;
    st.step = run.step;
    st.metadata = checkpoint_metadata(run);
    if (run.zero) {
      st.metadata[kZeroWorldSize] = std::to_string(run.world);
      st.metadata[kZeroStep] = step;
    }
    tc::io::save_checkpoint(cfg.checkpoint_dir, st);
    // The weights alone, for PyTorch / safetensors users (and byte comparisons).
    tc::io::save_safetensors(dir / "model.safetensors", run.model.module->state_dict(),
                             {{"model", setting_name(cfg.model)}, {"step", step}});
  }
  if (run.zero) {
    tc::dist::barrier();
    remove_old_shards(dir, tc::dist::rank(), run.world);
  }
}

// ---------------------------------------------------------------- one training step

// The loss of one batch, forward pass in the run's autocast region; with the numerics
// report, every layer's output passes through it.
tc::Tensor forward_loss(TrainingRun& run, RunLog& log, const tc::data::Example& batch) {
  const AutocastRegion autocast(run.prec, run.device);
  const tc::Tensor logits = log.numerics ? run.model.forward_hooked(batch.data,
                                                                    [&](const std::string& layer, const tc::Tensor& y) {
                                                                      return log.numerics->watch(y, layer);
                                                                    })
                                         : run.model.forward(batch.data);
  return model_loss(run.model, logits, batch.target);
}

// Whether step `step` (1-based) is logged to --metrics and TensorBoard: every
// --log-every steps, the last planned step and the last one --max-steps allows.
// Whether this step's loss or gradients hold inf/NaN (no GradScaler watches them). With
// --on-nonfinite stop, throws before anything is applied or saved, naming the step and the
// first non-finite gradient; with skip, returns true so the caller drops the step.
bool nonfinite_step(double loss, const TrainingRun& run, int64_t step) {
  const TrainConfig& cfg = run.cfg;
  std::vector<tc::Tensor> grads;
  if (run.zero) {  // the gradients are this rank's shard: the ranks decide together
    for (const auto& g : run.optimizer->param_groups())
      for (const auto& p : g.params) grads.push_back(p.grad());
  } else {
    for (const auto& p : run.params) grads.push_back(p.grad());
  }
  const bool bad_loss = !std::isfinite(loss);
  int64_t found_on = tc::amp::found_nonfinite(grads) ? tc::dist::rank() : tc::dist::world_size();
  if (run.zero) {
    const tc::Tensor t = tc::full({}, static_cast<double>(found_on), tc::kInt64);
    tc::dist::all_reduce(t, tc::dist::ReduceOp::Min);
    found_on = t.item<int64_t>();
  }
  if (!bad_loss && found_on == tc::dist::world_size()) return false;
  if (cfg.on_nonfinite == OnNonfinite::kSkip) return true;
  std::string what = bad_loss ? "the loss is " + std::string(std::isnan(loss) ? "nan" : "inf") : "the loss is finite";
  const int64_t first = run.zero ? -1 : tc::amp::first_nonfinite(grads);
  const tc::nn::NamedTensors& named = run.named;
  if (run.zero && found_on < tc::dist::world_size())
    what += (bad_loss ? " and" : " but") + std::string(" a gradient in the shard of rank ") + std::to_string(found_on) +
            " holds inf/NaN";
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

bool is_log_step(const TrainingRun& run, int64_t step) {
  return step % run.cfg.log_every == 0 || step == run.total_steps ||
         (run.cfg.max_steps > 0 && step >= run.cfg.max_steps);
}

// Applies the gradients unless they hold inf/NaN: the scaler skips such a step itself;
// without one, --on-nonfinite says (stop throws, skip drops it). Returns whether the
// weights were updated.
bool apply_gradients(TrainingRun& run, RunLog& log, double loss) {
  const int64_t step = run.step + 1;
  if (run.check_nonfinite && nonfinite_step(loss, run, step)) {
    ++run.result.nonfinite_steps;
    if (log.numerics) log.numerics->record_overflow(step, run.named);
    run.optimizer->zero_grad(/*set_to_none=*/true);
    return false;
  }
  run.scaler->step(*run.optimizer);
  run.scaler->update();
  const bool stepped = !run.scaler->last_step().skipped;  // on CUDA, waits for the device's answer
  if (log.numerics && stepped) log.numerics->after_update(run.named);
  if (log.numerics && !stepped)
    log.say("step " + std::to_string(step) +
            ": inf/NaN, step skipped; first non-finite: " + log.numerics->record_overflow(step, run.named));
  return stepped;
}

// What the fp8 casts of step `step` did per linear layer, to the numerics report and (on a
// logged step) TensorBoard; the counts then start again.
void report_fp8(TrainingRun& run, RunLog& log, int64_t step, bool logged) {
  const bool one_scale =
      run.prec.fp8->scaling == tc::fp8::Scaling::kTensorwise || run.prec.fp8->scaling == tc::fp8::Scaling::kDelayed;
  for (const auto& [layer, stats] : tc::nn::named_fp8_stats(*run.model.module)) {
    if (log.numerics) log.numerics->record_fp8(layer, *stats);
    if (log.tensorboard && logged) log.tensorboard->fp8(step, layer, *stats, one_scale);
    stats->clear();
  }
}

// One optimizer step on `batch`, recorded; `norm` gets the gradient norm when the step is
// logged to TensorBoard, else -1.
StepRecord train_step(TrainingRun& run, RunLog& log, tc::data::Example& batch, int64_t epoch, double& norm) {
  const auto t0 = Clock::now();
  // From pinned memory: the copies queue behind the previous step without waiting.
  if (run.device.is_cuda()) batch = {batch.data.to(run.device, true), batch.target.to(run.device, true)};
  run.optimizer->zero_grad(/*set_to_none=*/true);
  if (log.numerics) log.numerics->begin_step(run.step + 1);
  const bool logged = is_log_step(run, run.step + 1);
  // fp8 statistics cost a pass over each quantized tensor: only where they are reported.
  const bool observe_fp8 = run.prec.fp8 && ((log.numerics && log.numerics->sampling()) || (log.tensorboard && logged));
  tc::Tensor loss;
  {
    const tc::fp8::ObserveGuard observe(observe_fp8);
    loss = forward_loss(run, log, batch);
  }
  // --loss-weight scales the objective (as an auxiliary-loss weight or 1/K gradient
  // accumulation does) and so every gradient; the logged loss stays unweighted.
  run.scaler->scale(run.cfg.loss_weight == 1.0 ? loss : loss * run.cfg.loss_weight).backward();
  if (observe_fp8) report_fp8(run, log, run.step + 1, logged);
  if (log.numerics) {
    log.numerics->record_gradients(run.named);
    log.numerics->before_update(run.named);
  }
  StepRecord rec;
  if (run.cfg.track_zero_grads) rec.zero_grad_fraction = zero_fraction(run.params);
  rec.loss_scale = run.scaler->get_scale();                     // the scale this step's gradients carry
  rec.lr = run.optimizer->param_groups()[0].options->get_lr();  // the lr of this step
  rec.loss = run.world > 1 ? mean_over_ranks(loss) : loss.item<double>();
  if (run.zero && logged)  // a collective: every rank, whether or not it writes TensorBoard
    norm = run.zero->clip_grad_norm_(std::numeric_limits<double>::infinity()) / rec.loss_scale;
  else
    norm = log.tensorboard && logged ? grad_norm(run.params, rec.loss_scale) : -1;
  const bool stepped = apply_gradients(run, log, rec.loss);
  if (run.scheduler) run.scheduler->step();
  const auto t1 = Clock::now();
  ++run.step;
  ++run.steps_here;
  rec.step = run.step;
  rec.epoch = epoch + 1;
  rec.skipped = !stepped;
  rec.skipped_total = run.scaler->steps_skipped() + run.result.nonfinite_steps;
  rec.step_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  run.step_seconds += std::chrono::duration<double>(t1 - t0).count();
  run.result.train_seconds = run.step_seconds;
  rec.seconds = run.previous_seconds + run.step_seconds;
  run.result.steps_log.push_back(rec);
  return rec;
}

// ---------------------------------------------------------------- logging a step

void write_metrics(RunLog& log, const StepRecord& rec) {
  JsonObject o;
  o.add("step", rec.step)
      .add("epoch", rec.epoch)
      .add("loss", rec.loss)
      .add("loss_scale", rec.loss_scale)
      .add("skipped", rec.skipped_total)
      .add("skipped_step", rec.skipped)
      .add("lr", rec.lr)
      .add("seconds", rec.seconds);
  if (rec.zero_grad_fraction >= 0) o.add("zero_grad_fraction", rec.zero_grad_fraction);
  log.metrics.write(o);
}

void show_progress(const TrainingRun& run, RunLog& log, const StepRecord& rec, int64_t epoch) {
  const tc::data::DataLoader& loader = *run.loader;
  const int64_t per_epoch = loader.size();
  ProgressInfo pi;
  pi.epoch = epoch + 1;
  pi.epochs = run.cfg.epochs;
  pi.step = loader.batch_index() == 0 && loader.epoch() != epoch ? per_epoch : loader.batch_index();
  pi.steps_in_epoch = per_epoch;
  pi.global_step = run.step;
  pi.loss = rec.loss;
  pi.loss_scale = rec.loss_scale;
  pi.scaler = run.use_scaler;
  pi.skipped = rec.skipped_total;
  const double elapsed = run.elapsed_seconds();
  pi.samples_per_s = elapsed > 0 ? run.steps_here * double(run.cfg.batch_size) / elapsed : 0;
  pi.eta_s = run.steps_here > 0 ? elapsed / run.steps_here * double(run.total_steps - run.step) : -1;
  log.progress.update(pi);
}

void log_step(const TrainingRun& run, RunLog& log, const StepRecord& rec, double norm, int64_t epoch) {
  const bool logged = is_log_step(run, run.step);
  if (log.metrics.is_open() && logged) write_metrics(log, rec);
  if (log.tensorboard && logged)
    log.tensorboard->step(run.step, rec.loss, rec.lr, rec.loss_scale, rec.skipped_total, norm, run.samples_per_second(),
                          run.training_peak_bytes());
  if (!run.cfg.quiet) show_progress(run, log, rec, epoch);
}

// ---------------------------------------------------------------- epochs

struct EpochLoss {
  double sum = 0;
  int64_t count = 0;
};

// The steps of one epoch, or up to --max-steps; each logged, with --checkpoint-every's saves.
EpochLoss train_epoch(TrainingRun& run, RunLog& log, int64_t epoch) {
  EpochLoss loss;
  for (auto& batch : *run.loader) {
    double norm = -1;
    const StepRecord rec = train_step(run, log, batch, epoch, norm);
    loss.sum += rec.loss;
    ++loss.count;
    log_step(run, log, rec, norm, epoch);
    if (run.cfg.checkpoint_every > 0 && run.step % run.cfg.checkpoint_every == 0 && !run.limit_reached())
      save_checkpoint(run, epoch);
    if (run.limit_reached()) break;
  }
  return loss;
}

std::string epoch_line(const TrainingRun& run, const EpochRecord& er, bool complete) {
  char head[160], metric[80], seconds[40];
  std::snprintf(head, sizeof head, "epoch %lld%s  step %lld  train loss %.4f  ", static_cast<long long>(er.epoch),
                complete ? "" : " (stopped early)", static_cast<long long>(er.step), er.train_loss);
  if (run.model.language_model)
    std::snprintf(metric, sizeof metric, "held-out %.4f bits/byte  ", er.test_bits_per_byte);
  else
    std::snprintf(metric, sizeof metric, "test accuracy %.2f%%  ", 100 * er.test_accuracy);
  std::snprintf(seconds, sizeof seconds, "%.1f s", run.previous_seconds + run.step_seconds);
  const std::string scale = run.use_scaler ? "loss scale " + std::to_string(int64_t(run.scaler->get_scale())) +
                                                 "  skipped " + std::to_string(run.scaler->steps_skipped()) + "  "
                                           : "";
  return std::string(head) + metric + scale + seconds;
}

EpochRecord record_epoch(TrainingRun& run, int64_t epoch, const EpochLoss& loss, const Evaluation& ev) {
  EpochRecord er;
  er.epoch = epoch + 1;
  er.step = run.step;
  er.train_loss = loss.count ? loss.sum / loss.count : 0;
  er.test_accuracy = ev.accuracy;
  er.test_loss = ev.loss;
  er.test_bits_per_byte = ev.bits_per_byte;
  run.result.epochs_log.push_back(er);
  run.result.test_accuracy = ev.accuracy;
  run.result.test_loss = ev.loss;
  run.result.test_bits_per_byte = ev.bits_per_byte;
  return er;
}

// After an epoch's steps: an epoch is complete when the loader has no batch of it left.
// A complete epoch, or one --max-steps stopped, is evaluated, logged and checkpointed.
void finish_epoch(TrainingRun& run, RunLog& log, int64_t epoch, const EpochLoss& loss) {
  tc::data::DataLoader& loader = *run.loader;
  const bool complete = loader.epoch() != epoch || loader.batch_index() >= loader.size();
  if (complete && loader.epoch() == epoch) loader.set_epoch(epoch + 1);
  if (!complete && !run.limit_reached()) return;
  const Evaluation ev = evaluate(run.model, *run.data.test, run.prec, run.device);  // sharded across ranks
  const EpochRecord er = record_epoch(run, epoch, loss, ev);
  if (log.tensorboard) {
    log.tensorboard->epoch(run.step, ev.accuracy, ev.loss, ev.bits_per_byte);
    log.tensorboard->flush();
  }
  if (!run.cfg.quiet) {
    log.progress.finish();
    log.say(epoch_line(run, er, complete));
  }
  save_checkpoint(run, complete ? epoch + 1 : epoch);
}

void start_clock(TrainingRun& run) {
  run.total_steps = run.cfg.max_steps > 0 ? std::min(run.cfg.max_steps, run.planned_steps) : run.planned_steps;
  run.check_nonfinite = !run.use_scaler && run.cfg.on_nonfinite != OnNonfinite::kContinue;
  run.named = run.model.module->named_parameters();
  tc::reset_peak_memory_stats(run.device);
  run.t_start = Clock::now();
}

void train_epochs(TrainingRun& run, RunLog& log) {
  while (run.loader->epoch() < run.cfg.epochs && !run.limit_reached()) {
    const int64_t epoch = run.loader->epoch();  // 0-based
    const EpochLoss loss = train_epoch(run, log, epoch);
    finish_epoch(run, log, epoch, loss);
  }
  if (run.steps_here == 0 && !run.cfg.quiet)
    log.say("nothing to do: the run already reached --epochs/--max-steps (" + std::to_string(run.step) + " steps)");
}

double median_step_ms(const std::vector<StepRecord>& steps) {
  if (steps.empty()) return 0;
  std::vector<double> ms;
  for (const auto& r : steps) ms.push_back(r.step_ms);
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  return ms[ms.size() / 2];
}

TrainResult summarize(TrainingRun& run, RunLog& log) {
  TrainResult& r = run.result;
  r.epochs = std::min<int64_t>(run.loader->epoch(), run.cfg.epochs);
  r.steps = run.step;
  r.skipped_steps = run.scaler->steps_skipped() + r.nonfinite_steps;
  r.final_loss_scale = run.scaler->get_scale();
  r.final_loss = r.steps_log.empty() ? 0 : r.steps_log.back().loss;
  r.train_seconds = run.previous_seconds + run.step_seconds;
  r.peak_memory_bytes = std::max<int64_t>(0, run.training_peak_bytes());
  r.median_step_ms = median_step_ms(r.steps_log);
  r.weight_state_bytes = weight_state_bytes(run.params, *run.optimizer);
  if (log.numerics) {
    r.numerics_table = log.numerics->table();
    r.numerics = log.numerics->stats();
    if (!run.cfg.numerics_json.empty()) write_file_atomic(run.cfg.numerics_json, numerics_json(*log.numerics));
  }
  return std::move(r);
}

}  // namespace

TrainResult run_training(const TrainConfig& config) {
  TrainingRun run;
  run.cfg = config_for_this_rank(config);
  load_resume(run);
  check_checkpoint_dir(run.cfg);
  check_output_path(run.cfg.metrics_path, "--metrics");
  check_output_path(run.cfg.numerics_json, "--numerics-json");
  choose_device_and_precision(run);
  load_data(run);
  build_model_and_optimizer(run);
  check_data_and_world(run);
  make_loader(run);
  make_schedule_and_restore(run);
  describe_run(run);

  RunLog log(run.cfg);
  print_header(run, log);
  log.open_outputs(run.cfg, run.resume.has_value());
  start_clock(run);
  train_epochs(run, log);
  return summarize(run, log);
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
  std::string fp8;
  for (const auto& f : report.fp8_stats()) {
    JsonObject o;
    o.add("layer", f.layer)
        .add("tensor", f.tensor)
        .add("quantizations", f.quantizations)
        .add("values", f.total)
        .add("amax", double(f.amax))
        .add("scale_min", double(f.scale_min))
        .add("scale_max", double(f.scale_max))
        .add("saturated", f.share(f.saturated))
        .add("flushed", f.share(f.flushed));
    fp8 += (fp8.empty() ? "\n  " : ",\n  ") + o.str();
  }
  JsonObject out;
  out.add("sampled_steps", report.sampled_steps())
      .add_raw("tensors", "[" + tensors + "]")
      .add_raw("overflow_steps", "[" + overflows + "]");
  if (!fp8.empty()) out.add_raw("fp8", "[" + fp8 + "]");
  return out.str() + "\n";
}

std::string summary_json(const TrainResult& r) {
  JsonObject o;
  o.add("model", r.model).add("precision", r.precision);
  if (r.device != "cpu") o.add("device", r.device);
  if (!r.weight_update.empty()) o.add("weight_update", r.weight_update);
  if (!r.fp8_recipe.empty()) o.add("fp8_recipe", r.fp8_recipe);
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
