# SPDX-License-Identifier: BSD-3-Clause
#
# cmake -DRELEASE=lib/libcucopy.so.0 -DTESTHOOKS=testhooks/libcucopy.so.0 -P check_no_test_hooks.cmake
#
# The release library must not contain the test hooks (capi/testhooks.go):
# the name of their variable (CUCOPY_TEST_FAULT) and the crossing counters
# of tests/c/test_crossings (cucopy_test_crossings) are nowhere in it. The
# test build must contain both, which shows that the search finds the hooks
# where they are.
foreach(var RELEASE TESTHOOKS)
  if(NOT EXISTS "${${var}}")
    message(FATAL_ERROR "${var} library ${${var}} does not exist")
  endif()
endforeach()
foreach(hook CUCOPY_TEST_FAULT cucopy_test_crossings)
  file(STRINGS "${RELEASE}" in_release REGEX "${hook}")
  file(STRINGS "${TESTHOOKS}" in_testhooks REGEX "${hook}")
  if(in_release)
    message(FATAL_ERROR "${RELEASE} contains the test hooks (${hook})")
  endif()
  if(NOT in_testhooks)
    message(FATAL_ERROR "${TESTHOOKS} lacks ${hook}: the check cannot tell")
  endif()
endforeach()
message(STATUS "release library without test hooks; test build with them")
