// CPU feature detection (tensorcast/cpu_features.h): CPUID, read once per process. The
// only file that runs CPUID; everything else asks cpu_features() (scripts/check-layers).
#include "tensorcast/cpu_features.h"

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
    r.sse4_2 = __builtin_cpu_supports("sse4.2");
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
    // The vendor string of leaf 0, in EBX, EDX, ECX: "GenuineIntel" or "AuthenticAMD".
    if (__get_cpuid(0, &eax, &ebx, &ecx, &edx)) {
      if (ebx == 0x756e6547u && edx == 0x49656e69u && ecx == 0x6c65746eu) r.vendor = CpuVendor::kIntel;
      if (ebx == 0x68747541u && edx == 0x69746e65u && ecx == 0x444d4163u) r.vendor = CpuVendor::kAmd;
    }
    r.fast_gather = r.avx512f && r.vendor == CpuVendor::kIntel;
    // AMX: the CPUID bits (leaf 7: EDX 22 AMX-BF16, 24 AMX-TILE), and Linux's permission for
    // this process to use the tile data (arch_prctl ARCH_REQ_XCOMP_PERM for XTILEDATA, 5.16
    // and later; refused where the kernel or the hypervisor does not save the tile state).
    // oneDNN asks for the same permission before its AMX kernels.
    // AVX512-FP16: leaf 7, EDX bit 23 (by CPUID: clang 14's builtin does not know the name);
    // the OS saves its state with AVX-512's, which avx512f's check covers.
    const bool leaf7 = __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx);
    r.avx512_fp16 = r.avx512f && leaf7 && (edx & (1u << 23));
    if (leaf7 && (edx & (1u << 22)) && (edx & (1u << 24))) {
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

}  // namespace tc
