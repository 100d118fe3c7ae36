// `tensorcast plan`: the memory of a training step (or a forward pass) per precision,
// planned on the meta device: the bench's step (build, warm-up step, measured step) runs
// with tensors that have shapes and no storage, and the allocator's byte counts give the
// peak and what it is made of. Nothing is computed and no tensor memory is allocated (the
// parameters are initialized on the CPU first, then moved), so a model too large for this
// machine, or a card it does not have, can be planned. --measure runs the same step on the
// CPU and prints the measured peak beside the plan.
#include <tensorcast/allocator.h>
#include <tensorcast/parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "args.h"
#include "bench.h"
#include "commands.h"
#include "json.h"
#include "settings.h"

namespace tcli {

namespace {

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

std::vector<PrecisionChoice> precisions(const std::string& flag) {
  std::vector<PrecisionChoice> out;
  for (const std::string& item : split_list(flag)) {
    const std::optional<PrecisionChoice> p = parse_setting<PrecisionChoice>(item);
    if (!p || *p == PrecisionChoice::kAuto || *p == PrecisionChoice::kBf16Pure || *p == PrecisionChoice::kFp8)
      throw UsageError("--precision expects a comma-separated list of fp32, bf16 and fp16, got '" + item + "'");
    out.push_back(*p);
  }
  if (out.empty()) throw UsageError("--precision expects a comma-separated list of fp32, bf16 and fp16, got ''");
  return out;
}

std::vector<double> budgets_mib(const std::string& flag) {
  std::vector<double> out;
  for (const std::string& item : split_list(flag)) {
    char* end = nullptr;
    const double v = std::strtod(item.c_str(), &end);
    if (item.empty() || end != item.c_str() + item.size() || !(v > 0) || v * 1048576.0 > 9.0e18)
      throw UsageError("--memory-budget expects a comma-separated list of positive MiB, got '" + item + "'");
    out.push_back(v);
  }
  if (out.empty()) throw UsageError("--memory-budget expects a comma-separated list of positive MiB, got ''");
  return out;
}

double mib(int64_t bytes) { return static_cast<double>(bytes) / 1048576.0; }

struct PlanRow {
  std::string precision;
  BenchResult plan;
  int64_t measured_peak = -1;  // --measure: the CPU's peak (-1: not measured)
};

std::string plan_json(const BenchConfig& c, const std::vector<PlanRow>& rows) {
  std::string list;
  for (const PlanRow& r : rows) {
    JsonObject o;
    o.add("precision", r.precision)
        .add("peak_memory_bytes", r.plan.peak_memory_bytes)
        .add("weights_bytes", r.plan.weights_bytes)
        .add("optimizer_state_bytes", r.plan.optimizer_state_bytes)
        .add("gradient_bytes", r.plan.gradient_bytes)
        .add("batch_bytes", r.plan.batch_bytes)
        .add("activation_bytes", r.plan.activation_bytes());
    if (r.measured_peak >= 0) o.add("measured_peak_memory_bytes", r.measured_peak);
    list += (list.empty() ? "" : ", ") + o.str();
  }
  JsonObject o;
  o.add("model", setting_name(c.model))
      .add("batch_size", c.batch_size)
      .add("inference", c.inference)
      .add_raw("plans", "[" + list + "]");
  return o.str();
}

void print_table(const BenchConfig& c, const std::string& description, const std::vector<PlanRow>& rows) {
  std::printf("%s, %s at batch %lld, planned on the meta device (MiB):\n", description.c_str(),
              c.inference ? "forward pass" : "training step", static_cast<long long>(c.batch_size));
  std::printf("  %-44s", "");
  for (const PlanRow& r : rows) std::printf("%12s", r.precision.c_str());
  std::printf("\n");
  auto line = [&](const char* name, auto value) {
    std::printf("  %-44s", name);
    for (const PlanRow& r : rows) std::printf("%12.1f", mib(value(r.plan)));
    std::printf("\n");
  };
  line("weights (parameters and buffers)", [](const BenchResult& b) { return b.weights_bytes; });
  line("optimizer state, master weights, weight copies", [](const BenchResult& b) { return b.optimizer_state_bytes; });
  line("the batch", [](const BenchResult& b) { return b.batch_bytes; });
  line("activations, gradients, temporaries at peak", [](const BenchResult& b) { return b.activation_bytes(); });
  line("peak", [](const BenchResult& b) { return b.peak_memory_bytes; });
  line("(gradients, all of them)", [](const BenchResult& b) { return b.gradient_bytes; });
  if (rows.front().measured_peak < 0) return;
  std::printf("  %-44s", "measured peak on the CPU");
  for (const PlanRow& r : rows) std::printf("%12.1f", mib(r.measured_peak));
  std::printf("\n  %-44s", "plan / measured - 1");
  for (const PlanRow& r : rows)
    std::printf("%11.2f%%", 100.0 * (static_cast<double>(r.plan.peak_memory_bytes) /
                                         static_cast<double>(std::max<int64_t>(1, r.measured_peak)) -
                                     1.0));
  std::printf("\n");
}

}  // namespace

int cmd_plan(int argc, char** argv) {
  BenchConfig c;
  c.meta = true;
  c.warmup = 1;
  c.steps = 1;
  c.batch_size = 64;
  std::string precision_list = "fp32,bf16,fp16", budget_list;
  int64_t threads = 0;
  bool json = false, measure = false;
  int64_t batch_cap = int64_t{1} << 20;
  ArgParser p("plan",
              "The peak tensor memory of a training step (forward, backward, AdamW with fp32 master weights)\n"
              "or, with --inference, a forward pass, per precision, and what it is made of: planned on the\n"
              "meta device (shapes without storage), so nothing is computed or allocated. With --memory-budget,\n"
              "the largest batch size whose step fits each budget.");
  p.choice("--model", &c.model, setting_choices<ModelKind>(), "model (default cnn)");
  p.string("--precision", &precision_list, "LIST", "comma-separated fp32, bf16, fp16 (default all three)");
  p.positive_int("--batch-size", &c.batch_size, "B", "batch size (default 64)");
  p.positive_int("--width", &c.size.width, "W", "mlp-large or gpt: width (as tensorcast bench)", 1 << 20);
  p.positive_int("--layers", &c.size.layers, "N", "gpt: transformer blocks (default 4)", 4096);
  p.positive_int("--context", &c.size.context, "T", "gpt: sequence length (default 128)", 1 << 22);
  p.positive_int("--vocab", &c.size.vocab, "V", "gpt: vocabulary (default 256: bytes; GPT-2's is 50257)", 1 << 24);
  p.flag("--inference", &c.inference, "plan a forward pass without gradients");
  p.string("--memory-budget", &budget_list, "MIB[,MIB...]",
           "instead of one batch size: the largest batch size within each budget of peak tensor memory");
  p.positive_int("--max-batch-size", &batch_cap, "B", "with --memory-budget: the largest batch size tried");
  p.flag("--measure", &measure, "also run the step on the CPU and print its measured peak beside the plan");
  p.positive_int("--threads", &threads, "T", "CPU threads for --measure", tc::kMaxThreads);
  p.flag("--json", &json, "print one JSON object instead of text");
  p.epilog(
      "examples:\n  tensorcast plan --model gpt --batch-size 16\n"
      "  tensorcast plan --model gpt --width 768 --layers 12 --context 1024 --vocab 50257 --precision fp32,bf16 "
      "--memory-budget 24576,40960,81920\n"
      "  tensorcast plan --model cnn --precision bf16 --measure --json\n");
  if (!p.parse(argc, argv, 2)) return 0;
  const std::vector<PrecisionChoice> precs = precisions(precision_list);
  if (p.given("--memory-budget") && (p.given("--batch-size") || measure))
    throw UsageError("--memory-budget finds the batch size itself; it does not combine with --batch-size or --measure");
  if (p.given("--max-batch-size") && !p.given("--memory-budget"))
    throw UsageError("--max-batch-size only applies with --memory-budget MIB");
  const std::vector<double> budgets = p.given("--memory-budget") ? budgets_mib(budget_list) : std::vector<double>{};
  if (threads > 0) tc::set_num_threads(static_cast<int>(threads));
  if (parse_only) return 0;

  if (!budgets.empty()) {
    std::string list;
    if (!json)
      std::printf("%s: the largest batch size within each budget of peak tensor memory (planned)\n",
                  setting_name(c.model).c_str());
    for (PrecisionChoice prec : precs) {
      c.precision = prec;
      for (double budget : budgets) {
        const MemoryBudgetResult m =
            run_memory_budget(c, static_cast<int64_t>(std::llround(budget * 1048576.0)), batch_cap);
        if (json) {
          list += (list.empty() ? "" : ", ") + memory_budget_json(m);
          continue;
        }
        std::printf("  %-5s %10.0f MiB: batch %lld (peak %.1f MiB)%s\n", setting_name(prec).c_str(), budget,
                    static_cast<long long>(m.max_batch_size), mib(m.peak_memory_bytes),
                    m.capped ? ", the --max-batch-size cap: the maximum may be larger" : "");
      }
    }
    if (json) std::printf("{\"model\": \"%s\", \"budgets\": [%s]}\n", setting_name(c.model).c_str(), list.c_str());
    return 0;
  }

  std::vector<PlanRow> rows;
  for (PrecisionChoice prec : precs) {
    c.precision = prec;
    PlanRow row{setting_name(prec), run_bench(c)};
    if (measure) {
      BenchConfig cpu = c;
      cpu.meta = false;
      cpu.device = "cpu";
      cpu.scaler = false;  // as planned: the scaler's state is a few scalars
      row.measured_peak = run_bench(cpu).peak_memory_bytes;
    }
    rows.push_back(row);
  }
  if (json)
    std::printf("%s\n", plan_json(c, rows).c_str());
  else
    print_table(c, rows.front().plan.description, rows);
  return 0;
}

}  // namespace tcli
