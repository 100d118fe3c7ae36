// The memory of the host's two devices: the CPU's (64-byte aligned, so vector loads and
// oneDNN never straddle cache lines, with a cache of large freed blocks; see allocator.h)
// and the meta device's, which has none (its bytes are only counted: what a plan needs).
#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/device_memory.h"
#include "tensorcast/error.h"

namespace tc::detail {
namespace {

constexpr size_t kCacheMin = size_t{1} << 20;  // smaller blocks come from malloc's own bins
constexpr size_t kCacheLimit = size_t{1} << 30;

size_t block_size(size_t n) {  // what is asked of the OS: 64-byte multiples, 4 KiB for large ones
  return n >= kCacheMin ? (n + 4095) / 4096 * 4096 : (n + 63) / 64 * 64;
}

class BlockCache {
 public:
  void* take(size_t size) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find(size);
    if (it == free_.end() || it->second.empty()) return nullptr;
    void* p = it->second.back();
    it->second.pop_back();
    bytes_ -= size;
    return p;
  }
  bool give(void* p, size_t size) {
#if defined(TC_NO_ALLOC_CACHE)
    return false;
#endif
    std::lock_guard<std::mutex> lock(mutex_);
    if (bytes_ + size > kCacheLimit) return false;
    free_[size].push_back(p);
    bytes_ += size;
    return true;
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [size, blocks] : free_)
      for (void* p : blocks) std::free(p);
    free_.clear();
    bytes_ = 0;
  }
  int64_t bytes() {
    std::lock_guard<std::mutex> lock(mutex_);
    return static_cast<int64_t>(bytes_);
  }

 private:
  std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  size_t bytes_ = 0;
};

BlockCache& cache() {
  static BlockCache* c = new BlockCache;  // never destroyed: storages may outlive statics
  return *c;
}

void* cpu_allocate(size_t n, Device d, void** /*stream*/) {
  const size_t rounded = block_size(n);
  if (rounded == 0) return nullptr;
  void* data = rounded >= kCacheMin ? cache().take(rounded) : nullptr;
  if (data == nullptr) data = std::aligned_alloc(64, rounded);
  if (data == nullptr) {  // give the cached blocks back and try once more
    cache().clear();
    data = std::aligned_alloc(64, rounded);
  }
  if (data == nullptr) TC_FAIL("allocator", "out of memory allocating ", n, " bytes on ", d);
  return data;
}

void cpu_release(void* p, size_t n, Device, void*) {
  const size_t rounded = block_size(n);
  if (rounded < kCacheMin || !cache().give(p, rounded)) std::free(p);
}

}  // namespace

DeviceMemory cpu_memory() {
  DeviceMemory m;
  m.type = DeviceType::CPU;
  m.name = "cpu";
  m.allocate = cpu_allocate;
  m.release = cpu_release;
  m.cached_bytes = [](Device) { return cache().bytes(); };
  m.empty_cache = [](Device) { cache().clear(); };
  return m;
}

DeviceMemory meta_memory() {
  DeviceMemory m;
  m.type = DeviceType::Meta;
  m.name = "meta";
  return m;
}

}  // namespace tc::detail
