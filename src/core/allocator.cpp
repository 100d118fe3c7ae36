// The CPU allocator behind Storage, with exact statistics (memory_stats) and a cache of
// large freed blocks (see allocator.h). 64-byte aligned so vector loads and oneDNN never
// straddle cache lines.
#include "tensorcast/allocator.h"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "core/tensor_impl.h"
#include "tensorcast/cuda.h"
#if defined(TC_WITH_CUDA)
#include "core/cuda_runtime.h"
#endif

namespace tc {
namespace {

struct Counters {
  std::atomic<int64_t> current{0}, peak{0}, count{0}, live{0}, total{0};
};
Counters& counters(Device d) {
  static Counters cpu, meta, cuda[64];
  if (d.is_cpu()) return cpu;
  if (d.is_meta()) return meta;
  TC_CHECK(d.index >= 0 && d.index < 64, "allocator", "no device ", d);
  return cuda[d.index];
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

BlockCache& cpu_cache() {
  static BlockCache* cache = new BlockCache;  // never destroyed: storages may outlive statics
  return *cache;
}

}  // namespace

Storage::Storage(size_t n, Device dev, bool pinned_host) : nbytes(n), device(dev), owned(true) {
  if (pinned_host) {
    TC_CHECK(dev.is_cpu(), "pin_memory", "pinned memory is host memory, not ", dev);
#if defined(TC_WITH_CUDA)
    data = cuda::detail::allocate_pinned(n);
    pinned = true;
    note_alloc(dev, static_cast<int64_t>(n));
    return;
#else
    TC_FAIL("pin_memory", "pinned memory needs a CUDA device: ", cuda::unavailable_reason());
#endif
  }
  if (dev.is_meta()) {  // no memory: the bytes are counted (the memory a plan needs), never allocated
    note_alloc(dev, static_cast<int64_t>(n));
    return;
  }
  if (dev.is_cuda()) {
#if defined(TC_WITH_CUDA)
    const cudaStream_t s = cuda::detail::raw_stream(dev);
    data = cuda::detail::allocate(n, dev, s);
    stream = s;
    note_alloc(dev, static_cast<int64_t>(n));
    return;
#else
    TC_FAIL("allocator", "device ", dev, " is not available: ", cuda::unavailable_reason());
#endif
  }
  const size_t rounded = block_size(n);
  if (rounded >= kCacheMin) data = cpu_cache().take(rounded);
  if (data == nullptr && rounded != 0) data = std::aligned_alloc(64, rounded);
  if (data == nullptr && rounded != 0) {  // give the cached blocks back and try once more
    cpu_cache().clear();
    data = std::aligned_alloc(64, rounded);
  }
  if (rounded != 0 && data == nullptr) TC_FAIL("allocator", "out of memory allocating ", n, " bytes on ", dev);
  note_alloc(dev, static_cast<int64_t>(n));
}

Storage::Storage(void* d, size_t n, Device dev) : data(d), nbytes(n), device(dev), owned(false) {}

Storage::~Storage() {
  if (!owned) return;
  if (device.is_meta()) {
    note_free(device, static_cast<int64_t>(nbytes));
    return;
  }
#if defined(TC_WITH_CUDA)
  if (device.is_cuda() || pinned) {
    if (pinned)
      cuda::detail::release_pinned(data, nbytes);
    else
      cuda::detail::release(data, device, static_cast<cudaStream_t>(stream));
    note_free(device, static_cast<int64_t>(nbytes));
    return;
  }
#endif
  const size_t rounded = block_size(nbytes);
  if (rounded < kCacheMin || !cpu_cache().give(data, rounded)) std::free(data);
  note_free(device, static_cast<int64_t>(nbytes));
}

MemoryStats memory_stats(Device d) {
  Counters& c = counters(d);
  MemoryStats s{c.current.load(), c.peak.load(), c.count.load(), c.live.load(), 0, c.total.load(), 0};
  if (d.is_cpu()) {
    s.cached_bytes = cpu_cache().bytes();
    s.reserved_bytes = s.current_bytes + s.cached_bytes;
  }
#if defined(TC_WITH_CUDA)
  if (d.is_cuda() && d.index < cuda::device_count()) {
    s.cached_bytes = cuda::detail::cached_bytes(d);
    s.reserved_bytes = cuda::detail::reserved_bytes(d);
  }
#endif
  return s;
}

void empty_cache(Device d) {
  if (d.is_cpu()) cpu_cache().clear();
#if defined(TC_WITH_CUDA)
  if (d.is_cpu()) cuda::detail::empty_pinned_cache();
#endif
#if defined(TC_WITH_CUDA)
  if (d.is_cuda()) cuda::detail::empty_cache(d);
#endif
}

void reset_peak_memory_stats(Device d) {
  Counters& c = counters(d);
  c.peak.store(c.current.load());
}

}  // namespace tc
