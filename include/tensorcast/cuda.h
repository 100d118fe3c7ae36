/// \file
/// tc::cuda: the CUDA devices, their streams and their memory (libtorch's torch::cuda and
/// c10::cuda, same names where there is one). Every function exists in every build: in a
/// CPU-only build, or on a machine whose driver sees no GPU, is_available() is false,
/// device_count() is 0, unavailable_reason() says why, and the rest throw tc::Error.
#pragma once
#include <cstdint>
#include <string>

#include "tensorcast/device.h"

namespace tc::cuda {

/// True when a CUDA build finds a usable GPU (unavailable_reason() says why not).
bool is_available();
/// The number of usable GPUs (0 without CUDA).
int device_count();
/// Why is_available() is false ("" when it is true): "this build has no CUDA backend
/// (configure with -DTC_CUDA=ON)", or the driver's answer to cudaGetDeviceCount.
std::string unavailable_reason();

/// The calling thread's current device (cudaSetDevice's), 0 until set.
int current_device();
/// Makes `index` this thread's current GPU.
void set_device(int index);
/// Waits for all work on `index` (-1: the current device) to finish.
void synchronize(int index = -1);

/// What get_device_properties reports of a GPU.
struct DeviceProperties {
  std::string name;  ///< e.g. "NVIDIA H100 80GB HBM3"
  /// \name Compute capability
  /// @{

  /// The compute capability, major.minor (9.0 for Hopper).
  int major = 0, minor = 0;
  /// @}
  int64_t total_memory = 0;       ///< bytes
  int multi_processor_count = 0;  ///< streaming multiprocessors
};
/// The properties of GPU `index` (-1: the current one).
DeviceProperties get_device_properties(int index = -1);

/// A CUDA stream on one device (c10::cuda::CUDAStream). Work a thread issues goes to its
/// current stream for that device: the device's default (legacy) stream until a StreamGuard
/// or set_current_stream says otherwise.
class Stream {
 public:
  Stream() = default;
  /// Wraps a cudaStream_t of `device`.
  Stream(void* handle, Device device) : handle_(handle), device_(device) {}
  void* handle() const { return handle_; }  ///< a cudaStream_t (nullptr: the default stream)
  /// The GPU the stream belongs to.
  Device device() const { return device_; }
  /// Waits until all work queued on the stream has finished.
  void synchronize() const;
  bool query() const;  ///< true when all work queued on it has finished
  /// The same stream of the same device.
  friend bool operator==(const Stream& a, const Stream& b) { return a.handle_ == b.handle_ && a.device_ == b.device_; }

 private:
  void* handle_ = nullptr;
  Device device_{kCUDA, 0};
};

/// The default (null) stream of GPU `index` (-1: the current one).
Stream default_stream(int index = -1);
/// This thread's current stream on GPU `index` (-1: the current one): what tensorcast's kernels are queued on.
Stream current_stream(int index = -1);
void set_current_stream(const Stream& stream);  ///< for the stream's device, on this thread
/// A stream from a per-device pool (created on first use, never destroyed), for work that
/// should overlap the default stream's: copies ahead of compute, collectives.
Stream stream_from_pool(int index = -1);

/// A CUDA event (at::cuda::CUDAEvent, without timing): record() marks the work queued on a
/// stream so far; query() says whether it has all run, synchronize() waits for it (only).
/// Created on the first record(); an event never recorded counts as done. Move-only.
class Event {
 public:
  Event() = default;
  ~Event();
  /// Takes over o's event.
  Event(Event&& o) noexcept;
  /// Takes over o's event, releasing this one's.
  Event& operator=(Event&& o) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  /// Records the event on `stream` (created on first use).
  void record(const Stream& stream);
  /// True when the recorded work has finished (or nothing was recorded).
  bool query() const;
  /// Waits until the recorded work has finished.
  void synchronize() const;

 private:
  void* handle_ = nullptr;  ///< a cudaEvent_t
  Device device_{kCUDA, 0};
};

/// Makes `stream` current on this thread for its scope, then restores the previous one.
class StreamGuard {
 public:
  /// Makes `stream` current for its device until the guard is destroyed.
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream previous_;
};

}  // namespace tc::cuda
