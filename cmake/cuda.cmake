# The CUDA backend. TC_CUDA=AUTO (default) builds it when a working CUDA compiler is found
# (nvcc on PATH or in /usr/local/cuda), OFF never, ON requires it. Without it the library is
# CPU only and tc::cuda::is_available() is false; the CUDA tests skip and say why.
# Sanitizer and fuzzer builds are CPU only: their -fsanitize flags are host-compiler flags,
# and ASan/TSan cannot see into device memory anyway.
if(NOT tc_sanitize STREQUAL "off" OR TC_FUZZ)
  if(TC_CUDA STREQUAL "ON")
    message(FATAL_ERROR "TC_CUDA=ON cannot be combined with TC_SANITIZE or TC_FUZZ (those builds are CPU only)")
  endif()
  set(tc_cuda_wanted OFF)
else()
  set(tc_cuda_wanted ${TC_CUDA})
endif()
if(tc_cuda_wanted STREQUAL "ON" OR tc_cuda_wanted STREQUAL "AUTO")
  include(CheckLanguage)
  # nvcc on PATH or named by CUDACXX, else the toolkit's usual home (PyTorch's CUDA_HOME default).
  if(NOT DEFINED ENV{CUDACXX} AND NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    find_program(tc_nvcc_on_path nvcc)
    if(NOT tc_nvcc_on_path)
      set(ENV{CUDACXX} /usr/local/cuda/bin/nvcc)
    endif()
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # Ampere (sm_80: bf16 Tensor Cores, the oldest GPU the backend targets) and Hopper
    # (sm_90); a user's -DCMAKE_CUDA_ARCHITECTURES=... wins.
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80 90)
    endif()
    enable_language(CUDA)
    # CMake 3.25 (Debian 12's) knows no C++20 flag for nvcc 13, and the library's
    # cxx_std_20 feature asks for one for its CUDA sources too.
    if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    # The runtime and cuBLASLt, found next to the compiler. Not find_package(CUDAToolkit):
    # CMake 3.25's module (Debian 12's) stops at configure on CUDA 13, which has no nvToolsExt.
    set(tc_cuda_root "${CMAKE_CUDA_COMPILER_TOOLKIT_ROOT}")
    find_library(TC_CUDART_LIBRARY cudart HINTS "${tc_cuda_root}" PATH_SUFFIXES lib64 lib targets/x86_64-linux/lib
                 NO_DEFAULT_PATH)
    find_library(TC_CUBLASLT_LIBRARY cublasLt HINTS "${tc_cuda_root}" PATH_SUFFIXES lib64 lib
                 targets/x86_64-linux/lib NO_DEFAULT_PATH)
    if(TC_CUDART_LIBRARY AND TC_CUBLASLT_LIBRARY)
      set(TC_WITH_CUDA ON)
    elseif(tc_cuda_wanted STREQUAL "ON")
      message(FATAL_ERROR "TC_CUDA=ON but the CUDA runtime or cuBLASLt was not found under ${tc_cuda_root}")
    else()
      message(STATUS "tensorcast: nvcc found but not libcudart/libcublasLt under ${tc_cuda_root}: CPU only")
    endif()
  elseif(TC_CUDA STREQUAL "ON")
    message(FATAL_ERROR "TC_CUDA=ON but no CUDA compiler was found (looked for nvcc on PATH and in "
                        "/usr/local/cuda; set CUDACXX=/path/to/nvcc)")
  endif()
elseif(NOT tc_cuda_wanted STREQUAL "OFF")
  message(FATAL_ERROR "TC_CUDA=${TC_CUDA}: expected OFF, AUTO or ON")
endif()
# cuDNN (conv2d on CUDA tensors), optional: cudnn.h and libcudnn under TC_CUDNN_ROOT when
# given (a prefix with include/ and lib/ or lib64/, e.g. the pip package nvidia-cudnn-cu13's
# folder, whose lib/ may hold only libcudnn.so.9), else next to the toolkit. TC_CUDNN=OFF
# never looks; ON requires it. Without it the CUDA backend builds and conv2d on a CUDA
# tensor throws, saying how to reconfigure.
set(TC_CUDNN "AUTO" CACHE STRING "cuDNN for the CUDA backend's convolutions: OFF, AUTO or ON")
set_property(CACHE TC_CUDNN PROPERTY STRINGS OFF AUTO ON)
set(TC_CUDNN_ROOT "" CACHE PATH "Prefix holding include/cudnn.h and lib/libcudnn.so* (default: the CUDA toolkit)")
if(NOT TC_CUDNN MATCHES "^(OFF|AUTO|ON)$")
  message(FATAL_ERROR "TC_CUDNN=${TC_CUDNN}: expected OFF, AUTO or ON")
elseif(TC_CUDNN STREQUAL "ON" AND NOT TC_WITH_CUDA)
  message(FATAL_ERROR "TC_CUDNN=ON needs the CUDA backend (TC_CUDA)")
elseif(TC_WITH_CUDA AND NOT TC_CUDNN STREQUAL "OFF")
  if(TC_CUDNN_ROOT)
    set(tc_cudnn_hints "${TC_CUDNN_ROOT}")
  else()
    set(tc_cudnn_hints "${tc_cuda_root}")
  endif()
  # A changed root searches again (find_* results are cached).
  if(NOT "${tc_cudnn_hints}" STREQUAL "${TC_CUDNN_SEARCHED_IN}")
    unset(TC_CUDNN_INCLUDE_DIR CACHE)
    unset(TC_CUDNN_LIBRARY CACHE)
    set(TC_CUDNN_SEARCHED_IN "${tc_cudnn_hints}" CACHE INTERNAL "")
  endif()
  find_path(TC_CUDNN_INCLUDE_DIR cudnn.h HINTS ${tc_cudnn_hints} PATH_SUFFIXES include targets/x86_64-linux/include
            NO_DEFAULT_PATH)
  find_library(TC_CUDNN_LIBRARY NAMES cudnn libcudnn.so.9 HINTS ${tc_cudnn_hints}
               PATH_SUFFIXES lib64 lib targets/x86_64-linux/lib NO_DEFAULT_PATH)
  if(TC_CUDNN_INCLUDE_DIR AND TC_CUDNN_LIBRARY)
    set(TC_WITH_CUDNN ON)
    message(STATUS "tensorcast: cuDNN ${TC_CUDNN_LIBRARY} (${TC_CUDNN_INCLUDE_DIR}/cudnn.h)")
  elseif(TC_CUDNN STREQUAL "ON")
    message(FATAL_ERROR "TC_CUDNN=ON but cudnn.h and libcudnn were not found under ${tc_cudnn_hints} "
                        "(set -DTC_CUDNN_ROOT=/path/with/include/and/lib)")
  else()
    message(STATUS "tensorcast: no cuDNN under ${tc_cudnn_hints}: conv2d on CUDA tensors unavailable "
                   "(set -DTC_CUDNN_ROOT=...)")
  endif()
endif()
if(TC_WITH_CUDA)
  message(STATUS "tensorcast: CUDA backend ON (${CMAKE_CUDA_COMPILER} ${CMAKE_CUDA_COMPILER_VERSION}, "
                 "architectures ${CMAKE_CUDA_ARCHITECTURES})")
else()
  message(STATUS "tensorcast: CPU only (TC_CUDA=${TC_CUDA})")
endif()

# Adds the backend to the library: the kernels (src/backend/cuda: *.cu by nvcc, the kernel
# table kernels.cpp) and the CUDA runtime and cuBLASLt, which the core's device runtime and
# allocator call too.
function(tc_add_cuda_backend target)
  if(NOT TC_WITH_CUDA)
    return()
  endif()
  file(GLOB cuda_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/backend/cuda/*.cu
       ${PROJECT_SOURCE_DIR}/src/backend/cuda/*.cpp)
  target_sources(${target} PRIVATE ${cuda_sources})
  target_compile_definitions(${target} PRIVATE TC_WITH_CUDA=1)
  target_include_directories(${target} SYSTEM PRIVATE ${CMAKE_CUDA_TOOLKIT_INCLUDE_DIRECTORIES})
  target_link_libraries(${target} PRIVATE ${TC_CUDART_LIBRARY} ${TC_CUBLASLT_LIBRARY})
  if(TC_WITH_CUDNN)
    target_compile_definitions(${target} PRIVATE TC_WITH_CUDNN=1)
    target_include_directories(${target} SYSTEM PRIVATE ${TC_CUDNN_INCLUDE_DIR})
    target_link_libraries(${target} PRIVATE ${TC_CUDNN_LIBRARY})
  endif()
  # Relaxed constexpr lets kernels call tensorcast/half.h's conversions, so both devices
  # round with one piece of code.
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr -Xcompiler=-Wall -Xcompiler=-Wno-unused-parameter>)
endfunction()
