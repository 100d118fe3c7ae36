// Internal (nvcc only): errors a kernel finds in its data (an index out of range) and the
// host raises later, without a synchronisation. A kernel that meets a bad value records it
// in a small page-locked host record mapped into the device and carries on safely (its op
// treats the element as absent); the next call of the same family of ops on that device
// takes the record and raises the CPU's error, as PyTorch's device-side asserts surface at
// a later call. Used by embedding (bad indices) and the class losses (bad targets).
#pragma once
#include <cstdint>
#include <optional>

#include "backend/cuda/launch.h"

namespace tc::gpu {

// One record: written by a kernel meeting a bad value (any one of them wins), read and
// reset by the host. `state` is set last, after a system-wide fence.
struct DeferredError {
  volatile int64_t value;  // the bad value
  volatile int64_t bound;  // the bound it broke (rows, classes)
  volatile int32_t code;   // what the recording op wants to remember (which op)
  volatile int32_t state;  // 0: none, 1: value, bound and code hold one
};

// The families of ops with a record of their own on each device.
enum class DeferredSlot : int { kEmbedding = 0, kClassLoss = 1, kCount = 2 };

// The device address of `slot`'s record on `device` (allocated on first use: page-locked,
// mapped and portable, once per device, never freed).
DeferredError* deferred_error_record(Device device, DeferredSlot slot);

struct RecordedError {
  int64_t value = 0, bound = 0;
  int32_t code = 0;
};
// The error an earlier kernel on `device` recorded in `slot`, if any, clearing the record
// (no synchronisation: a kernel still running reports at a later call).
std::optional<RecordedError> take_deferred_error(Device device, DeferredSlot slot);

__device__ __forceinline__ void record_deferred_error(DeferredError* r, int64_t value, int64_t bound, int32_t code) {
  r->value = value;
  r->bound = bound;
  r->code = code;
  __threadfence_system();
  r->state = 1;
}

}  // namespace tc::gpu
