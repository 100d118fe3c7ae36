// Included by every file under an x86/avx512bf16/ folder. CMakeLists.txt compiles those
// files with TC_ISA_FLAGS_avx512bf16 (-mavx512f -mavx512bw -mavx512vl -mavx512bf16 -mfma -mf16c); where they are
// missing this stops the compile, since code written with vector extensions would otherwise build, silently, for
// baseline x86-64.
#pragma once
#if !(defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512BF16__) && \
      defined(__FMA__) && defined(__F16C__))
#error \
    "compiled without -mavx512f -mavx512bw -mavx512vl -mavx512bf16 -mfma -mf16c: files under x86/avx512bf16/ get them from CMakeLists.txt (TC_ISA_FLAGS_avx512bf16)"
#endif
