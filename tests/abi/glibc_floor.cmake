# SPDX-License-Identifier: BSD-3-Clause
#
# cmake -DOBJDUMP=objdump -DLIB=libcucopy.so.0 -DOUT=glibc-floor.txt -P glibc_floor.cmake
#
# Reports the newest GLIBC_ symbol version the library needs: the oldest glibc
# it loads on. Informational; never fails when the library can be read.
cmake_minimum_required(VERSION 3.20)
execute_process(COMMAND "${OBJDUMP}" -T "${LIB}" OUTPUT_VARIABLE _out RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "${OBJDUMP} -T ${LIB} failed")
endif()
string(REGEX MATCHALL "GLIBC_[0-9.]+" _vers "${_out}")
set(_floor "")
foreach(_v IN LISTS _vers)
  string(REPLACE "GLIBC_" "" _n "${_v}")
  string(REGEX REPLACE "\\.$" "" _n "${_n}")
  if(_floor STREQUAL "" OR _n VERSION_GREATER _floor)
    set(_floor "${_n}")
  endif()
endforeach()
if(_floor STREQUAL "")
  set(_line "libcucopy.so.0 needs no versioned glibc symbol")
else()
  set(_line "libcucopy.so.0 glibc floor: GLIBC_${_floor}")
endif()
message(STATUS "${_line}")
if(OUT)
  file(WRITE "${OUT}" "${_line}\n")
endif()
