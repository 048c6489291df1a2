# SPDX-License-Identifier: BSD-3-Clause
#
# Cross build for linux/arm64 (aarch64, e.g. Grace Hopper) on an x86-64
# Debian/Ubuntu host, with Debian's cross compilers and qemu-user:
#
#   apt-get install gcc-aarch64-linux-gnu g++-aarch64-linux-gnu \
#                   gfortran-aarch64-linux-gnu qemu-user
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64-linux-gnu.cmake
#
# (`make build-arm64` / `make test-arm64` do both.) The Go library and tools
# are built with GOOS=linux GOARCH=arm64 CGO_ENABLED=1 CC=<the C compiler
# below> (CMakeLists.txt derives GOARCH from CMAKE_SYSTEM_PROCESSOR). CTest
# runs every test binary through CMAKE_CROSSCOMPILING_EMULATOR; the test
# scripts that start binaries themselves take it as EMULATOR.
#
#   CUCOPY_CROSS_PREFIX    the compilers' prefix (default aarch64-linux-gnu-)
#   CUCOPY_CROSS_SYSROOT   the target's libraries for qemu's -L
#                          (default /usr/aarch64-linux-gnu)
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

if(NOT DEFINED CUCOPY_CROSS_PREFIX)
  set(CUCOPY_CROSS_PREFIX aarch64-linux-gnu-)
endif()
if(NOT DEFINED CUCOPY_CROSS_SYSROOT)
  set(CUCOPY_CROSS_SYSROOT /usr/aarch64-linux-gnu)
endif()
set(CMAKE_C_COMPILER ${CUCOPY_CROSS_PREFIX}gcc)
set(CMAKE_CXX_COMPILER ${CUCOPY_CROSS_PREFIX}g++)
set(CMAKE_Fortran_COMPILER ${CUCOPY_CROSS_PREFIX}gfortran)

# Libraries and headers only from the target's tree; programs (go, cmake,
# pkg-config, qemu) from the host.
set(CMAKE_FIND_ROOT_PATH ${CUCOPY_CROSS_SYSROOT})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# Test binaries run under qemu-user with the target's dynamic loader and
# libraries (qemu-user-static's binary works the same).
find_program(CUCOPY_QEMU_AARCH64 NAMES qemu-aarch64 qemu-aarch64-static)
if(CUCOPY_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${CUCOPY_QEMU_AARCH64} -L ${CUCOPY_CROSS_SYSROOT})
endif()
