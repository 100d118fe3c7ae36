// `tensorcast bench`: warm-up steps, then the median time of N training steps (forward,
// backward, GradScaler, AdamW) or forward passes (--inference) on a synthetic batch.
#include "bench.h"

#include <tensorcast/allocator.h>
#include <tensorcast/amp/autocast.h>
#include <tensorcast/amp/grad_scaler.h>
#include <tensorcast/autograd.h>
#include <tensorcast/dist/ddp.h>
#include <tensorcast/dist/zero.h>
#include <tensorcast/gemm16.h>
#include <tensorcast/ops.h>
#include <tensorcast/optim/adamw.h>
#include <tensorcast/profiler.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>

#include "args.h"
#include "commands.h"
#include "json.h"
#include "models.h"
#include "trainer.h"

namespace tcli {

BenchResult run_bench(const BenchConfig& cfg) {
  const tc::Device device = cfg.meta ? tc::Device(tc::kMeta) : resolve_device(cfg.device);
  if (device.is_cuda() && cfg.distributed)
    throw tc::Error("[cli] --distributed runs on the CPU only for now; drop --device " + cfg.device);
  // A plan is of a CPU run (the meta device follows the CPU's autocast state).
  const Precision prec = resolve_precision(cfg.precision, cfg.meta ? tc::Device(tc::kCPU) : device, cfg.fp8_recipe);
  const bool use_scaler = prec.compute == tc::kFloat16 && cfg.scaler && !cfg.inference && !cfg.meta;
  auto counted = [&] { return tc::memory_stats(device).current_bytes; };
  const int64_t before_model = counted();
  tc::manual_seed(0);
  Model model = build_model(cfg.model, cfg.size);
  tc::amp::set_autocast_cache_keeps_training_copies(model.keeps_weight_copies);
  model.module->to(device);
  const int64_t before_batch = counted();
  tc::data::Example batch;
  if (cfg.meta) {  // shapes only: a plan's batch may be far larger than this machine's memory
    const tc::data::Example one = synthetic_batch(cfg.model, 1, cfg.size);
    auto batched = [&](const tc::Tensor& t) {
      tc::Shape s = t.sizes();
      s[0] = cfg.batch_size;
      return tc::empty(s, tc::TensorOptions(t.dtype()).device(device));
    };
    batch = {batched(one.data), batched(one.target)};
  } else {
    batch = synthetic_batch(cfg.model, cfg.batch_size, cfg.size);
    batch = {batch.data.to(device), batch.target.to(device)};
  }
  const int64_t before_steps = counted();
  std::vector<tc::Tensor> params = model.module->parameters();
  tc::optim::AdamW optimizer(params, tc::optim::AdamWOptions(1e-3).weight_decay(0.0));
  tc::amp::GradScaler scaler(tc::amp::GradScalerOptions().enabled(use_scaler));
  if (cfg.inference) model.module->eval();
  std::optional<tc::dist::DistributedDataParallel> ddp;
  std::optional<tc::dist::ZeroRedundancyOptimizer> zero;
  if (cfg.distributed) {
    ddp.emplace(model.module, tc::dist::DistributedDataParallelOptions().bucket_cap_bytes(cfg.bucket_cap_bytes));
    tc::dist::sync_grad_scaler(scaler);
    if (cfg.zero_stage > 0) zero.emplace(*ddp, optimizer, tc::dist::ZeroOptions().stage(cfg.zero_stage));
  }
  std::vector<double> comm_ms, hidden_ms, exposed_ms;
  bool timing = false;
  tc::dist::ShardMemory held;  // after a timed step's backward

  auto one = [&] {
    if (cfg.inference) {
      tc::NoGradGuard no_grad;
      const AutocastRegion autocast(prec, device);
      tc::Tensor logits = model.forward(batch.data);
      if (!cfg.meta) (void)logits.sum().item<double>();  // make sure the work is done (CPU: it is; GPUs: a sync)
      return;
    }
    optimizer.zero_grad(true);
    tc::Tensor loss;
    {
      const AutocastRegion autocast(prec, device);
      loss = model_loss(model, model.forward(batch.data), batch.target);
    }
    scaler.scale(loss).backward();
    if (ddp && timing) held = zero ? zero->memory() : tc::dist::replicated_memory(*ddp, optimizer);
    if (ddp && timing) {
      const tc::dist::SyncStats& st = ddp->last_sync();
      comm_ms.push_back(1e3 * st.comm_seconds);
      hidden_ms.push_back(1e3 * st.hidden_seconds);
      exposed_ms.push_back(1e3 * st.exposed_seconds);
    }
    scaler.step(optimizer);
    scaler.update();
    if (!cfg.meta) (void)loss.item<double>();
  };
  for (int64_t i = 0; i < cfg.warmup; ++i) one();
  int64_t gradient_bytes = 0;
  for (const tc::Tensor& p : params)
    if (p.grad().defined())
      gradient_bytes += p.grad().numel() * static_cast<int64_t>(tc::element_size(p.grad().dtype()));
  const int64_t after_warmup = counted();
  tc::reset_peak_memory_stats(device);
  std::vector<double> ms;
  timing = true;
  for (int64_t i = 0; i < cfg.steps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    one();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  timing = false;
  BenchResult r;
  if (ddp) {
    const tc::dist::SyncStats& st = ddp->last_sync();
    r.world_size = tc::dist::world_size();
    r.buckets = st.buckets;
    r.comm_bytes = st.bytes;
    double comm = 0, hidden = 0;
    for (size_t i = 0; i < comm_ms.size(); ++i) comm += comm_ms[i], hidden += hidden_ms[i];
    r.hidden_fraction = comm > 0 ? hidden / comm : 0;
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v.empty() ? 0.0 : v[v.size() / 2];
    };
    r.comm_ms = median(comm_ms);
    r.exposed_ms = median(exposed_ms);
    r.zero_stage = cfg.zero_stage;
    const std::vector<int64_t> mine{held.parameters, held.gradients, held.optimizer_state};
    for (const tc::Tensor& t : tc::dist::all_gather(tc::tensor(mine))) {
      const int64_t* v = t.data_ptr<int64_t>();
      r.rank_memory.push_back({v[0], v[1], v[2]});
    }
  }
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
  r.model = setting_name(cfg.model);
  r.description = model.description;
  r.size = cfg.size;
  r.precision = prec.name();
  r.device = cfg.device;
  r.batch_size = cfg.batch_size;
  r.steps = cfg.steps;
  r.inference = cfg.inference;
  r.scaler = use_scaler;
  r.peak_memory_bytes = tc::memory_stats(device).peak_bytes - before_model;
  r.weights_bytes = before_batch - before_model;
  r.batch_bytes = before_steps - before_batch;
  r.gradient_bytes = gradient_bytes;
  r.optimizer_state_bytes = cfg.warmup > 0 ? after_warmup - before_steps - gradient_bytes : 0;
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  r.ms_per_step = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
  r.ms_min = ms.front();
  r.ms_max = ms.back();
  r.samples_per_s = r.ms_per_step > 0 ? cfg.batch_size * 1000.0 / r.ms_per_step : 0;
  return r;
}

// The kernel 16-bit matrix products ran on (tensorcast/gemm16.h), or "" for fp32.
std::string gemm16_path(const std::string& precision) {
  if (precision == "bf16") return std::string(tc::gemm16_name(tc::cpu_gemm16_path(tc::kBFloat16)));
  if (precision == "fp16") return std::string(tc::gemm16_name(tc::cpu_gemm16_path(tc::kFloat16)));
  return "";
}

std::string bench_json(const BenchResult& r) {
  JsonObject o;
  o.add("model", r.model)
      .add("precision", r.precision)
      .add("batch_size", r.batch_size)
      .add("inference", r.inference)
      .add("ms_per_step", r.ms_per_step)
      .add("peak_memory_bytes", r.peak_memory_bytes)
      .add("steps", r.steps)
      .add("scaler", r.scaler)
      .add("ms_min", r.ms_min)
      .add("ms_max", r.ms_max)
      .add("samples_per_s", r.samples_per_s)
      .add("threads", tc::get_num_threads());
  if (r.device != "cpu")
    o.add("device", r.device);
  else if (const std::string g = gemm16_path(r.precision); !g.empty())
    o.add("gemm16", g);
  if (r.size.width > 0) o.add("width", r.size.width);
  if (r.size.layers > 0) o.add("layers", r.size.layers);
  if (r.size.context > 0) o.add("context", r.size.context);
  if (r.world_size > 1)
    o.add("world_size", r.world_size)
        .add("buckets", r.buckets)
        .add("comm_bytes_per_step", r.comm_bytes)
        .add("comm_ms_per_step", r.comm_ms)
        .add("comm_hidden_fraction", r.hidden_fraction)
        .add("comm_exposed_ms_per_step", r.exposed_ms)
        .add("zero_stage", r.zero_stage);
  if (!r.rank_memory.empty()) {
    std::string rows;
    for (const auto& m : r.rank_memory) {
      if (!rows.empty()) rows += ',';
      rows += JsonObject()
                  .add("parameter_bytes", m.parameters)
                  .add("gradient_bytes", m.gradients)
                  .add("optimizer_state_bytes", m.optimizer_state)
                  .str();
    }
    o.add_raw("rank_memory", "[" + rows + "]");
  }
  if (!r.profile.empty()) {
    std::string list;
    for (const tc::profiler::OpStat& st : r.profile) {
      JsonObject e;
      const double per = static_cast<double>(r.steps);
      e.add("name", st.name)
          .add("calls_per_step", static_cast<double>(st.calls) / per)
          .add("self_ms_per_step", st.self_ms / per)
          .add("total_ms_per_step", st.total_ms / per)
          .add("self_alloc_bytes_per_step", static_cast<double>(st.self_alloc_bytes) / per);
      list += (list.empty() ? "" : ", ") + e.str();
    }
    o.add_raw("profile", "[" + list + "]");
  }
  return o.str();
}

MemoryBudgetResult run_memory_budget(const BenchConfig& config, int64_t budget_bytes, int64_t batch_cap) {
  const auto t0 = std::chrono::steady_clock::now();
  MemoryBudgetResult r;
  r.budget_bytes = budget_bytes;
  r.batch_cap = batch_cap;
  r.inference = config.inference;
  auto probe = [&](int64_t b) {
    BenchConfig c = config;
    c.batch_size = b;
    c.warmup = 1;  // AdamW's state exists from the first step on: the measured step holds all of it
    c.steps = 1;
    c.profile = false;
    const BenchResult br = run_bench(c);
    tc::empty_cache();  // do not carry a large probe's cached blocks into the next one
    r.model = br.model;
    r.precision = br.precision;
    r.scaler = br.scaler;
    r.probes.push_back({b, br.peak_memory_bytes});
    return br.peak_memory_bytes;
  };
  // Doubling: lo fits (or is 0), hi does not (or is 0: none found yet).
  int64_t lo = 0, lo_peak = 0, hi = 0, hi_peak = 0;
  for (int64_t b = 1;; b = std::min(b * 2, batch_cap)) {
    const int64_t peak = probe(b);
    if (peak > budget_bytes) {
      hi = b;
      hi_peak = peak;
      break;
    }
    lo = b;
    lo_peak = peak;
    if (b >= batch_cap) break;
  }
  // Narrow [lo, hi) down to lo + 1 == hi. The peak is close to linear in the batch size
  // (fixed weights/optimizer bytes + bytes per sample), so a linear interpolation between the
  // two ends usually lands on the answer and its neighbour confirms it; every third probe
  // is a plain bisection, so a peak that is not linear still costs at most 3 probes per halving.
  int phase = 0;
  int64_t guess = 0;
  while (hi > 0 && hi - lo > 1) {
    int64_t mid;
    if (phase == 0 && hi_peak > lo_peak) {
      const double est = static_cast<double>(lo) + static_cast<double>(budget_bytes - lo_peak) *
                                                       static_cast<double>(hi - lo) /
                                                       static_cast<double>(hi_peak - lo_peak);
      mid = guess = static_cast<int64_t>(std::floor(est));
    } else if (phase == 1) {
      mid = guess <= lo ? lo + 1 : hi - 1;  // the interpolated guess's neighbour on the open side
    } else {
      mid = lo + (hi - lo) / 2;
    }
    mid = std::clamp(mid, lo + 1, hi - 1);
    phase = (phase + 1) % 3;
    const int64_t peak = probe(mid);
    if (peak > budget_bytes) {
      hi = mid;
      hi_peak = peak;
    } else {
      lo = mid;
      lo_peak = peak;
    }
  }
  r.max_batch_size = lo;
  r.peak_memory_bytes = lo_peak;
  r.over_batch_size = hi;
  r.over_peak_memory_bytes = hi_peak;
  r.capped = hi == 0;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::string memory_budget_json(const MemoryBudgetResult& r) {
  JsonObject o;
  o.add("model", r.model)
      .add("precision", r.precision)
      .add("inference", r.inference)
      .add("scaler", r.scaler)
      .add("memory_budget_bytes", r.budget_bytes)
      .add("max_batch_size", r.max_batch_size)
      .add("peak_memory_bytes", r.peak_memory_bytes)
      .add("bytes_per_sample", r.max_batch_size > 0
                                   ? static_cast<double>(r.peak_memory_bytes) / static_cast<double>(r.max_batch_size)
                                   : 0.0);
  if (r.over_batch_size > 0)
    o.add("over_batch_size", r.over_batch_size).add("over_peak_memory_bytes", r.over_peak_memory_bytes);
  else
    o.add_raw("over_batch_size", "null").add_raw("over_peak_memory_bytes", "null");
  o.add("batch_cap", r.batch_cap)
      .add("capped", r.capped)
      .add("probes", static_cast<int64_t>(r.probes.size()))
      .add("seconds", r.seconds)
      .add("threads", tc::get_num_threads());
  std::string list;
  for (const MemoryProbe& p : r.probes)  // [batch_size, peak_memory_bytes] pairs, in the order probed
    list +=
        (list.empty() ? "[" : ", [") + std::to_string(p.batch_size) + ", " + std::to_string(p.peak_memory_bytes) + "]";
  o.add_raw("probe_log", "[" + list + "]");
  return o.str();
}

namespace {

// --zero: what each rank holds and the step time, against the unsharded run's.
void print_zero_comparison(const BenchResult& zero, const BenchResult& ddp) {
  constexpr double kMiB = 1048576.0;
  std::printf("ZeRO stage %d, per rank (MiB; plain data parallelism in brackets):\n", zero.zero_stage);
  for (size_t k = 0; k < zero.rank_memory.size() && k < ddp.rank_memory.size(); ++k) {
    const auto &z = zero.rank_memory[k], &d = ddp.rank_memory[k];
    std::printf("  rank %zu: parameters %.2f [%.2f], gradients %.2f [%.2f], optimizer state %.2f [%.2f]\n", k,
                z.parameters / kMiB, d.parameters / kMiB, z.gradients / kMiB, d.gradients / kMiB,
                z.optimizer_state / kMiB, d.optimizer_state / kMiB);
  }
  std::printf("step %.3f ms [%.3f ms]: %.2fx the time of plain data parallelism\n", zero.ms_per_step, ddp.ms_per_step,
              ddp.ms_per_step > 0 ? zero.ms_per_step / ddp.ms_per_step : 0.0);
}

}  // namespace

int cmd_bench(int argc, char** argv) {
  BenchConfig c;
  int64_t threads = 0;
  int64_t zero_stage = 0;
  bool json = false, no_scaler = false;
  double budget_mib = 0;
  int64_t batch_cap = int64_t{1} << 16;
  ArgParser p(
      "bench",
      "Times training steps (forward, backward, GradScaler, AdamW) or, with --inference, forward passes\n"
      "of a model on a synthetic batch: warm-up steps, then the median of --steps, and the peak tensor memory.");
  p.choice("--model", &c.model, setting_choices<ModelKind>(), "model (default cnn)");
  p.choice("--precision", &c.precision, setting_choices<PrecisionChoice>({PrecisionChoice::kBf16Pure}),
           "compute precision (default auto)");
  p.choice("--fp8-recipe", &c.fp8_recipe, setting_choices<Fp8RecipeChoice>(),
           "--precision fp8: tensorwise (default), delayed, rowwise or mxfp8");
  p.string("--device", &c.device, "D", "cpu (default), cuda or cuda:N");
  p.positive_int("--batch-size", &c.batch_size, "B", "batch size (default 128)");
  p.positive_int("--width", &c.size.width, "W",
                 "mlp-large: Linear(W,4W)-GELU-Linear(4W,W)-GELU-Linear(W,10) (default 1024); gpt: width W,\n"
                 "W/64 heads (default 256); for scaling benchmarks",
                 16384);
  p.positive_int("--layers", &c.size.layers, "N", "gpt: transformer blocks (default 4)", 256);
  p.positive_int("--context", &c.size.context, "T", "gpt: sequence length (default 128)", 65536);
  p.positive_int("--steps", &c.steps, "N", "timed steps (default 20)");
  p.nonnegative_int("--warmup", &c.warmup, "N", "untimed warm-up steps first (default 3)");
  p.flag("--inference", &c.inference, "time forward passes only (no gradients)");
  p.flag("--no-scaler", &no_scaler, "fp16 without a GradScaler");
  p.positive_int("--threads", &threads, "T", "CPU threads (default: the cores this process may use)", tc::kMaxThreads);
  p.flag("--json", &json, "print one JSON object instead of text");
  p.flag("--profile", &c.profile,
         "then run --steps more steps under the per-op profiler and print where a step's time goes\n"
         "(self/total ms, calls and MiB allocated per step for every op, backward formula, cast, optimizer step)");
  p.positive_double("--memory-budget", &budget_mib, "MIB",
                    "instead of timing: find the largest batch size whose step's peak tensor memory\n"
                    "(weights, AdamW state, gradients, activations, the batch) is <= MIB MiB (doubling, then "
                    "interpolation/bisection)");
  p.flag("--distributed", &c.distributed,
         "under mpirun: data parallel (DistributedDataParallel), --batch-size per process; also prints the\n"
         "all-reduce time per step, the part of it hidden behind backward, and the bytes all-reduced");
  double bucket_mib = 25;
  p.positive_double("--bucket-mib", &bucket_mib, "MIB", "with --distributed: gradient bucket size (default 25)");
  p.positive_int("--zero", &zero_stage, "1|2",
                 "with --distributed: shard the optimizer state (1) and the gradients (2) across the processes\n"
                 "(ZeroRedundancyOptimizer); times plain data parallelism first, in the same run, for the ratio",
                 2);
  p.positive_int("--max-batch-size", &batch_cap, "B",
                 "with --memory-budget: the largest batch size probed (default 65536)");
  p.epilog(
      "examples:\n  tensorcast bench --model mlp-large --precision bf16 --batch-size 256 --steps 50 --json\n"
      "  tensorcast bench --model gpt --precision bf16 --batch-size 16 --steps 5 --profile\n"
      "  tensorcast bench --model cnn --precision bf16 --memory-budget 256 --json\n"
      "  mpirun -np 2 tensorcast bench --model gpt --distributed --threads 1\n");
  if (!p.parse(argc, argv, 2)) return 0;
  if (p.given("--fp8-recipe") && c.precision != PrecisionChoice::kFp8)
    throw UsageError("--fp8-recipe applies to --precision fp8 only");
  c.scaler = !no_scaler;
  c.bucket_cap_bytes = std::max<int64_t>(1, static_cast<int64_t>(bucket_mib * 1048576.0));
  c.zero_stage = static_cast<int>(zero_stage);
  if (p.given("--zero") && !c.distributed) throw UsageError("--zero applies with --distributed (under mpirun)");
  if (threads > 0) tc::set_num_threads(static_cast<int>(threads));
  if (c.distributed && (c.inference || p.given("--memory-budget") || c.profile))
    throw UsageError(
        "--distributed times training steps; it does not combine with --inference, --memory-budget or "
        "--profile");
  if (p.given("--max-batch-size") && !p.given("--memory-budget"))
    throw UsageError("--max-batch-size only applies with --memory-budget MIB");
  if (p.given("--memory-budget")) {
    for (const char* f : {"--batch-size", "--steps", "--warmup", "--profile"})
      if (p.given(f))
        throw UsageError(std::string(f) +
                         " does not apply with --memory-budget (each probe runs 1 warm-up and 1 measured step at the "
                         "batch size it tries)");
    const double bytes = budget_mib * 1048576.0;
    if (bytes < 1 || bytes > 9.0e18)
      throw UsageError("--memory-budget expects MiB between 1 byte and 8 EiB, got " + std::to_string(budget_mib));
    if (parse_only) return 0;
    const MemoryBudgetResult m = run_memory_budget(c, static_cast<int64_t>(std::llround(bytes)), batch_cap);
    if (json) {
      std::printf("%s\n", memory_budget_json(m).c_str());
    } else {
      std::printf("%s %s%s %s: largest batch size within %.1f MiB of peak tensor memory: %lld (peak %.3f MiB",
                  m.model.c_str(), m.precision.c_str(), m.scaler ? "+scaler" : "",
                  m.inference ? "inference" : "training", m.budget_bytes / 1048576.0,
                  static_cast<long long>(m.max_batch_size), m.peak_memory_bytes / 1048576.0);
      if (m.over_batch_size > 0)
        std::printf("; batch %lld needs %.3f MiB", static_cast<long long>(m.over_batch_size),
                    m.over_peak_memory_bytes / 1048576.0);
      else
        std::printf("; the --max-batch-size cap %lld fits, the maximum may be larger",
                    static_cast<long long>(m.batch_cap));
      std::printf("), %zu probes in %.1f s, %d threads\n", m.probes.size(), m.seconds, tc::get_num_threads());
    }
    return 0;
  }
  if (parse_only) return 0;
  if (c.distributed) {
    tc::dist::init();
    if (tc::dist::world_size() < 2)
      throw UsageError("--distributed needs several processes: run it under mpirun -np N (N >= 2)");
  }
  std::optional<BenchResult> replicated;  // --zero: the same steps without sharding, first
  if (c.zero_stage > 0) {
    BenchConfig ddp_only = c;
    ddp_only.zero_stage = 0;
    replicated = run_bench(ddp_only);
  }
  const BenchResult r = run_bench(c);
  if (tc::dist::rank() != 0) return 0;
  if (json) {
    if (replicated)
      std::printf("{\"zero\":%s,\"ddp\":%s}\n", bench_json(r).c_str(), bench_json(*replicated).c_str());
    else
      std::printf("%s\n", bench_json(r).c_str());
  } else {
    std::printf(
        "%s %s%s batch %lld, %s: %.3f ms per %s (median of %lld; min %.3f, max %.3f), %.0f samples/s, peak tensor "
        "memory %.1f MiB, %d threads%s\n",
        r.model.c_str(), r.precision.c_str(), r.scaler ? "+scaler" : "", static_cast<long long>(r.batch_size),
        r.inference ? "inference" : "training", r.ms_per_step, r.inference ? "forward pass" : "step",
        static_cast<long long>(r.steps), r.ms_min, r.ms_max, r.samples_per_s, r.peak_memory_bytes / 1048576.0,
        tc::get_num_threads(),
        gemm16_path(r.precision).empty() ? ""
                                         : (", 16-bit GEMMs on the " + gemm16_path(r.precision) + " kernel").c_str());
    if (r.world_size > 1)
      std::printf(
          "data parallel, %d processes: %lld bucket(s), %.2f MiB of gradients %s per step "
          "(a ring sends %s of it per process); %s %.3f ms per step, %.0f%% of it hidden "
          "behind backward, %.3f ms exposed after it\n",
          r.world_size, static_cast<long long>(r.buckets), r.comm_bytes / 1048576.0,
          r.zero_stage == 2 ? "reduce-scattered" : "all-reduced", r.zero_stage == 2 ? "(p-1)/p" : "2(p-1)/p",
          r.zero_stage == 2 ? "reduce-scatter" : "all-reduce", r.comm_ms, 100 * r.hidden_fraction, r.exposed_ms);
    if (replicated) print_zero_comparison(r, *replicated);
    if (c.profile)
      std::printf("\nper-op profile, per %s (mean over %lld profiled %s):\n%s", r.inference ? "forward pass" : "step",
                  static_cast<long long>(r.steps), r.inference ? "passes" : "steps", r.profile_table.c_str());
  }
  return 0;
}

}  // namespace tcli
