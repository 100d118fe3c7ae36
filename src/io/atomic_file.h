// Internal: crash-safe file replacement. Bytes go to a temporary file in the target's
// directory; commit() fsyncs it, renames it over the target and fsyncs the directory, so
// readers (and a machine that loses power) see the old file or the new one, never a mix.
// A writer destroyed without commit() removes its temporary file.
#pragma once
#include <cstddef>
#include <filesystem>
#include <functional>

namespace tc::io {

class AtomicFile {
 public:
  explicit AtomicFile(std::filesystem::path target);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t size);
  void commit();
  const std::filesystem::path& temp_path() const { return temp_; }

 private:
  void discard() noexcept;

  std::filesystem::path target_;
  std::filesystem::path temp_;
  int fd_ = -1;
  size_t written_ = 0;
  bool committed_ = false;
};

// Removes the temporary files AtomicFile writes in `dir` (".NAME.tmp-PID-N-S") whose writer
// process no longer exists: what a killed save left behind. Files of live processes (this
// one included: another thread may be saving) are kept, and nothing else is touched.
// Returns how many were removed; errors are ignored (a leftover is only wasted space).
size_t remove_stale_temp_files(const std::filesystem::path& dir);

// Test hook: called after every chunk written by any AtomicFile with the bytes written so
// far; a hook that throws simulates a crash mid-write. Pass {} to remove it.
void set_atomic_write_hook(std::function<void(size_t bytes_written)> hook);

}  // namespace tc::io
