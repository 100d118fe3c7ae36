// The allocator behind Storage: each device's memory comes from its backend
// (core/device_memory.h), found by the device type; this file counts it (memory_stats,
// exact for every storage) and names no device.
#include "tensorcast/allocator.h"

#include <array>
#include <atomic>
#include <string>

#include "core/device_memory.h"
#include "core/tensor_impl.h"

namespace tc {
namespace {

using detail::DeviceMemory;

constexpr size_t kMaxDeviceTypes = 8, kMaxIndex = 64;

// The memory of each backend of this build, by device type (type unset: no backend).
struct MemoryTable {
  std::array<DeviceMemory, kMaxDeviceTypes> by_type{};
  std::array<bool, kMaxDeviceTypes> present{};
  std::string names;  // "cpu, meta", for errors
};

const MemoryTable& memory_table() {
  static const MemoryTable* const table = [] {
    auto* t = new MemoryTable;  // never destroyed: storages may outlive statics
    const auto add = [&](const DeviceMemory& m) {
      const auto i = static_cast<size_t>(m.type);
      t->by_type.at(i) = m;
      t->present.at(i) = true;
      t->names += std::string(t->names.empty() ? "" : ", ") + m.name;
    };
#define TC_ADD_MEMORY(name) add(detail::name##_memory());
    TC_BACKENDS(TC_ADD_MEMORY)
#undef TC_ADD_MEMORY
    return t;
  }();
  return *table;
}

const DeviceMemory* find_memory(DeviceType type) {
  const MemoryTable& t = memory_table();
  const auto i = static_cast<size_t>(type);
  return i < kMaxDeviceTypes && t.present[i] ? &t.by_type[i] : nullptr;
}

const DeviceMemory& memory_of(Device d) {
  const DeviceMemory* m = find_memory(d.type);
  TC_CHECK(m != nullptr, "allocator", "device ", d,
           " is not available: this build has no backend for it (backends: ", memory_table().names, ")");
  return *m;
}

// The backend that pins host memory for its copies, if the build has one.
const DeviceMemory* pinning_memory() {
  for (size_t i = 0; i < kMaxDeviceTypes; ++i)
    if (memory_table().present[i] && memory_table().by_type[i].allocate_pinned) return &memory_table().by_type[i];
  return nullptr;
}

struct Counters {
  std::atomic<int64_t> current{0}, peak{0}, count{0}, live{0}, total{0};
};
Counters& counters(Device d) {
  static std::array<std::array<Counters, kMaxIndex>, kMaxDeviceTypes> all;
  const auto type = static_cast<size_t>(d.type);
  TC_CHECK(type < kMaxDeviceTypes && d.index >= 0 && static_cast<size_t>(d.index) < kMaxIndex, "allocator",
           "no device ", d);
  return all[type][static_cast<size_t>(d.index)];
}

void note_alloc(Device d, int64_t bytes) {
  Counters& c = counters(d);
  const int64_t now = c.current.fetch_add(bytes) + bytes;
  int64_t peak = c.peak.load();
  while (now > peak && !c.peak.compare_exchange_weak(peak, now)) {
  }
  c.count.fetch_add(1);
  c.live.fetch_add(1);
  c.total.fetch_add(bytes);
}

void note_free(Device d, int64_t bytes) {
  Counters& c = counters(d);
  c.current.fetch_sub(bytes);
  c.live.fetch_sub(1);
}

}  // namespace

Storage::Storage(size_t n, Device dev, bool pinned_host) : nbytes(n), device(dev), owned(true) {
  if (pinned_host) {
    TC_CHECK(dev.is_cpu(), "pin_memory", "pinned memory is host memory, not ", dev);
    const DeviceMemory* m = pinning_memory();
    TC_CHECK(m != nullptr, "pin_memory",
             "pinned memory needs a GPU backend, and this build has none (backends: ", memory_table().names, ")");
    data = m->allocate_pinned(n);
    pinned = true;
  } else {
    const DeviceMemory& m = memory_of(dev);
    if (m.allocate) data = m.allocate(n, dev, &stream);  // else only counted: no memory (the meta device)
  }
  note_alloc(dev, static_cast<int64_t>(n));
}

Storage::Storage(void* d, size_t n, Device dev) : data(d), nbytes(n), device(dev), owned(false) {}

Storage::~Storage() {
  if (!owned) return;
  if (pinned) {
    pinning_memory()->release_pinned(data, nbytes);
  } else {
    const DeviceMemory& m = *find_memory(device.type);  // it allocated this storage
    if (m.release) m.release(data, nbytes, device, stream);
  }
  note_free(device, static_cast<int64_t>(nbytes));
}

MemoryStats memory_stats(Device d) {
  Counters& c = counters(d);
  MemoryStats s{c.current.load(), c.peak.load(), c.count.load(), c.live.load(), 0, c.total.load(), 0};
  if (const DeviceMemory* m = find_memory(d.type)) {
    if (m->cached_bytes) s.cached_bytes = m->cached_bytes(d);
    s.reserved_bytes = m->reserved_bytes ? m->reserved_bytes(d) : s.current_bytes + s.cached_bytes;
  }
  return s;
}

void empty_cache(Device d) {
  if (const DeviceMemory* m = find_memory(d.type); m && m->empty_cache) m->empty_cache(d);
  // The host's cache includes the page-locked blocks a GPU backend keeps.
  if (const DeviceMemory* p = pinning_memory(); p && d.is_cpu()) p->empty_pinned_cache();
}

void reset_peak_memory_stats(Device d) {
  Counters& c = counters(d);
  c.peak.store(c.current.load());
}

}  // namespace tc
