# SPDX-License-Identifier: BSD-3-Clause
#
# cmake -DRELEASE=lib/libcucopy.so.0 -DTESTHOOKS=testhooks/libcucopy.so.0 -P check_no_test_hooks.cmake
#
# The release library must not contain the test hooks (capi/testhooks.go):
# the name of their variable is nowhere in it. The test build must contain
# it, which shows that the search finds the hooks where they are.
foreach(var RELEASE TESTHOOKS)
  if(NOT EXISTS "${${var}}")
    message(FATAL_ERROR "${var} library ${${var}} does not exist")
  endif()
endforeach()
file(STRINGS "${RELEASE}" in_release REGEX "CUCOPY_TEST_FAULT")
file(STRINGS "${TESTHOOKS}" in_testhooks REGEX "CUCOPY_TEST_FAULT")
if(in_release)
  message(FATAL_ERROR "${RELEASE} contains the test hooks (CUCOPY_TEST_FAULT)")
endif()
if(NOT in_testhooks)
  message(FATAL_ERROR "${TESTHOOKS} lacks CUCOPY_TEST_FAULT: the check cannot tell")
endif()
message(STATUS "release library without test hooks; test build with them")
