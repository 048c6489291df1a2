# SPDX-License-Identifier: BSD-3-Clause
#
# cucopy_header_api(<header> <out_var>)
#
# Lists the functions the public header declares with CUCOPY_API, in header
# order. The header is the one list of the ABI: the linker's export map and the
# exported-symbols test are both derived from it.
#
# A declaration is "CUCOPY_API <return type> cucopy_<name>(" on one or more
# lines; the macro's own #define and comments that merely mention CUCOPY_API do
# not match because they are not followed by a cucopy_ name and "(".
function(cucopy_header_api header out_var)
  file(READ "${header}" _text)
  # Semicolons are CMake list separators; hide them before regex work.
  string(REPLACE ";" "@SEMI@" _text "${_text}")
  # Drop comments. CMake regexes have no non-greedy match, so turn the block
  # comment delimiters into single control characters first.
  string(ASCII 2 _cs)
  string(ASCII 3 _ce)
  string(REPLACE "/*" "${_cs}" _text "${_text}")
  string(REPLACE "*/" "${_ce}" _text "${_text}")
  string(REGEX REPLACE "${_cs}[^${_ce}]*${_ce}" " " _text "${_text}")
  string(REGEX REPLACE "//[^\n]*" "" _text "${_text}")
  string(REGEX MATCHALL
    "CUCOPY_API[ \t\r\n]+[A-Za-z_][A-Za-z0-9_ \t\r\n*]*[ \t\r\n*](cucopy_[A-Za-z0-9_]+)[ \t\r\n]*\\("
    _decls "${_text}")
  set(_names "")
  foreach(_d IN LISTS _decls)
    string(REGEX REPLACE ".*[ \t\r\n*](cucopy_[A-Za-z0-9_]+)[ \t\r\n]*\\($" "\\1" _n "${_d}")
    list(APPEND _names "${_n}")
  endforeach()
  list(REMOVE_DUPLICATES _names)
  if(NOT _names)
    message(FATAL_ERROR "cucopy_header_api: no CUCOPY_API function found in ${header}")
  endif()
  set(${out_var} "${_names}" PARENT_SCOPE)
endfunction()
