# The libtorch adapter (libtensorcast_torch, tensorcast::torch): tensorcast's GradScaler and
# an autocast guard for torch::Tensor (docs/libtorch.md). TC_TORCH=AUTO (default) builds it
# when find_package(Torch) succeeds -- point CMAKE_PREFIX_PATH at
# `python -c 'import torch; print(torch.utils.cmake_prefix_path)'` -- ON requires it, OFF
# skips it. Nothing else depends on it.
#
# Torch's config probes the installed GPUs with a try_run that passes the C++ standard on
# to nvcc as a CUDA dialect it refuses (CUDA20): the search runs with the project's
# standard unset; the targets below get C++20 through tensorcast's compile features.
set(TC_TORCH "AUTO" CACHE STRING "libtorch adapter: OFF, AUTO (when find_package(Torch) succeeds) or ON")
set_property(CACHE TC_TORCH PROPERTY STRINGS OFF AUTO ON)
if(NOT TC_TORCH STREQUAL "OFF")
  block(PROPAGATE Torch_FOUND TORCH_LIBRARIES TORCH_INSTALL_PREFIX)
    unset(CMAKE_CXX_STANDARD)
    find_package(Torch QUIET)
  endblock()
  if(NOT Torch_FOUND AND TC_TORCH STREQUAL "ON")
    message(FATAL_ERROR "TC_TORCH=ON but find_package(Torch) failed: set CMAKE_PREFIX_PATH to the output of "
                        "python -c 'import torch; print(torch.utils.cmake_prefix_path)'")
  endif()
endif()
if(Torch_FOUND)
  message(STATUS "tensorcast: libtorch adapter enabled (${TORCH_INSTALL_PREFIX})")
  # The adapter links libtorch alone: tensorcast's core would bring a second oneDNN and
  # OpenMP runtime into the process. What it shares with the core is header-only
  # (tensorcast/amp/scaler_rules.h).
  add_library(tensorcast_torch src/torch/amp.cpp)
  add_library(tensorcast::torch ALIAS tensorcast_torch)
  target_include_directories(tensorcast_torch PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                                                     $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  # Installed, the package's config links the libtorch its user finds instead of this one.
  target_link_libraries(tensorcast_torch PUBLIC "$<BUILD_INTERFACE:${TORCH_LIBRARIES}>")
  target_compile_features(tensorcast_torch PUBLIC cxx_std_20)
  target_compile_options(tensorcast_torch PRIVATE -Wall -Wextra -Wno-unused-parameter)
  set_target_properties(tensorcast_torch PROPERTIES VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}
    INSTALL_RPATH_USE_LINK_PATH ON)  # the installed adapter finds the libtorch it was built with
  include(${PROJECT_SOURCE_DIR}/cmake/torch_wheel.cmake)
  tc_torch_wheel_link_options(tensorcast_torch "${TORCH_INSTALL_PREFIX}")
else()
  message(STATUS "tensorcast: libtorch adapter off (no Torch found; docs/libtorch.md)")
endif()
