// Bulk conversion: the portable paths, run-time path selection, and the any-to-any loop.
// The vector paths live in convert_avx512.cpp / convert_f16c.cpp (compiled for their ISA).
#include "tensorcast/convert.h"

#include <cstring>
#include <type_traits>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace tc {

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = [] {
    CpuFeatures r;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    r.avx2 = __builtin_cpu_supports("avx2");
    // The CPUID bit where the OS saves AVX state, which is how GCC's builtin decides it;
    // clang 14's __builtin_cpu_supports does not know "f16c".
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    r.f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) && __builtin_cpu_supports("avx");
    r.fma = __builtin_cpu_supports("fma");
    r.avx512f = __builtin_cpu_supports("avx512f");
    r.avx512bw = __builtin_cpu_supports("avx512bw");
    r.avx512vl = __builtin_cpu_supports("avx512vl");
    r.avx512_bf16 = __builtin_cpu_supports("avx512bf16");
    // Vendor "GenuineIntel" (EBX, EDX, ECX of leaf 0).
    r.fast_gather = r.avx512f && __get_cpuid(0, &eax, &ebx, &ecx, &edx) && ebx == 0x756e6547u && edx == 0x49656e69u &&
                    ecx == 0x6c65746eu;
    // AMX: the CPUID bits (leaf 7: EDX 22 AMX-BF16, 24 AMX-TILE), and Linux's permission for
    // this process to use the tile data (arch_prctl ARCH_REQ_XCOMP_PERM for XTILEDATA, 5.16
    // and later; refused where the kernel or the hypervisor does not save the tile state).
    // oneDNN asks for the same permission before its AMX kernels.
    if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (edx & (1u << 22)) && (edx & (1u << 24))) {
#if defined(__linux__) && defined(__x86_64__)
      constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
      r.amx_bf16 = syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
#endif
    }
#endif
    return r;
  }();
  return f;
}

std::string_view convert_path_name(ConvertPath p) {
  switch (p) {
    case ConvertPath::kAuto:
      return "auto";
    case ConvertPath::kPortable:
      return "portable";
    case ConvertPath::kF16C:
      return "f16c";
    case ConvertPath::kAVX512:
      return "avx512";
    case ConvertPath::kAVX512BF16:
      return "avx512bf16";
  }
  return "?";
}

void convert(const void* src, DType sdt, void* dst, DType ddt, int64_t n) {
  if (sdt == ddt) {
    std::memcpy(dst, src, static_cast<size_t>(n) * element_size(sdt));
    return;
  }
  if (sdt == kFloat32 && ddt == kBFloat16)
    return float_to_bf16(static_cast<const float*>(src), static_cast<BFloat16*>(dst), n);
  if (sdt == kBFloat16 && ddt == kFloat32)
    return bf16_to_float(static_cast<const BFloat16*>(src), static_cast<float*>(dst), n);
  if (sdt == kFloat32 && ddt == kFloat16)
    return float_to_half(static_cast<const float*>(src), static_cast<Half*>(dst), n);
  if (sdt == kFloat16 && ddt == kFloat32)
    return half_to_float(static_cast<const Half*>(src), static_cast<float*>(dst), n);
  dispatch_all(sdt, "convert", [&]<class S>() {
    dispatch_all(ddt, "convert", [&]<class D>() {
      const S* s = static_cast<const S*>(src);
      D* d = static_cast<D*>(dst);
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (std::is_same_v<D, bool>) {
          d[i] = static_cast<float>(s[i]) != 0.0f || (std::is_integral_v<S> && s[i] != S{});
        } else if constexpr (std::is_same_v<S, BFloat16> || std::is_same_v<S, Half>) {
          d[i] = static_cast<D>(static_cast<float>(s[i]));  // 16-bit -> anything via float (exact)
        } else if constexpr (std::is_same_v<D, BFloat16> || std::is_same_v<D, Half>) {
          // double -> 16-bit via float would round twice; round the double once instead.
          if constexpr (std::is_same_v<S, double>)
            d[i] = round_double_to<D>(s[i]);
          else
            d[i] = D(static_cast<float>(s[i]));
        } else {
          d[i] = static_cast<D>(s[i]);
        }
      }
    });
  });
}

}  // namespace tc
