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
  int64_t cached_bytes = 0;           // freed blocks kept for reuse (not counted in current/peak)
  int64_t total_allocated_bytes = 0;  // bytes of all storages allocated since the process started
};

MemoryStats memory_stats(Device device = Device{});
void reset_peak_memory_stats(Device device = Device{});  // peak := current

// Large freed blocks (1 MiB and up) are cached by size and reused, because a training
// step frees and reallocates the same activation sizes every step, and fresh pages from
// the OS cost a page fault and zeroing per 4 KiB. empty_cache() returns them to the OS
// (torch.cuda.empty_cache's counterpart); at most 1 GiB is cached. Sanitizer builds do
// not cache, so use-after-free stays detectable.
void empty_cache(Device device = Device{});

}  // namespace tc
