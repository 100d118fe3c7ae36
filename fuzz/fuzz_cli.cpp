// The `tensorcast` command line (apps/tensorcast/args.cpp and each command's checks):
// the input is split into argv at '\n' and '\0', then dispatched as main() does, with
// tcli::parse_only set, so a command returns once its flags are parsed and validated and
// never trains, benchmarks or reads a file. A refusal is a UsageError (exit 2) or a
// tc::Error (exit 1); anything else would not reach the user as one line.
#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "args.h"
#include "commands.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tcli::parse_only = true;
  // --help texts would flood the fuzzer's output.
  const int null = ::open("/dev/null", O_WRONLY);
  if (null >= 0) ::dup2(null, STDOUT_FILENO);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args{"tensorcast"};
  std::string cur;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == '\n' || data[i] == '\0') {
      args.push_back(cur);
      cur.clear();
    } else {
      cur += static_cast<char>(data[i]);
    }
  }
  if (size > 0) args.push_back(cur);
  if (args.size() < 2) return 0;
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int argc = static_cast<int>(args.size());

  const std::string& cmd = args[1];
  try {
    if (cmd == "train")
      tcli::cmd_train(argc, argv.data());
    else if (cmd == "bench")
      tcli::cmd_bench(argc, argv.data());
    else if (cmd == "report")
      tcli::cmd_report(argc, argv.data());
    else if (cmd == "inspect")
      tcli::cmd_inspect(argc, argv.data());
  } catch (const tcli::UsageError&) {
  } catch (const tc::Error&) {
  } catch (...) {
    fuzz::escaped();
  }
  return 0;
}
