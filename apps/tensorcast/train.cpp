// `tensorcast train`: flags -> TrainConfig -> run_training -> summary.
#include <tensorcast/dist/process_group.h>
#include <tensorcast/ops.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "args.h"
#include "commands.h"
#include "json.h"
#include "trainer.h"

namespace tcli {

int cmd_train(int argc, char** argv) {
  TrainConfig c;
  ModelKind model = ModelKind::kCnn;
  PrecisionChoice precision = PrecisionChoice::kAuto;
  LrSchedule lr_schedule = LrSchedule::kCosine;
  OnNonfinite on_nonfinite = OnNonfinite::kStop;
  OptimizerKind optimizer = OptimizerKind::kAdamW;
  WeightUpdate weight_update = WeightUpdate::kKahan;
  Fp8RecipeChoice fp8_recipe = Fp8RecipeChoice::kTensorwise;
  std::string device = "cpu", data, checkpoint, resume, metrics, summary, tensorboard, numerics_json;
  int64_t epochs = 2, batch = 128, seed = 0, threads = 0, max_steps = 0, ck_every = 0, log_every = 10;
  int64_t numerics_every = 10, zero_stage = 0;
  double lr = 1e-3, loss_weight = 1.0, dist_timeout = 300, bucket_mib = 25;
  bool no_scaler = false, overwrite = false, no_progress = false, numerics_report = false;

  ArgParser p("train",
              "Trains a model with automatic mixed precision (autocast + GradScaler + AdamW) and evaluates it\n"
              "after every epoch. With no flags: the CNN on Fashion-MNIST, --precision auto, 2 epochs.");
  p.choice("--model", &model, setting_choices<ModelKind>(), "model (default cnn)");
  p.string("--data", &data, "PATH",
           "Fashion-MNIST directory (default /usr/share/datasets/fashion-mnist); a text file for gpt");
  p.choice("--precision", &precision, setting_choices<PrecisionChoice>(),
           "compute precision (default auto: bf16 on CPUs with native bf16, else fp32); bf16-pure: bf16 weights "
           "and optimizer state, no fp32 master copy; fp8: the linear layers' GEMMs in fp8 (--fp8-recipe), the "
           "rest bf16");
  p.choice("--fp8-recipe", &fp8_recipe, setting_choices<Fp8RecipeChoice>(),
           "fp8: tensorwise (default; E4M3 forward, E5M2 gradients), delayed (amax history of 1024 steps), "
           "rowwise (per-row power-of-two scales, E4M3) or mxfp8 (an E8M0 scale per 32 elements)");
  p.string("--device", &device, "D",
           "cpu (default), cuda or cuda:N: where the model trains; on a GPU, --precision auto is bf16 (fp16 with "
           "a GradScaler before compute capability 8.0)");
  p.choice("--weight-update", &weight_update, setting_choices<WeightUpdate>(),
           "bf16-pure: round each update to nearest with Kahan compensation (default), to nearest, or "
           "stochastically");
  p.flag("--no-scaler", &no_scaler, "fp16 without a GradScaler (shows gradient underflow)");
  p.choice("--on-nonfinite", &on_nonfinite, setting_choices<OnNonfinite>(),
           "inf/NaN loss or gradients without a GradScaler: stop (default), skip the step, continue");
  p.positive_int("--epochs", &epochs, "N", "passes over the training set (default 2)");
  p.positive_int("--batch-size", &batch, "B", "examples per step (default 128)");
  p.choice("--optimizer", &optimizer, setting_choices<OptimizerKind>(),
           "adamw (weight decay 0, the default) or sgd (momentum 0.9: gradients are not normalized, so fp16 "
           "underflow shows)");
  p.positive_double("--lr", &lr, "LR", "learning rate (default 1e-3 for adamw, 0.05 for sgd)");
  p.positive_double("--loss-weight", &loss_weight, "W",
                    "minimize loss x W (default 1): every gradient scales by W, as with an auxiliary-loss weight or "
                    "1/K gradient accumulation; small W shows fp16 underflow even under AdamW");
  p.choice("--lr-schedule", &lr_schedule, setting_choices<LrSchedule>(),
           "cosine: decay to 0 over the --epochs (default); constant: --lr throughout");
  p.nonnegative_int("--seed", &seed, "S", "seed of initialization, shuffling and synthetic data (default 0)");
  p.positive_int("--threads", &threads, "T", "CPU threads (default: the cores this process may use)", tc::kMaxThreads);
  p.positive_int("--max-steps", &max_steps, "N", "stop after N optimizer steps in total (resumed steps count)");
  p.string("--checkpoint", &checkpoint, "DIR",
           "save a training checkpoint to DIR at every epoch end and at the end (and see --checkpoint-every)");
  p.positive_int("--checkpoint-every", &ck_every, "N", "also save a checkpoint every N steps");
  p.flag("--overwrite", &overwrite, "let --checkpoint replace a checkpoint of another run");
  p.string("--resume", &resume, "DIR", "continue the run checkpointed in DIR exactly where it stopped");
  p.string("--metrics", &metrics, "FILE", "JSON Lines: step, epoch, loss, loss_scale, skipped, lr, seconds");
  p.positive_int("--log-every", &log_every, "N", "one --metrics record every N steps (default 10)");
  p.string("--summary-json", &summary, "FILE", "write a JSON summary of the run at the end");
  p.flag("--no-progress", &no_progress, "no live progress bar (plain log lines)");
  p.string("--tensorboard", &tensorboard, "DIR",
           "write TensorBoard event files to DIR (loss, lr, loss scale, skipped steps, gradient norm, ...)");
  p.flag("--numerics-report", &numerics_report,
         "per-tensor gradient ranges against fp16 (zero, flushed, subnormal, overflow), bf16 update loss, and the "
         "first non-finite tensor of each overflow step; a table at the end");
  p.positive_int("--numerics-every", &numerics_every, "N", "numerics report: sample one step in N (default 10)");
  p.string("--numerics-json", &numerics_json, "FILE", "write the numerics report as JSON (implies --numerics-report)");
  p.positive_double("--dist-timeout", &dist_timeout, "SECONDS",
                    "under mpirun: a collective waiting longer than this ends the job (default 300)");
  p.positive_double("--bucket-mib", &bucket_mib, "MIB",
                    "under mpirun: gradient bucket size, all-reduced while backward runs (default 25)");
  p.positive_int("--zero", &zero_stage, "1|2",
                 "under mpirun: shard the optimizer state (1), and the gradients too (2), across the processes "
                 "(ZeRO); the same weights as without it, bit for bit",
                 2);
  p.epilog(
      "examples:\n"
      "  tensorcast train                                         # the main job\n"
      "  tensorcast train --model cnn --precision bf16 --epochs 5\n"
      "  tensorcast train --precision fp16 --no-scaler --epochs 1 --numerics-report\n"
      "                                                           # which gradients underflow in fp16\n"
      "  tensorcast train --precision bf16-pure --epochs 5        # bf16 weights and AdamW state, Kahan updates\n"
      "  tensorcast train --precision fp8 --fp8-recipe delayed    # the linear layers' GEMMs in fp8\n"
      "  tensorcast train --model mlp --checkpoint ck --checkpoint-every 100\n"
      "  tensorcast train --resume ck --epochs 4                  # continue it, bit-identically\n"
      "  tensorcast train --model gpt --data book.txt --precision bf16\n"
      "  mpirun -np 2 tensorcast train --threads 1                # data parallel: 2 processes, batch 64 each\n"
      "  mpirun -np 4 tensorcast train --threads 1 --zero 2       # each holds 1/4 of the AdamW state and gradients\n");
  if (!p.parse(argc, argv, 2)) return 0;
  if (p.given("--checkpoint-every") && checkpoint.empty())
    throw UsageError("--checkpoint-every needs --checkpoint DIR (where to save)");

  if (p.given("--weight-update") && precision != PrecisionChoice::kBf16Pure)
    throw UsageError("--weight-update applies to --precision bf16-pure only");
  if (p.given("--fp8-recipe") && precision != PrecisionChoice::kFp8)
    throw UsageError("--fp8-recipe applies to --precision fp8 only");
  for (const char* f : {"--model", "--precision", "--batch-size", "--seed", "--lr", "--lr-schedule", "--no-scaler",
                        "--data", "--weight-update", "--optimizer", "--loss-weight", "--fp8-recipe"})
    if (p.given(f)) c.explicit_flags.push_back(f);
  c.model = model;
  c.data = data;
  c.precision = precision;
  c.fp8_recipe = fp8_recipe;
  c.device = device;
  c.scaler = !no_scaler;
  c.epochs = epochs;
  c.batch_size = batch;
  c.optimizer = optimizer;
  c.loss_weight = loss_weight;
  c.lr = p.given("--lr") || optimizer != OptimizerKind::kSgd ? lr : 0.05;
  c.lr_schedule = lr_schedule;
  c.seed = static_cast<uint64_t>(seed);
  c.max_steps = max_steps;
  c.checkpoint_dir = checkpoint;
  c.checkpoint_every = ck_every;
  c.overwrite = overwrite;
  c.resume_dir = resume;
  c.metrics_path = metrics;
  c.log_every = log_every;
  c.progress = !no_progress;
  c.on_nonfinite = on_nonfinite;
  c.weight_update = weight_update;
  c.tensorboard_dir = tensorboard;
  c.numerics_report = numerics_report || !numerics_json.empty();
  c.numerics_every = numerics_every;
  c.numerics_json = numerics_json;
  c.bucket_cap_bytes = std::max<int64_t>(1, static_cast<int64_t>(bucket_mib * 1048576.0));
  c.zero_stage = static_cast<int>(zero_stage);
  if (zero_stage > 0 && c.numerics_report)
    throw UsageError(
        "--zero frees each gradient once it is in its bucket, and --numerics-report reads the gradients: drop one");
  if (threads > 0) tc::set_num_threads(static_cast<int>(threads));

  check_output_path(summary, "--summary-json");  // fail now, not after an hour of training
  if (parse_only) return 0;
  // Under mpirun (or srun) the ranks come from the environment; alone, a world of one.
  tc::dist::init(tc::dist::InitOptions().timeout_seconds(dist_timeout));
  const TrainResult r = run_training(c);
  if (tc::dist::rank() != 0) return 0;  // rank 0 prints the summary and writes files
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "done: %lld steps (%lld skipped), final loss scale %g, peak tensor memory %.1f MiB, %.1f s training",
                static_cast<long long>(r.steps), static_cast<long long>(r.skipped_steps), r.final_loss_scale,
                r.peak_memory_bytes / 1048576.0, r.train_seconds);
  std::puts(buf);
  std::printf("weights + optimizer state: %.2f MiB\n", r.weight_state_bytes / 1048576.0);
  if (!r.numerics_table.empty())
    std::printf("numerics report (gradients against fp16's range):\n%s", r.numerics_table.c_str());
  if (!numerics_json.empty()) std::printf("numerics report: %s\n", numerics_json.c_str());
  if (r.test_accuracy >= 0)
    std::printf("test accuracy %.2f%% (%s, %s)\n", 100 * r.test_accuracy, r.model.c_str(), r.precision.c_str());
  if (r.test_bits_per_byte >= 0)
    std::printf("held-out loss %.4f bits/byte (%s, %s)\n", r.test_bits_per_byte, r.model.c_str(), r.precision.c_str());
  if (!summary.empty()) {
    write_file_atomic(summary, summary_json(r));
    std::printf("summary: %s\n", summary.c_str());
  }
  return 0;
}

}  // namespace tcli
