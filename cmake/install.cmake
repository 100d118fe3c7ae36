# What `cmake --install` puts under the prefix, as three components of one CMake package:
#   find_package(tensorcast REQUIRED [COMPONENTS dist torch])
#     tensorcast::tensorcast  libtensorcast (always)
#     tensorcast::dist        libtensorcast_dist, data parallelism on MPI (built with TC_DIST)
#     tensorcast::torch       libtensorcast_torch, the libtorch adapter (built with TC_TORCH)
# plus a pkg-config file for each (tensorcast, tensorcast-dist, tensorcast-torch) and the
# `tensorcast` command. Files belong to the install components Runtime (libraries, command)
# and Development (headers, CMake and pkg-config files, the .so links), which
# cmake/package.cmake turns into the tensorcast and tensorcast-dev Debian packages; the
# adapter's files are the component Torch, left out of them (libtorch is no Debian package).
include(CMakePackageConfigHelpers)

set(TC_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/tensorcast)
file(RELATIVE_PATH TC_PC_TO_PREFIX "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
if(BUILD_SHARED_LIBS)
  set(TC_SHARED ON)
else()
  set(TC_SHARED OFF)
endif()

# tc_install_library(TARGET EXPORT_SET COMPONENT NAME): installed as tensorcast::NAME.
function(tc_install_library target export component name)
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${name})
  install(TARGETS ${target} EXPORT ${export}
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT ${component} NAMELINK_COMPONENT Development
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT Development
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT ${component})
  set_property(TARGET ${target} APPEND PROPERTY INSTALL_RPATH "$ORIGIN")  # its siblings, under any prefix
  install(EXPORT ${export} NAMESPACE tensorcast:: DESTINATION ${TC_CMAKE_DIR} COMPONENT Development)
endfunction()

# The pkg-config file `name`.pc from cmake/tensorcast.pc.in. It locates the prefix from its
# own place, so an install under any --prefix works.
function(tc_install_pkgconfig name description libs requires libs_private cflags)
  set(TC_PC_NAME ${name})
  set(TC_PC_CFLAGS "${cflags}")
  set(TC_PC_DESCRIPTION "${description}")
  set(TC_PC_LIBS "${libs}")
  set(TC_PC_REQUIRES "${requires}")
  set(TC_PC_LIBS_PRIVATE "${libs_private}")
  configure_file(${PROJECT_SOURCE_DIR}/cmake/tensorcast.pc.in ${PROJECT_BINARY_DIR}/pkgconfig/${name}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/pkgconfig/${name}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig
          COMPONENT Development)
endfunction()

# The core: the library, every public header, the package's config files.
tc_install_library(tensorcast tensorcastTargets Runtime tensorcast)
install(DIRECTORY include/tensorcast DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} COMPONENT Development
        FILES_MATCHING PATTERN "*.h" PATTERN "*.def" PATTERN "torch" EXCLUDE)
install(FILES ${PROJECT_BINARY_DIR}/include/tensorcast/version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tensorcast
        COMPONENT Development)
configure_package_config_file(cmake/tensorcastConfig.cmake.in ${PROJECT_BINARY_DIR}/tensorcastConfig.cmake
  INSTALL_DESTINATION ${TC_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tensorcastConfigVersion.cmake COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/tensorcastConfig.cmake ${PROJECT_BINARY_DIR}/tensorcastConfigVersion.cmake
              cmake/torch_wheel.cmake
        DESTINATION ${TC_CMAKE_DIR} COMPONENT Development)
tc_install_pkgconfig(tensorcast "C++20 engine for mixed-precision (AMP) neural-network training"
  "-ltensorcast" "" "-ldnnl -lgomp -lz" "")

if(TARGET tensorcast_dist)
  tc_install_library(tensorcast_dist tensorcastDistTargets Runtime dist)
  tc_install_pkgconfig(tensorcast-dist "tensorcast's data parallelism on MPI (tc::dist)"
    "-ltensorcast_dist" "tensorcast" "-lmpi" "")
endif()

if(TARGET tensorcast_torch)
  tc_install_library(tensorcast_torch tensorcastTorchTargets Torch torch)
  install(DIRECTORY include/tensorcast/torch DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tensorcast COMPONENT Torch)
  # pkg-config knows no libtorch: the adapter's file names the libtorch it was built with.
  # It requires no tensorcast.pc: the adapter shares only headers with the core, and linking
  # libtensorcast would bring a second oneDNN and OpenMP runtime into a libtorch process.
  tc_install_pkgconfig(tensorcast-torch "tensorcast's GradScaler and autocast guard for libtorch"
    "-ltensorcast_torch -L${TORCH_INSTALL_PREFIX}/lib -Wl,-rpath,${TORCH_INSTALL_PREFIX}/lib -ltorch -ltorch_cpu -lc10"
    "" ""
    "-I${TORCH_INSTALL_PREFIX}/include -I${TORCH_INSTALL_PREFIX}/include/torch/csrc/api/include")
endif()

if(TARGET tensorcast_cli)
  install(TARGETS tensorcast_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT Runtime)
endif()
