// The subcommands; each returns the process exit status and throws UsageError (exit 2)
// or another exception (exit 1) with one line.
#pragma once

namespace tcli {

int cmd_train(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_report(int argc, char** argv);
int cmd_inspect(int argc, char** argv);

}  // namespace tcli
