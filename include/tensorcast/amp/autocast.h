/// \file
/// tc::amp autocast: the thread-local state behind torch.autocast, its RAII guard, the
/// weight-cast cache, and the hardware queries that say whether 16-bit math is native.
///
/// \code{.cpp}
///   {
///     tc::amp::AutocastGuard autocast(tc::kCPU, tc::kBFloat16);
///     auto y = tc::linear(x, w, b);     // runs in bf16; w's bf16 copy is cached
///     auto p = tc::softmax(y, -1);      // runs in fp32 (see tc::amp::policy_table())
///   }                                   // state restored, cache cleared (see below)
/// \endcode
///
/// Which op runs in which dtype is the policy table's business (amp/policy.h); this
/// header only holds the state. State is per thread: a region in one std::thread never
/// affects another, exactly as torch.autocast.
#pragma once
#include <cstdint>
#include <optional>

#include "tensorcast/device.h"
#include "tensorcast/dtype.h"
#include "tensorcast/tensor.h"

namespace tc::amp {

/// PyTorch's default autocast dtype of a device type: bfloat16 on CPU, float16 on CUDA.
DType default_autocast_dtype(DeviceType device);

/// libtorch-style options for AutocastGuard: AutocastOptions().dtype(kFloat16).cache_enabled(false).
struct AutocastOptions {
  TC_ARG(std::optional<DType>, dtype);  ///< unset: default_autocast_dtype(device)
  TC_ARG(bool, enabled) = true;         ///< false: the guard changes nothing
  TC_ARG(bool, cache_enabled) = true;   ///< reuse 16-bit copies of parameters within the region
};

/// Enters an autocast region for `device` in its scope (torch.autocast's __enter__/__exit__).
/// On exit the previous enabled flag, dtype and cache setting come back; when the outermost
/// guard of the thread exits, the weight-cast cache is cleared. An enabled=false guard
/// inside an enabled region turns autocast off for its scope.
/// dtype must be float16 or bfloat16 (torch.autocast accepts nothing else on CPU/CUDA).
class AutocastGuard {
 public:
  /// Autocast on `device` in its default dtype, cache enabled.
  explicit AutocastGuard(DeviceType device);
  /// Autocast on `device` in `dtype`.
  AutocastGuard(DeviceType device, DType dtype, bool enabled = true, bool cache_enabled = true);
  /// Autocast on `device` as `options` say.
  AutocastGuard(DeviceType device, const AutocastOptions& options);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  DeviceType device_;
  bool prev_enabled_;
  DType prev_dtype_;
  bool prev_cache_enabled_;
};

/// Whether autocast is on for `device` on this thread.
bool is_autocast_enabled(DeviceType device = kCPU);
/// The dtype autocast casts to on `device`.
DType get_autocast_dtype(DeviceType device = kCPU);
/// The raw setters behind the guard (torch.set_autocast_enabled / set_autocast_dtype);
/// prefer AutocastGuard, which restores state and manages the cache.
void set_autocast_enabled(DeviceType device, bool enabled);
/// Sets the dtype autocast casts to on `device`.
void set_autocast_dtype(DeviceType device, DType dtype);
/// Cache setting and nesting are per thread, shared by the device types (as in PyTorch).
bool is_autocast_cache_enabled();
/// Turns the weight-cast cache on or off (see is_autocast_cache_enabled()).
void set_autocast_cache_enabled(bool enabled);
int autocast_nesting_depth();  ///< live AutocastGuards on this thread

// ---- the weight-cast cache
/// Inside a region, the 16-bit copy of an fp32 leaf tensor that requires grad (a
/// parameter) is made once and reused by every op of the region. The key holds no
/// strong reference to the parameter (a weak_ptr detects a dead key whose address was
/// reused). A copy is reused only while its parameter is unchanged: same memory, geometry
/// and _version() (a parameter written in place is cast again; PyTorch would serve the
/// stale copy), and cast to the dtype asked. A copy made under NoGradGuard has no autograd
/// history; an op that needs gradients never takes it as it is (pytorch/pytorch#65766) but
/// gets the same values with the cast's autograd node. An optimizer step writes the copy
/// this thread's cache holds of each parameter it updates, in the same pass as the
/// parameter and rounded as the cast would be, so the copy stays current.
struct AutocastCacheStats {
  int64_t hits = 0;            ///< casts served from the cache
  int64_t misses = 0;          ///< casts made and stored (every replacement counts too)
  int64_t grad_attached = 0;   ///< copies without autograd history given the cast's node
  int64_t stale_replaced = 0;  ///< entries whose parameter was written since, or cast to another dtype, recast
  int64_t stepped = 0;         ///< copies an optimizer step wrote with their parameter
  int64_t size = 0;            ///< entries held now
};
AutocastCacheStats autocast_cache_stats();  ///< this thread's cache
void reset_autocast_cache_stats();          ///< zeroes every count (size is not a count: the entries stay)
void clear_autocast_cache();                ///< drops this thread's entries (torch.clear_autocast_cache)

/// Keeping weight copies from one region to the next (process-wide; off by default, where
/// the outermost region's exit clears the cache as torch.autocast's does). On, a copy made
/// under NoGradGuard outlives its region and serves later regions while its parameter is
/// alive and unchanged (the checks above): a model served one forward per region casts its
/// weights once instead of on every call. Writes made through data_ptr are invisible to
/// _version(): call tc::increment_version(t) after them.
void set_autocast_cache_across_regions(bool enabled);
/// See set_autocast_cache_across_regions().
bool is_autocast_cache_across_regions();

/// With the above, also keep the copies that took autograd history (training), their values
/// without the graph (process-wide; off by default). A training loop (forward in a region,
/// backward, optimizer step) then never casts its weights again: the step writes each copy
/// with its parameter. The cost: every 16-bit copy stays allocated through the backward and
/// the step, where the graph would have freed some, up to 2 bytes per parameter of peak
/// memory (none for a transformer, whose peak comes as its backward starts; a few percent
/// for the CLI's convnet, whose peak comes late in its backward).
void set_autocast_cache_keeps_training_copies(bool enabled);
/// See set_autocast_cache_keeps_training_copies().
bool autocast_cache_keeps_training_copies();

/// The cast autocast applies to one argument (at::autocast::cached_cast): floating tensors
/// on `device` other than float64 are cast to `to`; anything else comes back unchanged.
/// fp32 parameters cast to the region's 16-bit dtype go through the cache.
Tensor cached_cast(DType to, const Tensor& t, DeviceType device = kCPU);

// ---- hardware
/// CPU: native bf16 math (AVX-512 BF16 or AMX-BF16). CUDA: compute capability >= 8.0; this
/// build has no CUDA backend, so false.
bool is_bf16_supported(DeviceType device = kCPU);
/// CPU: native fp16 math (AVX-512 FP16); F16C only converts. CUDA: false in this build.
bool is_fp16_supported(DeviceType device = kCPU);

/// Entering a 16-bit CPU region on a CPU without native support for that dtype prints a
/// one-time warning to stderr: it runs slower there than fp32 (pytorch/pytorch#86270).
/// Tests can pretend a CPU lacks support and see whether the warning fired.
bool slow_autocast_warning_fired();
void reset_slow_autocast_warning();  ///< arms the warning again (tests)
/// Overrides the hardware answer the warning uses (std::nullopt: ask the CPU again).
void set_native_16bit_override(std::optional<bool> native);

}  // namespace tc::amp
