# SPDX-License-Identifier: BSD-3-Clause
#
# Install rules and the CMake / pkg-config packages (included from the
# top-level CMakeLists.txt before the subfolders, so CMAKE_INSTALL_RPATH
# reaches the executables they define).
#
#   <prefix>/lib/libcucopy.so.0, libcucopy.so -> libcucopy.so.0
#   <prefix>/include/cucopy.h, cucopy.f90 (Fortran module *source*)
#   <prefix>/lib/cmake/cucopy/cucopyConfig.cmake, cucopyConfigVersion.cmake
#   <prefix>/lib/pkgconfig/cucopy.pc
#   <prefix>/bin/cucopy_info, cucopy_perftest
#
# Everything is relocatable: the CMake package finds the prefix from its own
# location, cucopy.pc from ${pcfiledir}, the tools from $ORIGIN.

include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Installed executables find the installed library next to them.
file(RELATIVE_PATH _cucopy_bin_to_lib
     ${CMAKE_INSTALL_FULL_BINDIR} ${CMAKE_INSTALL_FULL_LIBDIR})
set(CMAKE_INSTALL_RPATH "\$ORIGIN/${_cucopy_bin_to_lib}")

# The Fortran module source, installed beside the header.
set(CUCOPY_FORTRAN_MODULE ${CMAKE_SOURCE_DIR}/include/cucopy.f90)

set(CUCOPY_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/cucopy)
set(CUCOPY_PKGCONFIG_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The library is built by `go build`, not by add_library: install the file
# and its development symlink (install(FILES) keeps a symlink a symlink).
install(FILES ${CUCOPY_LIBRARY} DESTINATION ${CMAKE_INSTALL_LIBDIR}
        PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE
                    GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
install(FILES ${CUCOPY_LIB_DIR}/libcucopy.so DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${CUCOPY_PUBLIC_HEADER} ${CUCOPY_FORTRAN_MODULE}
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(TARGET cucopy_info)
  install(PROGRAMS ${CUCOPY_BIN_DIR}/cucopy_info DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
# (cucopy_perftest installs itself: tools/perftest/CMakeLists.txt.)

# ---- CMake package: cucopy::cucopy (+ cucopy::fortran), relocatable
configure_package_config_file(
  ${CMAKE_SOURCE_DIR}/cmake/cucopyConfig.cmake.in
  ${CMAKE_BINARY_DIR}/package/cucopyConfig.cmake
  INSTALL_DESTINATION ${CUCOPY_CMAKE_INSTALL_DIR}
  PATH_VARS CMAKE_INSTALL_LIBDIR CMAKE_INSTALL_INCLUDEDIR)
# 0.x: only the same minor version is compatible (the API may still change
# between 0.x minors); from 1.0 on, the same major version, like the SONAME.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(_cucopy_compat SameMinorVersion)
else()
  set(_cucopy_compat SameMajorVersion)
endif()
write_basic_package_version_file(
  ${CMAKE_BINARY_DIR}/package/cucopyConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY ${_cucopy_compat})
install(FILES ${CMAKE_BINARY_DIR}/package/cucopyConfig.cmake
              ${CMAKE_BINARY_DIR}/package/cucopyConfigVersion.cmake
        DESTINATION ${CUCOPY_CMAKE_INSTALL_DIR})

# ---- pkg-config: cucopy.pc, relocatable through ${pcfiledir} when the
# install directories are relative to the prefix (the default).
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(CUCOPY_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _rel /p/${CUCOPY_PKGCONFIG_INSTALL_DIR} /p)
  string(REGEX REPLACE "/$" "" _rel "${_rel}")
  set(CUCOPY_PC_PREFIX "\${pcfiledir}/${_rel}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(CUCOPY_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  set(CUCOPY_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(CUCOPY_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(CUCOPY_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(${CMAKE_SOURCE_DIR}/cmake/cucopy.pc.in
               ${CMAKE_BINARY_DIR}/package/cucopy.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/package/cucopy.pc
        DESTINATION ${CUCOPY_PKGCONFIG_INSTALL_DIR})
