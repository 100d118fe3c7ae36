// Internal: what a backend calls to register itself (register_<name> in its kernels.cpp).
#pragma once
#include <array>
#include <cstddef>
#include <string>

#include "backend/kernels.h"

namespace tc::backend {

inline constexpr size_t kMaxDeviceTypes = 8;

class Registry {
 public:
  // The backend `name` ("cpu", "cuda") runs the tensors of device type `type` with these kernels.
  void add(DeviceType type, const char* name, const Kernels& kernels);
  const Kernels& kernels(DeviceType type) const;
  std::string backend_names() const;

 private:
  struct Entry {
    const char* name = nullptr;
    Kernels kernels;
  };
  std::array<Entry, kMaxDeviceTypes> entries_;
};

const Registry& registry();

}  // namespace tc::backend
