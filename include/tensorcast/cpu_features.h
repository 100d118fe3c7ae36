/// \file
/// What this CPU can run, read once from CPUID: the one place every run-time choice of a
/// vector path asks (conversions, the CPU kernels, the autocast default, oneDNN's GEMM).
#pragma once

namespace tc {

/// The CPU's vendor, where a choice depends on how a vendor implements an instruction.
enum class CpuVendor { kOther, kIntel, kAmd };

/// What this CPU supports, as the dispatchers read it (CPUID, and the OS's permission for
/// AMX tile state).
struct CpuFeatures {
  /// \name Instruction sets
  /// @{

  /// The instruction set extensions present (and enabled by the OS).
  bool sse4_2 = false, avx2 = false, f16c = false, fma = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512_bf16 = false;
  bool avx512_fp16 = false, amx_bf16 = false;
  /// @}
  CpuVendor vendor = CpuVendor::kOther;  ///< Intel, AMD or another
  bool fast_gather = false;              ///< AVX-512 gathers at about an element a cycle (Intel; AMD microcodes them)
};
/// This CPU's features, read once.
const CpuFeatures& cpu_features();

}  // namespace tc
