// The deferred error records of deferred_error.cuh: one page-locked, mapped block per
// device holding a record per slot.
#include <mutex>

#include "backend/cuda/deferred_error.cuh"

namespace tc::gpu {
namespace {

constexpr int kSlots = static_cast<int>(DeferredSlot::kCount);

// The records of one device: their host address and their device address.
struct Records {
  DeferredError* host = nullptr;
  DeferredError* device = nullptr;
};

Records records_of(Device device) {
  static std::mutex mutex;
  static Records records[64];
  TC_CHECK(device.is_cuda() && device.index >= 0 && device.index < 64, "cuda", "no deferred error record for ", device);
  std::lock_guard<std::mutex> lock(mutex);
  Records& r = records[device.index];
  if (r.host == nullptr) {
    void* host = nullptr;
    void* dev = nullptr;
    DeviceGuard guard(device);
    // Portable and mapped: usable from every device. Allocated once per device, never freed.
    TC_CUDA_CHECK(cudaHostAlloc(&host, kSlots * sizeof(DeferredError), cudaHostAllocMapped | cudaHostAllocPortable),
                  "cuda");
    TC_CUDA_CHECK(cudaHostGetDevicePointer(&dev, host, 0), "cuda");
    r.host = static_cast<DeferredError*>(host);
    for (int s = 0; s < kSlots; ++s) {
      r.host[s].value = 0;
      r.host[s].bound = 0;
      r.host[s].code = 0;
      r.host[s].state = 0;
    }
    r.device = static_cast<DeferredError*>(dev);
  }
  return r;
}

}  // namespace

DeferredError* deferred_error_record(Device device, DeferredSlot slot) {
  return records_of(device).device + static_cast<int>(slot);
}

std::optional<RecordedError> take_deferred_error(Device device, DeferredSlot slot) {
  DeferredError* r = records_of(device).host + static_cast<int>(slot);
  if (r->state == 0) [[likely]]
    return std::nullopt;
  const RecordedError e{r->value, r->bound, r->code};
  r->state = 0;
  return e;
}

}  // namespace tc::gpu
