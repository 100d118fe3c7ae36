# Debian packages of the install components (cmake/install.cmake), made by CPack:
#   `./run.sh package` writes tensorcast_<version>_amd64.deb (the command and the libraries)
#   and tensorcast-dev_<version>_amd64.deb (headers, CMake and pkg-config files).
# Depends are computed by dpkg-shlibdeps from what the libraries and the command link. The
# packages hold the CPU build: CUDA's libraries and libtorch come from no Debian package, so
# the CUDA backend and the libtorch adapter are built from source (docs/cuda.md, docs/libtorch.md).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME tensorcast)
set(CPACK_PACKAGE_VENDOR tensorcast)
set(CPACK_PACKAGE_CONTACT "tensorcast developers")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "C++20 engine for mixed-precision (AMP) neural-network training")
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL Runtime Development)
set(CPACK_COMPONENT_DEVELOPMENT_DEPENDS Runtime)  # tensorcast-dev depends on tensorcast (= version)
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
set(CPACK_COMPONENT_RUNTIME_DESCRIPTION
  "The tensorcast command and the shared libraries libtensorcast and libtensorcast_dist.")
set(CPACK_COMPONENT_DEVELOPMENT_DESCRIPTION
  "Headers, the CMake package (find_package(tensorcast COMPONENTS dist)) and pkg-config files.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME tensorcast)
# mpirun for `mpirun -np N tensorcast train`; the data set `tensorcast train` reads by default.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_RECOMMENDS "openmpi-bin, dataset-fashion-mnist")
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_NAME tensorcast-dev)
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEVELOPMENT_PACKAGE_SUGGESTS "cmake, pkg-config")
include(CPack)
