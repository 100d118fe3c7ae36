// `tensorcast bench`: warm-up steps, then the median time of N training steps (forward,
// backward, GradScaler, AdamW) or forward passes (--inference) on a synthetic batch.
#include "bench.h"

#include <tensorcast/allocator.h>
#include <tensorcast/amp/autocast.h>
#include <tensorcast/amp/grad_scaler.h>
#include <tensorcast/autograd.h>
#include <tensorcast/ops.h>
#include <tensorcast/optim/adamw.h>
#include <tensorcast/profiler.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "args.h"
#include "commands.h"
#include "json.h"
#include "models.h"
#include "trainer.h"

namespace tcli {

BenchResult run_bench(const BenchConfig& cfg) {
  const Precision prec = resolve_precision(cfg.precision);
  const bool use_scaler = prec.compute == tc::kFloat16 && cfg.scaler && !cfg.inference;
  tc::manual_seed(0);
  Model model = build_model(cfg.model);
  const tc::data::Example batch = synthetic_batch(cfg.model, cfg.batch_size);
  std::vector<tc::Tensor> params = model.module->parameters();
  tc::optim::AdamW optimizer(params, tc::optim::AdamWOptions(1e-3).weight_decay(0.0));
  tc::amp::GradScaler scaler(tc::amp::GradScalerOptions().enabled(use_scaler));
  if (cfg.inference) model.module->eval();

  auto one = [&] {
    if (cfg.inference) {
      tc::NoGradGuard no_grad;
      tc::amp::AutocastGuard autocast(tc::kCPU, prec.compute == tc::kFloat32 ? tc::kBFloat16 : prec.compute,
                                      prec.compute != tc::kFloat32);
      tc::Tensor logits = model.forward(batch.data);
      (void)logits.sum().item<double>();  // make sure the work is done (CPU: it is; GPUs: a sync)
      return;
    }
    optimizer.zero_grad(true);
    tc::Tensor loss;
    {
      tc::amp::AutocastGuard autocast(tc::kCPU, prec.compute == tc::kFloat32 ? tc::kBFloat16 : prec.compute,
                                      prec.compute != tc::kFloat32);
      loss = model_loss(model, model.forward(batch.data), batch.target);
    }
    scaler.scale(loss).backward();
    scaler.step(optimizer);
    scaler.update();
    (void)loss.item<double>();
  };
  for (int64_t i = 0; i < cfg.warmup; ++i) one();
  tc::reset_peak_memory_stats();
  std::vector<double> ms;
  for (int64_t i = 0; i < cfg.steps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    one();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  BenchResult r;
  if (cfg.profile) {
    tc::profiler::Profile prof;
    for (int64_t i = 0; i < cfg.steps; ++i) {
      tc::profiler::RecordFunction rec(cfg.inference ? "forward pass" : "training step");
      one();
    }
    prof.stop();
    r.profile = prof.key_averages();
    r.profile_table = prof.table(40, cfg.steps);
  }
  r.model = cfg.model;
  r.precision = prec.name;
  r.batch_size = cfg.batch_size;
  r.steps = cfg.steps;
  r.inference = cfg.inference;
  r.scaler = use_scaler;
  r.peak_memory_bytes = tc::memory_stats().peak_bytes;
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  r.ms_per_step = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
  r.ms_min = ms.front();
  r.ms_max = ms.back();
  r.samples_per_s = r.ms_per_step > 0 ? cfg.batch_size * 1000.0 / r.ms_per_step : 0;
  return r;
}

std::string bench_json(const BenchResult& r) {
  JsonObject o;
  o.add("model", r.model).add("precision", r.precision).add("batch_size", r.batch_size).add("inference", r.inference)
      .add("ms_per_step", r.ms_per_step).add("peak_memory_bytes", r.peak_memory_bytes).add("steps", r.steps)
      .add("scaler", r.scaler).add("ms_min", r.ms_min).add("ms_max", r.ms_max).add("samples_per_s", r.samples_per_s)
      .add("threads", tc::get_num_threads());
  if (!r.profile.empty()) {
    std::string list;
    for (const tc::profiler::OpStat& st : r.profile) {
      JsonObject e;
      const double per = static_cast<double>(r.steps);
      e.add("name", st.name).add("calls_per_step", static_cast<double>(st.calls) / per)
          .add("self_ms_per_step", st.self_ms / per).add("total_ms_per_step", st.total_ms / per)
          .add("self_alloc_bytes_per_step", static_cast<double>(st.self_alloc_bytes) / per);
      list += (list.empty() ? "" : ", ") + e.str();
    }
    o.add_raw("profile", "[" + list + "]");
  }
  return o.str();
}

int cmd_bench(int argc, char** argv) {
  BenchConfig c;
  int64_t threads = 0;
  bool json = false, no_scaler = false;
  ArgParser p("bench",
              "Times training steps (forward, backward, GradScaler, AdamW) or, with --inference, forward passes\n"
              "of a model on a synthetic batch: warm-up steps, then the median of --steps, and the peak tensor memory.");
  p.choice("--model", &c.model, {"cnn", "mlp", "mlp-large", "gpt"}, "model (default cnn)");
  p.choice("--precision", &c.precision, {"auto", "fp32", "bf16", "fp16"}, "compute precision (default auto)");
  p.positive_int("--batch-size", &c.batch_size, "B", "batch size (default 128)");
  p.positive_int("--steps", &c.steps, "N", "timed steps (default 20)");
  p.nonnegative_int("--warmup", &c.warmup, "N", "untimed warm-up steps first (default 3)");
  p.flag("--inference", &c.inference, "time forward passes only (no gradients)");
  p.flag("--no-scaler", &no_scaler, "fp16 without a GradScaler");
  p.positive_int("--threads", &threads, "T", "CPU threads (default: the cores this process may use)");
  p.flag("--json", &json, "print one JSON object instead of text");
  p.flag("--profile", &c.profile,
         "then run --steps more steps under the per-op profiler and print where a step's time goes\n"
         "(self/total ms, calls and MiB allocated per step for every op, backward formula, cast, optimizer step)");
  p.epilog("examples:\n  tensorcast bench --model mlp-large --precision bf16 --batch-size 256 --steps 50 --json\n"
           "  tensorcast bench --model gpt --precision bf16 --batch-size 16 --steps 5 --profile\n");
  if (!p.parse(argc, argv, 2)) return 0;
  c.scaler = !no_scaler;
  if (threads > 0) tc::set_num_threads(static_cast<int>(threads));
  const BenchResult r = run_bench(c);
  if (json) {
    std::printf("%s\n", bench_json(r).c_str());
  } else {
    std::printf("%s %s%s batch %lld, %s: %.3f ms per %s (median of %lld; min %.3f, max %.3f), %.0f samples/s, peak tensor memory %.1f MiB, %d threads\n",
                r.model.c_str(), r.precision.c_str(), r.scaler ? "+scaler" : "", static_cast<long long>(r.batch_size),
                r.inference ? "inference" : "training", r.ms_per_step, r.inference ? "forward pass" : "step",
                static_cast<long long>(r.steps), r.ms_min, r.ms_max, r.samples_per_s, r.peak_memory_bytes / 1048576.0,
                tc::get_num_threads());
    if (c.profile)
      std::printf("\nper-op profile, per %s (mean over %lld profiled %s):\n%s", r.inference ? "forward pass" : "step",
                  static_cast<long long>(r.steps), r.inference ? "passes" : "steps", r.profile_table.c_str());
  }
  return 0;
}

}  // namespace tcli
