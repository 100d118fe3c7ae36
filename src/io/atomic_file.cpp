// AtomicFile: temporary file + fsync + rename + directory fsync (see atomic_file.h).
#include "io/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <limits>
#include <mutex>
#include <random>
#include <string_view>

#include "tensorcast/error.h"

namespace tc::io {

namespace {

// Chunked writes bound the time between hook calls and keep each write() modest.
constexpr size_t kChunk = size_t{1} << 20;

std::mutex& hook_mutex() {
  static std::mutex m;
  return m;
}
std::function<void(size_t)>& hook() {
  static std::function<void(size_t)> h;
  return h;
}

std::string errno_text() { return std::strerror(errno); }

// Unique among processes (pid), threads (counter) and stale leftovers (random bits).
std::filesystem::path temp_name_for(const std::filesystem::path& target) {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t salt = std::random_device{}();
  std::string name = ".";
  name += target.filename().string();
  name += ".tmp-";
  name += std::to_string(::getpid());
  name += '-';
  name += std::to_string(counter++);
  name += '-';
  name += std::to_string(salt % 100000);
  return target.parent_path() / name;
}

// The writer's pid in a name made by temp_name_for (".NAME.tmp-PID-COUNTER-SALT", all three
// fields decimal), or -1 when the name is not one of ours.
long temp_file_pid(const std::string& name) {
  if (name.size() < 2 || name[0] != '.') return -1;
  const size_t tag = name.rfind(".tmp-");
  if (tag == std::string::npos || tag < 2) return -1;
  const std::string_view fields = std::string_view(name).substr(tag + 5);
  size_t dashes = 0;
  for (size_t i = 0; i < fields.size(); ++i) {
    const bool dash = fields[i] == '-';
    if (dash && (i == 0 || fields[i - 1] == '-' || i + 1 == fields.size())) return -1;  // an empty field
    if (!dash && (fields[i] < '0' || fields[i] > '9')) return -1;
    dashes += dash;
  }
  if (dashes != 2) return -1;
  long pid = -1;
  const char* end = fields.data() + fields.find('-');
  const auto [ptr, ec] = std::from_chars(fields.data(), end, pid);  // refuses what overflows
  return ec == std::errc() && ptr == end && pid > 0 && pid <= std::numeric_limits<pid_t>::max() ? pid : -1;
}

bool process_exists(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

void fsync_directory(const std::filesystem::path& dir) {
  const std::string d = dir.empty() ? std::string(".") : dir.string();
  const int fd = ::open(d.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) TC_FAIL("io", "cannot open directory ", d, " to sync it: ", errno_text());
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  // Some filesystems refuse fsync on directories (EINVAL); the rename itself still stands.
  if (rc != 0 && err != EINVAL) TC_FAIL("io", "cannot sync directory ", d, ": ", std::strerror(err));
}

}  // namespace

size_t remove_stale_temp_files(const std::filesystem::path& dir) {
  std::error_code ec;
  size_t removed = 0;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const long pid = temp_file_pid(it->path().filename().string());
    if (pid <= 0 || pid == ::getpid() || process_exists(static_cast<pid_t>(pid))) continue;
    std::error_code rm;
    if (it->is_regular_file(rm) && std::filesystem::remove(it->path(), rm)) ++removed;
  }
  return removed;
}

void set_atomic_write_hook(std::function<void(size_t)> h) {
  std::lock_guard<std::mutex> lock(hook_mutex());
  hook() = std::move(h);
}

AtomicFile::AtomicFile(std::filesystem::path target) : target_(std::move(target)) {
  TC_CHECK(!target_.filename().empty(), "io", "cannot write to ", target_, ": not a file name");
  temp_ = temp_name_for(target_);
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd_ < 0) TC_FAIL("io", "cannot create ", temp_.string(), " to write ", target_.string(), ": ", errno_text());
}

AtomicFile::~AtomicFile() {
  if (!committed_) discard();
}

void AtomicFile::discard() noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  ::unlink(temp_.c_str());
}

void AtomicFile::write(const void* data, size_t size) {
  TC_CHECK(fd_ >= 0, "io", "write to ", target_.string(), " after commit");
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const size_t n = size < kChunk ? size : kChunk;
    const ssize_t w = ::write(fd_, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      TC_FAIL("io", "cannot write ", target_.string(), ": ", errno_text());
    }
    p += w;
    size -= static_cast<size_t>(w);
    written_ += static_cast<size_t>(w);
    std::function<void(size_t)> h;
    {
      std::lock_guard<std::mutex> lock(hook_mutex());
      h = hook();
    }
    if (h) h(written_);
  }
}

void AtomicFile::commit() {
  TC_CHECK(fd_ >= 0, "io", "commit of ", target_.string(), " twice");
  if (::fsync(fd_) != 0) TC_FAIL("io", "cannot sync ", temp_.string(), ": ", errno_text());
  if (::close(fd_) != 0) {
    fd_ = -1;
    TC_FAIL("io", "cannot close ", temp_.string(), ": ", errno_text());
  }
  fd_ = -1;
  if (::rename(temp_.c_str(), target_.c_str()) != 0)
    TC_FAIL("io", "cannot rename ", temp_.string(), " to ", target_.string(), ": ", errno_text());
  committed_ = true;
  fsync_directory(target_.parent_path());
}

}  // namespace tc::io
