// The public dispatched ops, defined from the op list (tensorcast/ops.def): each hands its
// implementation (tc::impl, src/ops/impl.h) to the dispatcher (src/amp/dispatch.h), which
// checks the devices and applies autocast before autograd and the kernel. Outside an
// autocast region the cost is a device test per tensor and one thread-local bool test.
// Factories, comparisons, result_type and the thread settings are defined where they live:
// they have nothing to cast.
#include "amp/dispatch.h"
#include "ops/impl.h"
#include "tensorcast/cuda.h"

namespace tc::amp::detail {

void throw_no_kernel(std::string_view op, Device device) {
  if (device.is_cuda() && !cuda::is_available())
    TC_FAIL(op, "no kernel for a tensor on ", device, ": ", cuda::unavailable_reason());
  TC_FAIL(op, "no CUDA kernel yet for this op (tensor on ", device,
          "); docs/cuda.md lists the ops it runs so far: move the tensor with .to(tc::kCPU)");
}

}  // namespace tc::amp::detail

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
