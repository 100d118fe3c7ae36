// Internal: the thread-local autocast state and the one flag the dispatcher's fast path
// reads. Lives apart from autocast.h so that dispatch.h inlines the check.
#pragma once
#include "amp/op_id.h"
#include "core/tls.h"
#include "tensorcast/amp/autocast.h"
#include "tensorcast/amp/policy.h"

namespace tc::amp::detail {

// True when autocast is enabled for some device type on this thread and the dispatcher
// is not already inside an autocast-handled op. The fast path reads nothing else.
extern thread_local constinit bool t_autocast_active TC_TLS_FAST;

// Disables autocast for nested calls (PyTorch's ExcludeDispatchKeyGuard on the autocast
// keys): a composite op, once cast, runs its pieces as they are.
class ExcludeGuard {
 public:
  ExcludeGuard();
  ~ExcludeGuard();
  ExcludeGuard(const ExcludeGuard&) = delete;
  ExcludeGuard& operator=(const ExcludeGuard&) = delete;

 private:
  bool prev_;
};
bool is_excluded();

// One op of the policy table. Entries are never removed, so a pointer to one is a stable
// handle a call site can keep in a function-local static.
struct OpEntry;
OpEntry* op_entry(std::string_view op);  // registers a passthrough entry if unknown
OpEntry* builtin_entry(OpId op);         // an op of the list: its row, by index
CastPolicy entry_policy(const OpEntry* e);

// What the dispatcher does for one call: which device's region applies, and the dtype
// to cast eligible inputs to (cast = false: call the op as it is).
struct CastPlan {
  bool cast = false;
  DType to = kFloat32;
  DeviceType device = kCPU;
  bool widen_only = false;  // promote: never narrow an argument (a 0-d fp32 next to bf16 stays)
};
// `tensors` are the call's tensor arguments (vectors flattened), for the device and for
// promote's widest type.
CastPlan plan_casts(CastPolicy policy, const Tensor* const* tensors, size_t n);
Tensor apply_cast(const CastPlan& plan, const Tensor& t);

// The outermost AutocastGuard of the thread exits: clears the weight-cast cache, or keeps
// what set_autocast_cache_across_regions allows.
void end_outermost_region();

// The optimizer's side of the cache (this thread's). copy_for_step: the dense 16-bit copy
// of `param` the cache holds, made from the parameter as it is now, for the step to write
// the updated weights into (rounded as the cast rounds); undefined when there is none. A
// copy someone else still reads (saved by a graph not yet run backward) is left to them
// and a new buffer takes its place. copy_stepped: the step wrote `param` and `copy`, so the
// entry is current for the parameter's new version, and the copy's own version is bumped
// (what was made from its old values, packed tiles, is stale). A step that throws between the two
// leaves the entry stale: it is cast again.
Tensor copy_for_step(const Tensor& param);
void copy_stepped(const Tensor& param, const Tensor& copy);

}  // namespace tc::amp::detail
