// Shared by the fuzz targets: what counts as a safe refusal, and a scratch file for the
// readers that take a path.
#pragma once
#include <cxxabi.h>
#include <tensorcast/error.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <typeinfo>
#include <vector>

namespace fuzz {

// Called from a `catch (...)` that follows the catch of what a reader may refuse with
// (tc::Error; for the CLI, UsageError too). Any other exception (std::out_of_range from
// map::at, std::invalid_argument from std::stoi, a filesystem_error, std::bad_alloc) would
// reach the user as a bare "map::at" naming no file, key or flag: a finding. Says which
// type escaped and its message, then aborts, which libFuzzer reports as a crash.
[[noreturn]] inline void escaped() {
  try {
    throw;
  } catch (const std::exception& e) {
    int status = 0;
    char* name = abi::__cxa_demangle(typeid(e).name(), nullptr, nullptr, &status);
    std::fprintf(stderr, "fuzz: %s escaped (only tc::Error may): %s\n", status == 0 && name ? name : typeid(e).name(),
                 e.what());
    std::free(name);
  } catch (...) {
    std::fprintf(stderr, "fuzz: an exception that is not a std::exception escaped (only tc::Error may)\n");
  }
  std::abort();
}

// tc::Error is how every reader refuses bad input. Anything else (another exception type,
// see escaped(); a sanitizer report; a hang) is a finding, so it reaches libFuzzer.
// TC_FUZZ_VERBOSE=1 prints each refusal (for reading what a reproducer does).
template <class F>
void refused_or_ok(F&& f) {
  static const bool verbose = std::getenv("TC_FUZZ_VERBOSE") != nullptr;
  try {
    f();
  } catch (const tc::Error& e) {
    if (verbose) std::fprintf(stderr, "refused: %s\n", e.what());
  } catch (...) {
    escaped();
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
