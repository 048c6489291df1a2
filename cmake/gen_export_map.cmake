# SPDX-License-Identifier: BSD-3-Clause
#
# Writes the linker version script of libcucopy from the public header.
#   cmake -DHEADER=include/cucopy.h -DOUT=build/cucopy.map [-DEXTRA=name;...] -P gen_export_map.cmake
# Result: CUCOPY_0 { global: cucopy_a; cucopy_b; ... local: *; };
# EXTRA names more symbols (the test build's hooks, never the release library's).
# The file is rewritten only when its content changes, so an edit of a comment
# in the header does not relink the library.
cmake_minimum_required(VERSION 3.20)
if(NOT HEADER OR NOT OUT)
  message(FATAL_ERROR "usage: cmake -DHEADER=<cucopy.h> -DOUT=<map> -P gen_export_map.cmake")
endif()
include("${CMAKE_CURRENT_LIST_DIR}/CucopyHeaderApi.cmake")
cucopy_header_api("${HEADER}" _names)
list(APPEND _names ${EXTRA})

set(_map "/* Generated from include/cucopy.h by cmake/gen_export_map.cmake. Do not edit. */\n")
string(APPEND _map "CUCOPY_0 {\n  global:\n")
foreach(_n IN LISTS _names)
  string(APPEND _map "    ${_n};\n")
endforeach()
string(APPEND _map "  local:\n    *;\n};\n")

set(_old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" _old)
endif()
if(NOT _old STREQUAL _map)
  file(WRITE "${OUT}" "${_map}")
endif()
