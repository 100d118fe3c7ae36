// TensorBoard event files: what SummaryWriter writes is checked by a decoder of this file's
// own (bitwise CRC-32C, hand-rolled protobuf), by read_scalars, and by TensorBoard's own
// EventAccumulator when a Python with tensorboard is at hand; read_scalars refuses damaged
// files cleanly; the SSE4.2 CRC agrees with the table one.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <random>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string_view>

#include "common/testing.h"
#include "io/crc32c.h"
#include "tensorcast/io/summary_writer.h"

namespace fs = std::filesystem;
using tc::testing::read_file_bytes;
using tc::testing::TempDir;
using tc::testing::throws_with;

namespace {

void spit(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

// ---- the independent decoder: nothing here calls the library's CRC or reader

uint32_t crc_bitwise(std::string_view s) {
  uint32_t c = ~0u;
  for (unsigned char b : s) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
  }
  return ~c;
}
uint32_t masked(uint32_t c) { return ((c >> 15) | (c << 17)) + 0xa282ead8u; }

struct Cursor {
  std::string_view s;
  size_t pos = 0;
  bool done() const { return pos == s.size(); }
  void need(size_t n) const {
    if (s.size() - pos < n) throw std::runtime_error("decoder: past the end at " + std::to_string(pos));
  }
  uint64_t le(int n) {
    need(n);
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= uint64_t(uint8_t(s[pos + i])) << (8 * i);
    pos += n;
    return v;
  }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      need(1);
      const uint8_t b = s[pos++];
      v |= uint64_t(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
      if (shift > 63) throw std::runtime_error("decoder: long varint");
    }
  }
  std::string_view bytes() {
    const uint64_t n = varint();
    need(n);
    pos += n;
    return s.substr(pos - n, n);
  }
};

struct Decoded {
  size_t offset = 0;  // of the record
  std::optional<double> wall_time;
  std::optional<int64_t> step;
  std::string file_version;
  std::vector<std::pair<std::string, float>> values;
};

// Strict: any field SummaryWriter has no business writing fails the test.
Decoded decode_event(std::string_view data) {
  Decoded d;
  Cursor c{data};
  while (!c.done()) {
    const uint64_t key = c.varint();
    if (key == (1 << 3 | 1)) {
      const uint64_t bits = c.le(8);
      d.wall_time = std::bit_cast<double>(bits);
    } else if (key == (2 << 3 | 0)) {
      d.step = static_cast<int64_t>(c.varint());
    } else if (key == (3 << 3 | 2)) {
      d.file_version = c.bytes();
    } else if (key == (5 << 3 | 2)) {
      Cursor summary{c.bytes()};
      while (!summary.done()) {
        if (summary.varint() != (1 << 3 | 2)) throw std::runtime_error("decoder: Summary field other than value");
        Cursor value{summary.bytes()};
        std::pair<std::string, float> tv;
        while (!value.done()) {
          const uint64_t k = value.varint();
          if (k == (1 << 3 | 2))
            tv.first = value.bytes();
          else if (k == (2 << 3 | 5))
            tv.second = std::bit_cast<float>(static_cast<uint32_t>(value.le(4)));
          else
            throw std::runtime_error("decoder: Value key " + std::to_string(k));
        }
        d.values.push_back(tv);
      }
    } else {
      throw std::runtime_error("decoder: Event key " + std::to_string(key));
    }
  }
  return d;
}

std::vector<Decoded> decode_file(const std::string& bytes) {
  std::vector<Decoded> out;
  Cursor c{bytes};
  while (!c.done()) {
    const size_t offset = c.pos;
    const std::string_view len_bytes = c.s.substr(c.pos, 8);
    const uint64_t len = c.le(8);
    EXPECT_EQ(c.le(4), masked(crc_bitwise(len_bytes))) << "length CRC of the record at " << offset;
    c.need(len);
    const std::string_view data = c.s.substr(c.pos, len);
    c.pos += len;
    EXPECT_EQ(c.le(4), masked(crc_bitwise(data))) << "data CRC of the record at " << offset;
    out.push_back(decode_event(data));
    out.back().offset = offset;
  }
  return out;
}

// ---- crafting records (for the damage tests), with the test's own CRC

std::string le(uint64_t v, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s += char(v >> (8 * i));
  return s;
}
std::string varint(uint64_t v) {
  std::string s;
  for (; v >= 0x80; v >>= 7) s += char(v | 0x80);
  return s + char(v);
}
std::string key(int field, int wire) { return varint(uint64_t(field) << 3 | wire); }
std::string field_bytes(int field, const std::string& b) { return key(field, 2) + varint(b.size()) + b; }
std::string record(const std::string& data) {
  const std::string len = le(data.size(), 8);
  return len + le(masked(crc_bitwise(len)), 4) + data + le(masked(crc_bitwise(data)), 4);
}

double now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int64_t kBigStep = (int64_t{1} << 32) + 5;

struct Scalar {
  std::string tag;
  double value;
  int64_t step;
  double wall_time;
};
// Steps increase, as TensorBoard expects of one run (it drops "orphaned" later steps).
const std::vector<Scalar> kScalars = {
    {"train/loss", -1.5, 0, 1700000000.25},      {"train/loss", 0.0, 1, 1700000001.5},
    {"amp/loss_scale", kInf, 2, 1700000002.0},   {"amp/loss_scale", -kInf, 3, 1700000003.0},
    {"test/nan", std::nan(""), 4, 1700000004.0}, {"perf/big_step", 0.1, kBigStep, 1700000005.0}};

std::string write_sample(const fs::path& dir) {
  tc::io::SummaryWriter w(dir.string());
  for (const auto& s : kScalars) w.add_scalar(s.tag, s.value, s.step, s.wall_time);
  return w.path();
}

::testing::AssertionResult same_value(float got, double want) {
  if (std::isnan(want) ? std::isnan(got) : got == static_cast<float>(want)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << got << " != " << want;
}

// Runs in a death test's child: exits 0 when SummaryWriter reports the full "disk" in one
// "[io] SummaryWriter PATH: File too large" line.
void write_past_file_size_limit(const std::string& dir) {
  std::signal(SIGXFSZ, SIG_IGN);  // so that write() fails with EFBIG instead
  const rlimit limit{4096, 4096};
  ::setrlimit(RLIMIT_FSIZE, &limit);
  try {
    tc::io::SummaryWriter w(dir);
    for (int i = 0; i < 1000; ++i) w.add_scalar("train/loss", i, i);
    w.flush();
  } catch (const tc::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    std::exit(std::strstr(e.what(), "[io] SummaryWriter ") && std::strstr(e.what(), "File too large") ? 0 : 1);
  }
  std::exit(2);
}

}  // namespace

TEST(Crc32c, CheckValue) {
  const char* s = "123456789";
  EXPECT_EQ(tc::io::crc32c(0, s, 9), 0xE3069283u);
  EXPECT_EQ(tc::io::crc32c_portable(0, s, 9), 0xE3069283u);
  EXPECT_EQ(crc_bitwise(s), 0xE3069283u);
  EXPECT_EQ(tc::io::crc32c(tc::io::crc32c(0, s, 4), s + 4, 5), 0xE3069283u);  // continued
  EXPECT_EQ(tc::io::crc32c(0, s, 0), 0u);
}

TEST(Crc32c, HardwareMatchesTables) {
  std::mt19937 gen(7);
  std::vector<unsigned char> buf(5000);
  for (auto& b : buf) b = static_cast<unsigned char>(gen());
  std::vector<size_t> lengths;
  for (size_t n = 0; n <= 80; ++n) lengths.push_back(n);
  for (size_t n : {127, 128, 129, 1000, 4095, 4096, 4977}) lengths.push_back(n);
  for (size_t offset = 0; offset < 16; ++offset)
    for (size_t n : lengths) {
      if (offset + n > buf.size()) continue;
      const void* p = buf.data() + offset;
      const uint32_t table = tc::io::crc32c_portable(0, p, n);
      ASSERT_EQ(tc::io::crc32c(0, p, n), table) << "offset " << offset << ", length " << n;
      ASSERT_EQ(tc::io::crc32c(0x12345678u, p, n), tc::io::crc32c_portable(0x12345678u, p, n));
      if (n < 200) ASSERT_EQ(crc_bitwise({reinterpret_cast<const char*>(p), n}), table);
    }
}

TEST(SummaryWriter, IndependentDecoderReadsEveryRecord) {
  TempDir dir("summary");
  const double before = now();
  const std::string path = write_sample(dir.path / "run");  // the directory is created
  const double after = now();
  const std::string name = fs::path(path).filename().string();
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::regex pattern(R"(events\.out\.tfevents\.\d{10}\.)" +
                           std::regex_replace(host, std::regex(R"(\.)"), R"(\.)") + "\\." + std::to_string(::getpid()) +
                           R"(\.\d+)");
  EXPECT_TRUE(std::regex_match(name, pattern)) << name;

  const auto events = decode_file(read_file_bytes(path));
  ASSERT_EQ(events.size(), kScalars.size() + 1);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_EQ(events[0].step.value_or(-1), 0);
  ASSERT_TRUE(events[0].wall_time);
  EXPECT_GE(*events[0].wall_time, before - 1);
  EXPECT_LE(*events[0].wall_time, after + 1);
  EXPECT_TRUE(events[0].values.empty());
  for (size_t i = 0; i < kScalars.size(); ++i) {
    const auto& e = events[i + 1];
    SCOPED_TRACE(kScalars[i].tag + " at step " + std::to_string(kScalars[i].step));
    EXPECT_EQ(e.step.value_or(-1), kScalars[i].step);
    EXPECT_EQ(e.wall_time.value_or(-1), kScalars[i].wall_time);
    EXPECT_TRUE(e.file_version.empty());
    ASSERT_EQ(e.values.size(), 1u);
    EXPECT_EQ(e.values[0].first, kScalars[i].tag);
    EXPECT_TRUE(same_value(e.values[0].second, kScalars[i].value));
  }
}

TEST(SummaryWriter, DefaultWallTimeNegativeStepFlushAndSuffix) {
  TempDir dir("summary");
  tc::io::SummaryWriter w(dir.path.string(), ".v2");
  EXPECT_TRUE(w.path().ends_with(".v2")) << w.path();
  const double before = now();
  w.add_scalar("a", 3.0, -7);
  w.flush();  // the record is in the file while the writer is open
  const auto events = decode_file(read_file_bytes(w.path()));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].step.value_or(0), -7);
  EXPECT_GE(events[1].wall_time.value_or(0), before - 1);
  EXPECT_LE(events[1].wall_time.value_or(0), now() + 1);
  tc::io::SummaryWriter other(dir.path.string(), ".v2");  // same second, same process: another file
  EXPECT_NE(other.path(), w.path());
}

TEST(SummaryWriter, ReadScalarsRoundTrip) {
  TempDir dir("summary");
  const auto got = tc::io::read_scalars(write_sample(dir.path));
  ASSERT_EQ(got.size(), kScalars.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].tag, kScalars[i].tag);
    EXPECT_EQ(got[i].step, kScalars[i].step);
    EXPECT_EQ(got[i].wall_time, kScalars[i].wall_time);
    EXPECT_TRUE(same_value(got[i].value, kScalars[i].value)) << kScalars[i].tag;
  }
}

TEST(SummaryWriter, UnusableDirectoryOrFailedWriteThrows) {
  TempDir dir("summary");
  spit((dir.path / "file").string(), "x");
  EXPECT_TRUE(throws_with([&] { tc::io::SummaryWriter w((dir.path / "file").string()); },
                          {"[io] SummaryWriter ", (dir.path / "file").string()}));
  EXPECT_TRUE(throws_with([&] { tc::io::SummaryWriter w((dir.path / "file" / "sub").string()); },
                          {"[io] SummaryWriter ", "Not a directory"}));
  // A full disk, as the file-size limit makes one: the error names the file and errno.
  EXPECT_EXIT(write_past_file_size_limit(dir.path.string()), ::testing::ExitedWithCode(0), "events.out.tfevents");
}

TEST(ReadScalars, TruncatedAtEveryByte) {
  TempDir dir("summary");
  const std::string path = write_sample(dir.path);
  const std::string bytes = read_file_bytes(path);
  const auto events = decode_file(bytes);
  const std::string cut = (dir.path / "cut").string();
  for (size_t n = 0; n < bytes.size(); ++n) {
    spit(cut, bytes.substr(0, n));
    size_t whole = 0;  // records that end at or before n
    bool boundary = n == 0;
    for (size_t r = 1; r <= events.size(); ++r) {
      const size_t end = r < events.size() ? events[r].offset : bytes.size();
      if (end <= n) whole = r;
      boundary |= end == n;
    }
    if (boundary) {
      const auto got = tc::io::read_scalars(cut);
      EXPECT_EQ(got.size(), whole > 0 ? whole - 1 : 0) << "cut at " << n;
    } else {
      EXPECT_TRUE(
          throws_with([&] { tc::io::read_scalars(cut); },
                      {"[io] " + cut + ": record at byte " + std::to_string(events[whole].offset), "truncated"}))
          << "cut at " << n;
    }
  }
}

TEST(ReadScalars, FlippedByteNamesTheRecord) {
  TempDir dir("summary");
  const std::string path = write_sample(dir.path);
  const std::string bytes = read_file_bytes(path);
  const size_t at = decode_file(bytes)[3].offset;
  std::string data_flip = bytes, length_flip = bytes;
  data_flip[at + 12 + 5] ^= 0x20;
  length_flip[at + 1] ^= 0x01;
  spit(path, data_flip);
  EXPECT_TRUE(throws_with([&] { tc::io::read_scalars(path); },
                          {path + ": record at byte " + std::to_string(at), "data CRC mismatch"}));
  spit(path, length_flip);
  EXPECT_TRUE(throws_with([&] { tc::io::read_scalars(path); },
                          {path + ": record at byte " + std::to_string(at), "length CRC mismatch"}));
}

TEST(ReadScalars, HostileRecordsAreRefused) {
  TempDir dir("summary");
  const std::string path = (dir.path / "events").string();
  const std::string ok = record(key(2, 0) + varint(1));  // an Event holding only step 1
  const std::string absurd_len = le((uint64_t{64} << 20) + 1, 8);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {record("\x10"), "varint runs past the end of its message (at byte 31)"},
      {record("\x10" + std::string(9, '\xff') + "\x02"), "varint longer than 64 bits"},
      {record(key(2, 0) + std::string(9, '\x80') + "\x80\x01"), "varint longer than 64 bits"},
      {record("\x2a\x05"
              "ab"),
       "length-delimited field runs past the end"},
      {record(std::string("\x00", 1)), "field number 0"},
      {record(key(3, 3)), "wire type 3"},
      {record(key(7, 7)), "wire type 7"},
      // a Value longer than its Summary, though not than the record
      {record("\x2a\x03\x0a\x05x" + key(2, 0) + "\x01" + key(2, 0) + "\x01"), "runs past the end"},
      {absurd_len + le(masked(crc_bitwise(absurd_len)), 4), "length 67108865 exceeds 64 MiB"},
      {le(1000, 8) + le(masked(crc_bitwise(le(1000, 8))), 4) + "abc", "truncated (1000 data bytes"},
      {"\x01" + std::string(7, '\0') + le(masked(crc_bitwise(std::string("\x01") + std::string(7, '\0'))), 4) + "x",
       "truncated"},
      {std::string(5, '\0'), "truncated header (5 of 12 bytes)"},
  };
  for (const auto& [bytes, message] : cases) {
    spit(path, ok + bytes);  // the damage is in the second record
    EXPECT_TRUE(throws_with([&] { tc::io::read_scalars(path); },
                            {"[io] " + path + ": record at byte " + std::to_string(ok.size()) + ": ", message}));
  }
  EXPECT_TRUE(throws_with([&] { tc::io::read_scalars((dir.path / "missing").string()); }, {"cannot open"}));
  EXPECT_TRUE(throws_with([&] { tc::io::read_scalars(dir.path.string()); }, {"it is a directory"}));
  spit(path, record(key(2, 0) + std::string(9, '\x80') + "\x01"));  // 2^63 in ten bytes is valid
  EXPECT_EQ(tc::io::read_scalars(path).size(), 0u);
}

TEST(ReadScalars, SkipsUnknownFieldsAndOtherValues) {
  TempDir dir("summary");
  const std::string path = (dir.path / "events").string();
  const std::string scalar = field_bytes(7, "node") + field_bytes(1, "a") + key(2, 5) + le(0x40200000, 4) +  // 2.5
                             field_bytes(9, "metadata");
  const std::string image = field_bytes(1, "img") + field_bytes(4, "png bytes");
  const std::string event = key(1, 1) + le(std::bit_cast<uint64_t>(12.5), 8) + key(1, 0) + varint(3) +  // wrong type
                            key(4, 0) + varint(99) + key(9, 1) + le(1, 8) + field_bytes(10, "x") + key(11, 5) +
                            le(1, 4) + field_bytes(5, field_bytes(1, scalar) + field_bytes(1, image)) +
                            field_bytes(5, field_bytes(1, field_bytes(1, "b") + key(2, 5) + le(0xff800000, 4))) +
                            key(2, 0) + varint(42);  // the step comes after the summaries
  spit(path, record(field_bytes(3, "brain.Event:2")) + record(event));
  const auto got = tc::io::read_scalars(path);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].tag, "a");
  EXPECT_EQ(got[0].value, 2.5f);
  EXPECT_EQ(got[1].tag, "b");
  EXPECT_EQ(got[1].value, -std::numeric_limits<float>::infinity());
  for (const auto& s : got) {
    EXPECT_EQ(s.step, 42);
    EXPECT_EQ(s.wall_time, 12.5);
  }
}

// TensorBoard's own reader. Needs a Python with tensorboard: TC_TENSORBOARD_PYTHON, else python3.
TEST(SummaryWriter, TensorBoardEventAccumulatorReadsTheFile) {
  const char* env = std::getenv("TC_TENSORBOARD_PYTHON");
  const std::string python = env && *env ? env : "python3";
  if (std::system(("'" + python + "' -c 'import tensorboard' >/dev/null 2>&1").c_str()) != 0)
    GTEST_SKIP() << "tensorboard is not installed for " << python
                 << " (pip install tensorboard, or point TC_TENSORBOARD_PYTHON at a Python that has it)";
  TempDir dir("summary");
  const std::string path = write_sample(dir.path);
  const std::string script =
      "import sys\n"
      "from tensorboard.backend.event_processing.event_accumulator import EventAccumulator\n"
      "ea = EventAccumulator(sys.argv[1], size_guidance={\"scalars\": 0})\n"
      "ea.Reload()\n"
      "for tag in ea.Tags()[\"scalars\"]:\n"
      "    for e in ea.Scalars(tag):\n"
      "        print(\"S\", tag, e.step, repr(e.wall_time), repr(e.value))\n";
  spit((dir.path / "read.py").string(), script);
  std::FILE* p =
      ::popen(("'" + python + "' '" + (dir.path / "read.py").string() + "' '" + path + "' 2>&1").c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  ASSERT_EQ(::pclose(p), 0) << out;
  std::vector<Scalar> got;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (!line.starts_with("S ")) continue;
    std::istringstream f(line.substr(2));
    Scalar s;
    std::string wall, value;
    f >> s.tag >> s.step >> wall >> value;
    s.wall_time = std::strtod(wall.c_str(), nullptr);
    s.value = std::strtod(value.c_str(), nullptr);  // repr: "nan", "inf", "-inf" parse too
    got.push_back(s);
  }
  ASSERT_EQ(got.size(), kScalars.size()) << out;
  for (const auto& want : kScalars) {
    const auto it = std::find_if(got.begin(), got.end(), [&](const Scalar& s) { return s.step == want.step; });
    ASSERT_NE(it, got.end()) << "step " << want.step << " missing in:\n" << out;
    EXPECT_EQ(it->tag, want.tag);
    EXPECT_EQ(it->wall_time, want.wall_time);
    EXPECT_TRUE(same_value(static_cast<float>(it->value), want.value)) << want.tag;
  }
}
