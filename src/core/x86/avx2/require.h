// Included by every file under an x86/avx2/ folder. CMakeLists.txt compiles those
// files with TC_ISA_FLAGS_avx2 (-mavx2 -mf16c -mfma); where they are missing this stops the compile,
// since code written with vector extensions would otherwise build, silently, for baseline x86-64.
#pragma once
#if !(defined(__AVX2__) && defined(__F16C__) && defined(__FMA__))
#error "compiled without -mavx2 -mf16c -mfma: files under x86/avx2/ get them from CMakeLists.txt (TC_ISA_FLAGS_avx2)"
#endif
