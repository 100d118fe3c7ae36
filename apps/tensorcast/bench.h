// Timing whole training steps (or forward passes) of the CLI's models on synthetic data.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <tensorcast/profiler.h>

namespace tcli {

struct BenchConfig {
  std::string model = "cnn", precision = "auto";
  int64_t batch_size = 128, steps = 20, warmup = 3;
  bool inference = false, scaler = true;
  bool profile = false;  // then also run `steps` more steps under tc::profiler
};

struct BenchResult {
  std::string model, precision;
  int64_t batch_size = 0, steps = 0;
  bool inference = false, scaler = false;
  double ms_per_step = 0;  // median
  double ms_min = 0, ms_max = 0;
  int64_t peak_memory_bytes = 0;  // tensors alive during the timed steps (weights, optimizer state, activations)
  double samples_per_s = 0;
  // With BenchConfig::profile: per-record totals over the profiled steps (not the timed
  // ones: the median above has no profiler overhead), and the printed table per step.
  std::vector<tc::profiler::OpStat> profile;
  std::string profile_table;
};

BenchResult run_bench(const BenchConfig& config);
std::string bench_json(const BenchResult& r);

}  // namespace tcli
