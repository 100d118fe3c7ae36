// The public dispatched ops, defined from the op list (tensorcast/ops.def): each hands its
// implementation (tc::impl, src/ops/impl.h) to the dispatcher (src/amp/dispatch.h), which
// applies autocast before autograd and the device's kernels (backend/kernels.h). Outside an
// autocast region the cost is one thread-local bool test.
// Factories, comparisons, result_type and the thread settings are defined where they live:
// they have nothing to cast.
#include "amp/dispatch.h"
#include "ops/impl.h"

// The implementation as a callable (impl names are overloaded, so not a pointer).
#define TC_IMPL(op) [](const auto&... xs) -> decltype(auto) { return tc::impl::op(xs...); }
#define TC_EXPAND(...) __VA_ARGS__

// A qualified definition (tc::op) compiles only if ops.h declared the same signature.
#define TC_DEFAULT(...)
#define TC_POLICY(op, policy, pytorch, note)
#define TC_OP(ret, op, params, args) \
  auto tc::op params->ret { return amp::dispatch<amp::OpId::op>(TC_IMPL(op), TC_EXPAND args); }
#include "tensorcast/ops.def"
#undef TC_OP
#undef TC_POLICY
#undef TC_DEFAULT
#undef TC_EXPAND
#undef TC_IMPL
