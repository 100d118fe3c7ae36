// The weight-cast cache (at::autocast::cached_cast): one 16-bit copy per fp32 parameter
// per autocast region, shared by every op of the region.
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
  Tensor cast;
};

struct Cache {
  std::unordered_map<const TensorImpl*, Entry> entries;
  AutocastCacheStats stats;
};
thread_local Cache t_cache;

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
  auto it = c.entries.find(t.impl());
  if (it != c.entries.end()) {
    if (it->second.source.expired()) {
      c.entries.erase(it);  // a dead key: this tensor only reuses its address
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
  c.entries.emplace(t.impl(), Entry{t.impl_ptr(), cast});
  return cast;
}

AutocastCacheStats autocast_cache_stats() {
  AutocastCacheStats s = t_cache.stats;
  s.size = static_cast<int64_t>(t_cache.entries.size());
  return s;
}

void reset_autocast_cache_stats() { t_cache.stats = {}; }

void clear_autocast_cache() { t_cache.entries.clear(); }

}  // namespace tc::amp
