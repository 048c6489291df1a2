# SPDX-License-Identifier: BSD-3-Clause
#
# cmake -DPREFIX=<prefix> -DLIBDIR=<lib> -DINCLUDEDIR=<include> -DBINDIR=<bin>
#       -DVERSION=<x.y.z> -DREADELF=<readelf> -DDRIVER=<fake libcuda.so.1>
#       -DWITH_FORTRAN=ON|OFF -DTOOLS=<installed tools>
#       [-DMPI_SHIMS=<libcucopy_mpi*.so>] [-DMPI_PCS=<their .pc names>]
#       [-DEMULATOR=a|b] (a cross build: runs the installed tools through it)
#       [-DPKG_CONFIG=<pkg-config>] -P check_layout.cmake
#
# The installed tree has every file, the library symlink, the SONAME, no
# absolute path in the package files (relocatable), and the installed tools
# run (they find the library through $ORIGIN). Each MPI interposer is
# installed next to libcucopy.so.0 with its SONAME and RUNPATH $ORIGIN (how
# it finds libcucopy.so.0), links neither libcucopy nor a libcuda, and its
# .pc file's `preload` variable names it.
set(_fail "")

set(_files
  ${LIBDIR}/libcucopy.so.0
  ${LIBDIR}/libcucopy.so
  ${INCLUDEDIR}/cucopy.h
  ${LIBDIR}/cmake/cucopy/cucopyConfig.cmake
  ${LIBDIR}/cmake/cucopy/cucopyConfigVersion.cmake
  ${LIBDIR}/pkgconfig/cucopy.pc)
foreach(t IN LISTS TOOLS)
  list(APPEND _files ${BINDIR}/${t})
endforeach()
if(WITH_FORTRAN)
  list(APPEND _files ${INCLUDEDIR}/cucopy.f90)
endif()
foreach(f IN LISTS _files)
  if(NOT EXISTS "${PREFIX}/${f}")
    list(APPEND _fail "missing ${f}")
  else()
    message(STATUS "  ${f}")
  endif()
endforeach()

# libcucopy.so -> libcucopy.so.0 (a relative symlink), the .so.0 a real file.
set(_so "${PREFIX}/${LIBDIR}/libcucopy.so")
if(EXISTS "${_so}")
  if(NOT IS_SYMLINK "${_so}")
    list(APPEND _fail "${LIBDIR}/libcucopy.so is not a symlink")
  else()
    file(READ_SYMLINK "${_so}" _target)
    if(NOT _target STREQUAL "libcucopy.so.0")
      list(APPEND _fail "libcucopy.so points to '${_target}', not libcucopy.so.0")
    endif()
  endif()
endif()
if(EXISTS "${_so}.0")
  if(IS_SYMLINK "${_so}.0")
    list(APPEND _fail "libcucopy.so.0 is a symlink, not the library")
  endif()
  execute_process(COMMAND "${READELF}" -d "${_so}.0" OUTPUT_VARIABLE _dyn)
  if(NOT _dyn MATCHES "Library soname: \\[libcucopy\\.so\\.0\\]")
    list(APPEND _fail "installed library has no SONAME libcucopy.so.0")
  endif()
endif()

# The MPI interposers.
foreach(shim IN LISTS MPI_SHIMS)
  set(_f "${PREFIX}/${LIBDIR}/${shim}")
  if(NOT EXISTS "${_f}")
    list(APPEND _fail "missing ${LIBDIR}/${shim}")
    continue()
  endif()
  message(STATUS "  ${LIBDIR}/${shim}")
  execute_process(COMMAND "${READELF}" -d "${_f}" OUTPUT_VARIABLE _dyn)
  string(REPLACE "." "\\." _shim_re "${shim}")
  if(NOT _dyn MATCHES "Library soname: \\[${_shim_re}\\]")
    list(APPEND _fail "${shim}: no SONAME ${shim}")
  endif()
  if(NOT _dyn MATCHES "Library runpath: \\[\\$ORIGIN\\]")
    list(APPEND _fail "${shim}: RUNPATH is not exactly $ORIGIN (it finds libcucopy.so.0 there)")
  endif()
  if(_dyn MATCHES "Shared library: \\[(libcucopy\\.so|libcuda)")
    list(APPEND _fail "${shim} links ${CMAKE_MATCH_1}: it must dlopen it, only when needed")
  endif()
endforeach()
foreach(pc IN LISTS MPI_PCS)
  set(_pcf "${PREFIX}/${LIBDIR}/pkgconfig/${pc}.pc")
  if(NOT EXISTS "${_pcf}")
    list(APPEND _fail "missing ${LIBDIR}/pkgconfig/${pc}.pc")
    continue()
  endif()
  if(PKG_CONFIG)
    set(ENV{PKG_CONFIG_PATH} "${PREFIX}/${LIBDIR}/pkgconfig")
    execute_process(COMMAND "${PKG_CONFIG}" --variable=preload ${pc} OUTPUT_VARIABLE _pre
                    OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _rc)
    if(NOT _rc EQUAL 0 OR NOT EXISTS "${_pre}")
      list(APPEND _fail "pkg-config --variable=preload ${pc}: '${_pre}' does not exist")
    else()
      message(STATUS "  ${pc}.pc: preload=${_pre}")
    endif()
  endif()
endforeach()

# Relocatable: no package file names the prefix it was installed into.
set(_pc_files)
foreach(pc IN LISTS MPI_PCS)
  list(APPEND _pc_files ${LIBDIR}/pkgconfig/${pc}.pc)
endforeach()
foreach(f ${LIBDIR}/cmake/cucopy/cucopyConfig.cmake ${LIBDIR}/pkgconfig/cucopy.pc ${_pc_files})
  if(EXISTS "${PREFIX}/${f}")
    file(READ "${PREFIX}/${f}" _text)
    string(FIND "${_text}" "${PREFIX}" _at)
    if(NOT _at EQUAL -1)
      list(APPEND _fail "${f} contains the absolute prefix ${PREFIX}")
    endif()
  endif()
endforeach()
file(STRINGS "${PREFIX}/${LIBDIR}/pkgconfig/cucopy.pc" _v REGEX "^Version: ")
if(NOT _v STREQUAL "Version: ${VERSION}")
  list(APPEND _fail "cucopy.pc: '${_v}', expected 'Version: ${VERSION}'")
endif()

# The installed tools run from the prefix (RPATH $ORIGIN/../lib).
set(ENV{CUCOPY_CUDA_DRIVER} "${DRIVER}")
set(ENV{FAKECUDA_DEVICES} 2)
foreach(_exe IN LISTS TOOLS)
  set(_args "")
  if(_exe STREQUAL "cucopy_perftest")
    set(_args --help)
  endif()
  if(EXISTS "${PREFIX}/${BINDIR}/${_exe}")
    string(REPLACE "|" ";" _emulator "${EMULATOR}") # a cross build's (CMakeLists.txt)
    execute_process(COMMAND ${_emulator} "${PREFIX}/${BINDIR}/${_exe}" ${_args}
                    RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _err)
    if(NOT _rc EQUAL 0)
      list(APPEND _fail "installed ${_exe} ${_args} failed (${_rc}): ${_err}")
    else()
      message(STATUS "  ${BINDIR}/${_exe} ${_args}: runs")
    endif()
  endif()
endforeach()

if(_fail)
  list(JOIN _fail "\n  " _msg)
  message(FATAL_ERROR "install layout in ${PREFIX}:\n  ${_msg}")
endif()
message(STATUS "install layout in ${PREFIX}: OK")
