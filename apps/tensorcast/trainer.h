// The training loop shared by `tensorcast train` and `tensorcast report`: the AMP recipe
// (an autocast region around forward + loss, a GradScaler for fp16, AdamW), evaluation
// at each epoch end, checkpoints, exact resume, metrics and the progress display.
#pragma once
#include <tensorcast/amp/autocast.h>
#include <tensorcast/amp/fp8.h>
#include <tensorcast/amp/numerics.h>
#include <tensorcast/device.h>
#include <tensorcast/dtype.h>
#include <tensorcast/state_dict.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "settings.h"

namespace tc {
namespace io {
struct TrainingState;
}
namespace nn {
class Module;
}
namespace optim {
class Optimizer;
class LRScheduler;
}  // namespace optim
namespace amp {
class GradScaler;
}
namespace data {
class DataLoader;
}
}  // namespace tc

namespace tcli {

// The precision a run uses and why (for --precision auto).
struct Precision {
  PrecisionChoice choice = PrecisionChoice::kFp32;  // resolved: never kAuto
  tc::DType compute = tc::kFloat32;
  std::string reason;                                 // filled for auto
  bool pure = false;                                  // bf16-pure: the weights and optimizer state themselves are bf16
  std::optional<tc::fp8::Recipe> fp8 = std::nullopt;  // fp8: the linear layers' GEMMs on this recipe, the rest bf16
  std::string name() const { return setting_name(choice); }  // fp32, bf16, fp16, bf16-pure
};

// The autocast region of every forward pass of the CLI (training, evaluation, benchmarks):
// the precision's 16-bit dtype; fp32 runs with autocast off; fp8 adds its recipe's guard.
class AutocastRegion {
 public:
  AutocastRegion(const Precision& prec, tc::Device device)
      : guard_(device.type, prec.compute == tc::kFloat32 ? tc::kBFloat16 : prec.compute, prec.compute != tc::kFloat32),
        fp8_(prec.fp8.value_or(tc::fp8::Recipe{}), prec.fp8.has_value()) {}

 private:
  tc::amp::AutocastGuard guard_;
  tc::fp8::AutocastGuard fp8_;
};

// kAuto on the CPU -> bf16 where it has native bf16 math, else fp32; on a GPU -> bf16
// where it has bf16 Tensor Cores (compute capability 8.0 on), else fp16 with a GradScaler.
// kBf16Pure: bf16 autocast over bf16 weights with bf16 optimizer state
// (TrainConfig::weight_update says how updates are rounded), no float32 master copy.
// kFp8: bf16 autocast with the linear layers on `recipe`'s fp8 GEMMs (the CPU path only).
Precision resolve_precision(PrecisionChoice choice, tc::Device device = {},
                            Fp8RecipeChoice recipe = Fp8RecipeChoice::kTensorwise);

// --device: "cpu", "cuda" or "cuda:N", checked here: a CUDA device this machine or build
// does not have is a one-line tc::Error saying why.
tc::Device resolve_device(const std::string& flag);

struct TrainConfig {
  ModelKind model = ModelKind::kCnn;
  std::string data;  // empty: the model's default
  PrecisionChoice precision = PrecisionChoice::kAuto;
  Fp8RecipeChoice fp8_recipe = Fp8RecipeChoice::kTensorwise;  // --precision fp8 only
  std::string device = "cpu";  // cpu, cuda or cuda:N: where the model trains (the data is read on the CPU)
  bool scaler = true;          // fp16 only: false = --no-scaler
  // bf16-pure only: compensated (the default), to nearest or stochastic.
  WeightUpdate weight_update = WeightUpdate::kKahan;
  int64_t epochs = 2;
  int64_t batch_size = 128;
  OptimizerKind optimizer = OptimizerKind::kAdamW;  // AdamW (weight decay 0) or SGD (momentum 0.9)
  double lr = 1e-3;
  double loss_weight = 1.0;                      // the objective is loss * loss_weight (every gradient scales with it)
  LrSchedule lr_schedule = LrSchedule::kCosine;  // cosine (to 0 over the planned epochs) or constant
  uint64_t seed = 0;
  int64_t max_steps = 0;         // 0: no limit (total steps, counting resumed ones)
  std::string checkpoint_dir;    // empty: no checkpoints
  int64_t checkpoint_every = 0;  // steps; 0: only at epoch ends and at the end
  bool overwrite = false;        // allow replacing a checkpoint of another run
  std::string resume_dir;
  std::string metrics_path;                      // JSON Lines
  std::string tensorboard_dir;                   // empty: no TensorBoard event files
  int64_t log_every = 10;                        // metrics record every N steps (and the last step)
  bool progress = true;                          // console output
  bool quiet = false;                            // only errors (report runs)
  int64_t bucket_cap_bytes = int64_t{25} << 20;  // data parallel: gradient bucket size
  int zero_stage = 0;                            // ZeroRedundancyOptimizer stage (1, 2); 0: none
  bool track_zero_grads = false;                 // fraction of exactly-zero gradient values per step (report)
  // A non-finite loss or gradient that no GradScaler handles: kStop (an error naming the
  // step and the first non-finite gradient, nothing applied or saved), kSkip (drop the
  // step, as a scaler would) or kContinue (apply it anyway).
  OnNonfinite on_nonfinite = OnNonfinite::kStop;
  // The numerics report (tc::amp::NumericsReport): sampled every N steps, printed at the
  // end, written as JSON when numerics_json is set.
  bool numerics_report = false;
  int64_t numerics_every = 10;
  std::string numerics_json;
  // Which flags the user set explicitly (resume checks them against the checkpoint).
  std::vector<std::string> explicit_flags;
};

struct StepRecord {
  int64_t step = 0, epoch = 0;
  double loss = 0, loss_scale = 1, lr = 0, seconds = 0, step_ms = 0;
  bool skipped = false;
  int64_t skipped_total = 0;
  double zero_grad_fraction = -1;  // < 0: not tracked
};

struct EpochRecord {
  int64_t epoch = 0, step = 0;
  double train_loss = 0;           // mean over the epoch's steps run in this process
  double test_accuracy = -1;       // classification
  double test_loss = 0;            // mean cross-entropy on the test set / held-out text
  double test_bits_per_byte = -1;  // gpt
};

struct TrainResult {
  std::string model, device = "cpu", precision, precision_reason, data_description;
  bool scaler = false;
  int64_t epochs = 0, steps = 0, skipped_steps = 0, batch_size = 0;
  int64_t nonfinite_steps = 0;  // steps whose loss or gradients were inf/NaN without a scaler
  double final_loss_scale = 1, final_loss = 0;
  double test_accuracy = -1, test_loss = 0, test_bits_per_byte = -1;
  double train_seconds = 0;
  int64_t peak_memory_bytes = 0;   // tensors during training (weights, optimizer, activations), not the dataset
  int64_t weight_state_bytes = 0;  // the weights and the optimizer's state (moments, master copies, compensation)
  std::string weight_update;       // bf16-pure runs: kahan, nearest or stochastic
  std::string fp8_recipe;          // fp8 runs: tensorwise, delayed, rowwise or mxfp8
  std::string numerics_table;      // --numerics-report: the table printed at the end
  std::vector<tc::amp::NumericsReport::TensorStats> numerics;  // and its rows
  int64_t parameters = 0;
  int64_t world_size = 1;  // processes of a data-parallel run (batch_size is the global batch)
  double median_step_ms = 0;
  std::vector<StepRecord> steps_log;  // every step run in this process
  std::vector<EpochRecord> epochs_log;
  bool resumed = false;
  int64_t resumed_from_step = 0;
};

// Runs a training. Throws tc::Error (one line) on bad data, paths or checkpoints; all
// checks that can fail come before anything is written.
TrainResult run_training(const TrainConfig& config);

// --resume after the checks: puts a checkpoint into a freshly built run (weights, optimizer
// state, the scaler's when it is used, the loader's position, the generator), replays the
// LR schedule (may be null) to the checkpoint's step and returns that step. A checkpoint of
// another world size restarts its epoch instead of resuming the position, saying so in
// `note` when given. `load_optimizer`, when set, loads the optimizer state in place of
// optimizer.load_state_dict (a --zero run, or a checkpoint that names shard files). fuzz/
// drives it.
int64_t restore_training_state(const tc::io::TrainingState& state, tc::nn::Module& module,
                               tc::optim::Optimizer& optimizer, tc::amp::GradScaler& scaler, bool use_scaler,
                               tc::data::DataLoader& loader, tc::optim::LRScheduler* scheduler,
                               std::string* note = nullptr,
                               const std::function<void(const tc::StateDict&)>& load_optimizer = nullptr);

// Throws a one-line tc::Error when `path` (an output file of `flag`) cannot be written:
// it names a directory, or its directory does not exist. Empty path: nothing to check.
void check_output_path(const std::string& path, const std::string& flag);

// std::filesystem::absolute, but its one failure (no working directory: it was removed)
// is a tc::Error naming `flag` and `path`, not a std::filesystem::filesystem_error.
std::filesystem::path absolute_path(const std::string& path, const std::string& flag);

// --numerics-json: the report's rows ({"name", "kind", "amax", "zero", "fp16_flush_to_zero",
// "fp16_subnormal", "fp16_overflow", "nonfinite", "bf16_update_lost"}), overflow steps and,
// in an fp8 run, "fp8": per linear layer and quantized tensor {"layer", "tensor", "amax",
// "scale_min", "scale_max", "saturated", "flushed"} (shares of the values).
std::string numerics_json(const tc::amp::NumericsReport& report);

// The summary JSON of a run (model, precision, epochs, steps, skipped_steps,
// final_loss_scale, test_accuracy, train_seconds, peak_memory_bytes, ...).
std::string summary_json(const TrainResult& r);

}  // namespace tcli
