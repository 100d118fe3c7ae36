// Included by every file under an x86/amx/ folder. CMakeLists.txt compiles those
// files with TC_ISA_FLAGS_amx (the avx512bf16 flags, -mamx-tile -mamx-bf16); where they are missing this stops the
// compile, since code written with vector extensions would otherwise build, silently, for baseline x86-64.
#pragma once
// GCC spells the AMX macros __AMX_TILE__ / __AMX_BF16__, clang __AMXTILE__ / __AMXBF16__.
#if !(defined(__AVX512BF16__) && defined(__FMA__) && (defined(__AMX_TILE__) || defined(__AMXTILE__)) && \
      (defined(__AMX_BF16__) || defined(__AMXBF16__)))
#error \
    "compiled without the avx512bf16 flags, -mamx-tile -mamx-bf16: files under x86/amx/ get them from CMakeLists.txt (TC_ISA_FLAGS_amx)"
#endif
