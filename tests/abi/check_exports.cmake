# SPDX-License-Identifier: BSD-3-Clause
#
# cmake -DNM=nm -DLIB=libcucopy.so.0 -DHEADER=cucopy.h -P check_exports.cmake
#
# Fails unless the library's defined dynamic symbols are exactly the CUCOPY_API
# functions of the header, and unless no CUDA driver or NVML symbol is left
# undefined (the driver is reached through dlopen and a pointer table only).
cmake_minimum_required(VERSION 3.20)
include("${CMAKE_CURRENT_LIST_DIR}/../../cmake/CucopyHeaderApi.cmake")
cucopy_header_api("${HEADER}" _want)

execute_process(COMMAND "${NM}" -D --defined-only "${LIB}"
  OUTPUT_VARIABLE _out RESULT_VARIABLE _rc ERROR_VARIABLE _err)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "${NM} -D --defined-only ${LIB} failed: ${_err}")
endif()
string(REPLACE "\n" ";" _lines "${_out}")
set(_have "")
foreach(_l IN LISTS _lines)
  # "<addr> <type> <name>[@[@]VERSION]"; type A is a version node (CUCOPY_0).
  if(_l MATCHES "^[0-9a-fA-F]* *([A-Za-z]) ([^ @]+)")
    if(NOT CMAKE_MATCH_1 STREQUAL "A")
      list(APPEND _have "${CMAKE_MATCH_2}")
    endif()
  endif()
endforeach()
list(REMOVE_DUPLICATES _have)

set(_missing ${_want})
list(REMOVE_ITEM _missing ${_have})
set(_extra ${_have})
list(REMOVE_ITEM _extra ${_want})

execute_process(COMMAND "${NM}" -D --undefined-only "${LIB}"
  OUTPUT_VARIABLE _undef RESULT_VARIABLE _rc)
string(REGEX MATCHALL "[ \n](cu[A-Z][A-Za-z0-9_]*|nvml[A-Za-z0-9_]*)" _bad_undef "${_undef}")

list(LENGTH _want _nwant)
list(LENGTH _have _nhave)
set(_fail OFF)
if(_missing)
  list(JOIN _missing " " _s)
  message(SEND_ERROR "declared CUCOPY_API in the header but not exported: ${_s}")
  set(_fail ON)
endif()
if(_extra)
  list(JOIN _extra " " _s)
  message(SEND_ERROR "exported but not a CUCOPY_API function of the header: ${_s}")
  set(_fail ON)
endif()
if(_bad_undef)
  string(REGEX REPLACE "[ \n]" "" _bad_undef "${_bad_undef}")
  list(JOIN _bad_undef " " _s)
  message(SEND_ERROR "undefined CUDA/NVML symbols (must come from dlopen): ${_s}")
  set(_fail ON)
endif()
if(_fail)
  message(FATAL_ERROR "export check failed (${_nhave} exported, ${_nwant} declared)")
endif()
message(STATUS "ok: ${_nhave} exported symbols == ${_nwant} CUCOPY_API functions")
