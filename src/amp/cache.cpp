// The weight-cast cache (at::autocast::cached_cast): one 16-bit copy per fp32 parameter,
// shared by every op of a region and, when asked, by later regions while the parameter is
// unchanged.
#include <algorithm>
#include <atomic>
#include <memory>
#include <unordered_map>

#include "amp/state.h"
#include "core/tensor_impl.h"
#include "tensorcast/autograd.h"

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
  Tensor cast;

  bool made_from(const TensorImpl& t) const {
    const auto mem = storage.lock();
    return mem && mem == t.storage && version == mem->version.load(std::memory_order_relaxed) && offset == t.offset &&
           sizes == t.sizes && strides == t.strides;
  }
};

struct Cache {
  std::unordered_map<const TensorImpl*, Entry> entries;
  AutocastCacheStats stats;
};
thread_local Cache t_cache;
std::atomic<bool> g_across_regions{false};

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
    if (it->second.source.expired()) {
      c.entries.erase(it);  // a dead key: this tensor only reuses its address
    } else if (!it->second.made_from(src)) {
      ++c.stats.stale_replaced;
      c.entries.erase(it);
    } else if (is_grad_enabled() && !it->second.cast.requires_grad()) {
      // Made under no-grad, so it has no edge back to the parameter; reusing it here
      // would silently drop the parameter's gradient (pytorch/pytorch#65766).
      ++c.stats.no_grad_replaced;
      c.entries.erase(it);
    } else {
      ++c.stats.hits;
      return it->second.cast;
    }
  }
  Tensor cast = t.to(to);
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

namespace detail {

void end_outermost_region() {
  if (!is_autocast_cache_across_regions()) {
    clear_autocast_cache();  // torch.autocast.__exit__
    return;
  }
  // Kept: no-grad copies of live, unchanged parameters. A copy with autograd history holds
  // its parameter alive through the graph, so it never outlives the region.
  std::erase_if(t_cache.entries, [](const auto& kv) {
    const Entry& e = kv.second;
    const auto source = e.source.lock();
    return !source || e.cast.requires_grad() || !e.made_from(*source);
  });
}

}  // namespace detail
}  // namespace tc::amp
