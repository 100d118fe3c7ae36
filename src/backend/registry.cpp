// The registry of backends: a kernel table per device type, filled once, on first use, by
// the backends the build lists (core/backend_list.h, from CMake). It names no device itself.
#include "backend/registry.h"

#include <array>
#include <string>

#include "backend/kernels.h"
#include "core/backend_list.h"
#include "tensorcast/error.h"

namespace tc::backend {

#define TC_DECLARE_BACKEND(name) void register_##name(Registry& registry);
TC_BACKENDS(TC_DECLARE_BACKEND)
#undef TC_DECLARE_BACKEND

void Kernels::set_device(const char* device) {
#define TC_KERNEL(name, ret, params) name.set_device(device);
#include "backend/kernels.def"
#undef TC_KERNEL
#define TC_SET(F) map_##F.set_device(device);
  TC_UNARY_FNS(TC_SET)
  TC_BINARY_FNS(TC_SET)
  TC_TERNARY_FNS(TC_SET)
#undef TC_SET
}

void Registry::add(DeviceType type, const char* name, const Kernels& kernels) {
  Entry& e = entries_.at(static_cast<size_t>(type));
  e.kernels = kernels;
  e.kernels.set_device(name);
  e.name = name;
}

const Kernels& Registry::kernels(DeviceType type) const { return entries_.at(static_cast<size_t>(type)).kernels; }

std::string Registry::backend_names() const {
  std::string names;
  for (const Entry& e : entries_)
    if (e.name != nullptr) names += std::string(names.empty() ? "" : ", ") + e.name;
  return names;
}

const Registry& registry() {
  static const Registry* const r = [] {
    // Never destroyed: kernels run from other statics' destructors. A device type no
    // backend registers keeps an empty table, whose kernels each say so.
    auto* reg = new Registry;
#define TC_REGISTER_BACKEND(name) register_##name(*reg);
    TC_BACKENDS(TC_REGISTER_BACKEND)
#undef TC_REGISTER_BACKEND
    return reg;
  }();
  return *r;
}

const Kernels& kernels_for(Device device) { return registry().kernels(device.type); }

namespace detail {
void throw_no_kernel(const char* kernel, const char* device) {
  // A device type no backend registered has a table whose kernels name no device.
  if (device == nullptr)
    TC_FAIL(kernel, "no backend of this build runs tensors on this device (backends: ", registry().backend_names(),
            ")");
  TC_FAIL(kernel, "no kernel for ", device, " tensors (backends in this build: ", registry().backend_names(), ")");
}
}  // namespace detail

}  // namespace tc::backend
