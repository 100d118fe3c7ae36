// Internal: what the core and the CUDA kernels share about the CUDA runtime. Included only
// where TC_WITH_CUDA is defined (the CUDA build's sources; src/backend/cuda compiles only then).
#pragma once
#include <cuda_runtime_api.h>

#include <memory>

#include "tensorcast/cuda.h"
#include "tensorcast/error.h"

namespace tc {
struct Storage;
}

namespace tc::cuda::detail {

// Throws tc::Error "[op] call failed: <CUDA's message> (<error name>)" and clears a
// non-sticky error so the next call starts clean.
[[noreturn]] void throw_cuda_error(cudaError_t err, const char* op, const char* call);

// The raw current stream of `device` on this thread.
cudaStream_t raw_stream(Device device);

// Makes `device` current on this thread for its scope (c10::cuda::CUDAGuard): kernels and
// copies go to the device of the tensors they touch, whatever the thread's current device.
class DeviceGuard {
 public:
  explicit DeviceGuard(Device device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// Device memory for a Storage: stream-ordered (cudaMallocAsync on the device's pool, kept
// cached: see cuda_allocator.cpp). The block is freed on the stream it was allocated on.
void* allocate(size_t nbytes, Device device, cudaStream_t stream);
void release(void* ptr, Device device, cudaStream_t stream);
int64_t reserved_bytes(Device device);  // held from the driver, in use or cached
int64_t cached_bytes(Device device);    // held but free
void empty_cache(Device device);

// Page-locked host memory for a pinned Storage (Tensor::pin_memory), cached by size: a
// block comes back only when no copy is still using it (see keep_alive_until).
void* allocate_pinned(size_t nbytes);
void release_pinned(void* ptr, size_t nbytes);
void empty_pinned_cache();
// Keeps `storage` (pinned host memory an asynchronous copy reads or writes) alive until the
// work queued on `stream` so far is done, without waiting for it: PyTorch's
// CachingHostAllocator records an event the same way before it reuses a block.
void keep_alive_until(std::shared_ptr<Storage> storage, Device device, cudaStream_t stream);

}  // namespace tc::cuda::detail

// TC_CUDA_CHECK(cudaMemcpyAsync(...), "to") throws with the op and the call's text.
#define TC_CUDA_CHECK(call, op)                                      \
  do {                                                               \
    const cudaError_t tc_cuda_err_ = (call);                         \
    if (tc_cuda_err_ != cudaSuccess) [[unlikely]]                    \
      ::tc::cuda::detail::throw_cuda_error(tc_cuda_err_, op, #call); \
  } while (0)
