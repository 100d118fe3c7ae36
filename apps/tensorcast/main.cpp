// `tensorcast`: train, benchmark, report on and inspect mixed-precision training.
//
//   tensorcast train [flags]     train a model (no flags: the CNN on Fashion-MNIST, --precision auto)
//   tensorcast bench [flags]     time training steps (or forward passes) on synthetic data
//   tensorcast plan [flags]      a step's peak memory per precision, planned without allocating it
//   tensorcast report [flags]    fp32 vs bf16 vs fp16 (+/- GradScaler): a Markdown report with SVG plots
//   tensorcast inspect FILE      tensors, dtypes, shapes and training state of a safetensors file/checkpoint
//
// Exit status: 0 success, 1 a runtime error (bad data, unreadable file), 2 a usage error.
// Every error is ONE line on stderr: "tensorcast: <what is wrong>; <what to do>".
#include <tensorcast/amp/autocast.h>
#include <tensorcast/dist/process_group.h>
#include <tensorcast/version.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "args.h"
#include "commands.h"

namespace {

const char* kUsage =
    "usage: tensorcast <command> [flags]\n"
    "\n"
    "Mixed-precision (AMP) training on the CPU: fp32, bf16 and fp16 with a GradScaler.\n"
    "\n"
    "commands:\n"
    "  train      train a model (no flags: the CNN on Fashion-MNIST with --precision auto)\n"
    "  bench      median time per training step (or forward pass) and peak memory, synthetic data\n"
    "  plan       a step's peak memory per precision and the largest batch within a budget, planned\n"
    "             on the meta device (nothing allocated)\n"
    "  report     train fp32, bf16, fp16 and fp16 without a scaler; write report.md with SVG plots\n"
    "  inspect    list a safetensors file's or checkpoint's tensors and training state\n"
    "\n"
    "'tensorcast <command> --help' lists a command's flags; 'tensorcast --version' prints the version.\n";

// One line, whatever the message holds.
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "tensorcast: missing command (train, bench, plan, report or inspect); try 'tensorcast train'\n");
    return 2;
  }
  const std::string cmd = argv[1];
  try {
    if (cmd == "--help" || cmd == "-h" || cmd == "help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (cmd == "--version") {
      std::printf("tensorcast %s\n", TENSORCAST_VERSION);
      return 0;
    }
    // Every write this program makes to a weight goes through tensorcast (optimizer steps,
    // checkpoint loads, collectives), so 16-bit weight copies made for one no-grad forward
    // may serve the next while the weights are unchanged.
    tc::amp::set_autocast_cache_across_regions(true);
    if (cmd == "train") return tcli::cmd_train(argc, argv);
    if (cmd == "bench") return tcli::cmd_bench(argc, argv);
    if (cmd == "plan") return tcli::cmd_plan(argc, argv);
    if (cmd == "report") return tcli::cmd_report(argc, argv);
    if (cmd == "inspect") return tcli::cmd_inspect(argc, argv);
    throw tcli::UsageError("unknown command '" + cmd +
                           "' (use train, bench, plan, report or inspect; see 'tensorcast --help')");
  } catch (const tcli::UsageError& e) {
    std::fflush(stdout);
    if (tc::dist::world_size() > 1) tc::dist::abort("tensorcast: " + one_line(e.what()), 2);
    std::fprintf(stderr, "tensorcast: %s\n", one_line(e.what()).c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    // Under mpirun one failing rank ends the job (the others would wait for it forever).
    if (tc::dist::world_size() > 1) tc::dist::abort("tensorcast: error: " + one_line(e.what()), 1);
    std::fprintf(stderr, "tensorcast: error: %s\n", one_line(e.what()).c_str());
    return 1;
  }
}
