// The subcommands; each returns the process exit status and throws UsageError (exit 2)
// or another exception (exit 1) with one line.
#pragma once

namespace tcli {

// Set only by the argument-parser fuzzer (fuzz/fuzz_cli.cpp): each command returns 0 right
// after parsing and validating its flags, before it trains, benchmarks or reads a file.
inline bool parse_only = false;

int cmd_train(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_plan(int argc, char** argv);
int cmd_report(int argc, char** argv);
int cmd_inspect(int argc, char** argv);

}  // namespace tcli
