// The CPU allocator behind Storage, with exact statistics (memory_stats).
// 64-byte aligned so vector loads and oneDNN never straddle cache lines.
#include "tensorcast/allocator.h"

#include <atomic>
#include <cstdlib>
#include <new>

#include "core/tensor_impl.h"

namespace tc {
namespace {

struct Counters {
  std::atomic<int64_t> current{0}, peak{0}, count{0}, live{0};
};
Counters& counters(Device d) {
  static Counters cpu, cuda;
  return d.is_cpu() ? cpu : cuda;
}

void note_alloc(Device d, int64_t bytes) {
  Counters& c = counters(d);
  const int64_t now = c.current.fetch_add(bytes) + bytes;
  int64_t peak = c.peak.load();
  while (now > peak && !c.peak.compare_exchange_weak(peak, now)) {
  }
  c.count.fetch_add(1);
  c.live.fetch_add(1);
}

void note_free(Device d, int64_t bytes) {
  Counters& c = counters(d);
  c.current.fetch_sub(bytes);
  c.live.fetch_sub(1);
}

}  // namespace

Storage::Storage(size_t n, Device dev) : nbytes(n), device(dev), owned(true) {
  TC_CHECK(dev.is_cpu(), "allocator", "device ", dev, " is not available in this build");
  const size_t rounded = (n + 63) / 64 * 64;
  data = rounded == 0 ? nullptr : std::aligned_alloc(64, rounded);
  if (rounded != 0 && data == nullptr)
    TC_FAIL("allocator", "out of memory allocating ", n, " bytes on ", dev);
  note_alloc(dev, static_cast<int64_t>(n));
}

Storage::Storage(void* d, size_t n, Device dev) : data(d), nbytes(n), device(dev), owned(false) {}

Storage::~Storage() {
  if (!owned) return;
  std::free(data);
  note_free(device, static_cast<int64_t>(nbytes));
}

MemoryStats memory_stats(Device d) {
  Counters& c = counters(d);
  return {c.current.load(), c.peak.load(), c.count.load(), c.live.load()};
}

void reset_peak_memory_stats(Device d) {
  Counters& c = counters(d);
  c.peak.store(c.current.load());
}

}  // namespace tc
