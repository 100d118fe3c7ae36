// Internal: a device's memory, as its backend provides it. The allocator behind Storage
// (allocator.cpp) keeps one per backend the build compiles in (core/backend_list.h), finds
// it by the device type, and names no device itself.
#pragma once
#include <cstddef>
#include <cstdint>

#include "core/backend_list.h"
#include "tensorcast/device.h"

namespace tc::detail {

struct DeviceMemory {
  DeviceType type = DeviceType::CPU;
  const char* name = nullptr;  // as backend_names() lists it
  /// n bytes on device d (nullptr where n is 0), or an error naming the device. A
  /// stream-ordered allocator sets *stream to the stream the block belongs to. Left null:
  /// the device has no memory and its bytes are only counted (the meta device).
  void* (*allocate)(size_t n, Device d, void** stream) = nullptr;
  void (*release)(void* p, size_t n, Device d, void* stream) = nullptr;
  /// Freed bytes kept for reuse, and the bytes held from the system or driver (null: none,
  /// and current + cached).
  int64_t (*cached_bytes)(Device d) = nullptr;
  int64_t (*reserved_bytes)(Device d) = nullptr;
  void (*empty_cache)(Device d) = nullptr;  ///< hands the cached bytes back
  /// Page-locked host memory, from which copies to this device run asynchronously, where
  /// the device has it; empty_pinned_cache runs with the host's empty_cache.
  void* (*allocate_pinned)(size_t n) = nullptr;
  void (*release_pinned)(void* p, size_t n) = nullptr;
  void (*empty_pinned_cache)() = nullptr;
};

#define TC_DECLARE_MEMORY(name) DeviceMemory name##_memory();
TC_BACKENDS(TC_DECLARE_MEMORY)
#undef TC_DECLARE_MEMORY

}  // namespace tc::detail
