// Device memory for tensors: CUDA's stream-ordered allocator (cudaMallocAsync) on each
// device's default memory pool, told to keep what is freed (release threshold: unlimited).
// That is PyTorch's caching allocator in the driver (PyTorch offers it as
// backend:cudaMallocAsync): a training step frees and reallocates the same sizes every
// step, and a cached block comes back without a cudaMalloc, which can synchronize the device.
// A block is freed on the stream it was allocated on, so a kernel still queued there that
// reads it finishes first; a tensor used on another stream must be kept alive by the user
// until that stream is done (PyTorch's record_stream, which tensorcast does not have yet).
#if defined(TC_WITH_CUDA)
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/cuda_runtime.h"
#include "core/device_memory.h"
#include "core/tensor_impl.h"

namespace tc::cuda::detail {
namespace {

cudaMemPool_t pool(Device device) {
  static std::mutex mutex;
  static cudaMemPool_t pools[64] = {};
  std::lock_guard<std::mutex> lock(mutex);
  cudaMemPool_t& p = pools[device.index];
  if (p == nullptr) {
    TC_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&p, device.index), "allocator");
    uint64_t keep_all = UINT64_MAX;
    TC_CUDA_CHECK(cudaMemPoolSetAttribute(p, cudaMemPoolAttrReleaseThreshold, &keep_all), "allocator");
  }
  return p;
}

int64_t pool_attribute(Device device, cudaMemPoolAttr attr) {
  uint64_t value = 0;
  TC_CUDA_CHECK(cudaMemPoolGetAttribute(pool(device), attr, &value), "memory_stats");
  return static_cast<int64_t>(value);
}

}  // namespace

void* allocate(size_t nbytes, Device device, cudaStream_t stream) {
  TC_CHECK(device.index >= 0 && device.index < device_count(), "allocator", "device ", device,
           " is not available: ", device_count() == 0 ? unavailable_reason() : "no such device");
  if (nbytes == 0) return nullptr;
  DeviceGuard guard(device);
  (void)pool(device);
  void* p = nullptr;
  cudaError_t err = cudaMallocAsync(&p, nbytes, stream);
  if (err == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    // What the pool holds free may be in pieces too small: hand it back and try once more.
    (void)cudaStreamSynchronize(stream);
    (void)cudaMemPoolTrimTo(pool(device), 0);
    err = cudaMallocAsync(&p, nbytes, stream);
  }
  if (err == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    size_t free_bytes = 0, total = 0;
    (void)cudaMemGetInfo(&free_bytes, &total);
    TC_FAIL("allocator", "CUDA out of memory allocating ", nbytes, " bytes on ", device, " (", free_bytes,
            " bytes free of ", total, "; this process holds ", reserved_bytes(device),
            " bytes). Use a smaller batch, or free tensors and call tc::empty_cache(device)");
  }
  TC_CUDA_CHECK(err, "allocator");
  return p;
}

void release(void* ptr, Device device, cudaStream_t stream) {
  if (ptr == nullptr) return;
  // Called from Storage's destructor, so nothing here throws: an error means the context
  // is already lost (or the runtime is unloading at exit), and the memory with it.
  int previous = -1;
  (void)cudaGetDevice(&previous);
  if (previous != device.index) (void)cudaSetDevice(device.index);
  (void)cudaFreeAsync(ptr, stream);
  if (previous != device.index && previous >= 0) (void)cudaSetDevice(previous);
}

int64_t reserved_bytes(Device device) {
  DeviceGuard guard(device);
  return pool_attribute(device, cudaMemPoolAttrReservedMemCurrent);
}

int64_t cached_bytes(Device device) {
  DeviceGuard guard(device);
  return pool_attribute(device, cudaMemPoolAttrReservedMemCurrent) -
         pool_attribute(device, cudaMemPoolAttrUsedMemCurrent);
}

void empty_cache(Device device) {
  if (device.index >= device_count()) return;
  DeviceGuard guard(device);
  // Freed blocks become free in the pool only once their streams reach the free.
  TC_CUDA_CHECK(cudaDeviceSynchronize(), "empty_cache");
  TC_CUDA_CHECK(cudaMemPoolTrimTo(pool(device), 0), "empty_cache");
}

// ------------------------------------------------------------------ pinned host memory
// cudaHostAlloc and cudaFreeHost are slow and cudaFreeHost waits for the whole device, so
// freed blocks are kept by size and handed out again. A block an asynchronous copy still
// uses is not free yet: the copy holds its Storage (keep_alive_until) until an event
// recorded after it has passed, checked whenever the cache is used.
namespace {

struct InFlight {
  std::shared_ptr<Storage> storage;
  cudaEvent_t done;
};

struct PinnedCache {
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<void*>> free;
  std::vector<InFlight> in_flight;

  // The storages whose copies have finished, taken out under the lock (they are dropped
  // by the caller after it, since dropping one re-enters release_pinned).
  std::vector<std::shared_ptr<Storage>> take_finished() {
    std::vector<std::shared_ptr<Storage>> done;
    for (size_t i = 0; i < in_flight.size();) {
      if (cudaEventQuery(in_flight[i].done) == cudaErrorNotReady) {
        ++i;
        continue;
      }
      (void)cudaGetLastError();  // an error here belongs to the copy, reported where it was queued
      (void)cudaEventDestroy(in_flight[i].done);
      done.push_back(std::move(in_flight[i].storage));
      in_flight[i] = std::move(in_flight.back());
      in_flight.pop_back();
    }
    return done;
  }
};

PinnedCache& pinned_cache() {
  static PinnedCache* cache = new PinnedCache;  // never destroyed: storages may outlive statics
  return *cache;
}

}  // namespace

void* allocate_pinned(size_t nbytes) {
  if (nbytes == 0) return nullptr;
  PinnedCache& c = pinned_cache();
  std::vector<std::shared_ptr<Storage>> finished;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    finished = c.take_finished();
    auto it = c.free.find(nbytes);
    if (it != c.free.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      return p;  // `finished` is dropped after the lock, returning its blocks
    }
  }
  finished.clear();
  TC_CHECK(device_count() > 0, "pin_memory", "pinned memory needs a CUDA device: ", unavailable_reason());
  void* p = nullptr;
  // Portable: pinned for every device, so a copy to any GPU is asynchronous.
  cudaError_t err = cudaHostAlloc(&p, nbytes, cudaHostAllocPortable);
  if (err == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    empty_pinned_cache();
    err = cudaHostAlloc(&p, nbytes, cudaHostAllocPortable);
  }
  if (err == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    TC_FAIL("pin_memory", "could not page-lock ", nbytes,
            " bytes of host memory (the system's limit on locked "
            "memory, or memory itself, is exhausted); use smaller batches or pin_memory(false)");
  }
  TC_CUDA_CHECK(err, "pin_memory");
  return p;
}

void release_pinned(void* ptr, size_t nbytes) {
  if (ptr == nullptr) return;
  PinnedCache& c = pinned_cache();
  std::lock_guard<std::mutex> lock(c.mutex);
  c.free[nbytes].push_back(ptr);
}

void empty_pinned_cache() {
  PinnedCache& c = pinned_cache();
  std::vector<void*> blocks;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    for (auto& [size, list] : c.free) blocks.insert(blocks.end(), list.begin(), list.end());
    c.free.clear();
  }
  for (void* p : blocks) (void)cudaFreeHost(p);
}

void keep_alive_until(std::shared_ptr<Storage> storage, Device device, cudaStream_t stream) {
  DeviceGuard guard(device);
  cudaEvent_t done = nullptr;
  TC_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "to");
  if (const cudaError_t err = cudaEventRecord(done, stream); err != cudaSuccess) {
    (void)cudaEventDestroy(done);
    throw_cuda_error(err, "to", "cudaEventRecord");
  }
  PinnedCache& c = pinned_cache();
  std::vector<std::shared_ptr<Storage>> finished;
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    finished = c.take_finished();
    c.in_flight.push_back({std::move(storage), done});
  }
}

}  // namespace tc::cuda::detail

namespace tc::detail {

DeviceMemory cuda_memory() {
  DeviceMemory m;
  m.type = DeviceType::CUDA;
  m.name = "cuda";
  m.allocate = [](size_t n, Device d, void** stream) {
    const cudaStream_t s = cuda::detail::raw_stream(d);
    *stream = s;
    return cuda::detail::allocate(n, d, s);
  };
  m.release = [](void* p, size_t, Device d, void* stream) {
    cuda::detail::release(p, d, static_cast<cudaStream_t>(stream));
  };
  // A device the machine does not have holds nothing (memory_stats of cuda:3 on one GPU).
  m.cached_bytes = [](Device d) { return d.index < cuda::device_count() ? cuda::detail::cached_bytes(d) : 0; };
  m.reserved_bytes = [](Device d) { return d.index < cuda::device_count() ? cuda::detail::reserved_bytes(d) : 0; };
  m.empty_cache = cuda::detail::empty_cache;
  m.allocate_pinned = cuda::detail::allocate_pinned;
  m.release_pinned = cuda::detail::release_pinned;
  m.empty_pinned_cache = cuda::detail::empty_pinned_cache;
  return m;
}

}  // namespace tc::detail
#endif
