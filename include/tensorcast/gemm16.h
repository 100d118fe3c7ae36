/// \file
/// How the CPU computes a bfloat16 or float16 matrix product (matmul, mm, bmm, linear) or
/// convolution (conv2d, forward and both backward passes).
///
/// Every 16-bit product has the same contract: 16-bit operands, exact products, float32
/// accumulation, one rounding of the result. Two kernels meet it:
/// \verbatim
///   kNative   oneDNN's 16-bit GEMM (AVX512-BF16 dot products, AMX, AVX512-FP16);
///   kFloat32  the operands widened to float32 (exact), oneDNN's float32 GEMM, the result
///             rounded once: the same values up to the order of the float32 additions.
/// \endverbatim
/// Which is faster depends on the CPU: on Zen 4 the bf16 dot product runs at twice the
/// float32 FMA rate, while on Intel Xeons without AMX it runs at the same rate and the
/// float32 GEMM is faster than the 16-bit one. kAuto (the default) decides by the
/// CPU, the same way in every process on a machine: bfloat16 native with AMX or on AMD,
/// float32 on other Intel CPUs; float16 native wherever oneDNN has a kernel; a CPU without
/// a native kernel for the dtype always widens. On the float32 path kAuto still keeps
/// products with fewer than ~32 multiply-adds per converted element (matrix-vector-like:
/// a batch-1 forward) on the native kernel, which reads half the bytes; kFloat32 widens
/// all. The two paths differ in the last bits (the order of the additions), so set the mode
/// explicitly (or TC_CPU_GEMM16=auto|native|float32 in the environment, read once) where
/// runs must be bit-reproducible across different machines. Convolutions follow the same
/// choice (oneDNN 2.6's fp32 convolution is faster than its bf16 one on such a Xeon).
#pragma once
#include <cstdint>
#include <string_view>

#include "tensorcast/dtype.h"

namespace tc {

/// The kernel of the CPU's 16-bit products (see the top of this file).
enum class Gemm16 : uint8_t { kAuto, kNative, kFloat32 };

/// Chooses the kernel for this process (overrides TC_CPU_GEMM16).
void set_cpu_gemm16(Gemm16 mode);
Gemm16 get_cpu_gemm16();                    ///< the setting (kAuto unless set, or TC_CPU_GEMM16 says otherwise)
std::string_view gemm16_name(Gemm16 mode);  ///< "auto", "native", "float32"

/// The kernel a product with operands of `dtype` (bfloat16 or float16) runs on now: kNative
/// or kFloat32, kAuto resolved (timing both the first time). Defined by the CPU backend.
Gemm16 cpu_gemm16_path(DType dtype);

}  // namespace tc
