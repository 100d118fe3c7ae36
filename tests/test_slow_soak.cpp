// Slow test: a long fp16 AMP training run that must stay healthy. An MLP on synthetic data
// trains with autocast fp16 on the CPU, AdamW and a GradScaler, fed by a prefetching
// DataLoader; every kInjectEvery steps one gradient gets an inf or a NaN written into it,
// and every kCheckpointEvery steps a training checkpoint is written. Checked:
//   - resident memory (VmRSS) stays within +-5% of its value after warm-up, and at the end
//     of every epoch after warm-up (no prefetched batch alive) the live tensor bytes and
//     allocations are exactly what they were at the first (no leak per step);
//   - no NaN/inf weight or optimizer state at any checkpoint, nor in the last checkpoint
//     file read back;
//   - the scaler stays sane (scale finite, within [min_scale, max_scale]) and skips
//     exactly the injected steps: each one is skipped, leaves the weights and the
//     optimizer's step count untouched and halves the scale, and no other step is skipped;
//   - resuming from the last checkpoint (fresh model, optimizer, scaler and loader loaded
//     from the file) and training kResumeSteps more steps gives parameters, optimizer and
//     scaler state bit-identical to the uninterrupted run continuing as many steps.
//
// TC_SLOW_BOUNDED=0 in the environment runs the full form (20,000 steps); anything else
// (or nothing, as in CI) runs the bounded form: fewer steps, the same assertions.

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "common/testing.h"
#include "tensorcast/amp/autocast.h"
#include "tensorcast/amp/grad_scaler.h"
#include "tensorcast/data/data_loader.h"
#include "tensorcast/io/checkpoint.h"
#include "tensorcast/nn/nn.h"
#include "tensorcast/optim/adamw.h"

namespace fs = std::filesystem;

namespace tc {
namespace {

constexpr int64_t kIn = 32, kHidden = 128, kClasses = 10, kExamples = 4096, kBatch = 64;
constexpr int64_t kFullSteps = 20000, kBoundedSteps = 1500;
constexpr int64_t kCheckpointEvery = 500;
constexpr int64_t kInjectEvery = 100, kInjectPhase = 37;  // overflow at steps 37, 137, 237, ...
constexpr int64_t kResumeSteps = 100;                     // covers one injected overflow
constexpr int64_t kWarmupSteps = 500;                     // RSS baseline: at the first checkpoint
constexpr double kMinScale = 1.0, kMaxScale = 65536.0, kInitScale = 1024.0;
constexpr double kInputNoise = 0.3;  // fresh noise on every batch, from the global generator

bool bounded() {
  const char* s = std::getenv("TC_SLOW_BOUNDED");
  return s == nullptr || std::string(s) != "0";
}

// VmRSS of this process in KiB, from /proc/self/status.
int64_t rss_kib() {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  return -1;
}

bool is_injected(int64_t step) { return step % kInjectEvery == kInjectPhase; }

// Growth every 25 good steps against one backoff per 100 steps: the scale climbs to
// max_scale and then bounces off it, so both the bound and the backoff are exercised.
amp::GradScalerOptions scaler_options() {
  return amp::GradScalerOptions().init_scale(kInitScale).growth_interval(25).min_scale(kMinScale).max_scale(kMaxScale);
}

// Labels from a fixed random teacher, so the loss has something to go down to; every
// fifth label is random and the inputs get fresh noise each step (train_step), so a long
// run cannot memorize its way to zero loss and zero gradients.
std::shared_ptr<data::TensorDataset> make_dataset() {
  manual_seed(2024);
  const Tensor x = randn({kExamples, kIn});
  const Tensor teacher = randn({kClasses, kIn});
  const std::vector<double> clean = argmax(matmul(x, teacher.t()), 1).to_vector();
  const std::vector<double> noise = randint(0, kClasses, {kExamples}).to_vector();
  std::vector<int64_t> labels(static_cast<size_t>(kExamples));
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<int64_t>(i % 5 == 0 ? noise[i] : clean[i]);
  return std::make_shared<data::TensorDataset>(x, tensor(labels, {kExamples}));
}

struct Trainer {
  nn::Sequential model;
  optim::AdamW optimizer;
  amp::GradScaler scaler;
  data::DataLoader loader;

  Trainer(std::shared_ptr<data::TensorDataset> dataset, uint64_t init_seed)
      : model(
            (manual_seed(init_seed), nn::Sequential(nn::Linear(kIn, kHidden), nn::ReLU(), nn::Linear(kHidden, kHidden),
                                                    nn::ReLU(), nn::Linear(kHidden, kClasses)))),
        optimizer(model->parameters(), optim::AdamWOptions(1e-3).weight_decay(0.01)),
        scaler(scaler_options()),
        loader(std::move(dataset), data::DataLoaderOptions(kBatch).shuffle(true).seed(5).prefetch(2)) {}

  io::TrainingState state(int64_t step) const {
    io::TrainingState st;
    st.model = model->state_dict();
    st.optimizer = optimizer.state_dict();
    st.scaler = scaler.state_dict();
    st.data_loader = loader.state();
    st.rng = get_rng_state();
    st.step = step;
    st.metadata = {{"test", "soak"}};
    return st;
  }
  void load(const io::TrainingState& st) {
    model->load_state_dict(st.model);
    optimizer.load_state_dict(st.optimizer);
    scaler.load_state_dict(st.scaler);
    loader.load_state(st.data_loader);
    set_rng_state(st.rng);
  }
};

struct Counts {
  int64_t injected = 0;
  int64_t injected_skipped = 0;       // injected steps skipped as they should be (train_step)
  int64_t other_skipped = 0;          // skips nobody injected (must stay 0)
  int64_t scale_out_of_bounds = 0;    // steps after which the scale was not finite or outside its bounds
  int64_t weights_moved_on_skip = 0;  // skipped steps that changed a parameter
  int64_t steps_at_max_scale = 0;
  double last_loss = 0;
  std::vector<double> losses;  // every step's loss, skipped steps included
};

// The AdamW step count of the first parameter (every parameter steps together).
int64_t optimizer_steps(const optim::AdamW& opt) {
  const StateDict sd = opt.state_dict();
  const auto it = sd.find("state.0.step");
  return it == sd.end() ? 0 : static_cast<int64_t>(it->second.item_double());
}

bool all_finite(const StateDict& sd) {
  for (const auto& [name, t] : sd)
    for (double v : t.to_vector())
      if (!std::isfinite(v)) return false;
  return true;
}

// Byte equality of two state dicts (same keys, dtypes, shapes and bits).
::testing::AssertionResult bit_identical(const StateDict& a, const StateDict& b) {
  if (a.size() != b.size()) return ::testing::AssertionFailure() << a.size() << " vs " << b.size() << " entries";
  for (const auto& [k, t] : a) {
    const auto it = b.find(k);
    if (it == b.end()) return ::testing::AssertionFailure() << "'" << k << "' missing";
    const Tensor x = t.contiguous(), y = it->second.contiguous();
    if (x.dtype() != y.dtype() || x.sizes() != y.sizes() || std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) != 0)
      return ::testing::AssertionFailure() << "'" << k << "' differs";
  }
  return ::testing::AssertionSuccess();
}

// One training step at global index `step`; an injected step gets an inf (even
// injections) or a NaN (odd ones) in one element of one parameter's gradient. The input noise
// draws from the global generator, so a resume must restore it too.
void train_step(Trainer& t, const data::Example& batch, int64_t step, Counts& c) {
  t.optimizer.zero_grad();
  const Tensor input = batch.data + randn(batch.data.sizes()) * kInputNoise;
  Tensor loss;
  {
    amp::AutocastGuard autocast(kCPU, kFloat16);
    loss = nn::functional::cross_entropy(t.model->forward(input), batch.target);
  }
  t.scaler.scale(loss).backward();
  const bool inject = is_injected(step);
  std::vector<Tensor> before;
  int64_t opt_steps_before = 0, injected_param = -1;
  const double scale_before = t.scaler.get_scale();
  if (inject) {
    const std::vector<Tensor> params = t.model->parameters();
    for (const Tensor& p : params) before.push_back(p.clone());
    opt_steps_before = optimizer_steps(t.optimizer);
    const int64_t k = step / kInjectEvery;
    injected_param = k % static_cast<int64_t>(params.size());
    const Tensor& g = params[static_cast<size_t>(injected_param)].grad();
    g.data_ptr<float>()[k % g.numel()] =
        k % 2 == 0 ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
    ++c.injected;
  }
  const bool stepped = t.scaler.step(t.optimizer);
  t.scaler.update();
  const double scale = t.scaler.get_scale();
  if (!std::isfinite(scale) || scale < kMinScale || scale > kMaxScale) ++c.scale_out_of_bounds;
  if (scale == kMaxScale) ++c.steps_at_max_scale;
  if (inject) {
    // Skipped, blaming the parameter we poisoned, with the scale halved and AdamW's step
    // count unchanged.
    if (!stepped && t.scaler.last_step().skipped && t.scaler.last_step().param == injected_param &&
        scale == scale_before * 0.5 && optimizer_steps(t.optimizer) == opt_steps_before)
      ++c.injected_skipped;
    const std::vector<Tensor> params = t.model->parameters();
    for (size_t i = 0; i < params.size(); ++i)
      if (!testing::equal(params[i], before[i])) {
        ++c.weights_moved_on_skip;
        break;
      }
  } else if (!stepped) {
    ++c.other_skipped;
  }
  c.last_loss = loss.item_double();
  c.losses.push_back(c.last_loss);
}

// Trains steps [from, to); calls on_step(step_done) after each step and on_epoch_end(step_done)
// when an epoch's pass is over (its prefetch thread joined, its queue freed).
template <class F, class G>
void train(Trainer& t, int64_t from, int64_t to, Counts& c, F on_step, G on_epoch_end) {
  int64_t step = from;
  while (step < to) {
    bool stopped = false;
    for (auto& batch : t.loader) {
      train_step(t, batch, step, c);
      ++step;
      on_step(step);
      if (step >= to) {
        stopped = true;
        break;
      }
    }
    if (!stopped) on_epoch_end(step);
  }
}

TEST(SlowSoak, LongFp16RunWithOverflowsAndCheckpointsStaysHealthyAndResumesExactly) {
  const bool is_bounded = bounded();
  const int64_t steps = is_bounded ? kBoundedSteps : kFullSteps;
  ASSERT_EQ(steps % kCheckpointEvery, 0) << "the resume starts from a checkpoint at the last step";
  // One intra-op thread: the layers are far too small for a team to pay for its barriers,
  // and on a loaded machine every barrier waits for a descheduled team thread (steps then
  // vary from 1 to 90 ms). The DataLoader's prefetch thread still runs beside training.
  const int threads_before = get_num_threads();
  set_num_threads(1);
  const auto t0 = std::chrono::steady_clock::now();
  testing::TempDir dir("soak");
  auto dataset = make_dataset();
  Trainer run(dataset, 1);
  Counts c;

  int64_t rss_warm = 0, rss_min = 0, rss_max = 0, checkpoints = 0, bad_checkpoints = 0;
  MemoryStats epoch_base;  // live tensors at the first epoch end after warm-up
  int64_t epochs_checked = 0, epochs_with_other_memory = 0;
  auto on_epoch_end = [&](int64_t done) {
    if (done < kWarmupSteps) return;
    const MemoryStats m = memory_stats();
    if (epochs_checked++ == 0)
      epoch_base = m;
    else if (m.current_bytes != epoch_base.current_bytes || m.current_allocations != epoch_base.current_allocations)
      ++epochs_with_other_memory;
  };
  train(
      run, 0, steps, c,
      [&](int64_t done) {
        if (done % kCheckpointEvery != 0) return;
        const io::TrainingState st = run.state(done);
        if (!all_finite(st.model) || !all_finite(st.optimizer)) ++bad_checkpoints;
        io::save_checkpoint(dir.path, st);
        ++checkpoints;
        const int64_t rss = rss_kib();
        if (done == kWarmupSteps) {
          rss_warm = rss_min = rss_max = rss;
        } else if (done > kWarmupSteps) {
          rss_min = std::min(rss_min, rss);
          rss_max = std::max(rss_max, rss);
        }
        std::printf("  step %5lld  loss %.3g  scale %g  skipped %lld  VmRSS %lld KiB\n", static_cast<long long>(done),
                    c.last_loss, run.scaler.get_scale(), static_cast<long long>(run.scaler.steps_skipped()),
                    static_cast<long long>(rss));
      },
      on_epoch_end);
  const int64_t rss_end = rss_kib();
  // Mean losses over the first and the last 200 steps (a single batch is noisy).
  const auto mean_loss = [&](size_t from, size_t to) {
    double sum = 0;
    for (size_t i = from; i < to; ++i) sum += c.losses[i];
    return sum / static_cast<double>(to - from);
  };
  const double first_loss = mean_loss(0, 200), last_loss = mean_loss(c.losses.size() - 200, c.losses.size());
  const double train_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // The last checkpoint, read back from disk, holds finite weights.
  const io::TrainingState saved = io::load_checkpoint(dir.path);
  EXPECT_EQ(saved.step, steps);
  EXPECT_TRUE(all_finite(saved.model));
  EXPECT_TRUE(bit_identical(saved.model, run.model->state_dict()));

  // The uninterrupted run continues ...
  Counts c_cont;
  train(
      run, steps, steps + kResumeSteps, c_cont, [](int64_t) {}, [](int64_t) {});
  // ... and a fresh trainer (different initial weights, so loading must matter) resumes.
  Trainer resumed(dataset, 99);
  resumed.load(saved);
  Counts c_res;
  train(
      resumed, steps, steps + kResumeSteps, c_res, [](int64_t) {}, [](int64_t) {});
  const double total_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  set_num_threads(threads_before);

  std::printf(
      "soak (%s): %lld steps + %lld after resume, %lld checkpoints, "
      "mean loss of the first/last 200 steps %.3g -> %.3g\n",
      is_bounded ? "bounded; TC_SLOW_BOUNDED=0 for the full run" : "full", static_cast<long long>(steps),
      static_cast<long long>(kResumeSteps), static_cast<long long>(checkpoints), first_loss, last_loss);
  std::printf(
      "overflows: %lld injected, %lld skipped with the scale halved, %lld other skips; "
      "scale at max %lld steps, final %g\n",
      static_cast<long long>(c.injected), static_cast<long long>(c.injected_skipped),
      static_cast<long long>(c.other_skipped), static_cast<long long>(c.steps_at_max_scale), run.scaler.get_scale());
  std::printf("VmRSS: %lld KiB at warm-up (step %lld), %lld..%lld KiB after, %lld KiB at the end (%+.2f%%)\n",
              static_cast<long long>(rss_warm), static_cast<long long>(kWarmupSteps), static_cast<long long>(rss_min),
              static_cast<long long>(rss_max), static_cast<long long>(rss_end),
              rss_warm > 0 ? 100.0 * static_cast<double>(rss_end - rss_warm) / static_cast<double>(rss_warm) : 0.0);
  std::printf(
      "live tensors at the %lld epoch ends after warm-up: %lld B in %lld allocations at the first, "
      "%lld differ\n",
      static_cast<long long>(epochs_checked), static_cast<long long>(epoch_base.current_bytes),
      static_cast<long long>(epoch_base.current_allocations), static_cast<long long>(epochs_with_other_memory));
  std::printf("time: %.1f s training, %.1f s in all\n", train_s, total_s);

  // Memory is flat after warm-up. (Not VmRSS under a sanitizer: its shadow memory, access
  // history and quarantine grow on their own.)
  ASSERT_GT(rss_warm, 0);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  EXPECT_LE(static_cast<double>(rss_max), 1.05 * static_cast<double>(rss_warm));
  EXPECT_GE(static_cast<double>(rss_min), 0.95 * static_cast<double>(rss_warm));
  EXPECT_LE(static_cast<double>(rss_end), 1.05 * static_cast<double>(rss_warm));
#endif
  EXPECT_GT(epochs_checked, 10);
  EXPECT_EQ(epochs_with_other_memory, 0) << "live tensors at an epoch end differ from the first after warm-up ("
                                         << epoch_base.current_bytes << " B)";
  // Weights stay finite; the model learns despite the injected overflows.
  EXPECT_EQ(checkpoints, steps / kCheckpointEvery);
  EXPECT_EQ(bad_checkpoints, 0);
  EXPECT_LT(last_loss, 0.6 * std::log(static_cast<double>(kClasses)));  // well below a uniform guess (ln 10)
  // The scaler skipped exactly the injected steps, each with a backoff, and kept its bounds.
  EXPECT_EQ(c.injected, (steps - kInjectPhase + kInjectEvery - 1) / kInjectEvery);
  EXPECT_EQ(c.injected_skipped, c.injected);
  EXPECT_EQ(c.weights_moved_on_skip, 0);
  EXPECT_EQ(c.other_skipped, 0);
  EXPECT_EQ(c.scale_out_of_bounds, 0);
  EXPECT_GT(c.steps_at_max_scale, 0) << "the scale never grew to max_scale: the bound was not exercised";
  EXPECT_EQ(run.scaler.steps_skipped(), c.injected + c_cont.injected);
  EXPECT_EQ(optimizer_steps(run.optimizer), steps + kResumeSteps - run.scaler.steps_skipped());
  // Resume is exact: both continuations saw the same overflow and end bit-identical.
  EXPECT_EQ(c_cont.injected, 1);
  EXPECT_EQ(c_cont.injected_skipped, 1);
  EXPECT_EQ(c_res.injected_skipped, 1);
  EXPECT_TRUE(bit_identical(resumed.model->state_dict(), run.model->state_dict()));
  EXPECT_TRUE(bit_identical(resumed.optimizer.state_dict(), run.optimizer.state_dict()));
  EXPECT_TRUE(bit_identical(resumed.scaler.state_dict(), run.scaler.state_dict()));
  EXPECT_TRUE(bit_identical(resumed.loader.state(), run.loader.state()));
}

}  // namespace
}  // namespace tc
