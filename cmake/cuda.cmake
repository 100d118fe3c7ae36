# The CUDA seam. TC_CUDA=OFF (default) builds the CPU library only; AUTO enables CUDA when
# a toolkit is found; ON requires it. The CUDA backend itself is a later issue: for now
# this only defines TC_WITH_CUDA so code can tell which build it is.
if(TC_CUDA STREQUAL "ON" OR TC_CUDA STREQUAL "AUTO")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    set(TC_WITH_CUDA ON)
  elseif(TC_CUDA STREQUAL "ON")
    message(FATAL_ERROR "TC_CUDA=ON but no CUDA compiler was found (looked for nvcc)")
  endif()
endif()
if(TC_WITH_CUDA)
  message(STATUS "tensorcast: CUDA seam enabled (${CMAKE_CUDA_COMPILER})")
else()
  message(STATUS "tensorcast: CPU only")
endif()
