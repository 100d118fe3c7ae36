// The autocast state (thread-local per device type), AutocastGuard, and the hardware
// queries with the one-time "bf16 is slow here" warning.
#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>

#include "amp/state.h"
#include "tensorcast/convert.h"
#include "tensorcast/cuda.h"

namespace tc::amp {
namespace detail {

thread_local constinit bool t_autocast_active TC_TLS_FAST = false;

namespace {

struct DeviceState {
  bool enabled = false;
  DType dtype;
};

// PyTorch keeps enabled + dtype per device type, and cache_enabled + nesting per thread.
struct ThreadState {
  DeviceState cpu{false, kBFloat16};
  DeviceState cuda{false, kFloat16};
  bool cache_enabled = true;
  int nesting = 0;
  bool excluded = false;
};
thread_local ThreadState t_state;

// The meta device plans CPU runs (shapes and bytes without values), so it follows the
// CPU's state: a CPU region casts meta tensors as it casts CPU ones.
DeviceState& device_state(DeviceType d) { return d == kCUDA ? t_state.cuda : t_state.cpu; }

void refresh_active() { t_autocast_active = (t_state.cpu.enabled || t_state.cuda.enabled) && !t_state.excluded; }

void check_dtype(DType dtype) {
  TC_CHECK(dtype == kBFloat16 || dtype == kFloat16, "autocast",
           "in autocast, the supported dtypes are bfloat16 and float16, got ", dtype_name(dtype));
}

}  // namespace

ExcludeGuard::ExcludeGuard() : prev_(t_state.excluded) {
  t_state.excluded = true;
  refresh_active();
}
ExcludeGuard::~ExcludeGuard() {
  t_state.excluded = prev_;
  refresh_active();
}
bool is_excluded() { return t_state.excluded; }

}  // namespace detail

using detail::device_state;
using detail::t_state;

DType default_autocast_dtype(DeviceType device) { return device == kCUDA ? kFloat16 : kBFloat16; }

bool is_autocast_enabled(DeviceType device) { return device_state(device).enabled; }
DType get_autocast_dtype(DeviceType device) { return device_state(device).dtype; }
void set_autocast_enabled(DeviceType device, bool enabled) {
  device_state(device).enabled = enabled;
  detail::refresh_active();
}
void set_autocast_dtype(DeviceType device, DType dtype) {
  detail::check_dtype(dtype);
  device_state(device).dtype = dtype;
}
bool is_autocast_cache_enabled() { return t_state.cache_enabled; }
void set_autocast_cache_enabled(bool enabled) { t_state.cache_enabled = enabled; }
int autocast_nesting_depth() { return t_state.nesting; }

// ------------------------------------------------------------------ hardware

bool is_bf16_supported(DeviceType device) {
  // CUDA: bf16 Tensor Cores from compute capability 8.0 (Ampere), torch.cuda.is_bf16_supported's rule.
  if (device == kCUDA) return cuda::is_available() && cuda::get_device_properties(0).major >= 8;
  const CpuFeatures& f = cpu_features();
  return f.avx512_bf16 || f.amx_bf16;
}

bool is_fp16_supported(DeviceType device) {
  if (device == kCUDA) return cuda::is_available();  // fp16 Tensor Cores on every GPU CUDA 13 supports
  return cpu_features().avx512_fp16;
}

namespace {
std::atomic<bool> g_warned{false};
std::mutex g_override_mutex;
std::optional<bool> g_native_override;

bool native_16bit(DType dtype) {
  {
    std::lock_guard<std::mutex> lock(g_override_mutex);
    if (g_native_override) return *g_native_override;
  }
  return dtype == kBFloat16 ? is_bf16_supported(kCPU) : is_fp16_supported(kCPU);
}

void maybe_warn_slow(DeviceType device, DType dtype, bool enabled) {
  if (!enabled || device != kCPU || g_warned.load(std::memory_order_relaxed)) return;
  if (native_16bit(dtype)) return;
  if (g_warned.exchange(true)) return;
  const std::string name(dtype_name(dtype));
  std::fprintf(stderr,
               "[autocast] warning: this CPU has no native %s math (%s); CPU autocast in %s will likely "
               "run slower than float32 here (pytorch/pytorch#86270). Shown once.\n",
               name.c_str(), dtype == kBFloat16 ? "no AVX-512 BF16 or AMX-BF16" : "no AVX-512 FP16", name.c_str());
}
}  // namespace

bool slow_autocast_warning_fired() { return g_warned.load(); }
void reset_slow_autocast_warning() { g_warned.store(false); }
void set_native_16bit_override(std::optional<bool> native) {
  std::lock_guard<std::mutex> lock(g_override_mutex);
  g_native_override = native;
}

// ------------------------------------------------------------------ the guard

AutocastGuard::AutocastGuard(DeviceType device) : AutocastGuard(device, default_autocast_dtype(device)) {}

AutocastGuard::AutocastGuard(DeviceType device, const AutocastOptions& o)
    : AutocastGuard(device, o.dtype().value_or(default_autocast_dtype(device)), o.enabled(), o.cache_enabled()) {}

AutocastGuard::AutocastGuard(DeviceType device, DType dtype, bool enabled, bool cache_enabled)
    : device_(device),
      prev_enabled_(is_autocast_enabled(device)),
      prev_dtype_(get_autocast_dtype(device)),
      prev_cache_enabled_(t_state.cache_enabled) {
  detail::check_dtype(dtype);  // before touching state: a bad dtype leaves the thread as it was
  maybe_warn_slow(device, dtype, enabled);
  device_state(device) = {enabled, dtype};
  ++t_state.nesting;
  t_state.cache_enabled = cache_enabled;
  detail::refresh_active();
}

AutocastGuard::~AutocastGuard() {
  if (--t_state.nesting == 0) detail::end_outermost_region();
  device_state(device_) = {prev_enabled_, prev_dtype_};
  t_state.cache_enabled = prev_cache_enabled_;
  detail::refresh_active();
}

}  // namespace tc::amp
