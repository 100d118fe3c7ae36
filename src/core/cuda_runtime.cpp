// tc::cuda (tensorcast/cuda.h): devices, streams and errors. In a build without the CUDA
// backend every query answers "none" and the rest throw, so callers need no #if.
#include <array>
#include <mutex>

#include "tensorcast/cuda.h"
#include "tensorcast/error.h"

#if defined(TC_WITH_CUDA)
#include "core/cuda_runtime.h"
#endif

namespace tc::cuda {

#if !defined(TC_WITH_CUDA)

namespace {
constexpr const char* kNoBackend = "this build has no CUDA backend (configure with -DTC_CUDA=ON and nvcc installed)";
[[noreturn]] void unavailable(const char* what) { TC_FAIL("cuda", what, ": ", kNoBackend); }
}  // namespace

bool is_available() { return false; }
int device_count() { return 0; }
std::string unavailable_reason() { return kNoBackend; }
int current_device() { unavailable("current_device"); }
void set_device(int) { unavailable("set_device"); }
void synchronize(int) { unavailable("synchronize"); }
DeviceProperties get_device_properties(int) { unavailable("get_device_properties"); }
void Stream::synchronize() const { unavailable("Stream::synchronize"); }
bool Stream::query() const { unavailable("Stream::query"); }
Stream default_stream(int) { unavailable("default_stream"); }
Stream current_stream(int) { unavailable("current_stream"); }
void set_current_stream(const Stream&) { unavailable("set_current_stream"); }
Stream stream_from_pool(int) { unavailable("stream_from_pool"); }
StreamGuard::StreamGuard(const Stream&) { unavailable("StreamGuard"); }
StreamGuard::~StreamGuard() = default;
Event::~Event() = default;
Event::Event(Event&&) noexcept = default;
Event& Event::operator=(Event&&) noexcept = default;
void Event::record(const Stream&) { unavailable("Event::record"); }
bool Event::query() const { return true; }
void Event::synchronize() const {}

#else

namespace {

constexpr int kMaxDevices = 64;
constexpr int kPoolStreams = 4;

struct Probe {
  int count = 0;
  std::string reason;
};

// The driver is asked once: cudaGetDeviceCount initializes the runtime, and its answer
// (no driver, no device, a driver older than the toolkit) does not change in a process.
const Probe& probe() {
  static const Probe p = [] {
    Probe r;
    const cudaError_t err = cudaGetDeviceCount(&r.count);
    if (err != cudaSuccess) {
      r.count = 0;
      r.reason = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(err) + " (" + cudaGetErrorName(err) + ")";
      (void)cudaGetLastError();
    } else if (r.count == 0) {
      r.reason = "the CUDA driver reports no device";
    }
    if (r.count > kMaxDevices) r.count = kMaxDevices;
    return r;
  }();
  return p;
}

int checked_index(int index, const char* op) {
  if (index < 0) index = current_device();
  TC_CHECK(index < device_count(), op, "device cuda:", index, " does not exist (",
           device_count() == 0 ? unavailable_reason() : std::to_string(device_count()) + " device(s) visible", ")");
  return index;
}

// The current stream per device of this thread; nullptr is the device's default stream.
thread_local std::array<cudaStream_t, kMaxDevices> t_current{};

}  // namespace

namespace detail {

void throw_cuda_error(cudaError_t err, const char* op, const char* call) {
  (void)cudaGetLastError();  // clears a non-sticky error; a sticky one stays (the context is lost)
  TC_FAIL(op, call, " failed: ", cudaGetErrorString(err), " (", cudaGetErrorName(err), ")");
}

cudaStream_t raw_stream(Device device) { return t_current[static_cast<size_t>(device.index)]; }

DeviceGuard::DeviceGuard(Device device) {
  TC_CUDA_CHECK(cudaGetDevice(&previous_), "cuda");
  if (previous_ == device.index) {
    previous_ = -1;
    return;
  }
  TC_CUDA_CHECK(cudaSetDevice(device.index), "cuda");
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0) (void)cudaSetDevice(previous_);
}

}  // namespace detail

bool is_available() { return probe().count > 0; }
int device_count() { return probe().count; }
std::string unavailable_reason() { return probe().reason; }

int current_device() {
  TC_CHECK(is_available(), "cuda", "no CUDA device: ", unavailable_reason());
  int index = 0;
  TC_CUDA_CHECK(cudaGetDevice(&index), "cuda");
  return index;
}

void set_device(int index) {
  index = checked_index(index, "cuda.set_device");
  TC_CUDA_CHECK(cudaSetDevice(index), "cuda.set_device");
}

void synchronize(int index) {
  detail::DeviceGuard guard(Device(kCUDA, static_cast<int8_t>(checked_index(index, "cuda.synchronize"))));
  TC_CUDA_CHECK(cudaDeviceSynchronize(), "cuda.synchronize");
}

DeviceProperties get_device_properties(int index) {
  index = checked_index(index, "cuda.get_device_properties");
  cudaDeviceProp p{};
  TC_CUDA_CHECK(cudaGetDeviceProperties(&p, index), "cuda.get_device_properties");
  return {p.name, p.major, p.minor, static_cast<int64_t>(p.totalGlobalMem), p.multiProcessorCount};
}

void Stream::synchronize() const {
  detail::DeviceGuard guard(device_);
  TC_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(handle_)), "cuda.Stream.synchronize");
}

bool Stream::query() const {
  detail::DeviceGuard guard(device_);
  const cudaError_t err = cudaStreamQuery(static_cast<cudaStream_t>(handle_));
  if (err == cudaErrorNotReady) return false;
  TC_CUDA_CHECK(err, "cuda.Stream.query");
  return true;
}

Stream default_stream(int index) {
  return Stream(nullptr, Device(kCUDA, static_cast<int8_t>(checked_index(index, "cuda.default_stream"))));
}

Stream current_stream(int index) {
  index = checked_index(index, "cuda.current_stream");
  return Stream(t_current[static_cast<size_t>(index)], Device(kCUDA, static_cast<int8_t>(index)));
}

void set_current_stream(const Stream& stream) {
  const int index = checked_index(stream.device().index, "cuda.set_current_stream");
  t_current[static_cast<size_t>(index)] = static_cast<cudaStream_t>(stream.handle());
}

Stream stream_from_pool(int index) {
  index = checked_index(index, "cuda.stream_from_pool");
  static std::mutex mutex;
  static std::array<std::array<cudaStream_t, kPoolStreams>, kMaxDevices> pool{};
  static std::array<unsigned, kMaxDevices> next{};
  std::lock_guard<std::mutex> lock(mutex);
  cudaStream_t& s = pool[static_cast<size_t>(index)][next[static_cast<size_t>(index)]++ % kPoolStreams];
  if (s == nullptr) {
    const Device device(kCUDA, static_cast<int8_t>(index));
    detail::DeviceGuard guard(device);
    // Non-blocking, as PyTorch's pool streams: they do not wait for the legacy default stream.
    TC_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cuda.stream_from_pool");
  }
  return Stream(s, Device(kCUDA, static_cast<int8_t>(index)));
}

StreamGuard::StreamGuard(const Stream& stream) : previous_(current_stream(stream.device().index)) {
  set_current_stream(stream);
}

StreamGuard::~StreamGuard() { set_current_stream(previous_); }

Event::~Event() {
  if (handle_ == nullptr) return;
  detail::DeviceGuard guard(device_);
  (void)cudaEventDestroy(static_cast<cudaEvent_t>(handle_));  // no throw from a destructor
}

Event::Event(Event&& o) noexcept : handle_(o.handle_), device_(o.device_) { o.handle_ = nullptr; }

Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    Event old(std::move(*this));
    handle_ = o.handle_;
    device_ = o.device_;
    o.handle_ = nullptr;
  }
  return *this;
}

void Event::record(const Stream& stream) {
  detail::DeviceGuard guard(stream.device());
  if (handle_ != nullptr && device_ != stream.device()) *this = Event();
  if (handle_ == nullptr) {
    cudaEvent_t e = nullptr;
    TC_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cuda.Event.record");
    handle_ = e;
    device_ = stream.device();
  }
  TC_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(handle_), static_cast<cudaStream_t>(stream.handle())),
                "cuda.Event.record");
}

bool Event::query() const {
  if (handle_ == nullptr) return true;
  detail::DeviceGuard guard(device_);
  const cudaError_t err = cudaEventQuery(static_cast<cudaEvent_t>(handle_));
  if (err == cudaErrorNotReady) return false;
  TC_CUDA_CHECK(err, "cuda.Event.query");
  return true;
}

void Event::synchronize() const {
  if (handle_ == nullptr) return;
  detail::DeviceGuard guard(device_);
  TC_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(handle_)), "cuda.Event.synchronize");
}

#endif

}  // namespace tc::cuda
