// TensorBoard event files (read_scalars, src/io/summary_writer.cpp): the input is the file.
// What is accepted must survive a SummaryWriter round trip: the same tags, steps, wall
// times and values. Byte mutations rarely keep a CRC right, so the custom mutator fixes
// both CRCs of every record it can frame in three mutations of four; the rest fuzz the
// framing checks themselves.
#include <tensorcast/io/summary_writer.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "io/crc32c.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

void put_crc(uint8_t* at, const uint8_t* bytes, size_t n) {
  const uint32_t crc = tc::io::mask_crc32c(tc::io::crc32c(0, bytes, n));
  for (int i = 0; i < 4; ++i) at[i] = static_cast<uint8_t>(crc >> (8 * i));
}

bool same(const tc::io::ScalarEvent& a, const tc::io::ScalarEvent& b) {
  const bool value = std::isnan(a.value) ? std::isnan(b.value) : a.value == b.value;
  const bool wall = std::isnan(a.wall_time) ? std::isnan(b.wall_time) : a.wall_time == b.wall_time;
  return a.tag == b.tag && a.step == b.step && value && wall;
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned seed) {
  size = LLVMFuzzerMutate(data, size, max_size);
  if (seed % 4 == 0) return size;
  for (size_t at = 0; size - at >= 16;) {
    uint64_t len = 0;
    for (int i = 0; i < 8; ++i) len |= uint64_t{data[at + i]} << (8 * i);
    put_crc(data + at + 8, data + at, 8);
    if (len > size - at - 16) break;
    put_crc(data + at + 12 + len, data + at + 12, len);
    at += 16 + len;
  }
  return size;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_scratch("tfevents", data, size);
  std::vector<tc::io::ScalarEvent> scalars;
  bool accepted = false;
  fuzz::refused_or_ok([&] {
    scalars = tc::io::read_scalars(path);
    accepted = true;
  });
  if (!accepted) return 0;
  const std::string dir = fuzz::scratch_path("tfevents_dir");
  std::string written;
  {
    // A negative wall time means "now" to add_scalar: those are written as 0 and compared so.
    tc::io::SummaryWriter w(dir);
    for (auto& s : scalars) {
      if (s.wall_time < 0) s.wall_time = 0;
      w.add_scalar(s.tag, s.value, s.step, s.wall_time);
    }
    written = w.path();
  }
  std::vector<tc::io::ScalarEvent> again;
  try {
    again = tc::io::read_scalars(written);
  } catch (const tc::Error&) {
    fuzz::broken("read_scalars refused a file SummaryWriter wrote");
  } catch (...) {
    fuzz::escaped();
  }
  std::filesystem::remove_all(dir);
  if (again.size() != scalars.size()) fuzz::broken("write/read round trip changed the number of scalars");
  for (size_t i = 0; i < again.size(); ++i)
    if (!same(again[i], scalars[i])) fuzz::broken("write/read round trip changed a scalar");
  return 0;
}
