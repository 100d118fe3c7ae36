# The PyTorch pip wheel's libtorch_cuda needs the wheel's own CUDA libraries (NCCL, cuBLAS,
# ...), which its RPATH finds at run time; at link time the linker must be told where they
# are, or it takes an older toolkit's from /usr/local/cuda. Used by the build
# (cmake/torch.cmake) and by the installed package's torch component, each with the libtorch
# it found: the options are never exported with a path of the machine that built them.
function(tc_torch_wheel_link_options target torch_prefix)
  file(GLOB dirs LIST_DIRECTORIES true "${torch_prefix}/../nvidia/*/lib")
  foreach(dir ${dirs})
    get_target_property(imported ${target} IMPORTED)
    if(imported)
      target_link_options(${target} INTERFACE "-Wl,-rpath-link,${dir}")
    else()
      target_link_options(${target} PRIVATE "-Wl,-rpath-link,${dir}")
      target_link_options(${target} INTERFACE "$<BUILD_INTERFACE:-Wl,-rpath-link,${dir}>")
    endif()
  endforeach()
endfunction()
