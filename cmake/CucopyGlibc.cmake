# SPDX-License-Identifier: BSD-3-Clause
#
# The oldest glibc the shipped binaries load on. Built on a new glibc
# (Debian 12: 2.36), a binary needs the newest versions of the functions it
# calls; the few that glibc 2.32 and 2.34 versioned anew (moved from libdl
# and libpthread into libc) are bound to their original versions instead
# (glibc/glibc_compat.h, forced into every C file), executables enter glibc
# through the original __libc_start_main (glibc/libc_start.c, --wrap), and
# libdl.so.2 and libpthread.so.0 are kept as dependencies (on an old glibc
# those functions live there; on a new one they are empty stubs). The
# result is checked by tests/abi/glibc_floor.cmake against CUCOPY_GLIBC_FLOOR.
#
#   CUCOPY_GLIBC_FLOOR   the glibc version the shipped binaries must load on
#                        (default 2.28: RHEL/Rocky 8); empty: no pinning, the
#                        build machine's glibc is the floor.
set(CUCOPY_GLIBC_FLOOR "2.28" CACHE STRING
    "oldest glibc the shipped binaries load on (empty: the build machine's)")

set(CUCOPY_GLIBC_PIN OFF)
if(CUCOPY_GLIBC_FLOOR AND CMAKE_SYSTEM_NAME STREQUAL "Linux"
   AND CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|aarch64|arm64)$")
  set(CUCOPY_GLIBC_PIN ON)
endif()
set(CUCOPY_GLIBC_COMPAT_H ${CMAKE_CURRENT_LIST_DIR}/glibc/glibc_compat.h)
# The link flags that keep libdl and libpthread as dependencies.
set(CUCOPY_GLIBC_LINK_FLAGS -Wl,--push-state,--no-as-needed -l:libdl.so.2 -l:libpthread.so.0
                            -Wl,--pop-state)

# cucopy_glibc_floor(target): applies the pinning to a shipped C target
# (and, for an executable or shared library, lists it in the global property
# CUCOPY_SHIPPED_BINARIES, which the floor test checks).
function(cucopy_glibc_floor target)
  get_target_property(_type ${target} TYPE)
  if(_type MATCHES "^(EXECUTABLE|SHARED_LIBRARY)$")
    set_property(GLOBAL APPEND PROPERTY CUCOPY_SHIPPED_BINARIES $<TARGET_FILE:${target}>)
  endif()
  if(NOT CUCOPY_GLIBC_PIN)
    return()
  endif()
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:C>:-include${CUCOPY_GLIBC_COMPAT_H}>)
  if(NOT _type STREQUAL "STATIC_LIBRARY")
    target_link_options(${target} PRIVATE ${CUCOPY_GLIBC_LINK_FLAGS})
  endif()
  if(_type STREQUAL "EXECUTABLE")
    target_sources(${target} PRIVATE ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/glibc/libc_start.c)
    target_link_options(${target} PRIVATE -Wl,--wrap=__libc_start_main)
  endif()
endfunction()
