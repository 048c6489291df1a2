# SPDX-License-Identifier: BSD-3-Clause
#
# cmake "-DCOMMAND=<mpirun;args;...>" -DEXPECT=pass|fault
#       [-DREQUIRE=<regex>] [-DREQUIRE2=<regex>] [-DREQUIRE3=<regex>] [-DFORBID=<regex>]
#       -P run_check.cmake
#
# EXPECT=pass: the command exits 0, prints no FAILED line, and its output
# matches every REQUIRE* regex (each must match; CTest's own
# PASS_REGULAR_EXPRESSION would ignore the exit status and accept any one),
# and not FORBID.
# EXPECT=fault (the negative control): the command fails, a rank died of a
# segmentation fault (a CPU access to PROT_NONE "device" memory inside the
# MPI library), not of anything else, and no rank passed.
execute_process(COMMAND ${COMMAND} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(all "${out}${err}")
message("${all}")
if(EXPECT STREQUAL "pass")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "the job failed (exit ${rc})")
  endif()
  if(all MATCHES "FAILED|VIOLATION|fakecuda: [0-9]+ violations")
    message(FATAL_ERROR "a FAILED or VIOLATION line")
  endif()
  foreach(v REQUIRE REQUIRE2 REQUIRE3)
    if(DEFINED ${v} AND NOT all MATCHES "${${v}}")
      message(FATAL_ERROR "the output does not match: ${${v}}")
    endif()
  endforeach()
  if(DEFINED FORBID AND all MATCHES "${FORBID}")
    message(FATAL_ERROR "the output matches what it must not: ${FORBID}")
  endif()
  message(STATUS "passed")
elseif(EXPECT STREQUAL "fault")
  if(rc EQUAL 0)
    message(FATAL_ERROR "expected the job to fail, it exited 0")
  endif()
  if(all MATCHES "(p2p_device|i?coll_device|f_p2p|f_coll|cucopy_mpi_bench): rank [0-9]+: PASS")
    message(FATAL_ERROR "a rank passed: device buffers went through without the shim?")
  endif()
  if(NOT all MATCHES "Segmentation fault|signal 11")
    message(FATAL_ERROR "the job failed (${rc}) but not of a segmentation fault")
  endif()
  message(STATUS "died of a segmentation fault, as expected (exit ${rc})")
else()
  message(FATAL_ERROR "EXPECT must be pass or fault, not '${EXPECT}'")
endif()
