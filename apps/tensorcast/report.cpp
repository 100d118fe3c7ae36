// `tensorcast report`: trains the same model from the same seed in fp32, bf16, fp16 with a
// GradScaler and fp16 without one, benchmarks forward passes, and writes DIR/report.md
// with SVG plots (loss, loss scale with skipped steps, gradient zeros, time per step,
// peak memory, test accuracy) and a paragraph on what fp16 without a scaler did. Each run
// also writes TensorBoard event files to DIR/tensorboard/<run>; the loss-scale plot is
// drawn from them, so the report shows what TensorBoard will.
#include <tensorcast/cuda.h>
#include <tensorcast/error.h>
#include <tensorcast/io/summary_writer.h>
#include <tensorcast/ops.h>
#include <tensorcast/version.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "args.h"
#include "bench.h"
#include "commands.h"
#include "json.h"
#include "svg.h"
#include "trainer.h"

namespace tcli {
namespace fs = std::filesystem;

namespace {

struct Run {
  std::string label;
  PrecisionChoice precision = PrecisionChoice::kFp32;
  bool scaler = true;
  TrainResult result;
  BenchResult inference;
  std::vector<tc::io::ScalarEvent> events;  // read back from the run's event file
};

// A run's TensorBoard directory name: "fp16 + GradScaler" -> "fp16-gradscaler".
std::string dir_name(const std::string& label) {
  std::string name;
  for (char c : label) {
    if (std::isalnum(static_cast<unsigned char>(c)))
      name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else if (!name.empty() && name.back() != '-')
      name += '-';
  }
  return name;
}

bool is_event_file(const fs::path& p) { return p.filename().string().starts_with("events.out.tfevents."); }

// Event files of an earlier report in the same directory would mix into this one's runs.
void remove_event_files(const fs::path& dir) {
  std::error_code ec, rm;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (is_event_file(it->path()) && !fs::remove(it->path(), rm) && rm)
      throw tc::Error("[report] cannot remove " + it->path().string() + ": " + rm.message());
}

std::vector<tc::io::ScalarEvent> read_run_events(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (is_event_file(it->path())) files.push_back(it->path());
  if (ec) throw tc::Error("[report] cannot list " + dir.string() + ": " + ec.message());
  if (files.size() != 1)
    throw tc::Error("[report] expected one TensorBoard event file in " + dir.string() + ", found " +
                    std::to_string(files.size()));
  return tc::io::read_scalars(files[0].string());
}

// One tag's scalars, in the order the run wrote them.
std::vector<tc::io::ScalarEvent> scalars_of(const Run& r, const std::string& tag) {
  std::vector<tc::io::ScalarEvent> out;
  for (const auto& e : r.events)
    if (e.tag == tag) out.push_back(e);
  return out;
}

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// Trailing moving average, so noisy per-step losses read as curves.
std::vector<double> smooth(const std::vector<double>& v, size_t window) {
  std::vector<double> out(v.size());
  double sum = 0;
  size_t n = 0, bad = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isfinite(v[i]))
      sum += v[i], ++n;
    else
      ++bad;
    if (i >= window) {
      if (std::isfinite(v[i - window]))
        sum -= v[i - window], --n;
      else
        --bad;
    }
    out[i] = bad ? NAN : (n ? sum / n : NAN);
  }
  return out;
}

double mean_tail(const std::vector<StepRecord>& log, size_t k, double StepRecord::*field) {
  if (log.empty()) return NAN;
  const size_t from = log.size() > k ? log.size() - k : 0;
  double s = 0;
  for (size_t i = from; i < log.size(); ++i) s += log[i].*field;
  return s / double(log.size() - from);
}

std::string percent(double f) { return std::isfinite(f) ? fmt("%.2f%%", 100 * f) : "n/a"; }

// What fp16 without a scaler did, in words, against fp16 with one and fp32.
std::string explain_no_scaler(const Run& fp32, const Run& scaled, const Run& bare) {
  const auto& b = bare.result;
  int64_t nonfinite = 0;
  for (const auto& s : b.steps_log) nonfinite += !std::isfinite(s.loss);
  const double z_bare = mean_tail(b.steps_log, b.steps_log.size(), &StepRecord::zero_grad_fraction);
  const double z_scaled =
      mean_tail(scaled.result.steps_log, scaled.result.steps_log.size(), &StepRecord::zero_grad_fraction);
  const double z_fp32 = mean_tail(fp32.result.steps_log, fp32.result.steps_log.size(), &StepRecord::zero_grad_fraction);
  const double first =
      b.steps_log.empty()
          ? NAN
          : mean_tail({b.steps_log.begin(), b.steps_log.begin() + std::min<size_t>(20, b.steps_log.size())}, 20,
                      &StepRecord::loss);
  const double last = mean_tail(b.steps_log, 50, &StepRecord::loss);
  const double last_fp32 = mean_tail(fp32.result.steps_log, 50, &StepRecord::loss);
  // Steps where fp16 lost clearly more gradient values to zero than fp32 did at the same step.
  int64_t underflow_steps = 0;
  const size_t n = std::min(b.steps_log.size(), fp32.result.steps_log.size());
  for (size_t i = 0; i < n; ++i)
    if (b.steps_log[i].zero_grad_fraction > fp32.result.steps_log[i].zero_grad_fraction + 0.01) ++underflow_steps;

  std::string s;
  s += "Without loss scaling, fp16 gradients smaller than 2^-24 (about 6e-8) flush to zero in the backward pass. ";
  s += "On average " + percent(z_bare) +
       " of the gradient values were exactly zero per step in fp16 without a scaler, against " + percent(z_scaled) +
       " in fp16 with the GradScaler (loss scale " + fmt("%g", scaled.result.final_loss_scale) + " at the end) and " +
       percent(z_fp32) + " in fp32 (zeros there come from the model, e.g. inactive ReLUs, not from underflow). ";
  s += "In " + std::to_string(underflow_steps) + " of " + std::to_string(n) +
       " steps fp16 without a scaler had at least one percentage point more zero gradients than fp32. ";
  if (nonfinite > 0) {
    s += "The loss became inf/NaN in " + std::to_string(nonfinite) +
         " steps: the run diverged (nothing skips those steps without a scaler). ";
  } else if (std::isfinite(first) && std::isfinite(last) && last > 0.9 * first) {
    s += "The loss stalled: it went from " + fmt("%.3f", first) + " (first 20 steps) to only " + fmt("%.3f", last) +
         " (last 50 steps). ";
  } else {
    s += "The loss still fell, from " + fmt("%.3f", first) + " (first 20 steps) to " + fmt("%.3f", last) +
         " (last 50 steps; fp32: " + fmt("%.3f", last_fp32) + "). ";
  }
  if (b.test_accuracy >= 0 && fp32.result.test_accuracy >= 0) {
    const double gap = 100 * (fp32.result.test_accuracy - b.test_accuracy);
    s += "Test accuracy: " + percent(b.test_accuracy) + " against " + percent(fp32.result.test_accuracy) +
         " in fp32 (" + fmt("%+.2f", -gap) + " points). ";
    if (std::fabs(gap) < 0.5 && nonfinite == 0)
      s += "Here the damage is small: AdamW divides each update by the gradient's running RMS, so a gradient that is "
           "uniformly small still moves the weights, and most of this model's gradients lie above fp16's subnormal "
           "range; what underflow costs is the values lost to zero. The next section shrinks the loss until they are "
           "most of the gradient.";
    else
      s += "The scaler is what makes fp16 training work here.";
  }
  return s;
}

// The loss weight at which fp16 without a scaler measurably loses: at weight 1 AdamW's
// normalization hides the lost gradients on these models (see explain_no_scaler).
constexpr double kSmallLossWeight = 1e-4;

// The section on a 10^4 times smaller loss: fp32, fp16 + GradScaler and fp16 without one,
// with the numerics report naming the layers whose gradients fp16 flushes to zero.
std::string small_loss_section(const std::vector<Run>& runs) {
  const Run &fp32 = runs[0], &scaled = runs[1], &bare = runs[2];
  const bool lm = fp32.result.test_accuracy < 0;
  auto metric = [&](const Run& r) {
    return lm ? fmt("%.4f bits/byte", r.result.test_bits_per_byte) : percent(r.result.test_accuracy);
  };
  std::string md = "## Where fp16 without a scaler fails: a smaller loss\n\n";
  md += "The same runs with the loss multiplied by " + fmt("%g", kSmallLossWeight) +
        " (`tensorcast train --loss-weight " + fmt("%g", kSmallLossWeight) +
        "`), as an auxiliary-loss weight, a 1/K gradient accumulation or a per-token mean over many tokens shrinks "
        "every gradient. AdamW's update does not depend on the gradient's scale, so fp32 and fp16 with a GradScaler "
        "train as before; without a scaler the gradients fall under fp16's smallest subnormal (2^-24) and flush to "
        "zero.\n\n";
  md += std::string("| run (loss x ") + fmt("%g", kSmallLossWeight) + ") | test " + (lm ? "bits/byte" : "accuracy") +
        " | loss (last 50 steps) | final loss scale |\n|---|---|---|---|\n";
  for (const Run* r : {&fp32, &scaled, &bare})
    md += "| " + r->label + " | " + metric(*r) + " | " +
          fmt("%.4f", mean_tail(r->result.steps_log, 50, &StepRecord::loss)) + " | " +
          (r->result.scaler ? fmt("%g", r->result.final_loss_scale) : std::string("—")) + " |\n";
  md +=
      "\nThe numerics report of both fp16 runs (`--numerics-report --numerics-every 2`): per tensor, the fraction of "
      "gradient values that are zero (ReLU and pooling masks included) and that are fp16 subnormals (fewer than 11 "
      "significant bits).\n\n";
  md +=
      "| gradient of | zero, no scaler | zero, GradScaler | subnormal, no scaler | subnormal, GradScaler |\n"
      "|---|---|---|---|---|\n";
  for (const auto& b : bare.result.numerics)
    for (const auto& c : scaled.result.numerics)
      if (b.name == c.name && b.kind == c.kind)
        md += "| " + std::string(b.kind == "output_grad" ? "output of " : "") + b.name + " | " +
              percent(b.share(b.zero + b.flush)) + " | " + percent(c.share(c.zero + c.flush)) + " | " +
              percent(b.share(b.subnormal)) + " | " + percent(c.share(c.subnormal)) + " |\n";
  return md + "\n";
}

void write_svg(const fs::path& dir, const std::string& name, const std::string& svg) {
  write_file_atomic(dir / name, svg);
}

}  // namespace

int cmd_report(int argc, char** argv) {
  ModelKind model_kind = ModelKind::kCnn;
  std::string data, out = "report", device = "cpu";
  int64_t epochs = 1, max_steps = 0, batch = 128, seed = 0, threads = 0, bench_steps = 10;
  ArgParser p("report",
              "Trains one model from one seed in fp32, bf16, fp16 with a GradScaler and fp16 without one,\n"
              "benchmarks forward passes, and writes DIR/report.md with SVG plots: loss curves, the loss scale\n"
              "with skipped steps, gradient zeros (underflow), time per step, peak memory and test accuracy.");
  p.choice("--model", &model_kind, setting_choices<ModelKind>(), "model (default cnn)");
  p.string("--data", &data, "PATH", "dataset directory (or text file for gpt); default as for train");
  p.string("--device", &device, "D", "cpu (default), cuda or cuda:N: where every run trains and is benchmarked");
  p.positive_int("--epochs", &epochs, "N", "epochs per run (default 1)");
  p.positive_int("--max-steps", &max_steps, "N", "stop each run after N steps");
  p.positive_int("--batch-size", &batch, "B", "batch size (default 128)");
  p.nonnegative_int("--seed", &seed, "S", "seed shared by all runs (default 0)");
  p.positive_int("--threads", &threads, "T", "CPU threads", tc::kMaxThreads);
  p.positive_int("--bench-steps", &bench_steps, "N", "timed forward passes per precision (default 10)");
  p.string("--out", &out, "DIR", "output directory (default ./report; created)");
  p.epilog("example:\n  tensorcast report --model cnn --epochs 1 --out docs/report\n");
  if (!p.parse(argc, argv, 2)) return 0;
  const std::string model = setting_name(model_kind);
  if (threads > 0) tc::set_num_threads(static_cast<int>(threads));
  std::error_code ec;
  if (fs::exists(out, ec) && !fs::is_directory(out, ec))
    throw tc::Error("[cli] --out " + out + " is a file; pass a directory");
  const fs::path parent = absolute_path(out, "--out").parent_path();
  if (!fs::is_directory(parent, ec))
    throw tc::Error("[cli] --out " + out + ": directory " + parent.string() + " does not exist; create it first");
  resolve_device(device);  // before the first run prints anything
  if (parse_only) return 0;

  using P = PrecisionChoice;
  std::vector<Run> runs = {{"fp32", P::kFp32, true, {}, {}, {}},
                           {"bf16", P::kBf16, true, {}, {}, {}},
                           {"fp16 + GradScaler", P::kFp16, true, {}, {}, {}},
                           {"fp16, no scaler", P::kFp16, false, {}, {}, {}}};
  std::vector<Run> small = {{"fp32", P::kFp32, true, {}, {}, {}},
                            {"fp16 + GradScaler", P::kFp16, true, {}, {}, {}},
                            {"fp16, no scaler", P::kFp16, false, {}, {}, {}}};
  const size_t total_runs = runs.size() + small.size();
  auto config_for = [&](const Run& r) {  // what every run shares: same data, model, seed
    TrainConfig c;
    c.model = model_kind;
    c.data = data;
    c.device = device;
    c.precision = r.precision;
    c.scaler = r.scaler;
    c.on_nonfinite = OnNonfinite::kContinue;  // the report shows what each precision does, overflows included
    c.epochs = epochs;
    c.max_steps = max_steps;
    c.batch_size = batch;
    c.seed = static_cast<uint64_t>(seed);
    c.quiet = true;
    return c;
  };
  for (size_t i = 0; i < runs.size(); ++i) {
    auto& r = runs[i];
    TrainConfig c = config_for(r);
    c.track_zero_grads = true;
    c.tensorboard_dir = (fs::path(out) / "tensorboard" / dir_name(r.label)).string();
    c.log_every = 1;  // every step in the event file, so the loss-scale plot marks each skipped step
    remove_event_files(c.tensorboard_dir);
    std::printf("[%zu/%zu] training %s in %s ...\n", i + 1, total_runs, model.c_str(), r.label.c_str());
    std::fflush(stdout);
    r.result = run_training(c);
    r.events = read_run_events(c.tensorboard_dir);
    BenchConfig bc;
    bc.model = model_kind;
    bc.device = device;
    bc.precision = r.precision;
    bc.batch_size = batch;
    bc.steps = bench_steps;
    bc.inference = true;
    bc.scaler = r.scaler;
    r.inference = run_bench(bc);
    std::printf("      %lld steps, %.1f s, median %.2f ms/step, %s%lld skipped, test %s\n",
                static_cast<long long>(r.result.steps), r.result.train_seconds, r.result.median_step_ms,
                r.result.scaler ? ("final loss scale " + fmt("%g", r.result.final_loss_scale) + ", ").c_str() : "",
                static_cast<long long>(r.result.skipped_steps),
                r.result.test_accuracy >= 0 ? ("accuracy " + percent(r.result.test_accuracy)).c_str()
                                            : fmt("%.4f bits/byte", r.result.test_bits_per_byte).c_str());
    std::fflush(stdout);
  }

  for (size_t i = 0; i < small.size(); ++i) {
    auto& r = small[i];
    TrainConfig c = config_for(r);
    c.loss_weight = kSmallLossWeight;
    c.numerics_report = r.precision == P::kFp16;
    c.numerics_every = 2;  // short report runs still get samples; these runs' timings are not reported
    std::printf("[%zu/%zu] training %s in %s, loss x %g ...\n", runs.size() + i + 1, total_runs, model.c_str(),
                r.label.c_str(), kSmallLossWeight);
    std::fflush(stdout);
    r.result = run_training(c);
  }
  // The runs took minutes: --out may have been removed or replaced by a file meanwhile.
  fs::create_directories(out, ec);
  if (ec) throw tc::Error("[report] cannot create --out directory " + out + ": " + ec.message());
  const fs::path dir(out);
  // ---- plots
  {
    svg::LinePlot lp;
    lp.title = "Training loss (" + model + ", moving average of 10 steps)";
    lp.x_label = "step";
    lp.y_label = "cross-entropy loss";
    for (size_t i = 0; i < runs.size(); ++i) {
      svg::Series s;
      s.name = runs[i].label;
      std::vector<double> y;
      for (const auto& st : runs[i].result.steps_log) s.x.push_back(double(st.step)), y.push_back(st.loss);
      s.y = smooth(y, 10);
      s.dashed = i == 3;
      lp.series.push_back(std::move(s));
    }
    write_svg(dir, "loss.svg", svg::render(lp));
  }
  {
    svg::LinePlot lp;
    lp.title = "fp16 loss scale (GradScaler), skipped steps marked";
    lp.x_label = "step";
    lp.y_label = "loss scale";
    lp.log_y = true;
    svg::Series s;
    s.name = "fp16 + GradScaler";
    s.color = svg::palette(2);
    s.markers_name = "skipped step (inf/NaN gradient)";
    const auto scale = scalars_of(runs[2], "amp/loss_scale");
    const auto skipped = scalars_of(runs[2], "amp/skipped_steps");  // a running count, logged with the scale
    float skipped_before = 0;
    for (size_t i = 0; i < scale.size(); ++i) {
      s.x.push_back(double(scale[i].step));
      s.y.push_back(scale[i].value);
      if (i < skipped.size() && skipped[i].value > skipped_before) {
        s.markers.emplace_back(double(scale[i].step), scale[i].value);
        skipped_before = skipped[i].value;
      }
    }
    lp.series.push_back(std::move(s));
    svg::Series none;
    none.name = "fp16, no scaler (scale 1)";
    none.color = svg::palette(3);
    none.dashed = true;
    for (const auto& e : scalars_of(runs[3], "amp/loss_scale"))
      none.x.push_back(double(e.step)), none.y.push_back(e.value);
    lp.series.push_back(std::move(none));
    write_svg(dir, "loss_scale.svg", svg::render(lp));
  }
  {
    svg::LinePlot lp;
    lp.title = "Gradient values that are exactly zero (moving average of 10 steps)";
    lp.x_label = "step";
    lp.y_label = "fraction of gradient values == 0";
    for (size_t i = 0; i < runs.size(); ++i) {
      svg::Series s;
      s.name = runs[i].label;
      std::vector<double> y;
      for (const auto& st : runs[i].result.steps_log)
        s.x.push_back(double(st.step)), y.push_back(st.zero_grad_fraction);
      s.y = smooth(y, 10);
      s.dashed = i == 3;
      lp.series.push_back(std::move(s));
    }
    write_svg(dir, "zero_grads.svg", svg::render(lp));
  }
  auto bars = [&](const std::string& title, const std::string& unit, auto value, const char* f) {
    svg::BarChart c;
    c.title = title;
    c.y_label = unit;
    for (size_t i = 0; i < runs.size(); ++i) {
      const double v = value(runs[i]);
      c.bars.push_back({runs[i].label, v, svg::palette(i), fmt(f, v)});
    }
    return svg::render(c);
  };
  write_svg(
      dir, "step_time.svg",
      bars(
          "Median time per training step", "ms", [](const Run& r) { return r.result.median_step_ms; }, "%.2f ms"));
  write_svg(dir, "inference_time.svg",
            bars(
                "Median time per forward pass (batch " + std::to_string(batch) + ")", "ms",
                [](const Run& r) { return r.inference.ms_per_step; }, "%.2f ms"));
  write_svg(dir, "memory.svg",
            bars(
                "Peak tensor memory during training", "MiB",
                [](const Run& r) { return r.result.peak_memory_bytes / 1048576.0; }, "%.1f MiB"));
  const bool lm = runs[0].result.test_accuracy < 0;
  write_svg(dir, "accuracy.svg",
            lm ? bars(
                     "Held-out loss (lower is better)", "bits per byte",
                     [](const Run& r) { return r.result.test_bits_per_byte; }, "%.3f")
               : bars(
                     "Test accuracy", "%", [](const Run& r) { return 100 * r.result.test_accuracy; }, "%.2f%%"));

  // ---- the Markdown
  std::string md;
  md += "# tensorcast mixed-precision report: " + model + "\n\n";
  md += "Generated by `tensorcast report --model " + model + " --epochs " + std::to_string(epochs) +
        (max_steps ? " --max-steps " + std::to_string(max_steps) : std::string()) + " --batch-size " +
        std::to_string(batch) + " --seed " + std::to_string(seed) + (device != "cpu" ? " --device " + device : "") +
        "` (tensorcast " + TENSORCAST_VERSION + ", " +
        (device != "cpu" ? "on " + device + ": " + tc::cuda::get_device_properties(tc::Device(device).index).name
                         : std::to_string(tc::get_num_threads()) + " threads") +
        "). Same model, data order and initialization (seed " + std::to_string(seed) +
        ") in every run; AdamW lr 1e-3, weight decay 0.\n\n";
  md += "Data: " + runs[0].result.data_description + ".\n\n";
  md +=
      "Every run's scalars (loss, learning rate, loss scale, skipped steps, gradient norm, samples/s, peak memory, "
      "test metrics) are in TensorBoard event files, one directory per run: `tensorboard --logdir " +
      (fs::path(out) / "tensorboard").string() + "` shows them side by side.\n\n";
  md += std::string("| run | test ") + (lm ? "bits/byte" : "accuracy") +
        " | loss (last 50 steps) | steps | skipped | final loss scale | zero grads | ms/step (train) | ms/forward | "
        "peak memory |\n";
  md += "|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : runs) {
    const auto& t = r.result;
    md += "| " + r.label + " | " + (lm ? fmt("%.4f", t.test_bits_per_byte) : percent(t.test_accuracy)) + " | " +
          fmt("%.4f", mean_tail(t.steps_log, 50, &StepRecord::loss)) + " | " + std::to_string(t.steps) + " | " +
          std::to_string(t.skipped_steps) + " | " + (t.scaler ? fmt("%g", t.final_loss_scale) : std::string("—")) +
          " | " + percent(mean_tail(t.steps_log, t.steps_log.size(), &StepRecord::zero_grad_fraction)) + " | " +
          fmt("%.2f", t.median_step_ms) + " | " + fmt("%.2f", r.inference.ms_per_step) + " | " +
          fmt("%.1f MiB", t.peak_memory_bytes / 1048576.0) + " |\n";
  }
  md += "\n## Loss\n\n![training loss](loss.svg)\n\n";
  md += "## fp16 without a GradScaler: what happened\n\n" + explain_no_scaler(runs[0], runs[2], runs[3]) + "\n\n";
  md += "![gradient zeros](zero_grads.svg)\n\n";
  md += small_loss_section(small);
  md +=
      "## Loss scale\n\nThe GradScaler starts at 65536, halves the scale and skips the step when a gradient overflows "
      "(inf/NaN), and doubles it after 2000 clean steps. " +
      std::to_string(runs[2].result.skipped_steps) + " of " + std::to_string(runs[2].result.steps) +
      " fp16 steps were skipped; the final scale was " + fmt("%g", runs[2].result.final_loss_scale) +
      ". The plot is drawn from the runs' event files (tags `amp/loss_scale` and `amp/skipped_steps`).\n\n";
  md += "![loss scale](loss_scale.svg)\n\n";
  md += "## Speed and memory\n\n";
  md +=
      "Training-step times are medians over the training run (data loading included); forward-pass times are "
      "`tensorcast bench --inference` medians of " +
      std::to_string(bench_steps) +
      " passes. Peak memory counts every tensor alive during training: fp32 master weights, AdamW state, "
      "activations and the 16-bit weight copies autocast caches. On a CPU without native bf16 (AVX-512 BF16/AMX) "
      "or fp16 math, 16-bit autocast is slower than fp32.\n\n";
  md +=
      "![time per step](step_time.svg)\n\n![time per forward pass](inference_time.svg)\n\n![peak "
      "memory](memory.svg)\n\n";
  md += std::string("## ") + (lm ? "Held-out loss" : "Test accuracy") + "\n\n![accuracy](accuracy.svg)\n";
  write_file_atomic(dir / "report.md", md);
  for (const auto& r : runs) {
    std::string name =
        setting_name(r.precision) + (r.scaler || r.precision != PrecisionChoice::kFp16 ? "" : "-noscaler");
    write_file_atomic(dir / ("summary-" + name + ".json"), summary_json(r.result));
  }
  std::printf(
      "report: %s (plots: loss.svg, loss_scale.svg, zero_grads.svg, step_time.svg, inference_time.svg, memory.svg, "
      "accuracy.svg)\n",
      (dir / "report.md").string().c_str());
  return 0;
}

}  // namespace tcli
