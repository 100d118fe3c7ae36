/// \file
/// Memory statistics per device (the CPU, or each CUDA device). Exact for tensor storage: every byte a tensor's storage
/// asks for is counted while it is alive (from_blob memory is the caller's and is not).
#pragma once
#include <cstdint>

#include "tensorcast/device.h"

namespace tc {

/// Tensor memory held on a device (torch.cuda.memory_stats' counters).
struct MemoryStats {
  int64_t current_bytes = 0;          ///< bytes held by live storages now
  int64_t peak_bytes = 0;             ///< high-water mark of current_bytes since the last reset
  int64_t allocation_count = 0;       ///< storages allocated since the process started
  int64_t current_allocations = 0;    ///< storages alive now
  int64_t cached_bytes = 0;           ///< freed blocks kept for reuse (not counted in current/peak)
  int64_t total_allocated_bytes = 0;  ///< bytes of all storages allocated since the process started
  /// Bytes held from the system or driver, in use or cached (torch.cuda.memory_reserved). On
  /// CUDA blocks are rounded up by the driver's pool, so this can exceed current + cached.
  int64_t reserved_bytes = 0;
};

/// The counters of `device` (default the CPU).
MemoryStats memory_stats(Device device = Device{});
void reset_peak_memory_stats(Device device = Device{});  ///< peak := current

/// Freed memory is cached and reused, because a training step frees and reallocates the
/// same activation sizes every step. CPU: blocks of 1 MiB and up, by size (fresh pages from
/// the OS cost a page fault and zeroing per 4 KiB), at most 1 GiB; sanitizer builds do not
/// cache, so use-after-free stays detectable. CUDA: the device's stream-ordered pool
/// (cudaMallocAsync) keeps everything freed. empty_cache() returns the cached memory to the
/// OS or the driver (torch.cuda.empty_cache's counterpart; on CUDA it waits for the device).
void empty_cache(Device device = Device{});

}  // namespace tc
