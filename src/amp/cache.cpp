// The weight-cast cache (at::autocast::cached_cast): one 16-bit copy per fp32 parameter,
// shared by every op of a region and, when asked, by later regions while the parameter is
// unchanged; an optimizer step writes the copy it holds with the parameter (so that the
// next forward finds it current instead of casting again).
#include <algorithm>
#include <atomic>
#include <memory>
#include <unordered_map>

#include "amp/state.h"
#include "autograd/nodes.h"
#include "core/tensor_impl.h"
#include "tensorcast/autograd.h"
#include "tensorcast/factories.h"

namespace tc::amp {
namespace {

struct Entry {
  // Keyed by the source's TensorImpl*, which every copy of the Tensor handle shares. The
  // weak reference keeps no parameter alive but tells a dead key from a live one: once
  // the source died, another tensor may have its address.
  std::weak_ptr<TensorImpl> source;
  // What the copy was made from: the memory (weak, for the same reason), its version and
  // the geometry. A parameter written in place or repointed since is cast again.
  std::weak_ptr<Storage> storage;
  uint64_t version = 0;
  int64_t offset = 0;
  Shape sizes, strides;
  // What ops get: with autograd history once a grad-needing op took it (the edge back to
  // the parameter), else a plain tensor (made under no-grad, or kept from an earlier region).
  Tensor cast;

  bool made_from(const TensorImpl& t) const {
    const auto mem = storage.lock();
    return mem && mem == t.storage && version == mem->version.load(std::memory_order_relaxed) && offset == t.offset &&
           sizes == t.sizes && strides == t.strides;
  }
  // Nothing but this entry holds the copy's memory (no graph saved it, no caller kept it),
  // so writing it in place changes no value anyone else reads.
  bool sole_owner() const { return cast.impl_ptr().use_count() == 1 && cast.impl()->storage.use_count() == 1; }
};

struct Cache {
  std::unordered_map<const TensorImpl*, Entry> entries;
  AutocastCacheStats stats;
};
thread_local Cache t_cache;

// The copy for an entry. Made inside InferenceMode it would be an inference tensor, yet
// the entry outlives that scope (the region goes on after it, or the cache is kept across
// regions) and a grad-mode op outside must be able to take the copy into its graph (an
// inference tensor cannot be): so the copy is always a normal tensor, made there without
// autograd history, exactly as one made under NoGradGuard. Its values are the same either
// way. Staleness needs nothing more: an inference parameter has no _version(), but the
// storage count that Entry::made_from reads still counts its writes (core/tensor_impl.h),
// so one written in place inside InferenceMode is cast again, never served stale.
Tensor make_copy(const Tensor& t, DType to) {
  if (!inference_mode_enabled()) return t.to(to);
  struct Normal {
    Normal() { set_inference_mode_enabled(false); }
    ~Normal() { set_inference_mode_enabled(true); }
  } normal;
  NoGradGuard no_grad;  // inside InferenceMode nothing is recorded, grad mode or not
  return t.to(to);
}
std::atomic<bool> g_across_regions{false};
std::atomic<bool> g_training_copies{false};

}  // namespace

Tensor cached_cast(DType to, const Tensor& t, DeviceType device) {
  if (!t.defined() || t.device().type != device || !is_floating(t.dtype()) || t.dtype() == kFloat64 || t.dtype() == to)
    return t;
  // Only parameters are worth caching: fp32 leaves that require grad, cast to the region's
  // 16-bit dtype, inside a region (outside one nothing would ever clear the entry).
  const bool cacheable = to == get_autocast_dtype(device) && t.dtype() == kFloat32 && t.is_leaf() &&
                         t.requires_grad() && is_autocast_cache_enabled() && autocast_nesting_depth() > 0;
  if (!cacheable) return t.to(to);
  Cache& c = t_cache;
  const TensorImpl& src = *t.impl();
  auto it = c.entries.find(&src);
  if (it != c.entries.end()) {
    Entry& e = it->second;
    if (e.source.expired()) {
      c.entries.erase(it);  // a dead key: this tensor only reuses its address
    } else if (!e.made_from(src) || e.cast.dtype() != to) {
      ++c.stats.stale_replaced;
      c.entries.erase(it);
    } else {
      if (is_grad_enabled() && !e.cast.requires_grad()) {
        // Made under no-grad (or kept from an earlier region), so it has no edge back to the
        // parameter; served as it is, it would silently drop the parameter's gradient
        // (pytorch/pytorch#65766). The same values, given the cast's autograd node.
        ++c.stats.grad_attached;
        e.cast = autograd::detail::record_cast(e.cast.detach(), t);
      }
      ++c.stats.hits;
      return e.cast;
    }
  }
  Tensor cast = make_copy(t, to);
  ++c.stats.misses;
  c.entries.emplace(&src, Entry{t.impl_ptr(), src.storage, src.storage->version.load(std::memory_order_relaxed),
                                src.offset, src.sizes, src.strides, cast});
  return cast;
}

AutocastCacheStats autocast_cache_stats() {
  AutocastCacheStats s = t_cache.stats;
  s.size = static_cast<int64_t>(t_cache.entries.size());
  return s;
}

void reset_autocast_cache_stats() { t_cache.stats = {}; }

void clear_autocast_cache() { t_cache.entries.clear(); }

void set_autocast_cache_across_regions(bool enabled) { g_across_regions.store(enabled); }
bool is_autocast_cache_across_regions() { return g_across_regions.load(); }
void set_autocast_cache_keeps_training_copies(bool enabled) { g_training_copies.store(enabled); }
bool autocast_cache_keeps_training_copies() { return g_training_copies.load(); }

namespace detail {

void end_outermost_region() {
  if (!is_autocast_cache_across_regions()) {
    clear_autocast_cache();  // torch.autocast.__exit__
    return;
  }
  // Kept: the copies of live, unchanged parameters; those that took autograd history only
  // when asked (their graph would have freed them), without it (it holds the region's
  // graph): the next grad-needing op gives them a new cast node.
  const bool training = autocast_cache_keeps_training_copies();
  auto& entries = t_cache.entries;
  for (auto it = entries.begin(); it != entries.end();) {
    Entry& e = it->second;
    const auto source = e.source.lock();
    if (!source || !e.made_from(*source) || (e.cast.requires_grad() && !training)) {
      it = entries.erase(it);
      continue;
    }
    if (e.cast.requires_grad()) e.cast = e.cast.detach();
    ++it;
  }
}

Tensor copy_for_step(const Tensor& param) {
  auto it = t_cache.entries.find(param.impl());
  if (it == t_cache.entries.end()) return Tensor();
  Entry& e = it->second;
  if (e.source.expired() || !e.made_from(*param.impl()) || !e.cast.is_contiguous()) return Tensor();
  // A copy someone else still reads (a graph not yet run backward saved it) keeps its
  // values; the step writes a new buffer, which the entry takes.
  if (!e.sole_owner()) e.cast = empty(e.cast.sizes(), TensorOptions(e.cast.dtype()).device(e.cast.device()));
  return e.cast;
}

void copy_stepped(const Tensor& param, const Tensor& copy) {
  auto it = t_cache.entries.find(param.impl());
  if (it == t_cache.entries.end() || !copy.defined() || it->second.cast.impl() != copy.impl()) return;
  Entry& e = it->second;
  e.version = param.impl()->storage->version.load(std::memory_order_relaxed);
  // The step wrote the copy through raw pointers: whatever was made from it before (a
  // product kernel's packed tiles) is stale.
  increment_version(copy);
  ++t_cache.stats.stepped;
}

}  // namespace detail
}  // namespace tc::amp
