// `tensorcast inspect FILE`: what a safetensors file or training checkpoint holds.
#include <tensorcast/error.h>
#include <tensorcast/io/describe.h>

#include <cstdio>
#include <filesystem>

#include "args.h"
#include "commands.h"

namespace tcli {

int cmd_inspect(int argc, char** argv) {
  std::string path;
  ArgParser p("inspect",
              "Lists the tensors (name, dtype, shape, bytes) and metadata of a safetensors file; for a training\n"
              "checkpoint (its directory or its checkpoint.safetensors) also the epoch, step and parts.");
  p.positional("FILE", &path, "a .safetensors file or a --checkpoint directory");
  p.epilog("examples:\n  tensorcast inspect ck/\n  tensorcast inspect ck/model.safetensors\n");
  if (!p.parse(argc, argv, 2)) return 0;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw tc::Error("[cli] " + path + " does not exist; pass a .safetensors file or a --checkpoint directory");
  if (parse_only) return 0;
  const std::string text = tc::io::describe(path);
  std::fputs(text.c_str(), stdout);
  if (!text.empty() && text.back() != '\n') std::fputc('\n', stdout);
  return 0;
}

}  // namespace tcli
