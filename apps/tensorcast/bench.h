// Timing whole training steps (or forward passes) of the CLI's models on synthetic data.
#pragma once
#include <tensorcast/profiler.h>

#include <cstdint>
#include <string>
#include <vector>

#include "models.h"

namespace tcli {

struct BenchConfig {
  ModelKind model = ModelKind::kCnn;
  PrecisionChoice precision = PrecisionChoice::kAuto;  // not kBf16Pure
  Fp8RecipeChoice fp8_recipe = Fp8RecipeChoice::kTensorwise;
  std::string device = "cpu";  // cpu, cuda or cuda:N
  int64_t batch_size = 128, steps = 20, warmup = 3;
  bool inference = false, scaler = true;
  bool profile = false;      // then also run `steps` more steps under tc::profiler
  bool distributed = false;  // under mpirun: DistributedDataParallel, batch_size per process
  // `tensorcast plan`: the steps run on the meta device (shapes and byte counts, nothing
  // computed or allocated), untimed, without the loss scaler (it reads found_inf's value).
  bool meta = false;
  int64_t bucket_cap_bytes = int64_t{25} << 20;
  int zero_stage = 0;  // with distributed: 1 or 2 shards the optimizer (ZeroRedundancyOptimizer)
  ModelSize size;      // --width/--layers/--context (scaling benchmarks); default: the model's own
};

struct BenchResult {
  std::string model, precision, device;
  std::string description;  // the model's one line (Model::description)
  ModelSize size;
  int64_t batch_size = 0, steps = 0;
  bool inference = false, scaler = false;
  double ms_per_step = 0;  // median
  double ms_min = 0, ms_max = 0;
  int64_t peak_memory_bytes = 0;  // tensors alive during the timed steps (weights, optimizer state, activations)
  // What the peak is made of: the model's parameters and buffers, the batch, what the
  // warm-up leaves alive besides the gradients (optimizer state, master weights, the
  // 16-bit weight copies a model keeps), the gradients, and the rest of the peak
  // (activations saved for backward, the gradients computed so far, temporaries).
  int64_t weights_bytes = 0, batch_bytes = 0, optimizer_state_bytes = 0, gradient_bytes = 0;
  int64_t activation_bytes() const { return peak_memory_bytes - weights_bytes - batch_bytes - optimizer_state_bytes; }
  double samples_per_s = 0;
  // With BenchConfig::profile: per-record totals over the profiled steps (not the timed
  // ones: the median above has no profiler overhead), and the printed table per step.
  std::vector<tc::profiler::OpStat> profile;
  std::string profile_table;
  // --distributed (medians over the timed steps, rank 0's view)
  int world_size = 1;
  int64_t buckets = 0;
  int64_t comm_bytes = 0;      // gradient payload all-reduced per step
  double comm_ms = 0;          // all-reduce time per step (communication thread busy)
  double hidden_fraction = 0;  // share of comm_ms that ran while backward was still running
  double exposed_ms = 0;       // waited after backward for the last buckets
  // Per rank (index = rank; gathered to rank 0): the bytes of parameters, of gradients
  // between backward and step, and of optimizer state.
  int zero_stage = 0;
  struct RankMemory {
    int64_t parameters = 0, gradients = 0, optimizer_state = 0;
  };
  std::vector<RankMemory> rank_memory;
};

BenchResult run_bench(const BenchConfig& config);
std::string bench_json(const BenchResult& r);

// `tensorcast bench --memory-budget MIB`: the largest batch size whose step (training, or
// a forward pass with config.inference) keeps the peak tensor memory within the budget.
// Each probe is run_bench at that batch with a fresh model and optimizer, 1 warm-up step
// and 1 measured step, so the peak counts weights, AdamW state, gradients, activations
// and the batch, exactly as the timed bench's peak does. The allocator's counter is exact,
// so the search is deterministic: doubling from 1 until a probe exceeds the budget (or
// reaches batch_cap), then linear interpolation and bisection down to two neighbouring
// batch sizes; it assumes the peak grows with the batch size.
struct MemoryProbe {
  int64_t batch_size = 0, peak_memory_bytes = 0;
};

struct MemoryBudgetResult {
  std::string model, precision;
  bool inference = false, scaler = false;
  int64_t budget_bytes = 0;
  int64_t max_batch_size = 0;          // 0: not even batch 1 fits
  int64_t peak_memory_bytes = 0;       // at max_batch_size (0 when it is 0)
  int64_t over_batch_size = 0;         // the smallest probed batch over the budget (max_batch_size + 1
  int64_t over_peak_memory_bytes = 0;  // unless capped) and its peak; 0: none (the cap fits)
  int64_t batch_cap = 0;
  bool capped = false;              // the cap itself fits: the true maximum may be larger
  std::vector<MemoryProbe> probes;  // in the order run
  double seconds = 0;
};

MemoryBudgetResult run_memory_budget(const BenchConfig& config, int64_t budget_bytes, int64_t batch_cap);
std::string memory_budget_json(const MemoryBudgetResult& r);

}  // namespace tcli
