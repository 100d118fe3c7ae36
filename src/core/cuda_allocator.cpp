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

#include "core/cuda_runtime.h"

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

}  // namespace tc::cuda::detail
#endif
