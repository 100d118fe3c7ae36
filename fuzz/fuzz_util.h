// Shared by the fuzz targets: what counts as a safe refusal, and a scratch file for the
// readers that take a path.
#pragma once
#include <tensorcast/error.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace fuzz {

// tc::Error is how every reader refuses bad input. Anything else that escapes (another
// exception type, a sanitizer report, a hang) is a finding, so it reaches libFuzzer.
// TC_FUZZ_VERBOSE=1 prints each refusal (for reading what a reproducer does).
template <class F>
void refused_or_ok(F&& f) {
  static const bool verbose = std::getenv("TC_FUZZ_VERBOSE") != nullptr;
  try {
    f();
  } catch (const tc::Error& e) {
    if (verbose) std::fprintf(stderr, "refused: %s\n", e.what());
  }
}

// An invariant the target checks does not hold: say which, then crash for libFuzzer.
[[noreturn]] inline void broken(const char* what) {
  std::fprintf(stderr, "fuzz invariant broken: %s\n", what);
  std::abort();
}

// One file per process and name, rewritten on every run (libFuzzer's -fork/-jobs workers
// are separate processes, so they do not share it), removed at exit. In /dev/shm when
// there is one: on a disk, writing the file costs more than reading it.
inline std::string scratch_path(const char* name) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : tmp && *tmp ? tmp : "/tmp";
  return dir + "/tc_fuzz_" + std::to_string(::getpid()) + "_" + name;
}

inline std::string write_scratch(const char* name, const void* data, size_t size) {
  static std::vector<std::string> made;  // one per name
  std::string path = scratch_path(name);
  auto it = std::find(made.begin(), made.end(), path);
  if (it == made.end()) {
    if (made.empty())
      std::atexit([] {
        for (const auto& p : made) std::remove(p.c_str());
      });
    made.push_back(path);
    it = made.end() - 1;
  }
  std::FILE* f = std::fopen(it->c_str(), "wb");
  if (!f || (size && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0) std::abort();
  return *it;
}

}  // namespace fuzz
