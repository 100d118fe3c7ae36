# Installs the library, headers, a CMake package (find_package(tensorcast)) and a pkg-config file.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS tensorcast EXPORT tensorcastTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/tensorcast DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h" PATTERN "*.def")
install(FILES ${PROJECT_BINARY_DIR}/include/tensorcast/version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tensorcast)
install(EXPORT tensorcastTargets NAMESPACE tensorcast:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tensorcast)
configure_package_config_file(cmake/tensorcastConfig.cmake.in
  ${PROJECT_BINARY_DIR}/tensorcastConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tensorcast)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tensorcastConfigVersion.cmake COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/tensorcastConfig.cmake ${PROJECT_BINARY_DIR}/tensorcastConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tensorcast)
# The .pc file locates the prefix from its own place, so `cmake --install --prefix X` works.
file(RELATIVE_PATH TC_PC_TO_PREFIX "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
configure_file(cmake/tensorcast.pc.in ${PROJECT_BINARY_DIR}/tensorcast.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/tensorcast.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
