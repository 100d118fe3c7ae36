/// \file
/// tc::Device: where a tensor's storage lives: the CPU, CUDA device `index` (tensorcast/cuda.h),
/// or nowhere: the meta device (shapes, dtypes and strides without storage).
#pragma once
#include <cstdint>
#include <iosfwd>
#include <string_view>

namespace tc {

/// Where a tensor's memory lives. Meta: nowhere (PyTorch's meta device): every op computes
/// its result's shape, dtype and layout, autograd records and runs, and the allocator
/// counts the bytes (`memory_stats(Device(kMeta))`) without allocating them; reading a
/// meta tensor's values is an error.
enum class DeviceType : uint8_t { CPU, CUDA, Meta };

/// A device type and index (libtorch's torch::Device).
struct Device {
  DeviceType type = DeviceType::CPU;  ///< CPU, CUDA or Meta
  int8_t index = 0;                   ///< which GPU (0 for the CPU)
  constexpr Device() = default;
  /// Device `i` of type `t`: `Device(kCUDA, 1)`.
  constexpr Device(DeviceType t, int8_t i = 0) : type(t), index(i) {}  // NOLINT
  /// "cpu", "cuda" (device 0), "cuda:N" or "meta", as torch::Device("cuda:1"); anything else is a
  /// tc::Error naming the string. Whether the device exists is checked where it is used.
  explicit Device(std::string_view spec);
  /// True for the CPU.
  constexpr bool is_cpu() const { return type == DeviceType::CPU; }
  /// True for a GPU.
  constexpr bool is_cuda() const { return type == DeviceType::CUDA; }
  /// True for the meta device (no storage).
  constexpr bool is_meta() const { return type == DeviceType::Meta; }
  /// The same type and index.
  friend constexpr bool operator==(Device a, Device b) { return a.type == b.type && a.index == b.index; }
};

/// DeviceType::CPU, as libtorch's torch::kCPU.
inline constexpr DeviceType kCPU = DeviceType::CPU;
/// DeviceType::CUDA, as libtorch's torch::kCUDA.
inline constexpr DeviceType kCUDA = DeviceType::CUDA;
/// DeviceType::Meta, as libtorch's torch::kMeta.
inline constexpr DeviceType kMeta = DeviceType::Meta;

/// Writes "cpu", "cuda:0", ..., "meta"
std::ostream& operator<<(std::ostream& os, Device d);

}  // namespace tc
