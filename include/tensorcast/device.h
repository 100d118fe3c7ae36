// tc::Device: where a tensor's storage lives: the CPU, or CUDA device `index` (tensorcast/cuda.h).
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string_view>

namespace tc {

enum class DeviceType : uint8_t { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int8_t index = 0;
  constexpr Device() = default;
  constexpr Device(DeviceType t, int8_t i = 0) : type(t), index(i) {}  // NOLINT
  // "cpu", "cuda" (device 0) or "cuda:N", as torch::Device("cuda:1"); anything else is a
  // tc::Error naming the string. Whether the device exists is checked where it is used.
  explicit Device(std::string_view spec);
  constexpr bool is_cpu() const { return type == DeviceType::CPU; }
  constexpr bool is_cuda() const { return type == DeviceType::CUDA; }
  friend constexpr bool operator==(Device a, Device b) { return a.type == b.type && a.index == b.index; }
};

inline constexpr DeviceType kCPU = DeviceType::CPU;
inline constexpr DeviceType kCUDA = DeviceType::CUDA;

std::ostream& operator<<(std::ostream& os, Device d);

}  // namespace tc
