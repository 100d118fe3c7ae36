// Internal to the tests: what the CUDA test files share. Their tests skip without a GPU
// (printing why) and compare each CUDA result with the CPU's.
#pragma once
#include <gtest/gtest.h>

#include <cstring>

#include "tensorcast/cuda.h"
#include "tensorcast/tensorcast.h"

namespace tc::testing {

inline const Device kGpu(kCUDA, 0);

// Whether the library was built with cuDNN (conv2d's CUDA kernels): tests/CMakeLists.txt
// gives the CUDA test files the library's definitions.
#if defined(TC_WITH_CUDNN)
inline constexpr bool kBuiltWithCudnn = true;
#else
inline constexpr bool kBuiltWithCudnn = false;
#endif

// Equal bits (NaN payloads included), same sizes, strides and dtype.
inline ::testing::AssertionResult same_bits(const Tensor& got_any, const Tensor& want) {
  const Tensor got = got_any.to(Device(kCPU));
  if (got.dtype() != want.dtype() || got.sizes() != want.sizes())
    return ::testing::AssertionFailure() << "got " << got.dtype() << shape_str(got.sizes()) << ", want " << want.dtype()
                                         << shape_str(want.sizes());
  const Tensor a = got.contiguous(), b = want.contiguous();
  const size_t bytes = static_cast<size_t>(a.numel()) * element_size(a.dtype());
  if (std::memcmp(a.raw_data(), b.raw_data(), bytes) != 0) return ::testing::AssertionFailure() << "bits differ";
  return ::testing::AssertionSuccess();
}

}  // namespace tc::testing

#define SKIP_WITHOUT_GPU() \
  if (!::tc::cuda::is_available()) GTEST_SKIP() << "no CUDA device: " << ::tc::cuda::unavailable_reason()
