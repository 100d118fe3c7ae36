// SummaryWriter and read_scalars: TensorBoard event files (see summary_writer.h).
// A file is a sequence of TFRecords: uint64 length, masked CRC-32C of the length, the
// data, masked CRC-32C of the data (all little-endian). Each record's data is a
// tensorflow.Event protobuf; only the fields scalars need are written and read:
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; float simple_value = 2; }
#include "tensorcast/io/summary_writer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string_view>

#include "io/crc32c.h"
#include "io/read_file.h"
#include "tensorcast/error.h"

namespace tc::io {

namespace {

// A record longer than this is damage, not data: scalar events are tens of bytes, and the
// reader must not allocate what a corrupt length asks for.
constexpr uint64_t kMaxRecord = uint64_t{64} << 20;

// Protobuf wire types.
constexpr int kVarint = 0, kFixed64 = 1, kBytes = 2, kFixed32 = 5;

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>(v >> (8 * i));
}
uint64_t get_le(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{p[i]} << (8 * i);
  return v;
}

void put_varint(std::string& out, uint64_t v) {
  for (; v >= 0x80; v >>= 7) out += static_cast<char>(v | 0x80);
  out += static_cast<char>(v);
}
void put_key(std::string& out, int field, int wire) { put_varint(out, uint64_t(field) << 3 | wire); }
void put_bytes(std::string& out, int field, std::string_view s) {
  put_key(out, field, kBytes);
  put_varint(out, s.size());
  out += s;
}
void put_double(std::string& out, int field, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, 8);
  put_key(out, field, kFixed64);
  put_le(out, bits, 8);
}

std::string event_head(double wall_time, int64_t step) {
  std::string e;
  put_double(e, 1, wall_time);
  put_key(e, 2, kVarint);
  put_varint(e, static_cast<uint64_t>(step));  // negative steps take ten bytes, as in protobuf
  return e;
}

double now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

// torch.utils.tensorboard's name: the counter tells apart writers of one process started
// in the same second.
std::string event_file_name(const std::string& suffix) {
  static std::atomic<int> counter{0};
  char host[256] = "localhost";
  if (::gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "localhost");
  host[sizeof host - 1] = '\0';
  char head[64];
  std::snprintf(head, sizeof head, "events.out.tfevents.%010lld.", static_cast<long long>(now()));
  return head + std::string(host) + "." + std::to_string(::getpid()) + "." + std::to_string(counter++) + suffix;
}

// Every refusal of read_scalars: the file, the record's offset, what is wrong.
template <class... What>
[[noreturn]] void damaged(const std::string& path, uint64_t record, const What&... what) {
  TC_FAIL("io", path, ": record at byte ", record, ": ", what...);
}

// One protobuf message's bytes, read field by field. `base` is the file offset of the
// first byte, so that every refusal names where the damage is.
class Fields {
 public:
  Fields(std::string_view bytes, uint64_t base, const std::string& path, uint64_t record)
      : p_(reinterpret_cast<const unsigned char*>(bytes.data())),
        n_(bytes.size()),
        base_(base),
        path_(path),
        record_(record) {}
  // A field's bytes as a message of its own.
  Fields message() {
    const std::string_view b = bytes();
    return Fields(b, base_ + pos_ - b.size(), path_, record_);
  }

  // The next field's number and wire type; false at the end of the message.
  bool next(uint64_t& field, int& wire) {
    if (pos_ == n_) return false;
    const uint64_t key = varint();
    field = key >> 3;
    wire = static_cast<int>(key & 7);
    if (field == 0 || field > (uint64_t{1} << 29) - 1) fail("field number " + std::to_string(field));
    return true;
  }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      need(1, "varint");
      const unsigned char b = p_[pos_++];
      if (shift == 63 && b > 1) fail("varint longer than 64 bits");  // the tenth byte holds bit 63 only
      v |= uint64_t{b & 0x7Fu} << shift;
      if (!(b & 0x80)) return v;
    }
  }
  uint64_t fixed(int bytes) {
    need(bytes, "fixed-size field");
    const uint64_t v = get_le(p_ + pos_, bytes);
    pos_ += bytes;
    return v;
  }
  std::string_view bytes() {
    const uint64_t len = varint();
    need(len, "length-delimited field");
    const std::string_view s(reinterpret_cast<const char*>(p_ + pos_), len);
    pos_ += len;
    return s;
  }
  void skip(int wire) {
    switch (wire) {
      case kVarint:
        varint();
        return;
      case kFixed64:
        fixed(8);
        return;
      case kBytes:
        bytes();
        return;
      case kFixed32:
        fixed(4);
        return;
      default:  // 3 and 4 are the deprecated groups, which no event writer uses
        fail("wire type " + std::to_string(wire));
    }
  }

 private:
  void need(uint64_t bytes, const char* what) {
    if (bytes > n_ - pos_) fail(std::string(what) + " runs past the end of its message");
  }
  [[noreturn]] void fail(const std::string& what) const {
    damaged(path_, record_, "malformed Event protobuf: ", what, " (at byte ", base_ + pos_, ")");
  }

  const unsigned char* p_;
  size_t n_, pos_ = 0;
  uint64_t base_;
  const std::string& path_;
  uint64_t record_;
};

// Appends the scalars of one Summary message.
void read_summary(Fields summary, std::vector<ScalarEvent>& out) {
  uint64_t field;
  int wire;
  while (summary.next(field, wire)) {
    if (field != 1 || wire != kBytes) {
      summary.skip(wire);
      continue;
    }
    Fields value = summary.message();
    ScalarEvent s;
    bool scalar = false;
    while (value.next(field, wire)) {
      if (field == 1 && wire == kBytes) {
        s.tag = value.bytes();
      } else if (field == 2 && wire == kFixed32) {
        const auto bits = static_cast<uint32_t>(value.fixed(4));
        std::memcpy(&s.value, &bits, 4);
        scalar = true;
      } else {
        value.skip(wire);
      }
    }
    if (scalar) out.push_back(std::move(s));
  }
}

// Appends the scalars of one Event; step and wall_time may come after the summary.
void read_event(Fields event, std::vector<ScalarEvent>& out) {
  const size_t first = out.size();
  int64_t step = 0;
  double wall_time = 0;
  uint64_t field;
  int wire;
  while (event.next(field, wire)) {
    if (field == 1 && wire == kFixed64) {
      const uint64_t bits = event.fixed(8);
      std::memcpy(&wall_time, &bits, 8);
    } else if (field == 2 && wire == kVarint) {
      step = static_cast<int64_t>(event.varint());
    } else if (field == 5 && wire == kBytes) {
      read_summary(event.message(), out);
    } else {
      event.skip(wire);
    }
  }
  for (size_t i = first; i < out.size(); ++i) out[i].step = step, out[i].wall_time = wall_time;
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

}  // namespace

SummaryWriter::SummaryWriter(const std::string& log_dir, const std::string& filename_suffix) {
  std::error_code ec;
  std::filesystem::create_directories(log_dir, ec);
  if (ec) TC_FAIL("io", "SummaryWriter ", log_dir, ": ", ec.message());
  if (!std::filesystem::is_directory(log_dir, ec)) TC_FAIL("io", "SummaryWriter ", log_dir, ": not a directory");
  path_ = (std::filesystem::path(log_dir) / event_file_name(filename_suffix)).string();
  file_ = std::fopen(path_.c_str(), "wbx");  // x: never truncate another writer's file
  if (!file_) fail(errno);
  std::string e = event_head(now(), 0);
  put_bytes(e, 3, "brain.Event:2");  // TensorBoard reads a file only after this record
  write_record(e);
}

SummaryWriter::~SummaryWriter() {
  if (file_) std::fclose(file_);
}

void SummaryWriter::add_scalar(const std::string& tag, double value, int64_t step, double wall_time) {
  std::string v;
  put_bytes(v, 1, tag);
  const auto f = static_cast<float>(value);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  put_key(v, 2, kFixed32);
  put_le(v, bits, 4);
  std::string summary;
  put_bytes(summary, 1, v);
  std::string e = event_head(wall_time < 0 ? now() : wall_time, step);
  put_bytes(e, 5, summary);
  write_record(e);
}

void SummaryWriter::flush() {
  if (std::fflush(file_) != 0) fail(errno);
}

void SummaryWriter::write_record(const std::string& event) {
  std::string head;
  put_le(head, event.size(), 8);
  put_le(head, mask_crc32c(crc32c(0, head.data(), 8)), 4);
  std::string tail;
  put_le(tail, mask_crc32c(crc32c(0, event.data(), event.size())), 4);
  errno = 0;
  if (std::fwrite(head.data(), 1, head.size(), file_) != head.size() ||
      std::fwrite(event.data(), 1, event.size(), file_) != event.size() ||
      std::fwrite(tail.data(), 1, tail.size(), file_) != tail.size())
    fail(errno);
}

void SummaryWriter::fail(int err) const {
  TC_FAIL("io", "SummaryWriter ", path_, ": ", std::strerror(err ? err : EIO));
}

std::vector<ScalarEvent> read_scalars(const std::string& path) {
  const int fd = open_regular_file(path, "io", "pass a TensorBoard event file (events.out.tfevents.*)");
  struct stat st {};
  ::fstat(fd, &st);
  const std::unique_ptr<std::FILE, FileCloser> file(::fdopen(fd, "rb"));
  if (!file) {
    const int err = errno;
    ::close(fd);
    TC_FAIL("io", "cannot read ", path, ": ", std::strerror(err));
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  std::vector<ScalarEvent> out;
  std::string data;
  for (uint64_t at = 0;; at += 12 + data.size()) {
    unsigned char head[12];
    const size_t got = std::fread(head, 1, sizeof head, file.get());
    if (std::ferror(file.get())) damaged(path, at, std::strerror(errno));
    if (got == 0) return out;  // the end falls between records
    if (got < sizeof head) damaged(path, at, "truncated header (", got, " of 12 bytes)");
    const uint64_t len = get_le(head, 8);
    if (mask_crc32c(crc32c(0, head, 8)) != get_le(head + 8, 4)) damaged(path, at, "length CRC mismatch");
    if (len > kMaxRecord) damaged(path, at, "length ", len, " exceeds 64 MiB");
    // Checked before allocating, so that a length a cut-short file cannot hold costs nothing.
    if (at + 12 + len + 4 > size) damaged(path, at, "truncated (", len, " data bytes and a CRC announced)");
    data.resize(len + 4);
    if (std::fread(data.data(), 1, data.size(), file.get()) != data.size())
      damaged(path, at, std::ferror(file.get()) ? std::strerror(errno) : "truncated");
    const auto* bytes = reinterpret_cast<const unsigned char*>(data.data());
    if (mask_crc32c(crc32c(0, bytes, len)) != get_le(bytes + len, 4)) damaged(path, at, "data CRC mismatch");
    read_event(Fields(std::string_view(data).substr(0, len), at + 12, path, at), out);
  }
}

}  // namespace tc::io
