# SPDX-License-Identifier: BSD-3-Clause
#
# cmake -DBUILD_DIR=<build tree> -DPREFIX=<prefix> [-DMOVE_TO=<dir>] -P install_tree.cmake
#
# Installs the build tree into a fresh PREFIX (cmake --install --prefix). With
# MOVE_TO, the installed tree is then moved there (PREFIX no longer exists
# afterwards), which is how the relocation tests consume a moved prefix.
foreach(v BUILD_DIR PREFIX)
  if(NOT ${v})
    message(FATAL_ERROR "install_tree.cmake: ${v} is not set")
  endif()
endforeach()
file(REMOVE_RECURSE "${PREFIX}")
if(MOVE_TO)
  file(REMOVE_RECURSE "${MOVE_TO}")
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${PREFIX}"
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install ${BUILD_DIR} --prefix ${PREFIX} failed (${rc})")
endif()
if(MOVE_TO)
  get_filename_component(_parent "${MOVE_TO}" DIRECTORY)
  file(MAKE_DIRECTORY "${_parent}")
  file(RENAME "${PREFIX}" "${MOVE_TO}")
  message(STATUS "installed into ${PREFIX}, moved to ${MOVE_TO}")
else()
  message(STATUS "installed into ${PREFIX}")
endif()
