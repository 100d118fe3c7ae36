// Memory statistics per device. Exact for tensor storage: every byte a tensor's storage
// asks for is counted while it is alive (from_blob memory is the caller's and is not).
#pragma once
#include <cstdint>

#include "tensorcast/device.h"

namespace tc {

struct MemoryStats {
  int64_t current_bytes = 0;     // bytes held by live storages now
  int64_t peak_bytes = 0;        // high-water mark of current_bytes since the last reset
  int64_t allocation_count = 0;  // storages allocated since the process started
  int64_t current_allocations = 0;
};

MemoryStats memory_stats(Device device = Device{});
void reset_peak_memory_stats(Device device = Device{});  // peak := current

}  // namespace tc
