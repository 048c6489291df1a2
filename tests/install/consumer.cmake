# SPDX-License-Identifier: BSD-3-Clause
#
# Builds and runs one consumer project against an installed cucopy.
#
# cmake -DMODE=cmake|pkgconfig -DLANG=C|Fortran -DSRC=<consumer dir>
#       -DWORK=<scratch dir> -DPREFIX=<installed prefix> -DLIBDIR=<lib>
#       -DDRIVER=<fake libcuda.so.1> -DDEVICES=<n> -DVERSION=<x.y.z>
#       [-DGENERATOR=...] [-DCC=...] [-DFC=...] [-DPKG_CONFIG=...] [-DEMULATOR=a|b]
#       -P consumer.cmake
#
# MODE=cmake:     cmake -S SRC -B WORK -DCMAKE_PREFIX_PATH=PREFIX; cmake --build
# MODE=pkgconfig: PKG_CONFIG_PATH=PREFIX/LIBDIR/pkgconfig, then the compiler
#                 with `pkg-config --cflags --libs cucopy` (C), and for Fortran
#                 the module source `pkg-config --variable=fortran_module cucopy`
#                 compiled first (gfortran flags: -J for the .mod directory).
# The program runs with CUCOPY_CUDA_DRIVER=DRIVER, FAKECUDA_DEVICES=DEVICES and
# must print OK.
foreach(v MODE LANG SRC WORK PREFIX LIBDIR DRIVER DEVICES VERSION)
  if("${${v}}" STREQUAL "")
    message(FATAL_ERROR "consumer.cmake: ${v} is not set")
  endif()
endforeach()
if(NOT EXISTS "${PREFIX}")
  message(FATAL_ERROR "no installed prefix at ${PREFIX} (the install fixture failed?)")
endif()

function(run)
  string(REPLACE ";" " " _show "${ARGN}")
  message(STATUS "$ ${_show}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}):\n${out}${err}")
  endif()
  set(OUT "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
set(EXE "${WORK}/consumer")

if(MODE STREQUAL "cmake")
  set(_args -S "${SRC}" -B "${WORK}" "-DCMAKE_PREFIX_PATH=${PREFIX}"
            -DCMAKE_BUILD_TYPE=RelWithDebInfo
            -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
  if(GENERATOR)
    list(APPEND _args -G "${GENERATOR}")
  endif()
  if(LANG STREQUAL "C" AND CC)
    list(APPEND _args "-DCMAKE_C_COMPILER=${CC}")
  elseif(LANG STREQUAL "Fortran" AND FC)
    list(APPEND _args "-DCMAKE_Fortran_COMPILER=${FC}")
  endif()
  run("${CMAKE_COMMAND}" ${_args})
  # The package must come from PREFIX, not from anywhere else.
  file(STRINGS "${WORK}/CMakeCache.txt" _dir REGEX "^cucopy_DIR:")
  string(REGEX REPLACE "^cucopy_DIR:[A-Z]+=" "" _dir "${_dir}")
  string(FIND "${_dir}" "${PREFIX}/" _at)
  if(NOT _at EQUAL 0)
    message(FATAL_ERROR "find_package(cucopy) found ${_dir}, not the package in ${PREFIX}")
  endif()
  message(STATUS "cucopy_DIR = ${_dir}")
  run("${CMAKE_COMMAND}" --build "${WORK}")
elseif(MODE STREQUAL "pkgconfig")
  if(NOT PKG_CONFIG OR NOT EXISTS "${PKG_CONFIG}")
    message(FATAL_ERROR "pkg-config not found: install it (apt-get install pkg-config; "
                        "`make prereqs` does) and re-run cmake")
  endif()
  set(ENV{PKG_CONFIG_PATH} "${PREFIX}/${LIBDIR}/pkgconfig")
  message(STATUS "PKG_CONFIG_PATH=$ENV{PKG_CONFIG_PATH}")
  run("${PKG_CONFIG}" --modversion cucopy)
  string(STRIP "${OUT}" _ver)
  if(NOT _ver STREQUAL VERSION)
    message(FATAL_ERROR "pkg-config --modversion cucopy: ${_ver}, expected ${VERSION}")
  endif()
  run("${PKG_CONFIG}" --cflags cucopy)
  separate_arguments(_cflags UNIX_COMMAND "${OUT}")
  run("${PKG_CONFIG}" --libs cucopy)
  separate_arguments(_libs UNIX_COMMAND "${OUT}")
  run("${PKG_CONFIG}" --variable=libdir cucopy)
  string(STRIP "${OUT}" _libdir)
  # The prefix is not on the loader's path: record it (or set LD_LIBRARY_PATH).
  list(APPEND _libs "-Wl,-rpath,${_libdir}")
  if(LANG STREQUAL "C")
    run("${CC}" -std=c11 -Wall -Wextra -Werror ${_cflags} "${SRC}/consumer.c"
        -o "${EXE}" ${_libs})
  else()
    run("${PKG_CONFIG}" --variable=fortran_module cucopy)
    string(STRIP "${OUT}" _mod)
    if(NOT EXISTS "${_mod}")
      message(FATAL_ERROR "fortran_module=${_mod} does not exist")
    endif()
    run("${FC}" -c "${_mod}" -J "${WORK}" -o "${WORK}/cucopy_mod.o")
    run("${FC}" -I "${WORK}" "${SRC}/consumer.f90" "${WORK}/cucopy_mod.o"
        -o "${EXE}" ${_libs})
  endif()
else()
  message(FATAL_ERROR "MODE must be cmake or pkgconfig, not '${MODE}'")
endif()

set(ENV{CUCOPY_CUDA_DRIVER} "${DRIVER}")
set(ENV{FAKECUDA_DEVICES} "${DEVICES}")
message(STATUS "$ CUCOPY_CUDA_DRIVER=${DRIVER} FAKECUDA_DEVICES=${DEVICES} ${EXE} ${DEVICES}")
string(REPLACE "|" ";" _emulator "${EMULATOR}") # a cross build's (CMakeLists.txt)
execute_process(COMMAND ${_emulator} "${EXE}" "${DEVICES}" RESULT_VARIABLE rc
                OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0 OR NOT out MATCHES "(^|\n) *OK\n?$")
  message(FATAL_ERROR "consumer failed (exit ${rc})")
endif()
# The C consumer also copies through device memory of the (fake) driver.
if(LANG STREQUAL "C" AND NOT out MATCHES "host -> device 0 -> device [0-9]+ -> host: data OK")
  message(FATAL_ERROR "consumer did not do the host -> device -> host round trip")
endif()
