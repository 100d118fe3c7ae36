/// \file
/// tc::Device: where a tensor's storage lives: the CPU, or CUDA device `index` (tensorcast/cuda.h).
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string_view>

namespace tc {

/// Where a tensor's memory lives.
enum class DeviceType : uint8_t { CPU, CUDA };

/// A device type and index (libtorch's torch::Device).
struct Device {
  DeviceType type = DeviceType::CPU;  ///< CPU or CUDA
  int8_t index = 0;                   ///< which GPU (0 for the CPU)
  constexpr Device() = default;
  /// Device `i` of type `t`: `Device(kCUDA, 1)`.
  constexpr Device(DeviceType t, int8_t i = 0) : type(t), index(i) {}  // NOLINT
  /// "cpu", "cuda" (device 0) or "cuda:N", as torch::Device("cuda:1"); anything else is a
  /// tc::Error naming the string. Whether the device exists is checked where it is used.
  explicit Device(std::string_view spec);
  /// True for the CPU.
  constexpr bool is_cpu() const { return type == DeviceType::CPU; }
  /// True for a GPU.
  constexpr bool is_cuda() const { return type == DeviceType::CUDA; }
  /// The same type and index.
  friend constexpr bool operator==(Device a, Device b) { return a.type == b.type && a.index == b.index; }
};

/// DeviceType::CPU, as libtorch's torch::kCPU.
inline constexpr DeviceType kCPU = DeviceType::CPU;
/// DeviceType::CUDA, as libtorch's torch::kCUDA.
inline constexpr DeviceType kCUDA = DeviceType::CUDA;

/// Writes "cpu", "cuda:0", ...
std::ostream& operator<<(std::ostream& os, Device d);

}  // namespace tc
