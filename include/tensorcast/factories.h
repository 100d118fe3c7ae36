/// \file
/// Tensor factories (libtorch's torch::zeros, torch::rand, ...) and the generator's seed
/// and state. ops.h includes this header, so code that includes ops.h has them too.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <vector>

#include "tensorcast/tensor.h"

namespace tc {

/// Uninitialized memory of `size`.
Tensor empty(const Shape& size, TensorOptions options = {});
/// Zeros of `size`.
Tensor zeros(const Shape& size, TensorOptions options = {});
/// Ones of `size`.
Tensor ones(const Shape& size, TensorOptions options = {});
/// `value` everywhere.
Tensor full(const Shape& size, double value, TensorOptions options = {});
/// 0, 1, ..., up to end (excluded).
Tensor arange(double end, TensorOptions options = {});
/// start, start + step, ..., up to end (excluded).
Tensor arange(double start, double end, double step = 1.0, TensorOptions options = {});
Tensor rand(const Shape& size, TensorOptions options = {});   ///< U[0, 1)
Tensor randn(const Shape& size, TensorOptions options = {});  ///< N(0, 1)
/// Uniform integers in [low, high), from the seeded generator.
Tensor randint(int64_t low, int64_t high, const Shape& size, TensorOptions options = kInt64);
Tensor randperm(int64_t n, TensorOptions options = kInt64);  ///< a seeded permutation of 0..n-1
/// Uninitialized memory of t's shape, dtype and device.
Tensor empty_like(const Tensor& t);
/// Zeros of t's shape, dtype and device.
Tensor zeros_like(const Tensor& t);
/// Ones of t's shape, dtype and device.
Tensor ones_like(const Tensor& t);
/// `value` in t's shape, dtype and device.
Tensor full_like(const Tensor& t, double value);
/// U[0, 1) in t's shape, dtype and device.
Tensor rand_like(const Tensor& t);
/// N(0, 1) in t's shape, dtype and device.
Tensor randn_like(const Tensor& t);

/// Copies `values` into a new tensor of `size` (default: 1-d) and dtype (default: T's).
template <class T>
Tensor tensor(const std::vector<T>& values, const Shape& size = {}, std::optional<DType> dtype = {});
/// A 1-d tensor of `values` (float32 unless options say otherwise).
Tensor tensor(std::initializer_list<double> values, TensorOptions options = {});
Tensor scalar_tensor(double value, TensorOptions options = {});  ///< 0-d

/// Wraps caller-owned memory without copying; the caller keeps it alive. Strides default
/// to contiguous. Not counted by memory_stats.
Tensor from_blob(void* data, const Shape& size, TensorOptions options = {});
/// As from_blob above, with explicit strides (in elements).
Tensor from_blob(void* data, const Shape& size, const Shape& strides, TensorOptions options = {});

/// Seeds the generator behind rand, randn, randint and dropout.
void manual_seed(uint64_t seed);
/// The generator's full state as a uint8 tensor (portable across platforms), and back:
/// set_rng_state(get_rng_state()) makes the following draws repeat exactly (resume).
Tensor get_rng_state();
/// Restores the generator from a get_rng_state() tensor.
void set_rng_state(const Tensor& state);

}  // namespace tc
